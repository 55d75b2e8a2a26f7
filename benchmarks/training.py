"""Time of one training step of the training chapter's model: NumPy against PyTorch.

One step = the loss and every gradient by teacher forcing (label smoothing
0.1) plus one Adam step with the warm-up rate. The PyTorch model is the same
architecture (post-LN encoder and decoder layers, no dropout, sinusoidal
positions, one embedding shared by source, target and output, scaled by
√d_model), the same sizes and the same dtype (float64, the course's), on the
CPU, both on one thread. PyTorch is not a course dependency: without it only
the NumPy figures are printed. Run:

    PYTHONPATH=$PWD python benchmarks/training.py
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from solutions.positional_encoding import sinusoidal_encoding  # noqa: E402
from solutions.training import (  # noqa: E402
    adam_step, init_transformer, noam_learning_rate, reversal_batch, transformer_loss_and_grads)

# (name, vocab, d_model, heads, d_ff, layers, batch, letters): the chapter's model, then larger.
SIZES = [("chapter", 16, 32, 4, 64, 1, 64, 7),
         ("wider, longer", 16, 128, 8, 512, 2, 64, 31)]
REPEATS = 20


def best_of(step, repeats=REPEATS):
    """The fastest of `repeats` calls, in milliseconds, after one warm-up call."""
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def numpy_step(V, d, h, d_ff, layers, src, tgt):
    params = init_transformer(V, d, d_ff, layers, seed=0)
    state = {"params": params, "adam": None, "step": 0}

    def step():
        state["step"] += 1
        _, grads = transformer_loss_and_grads(src, tgt, state["params"], h, label_smoothing=0.1)
        lr = noam_learning_rate(state["step"], d, 100)
        state["params"], state["adam"] = adam_step(state["params"], grads, state["adam"], lr=lr)
    return step


def torch_step(torch, V, d, h, d_ff, layers, src, tgt):
    torch.set_num_threads(1)
    nn = torch.nn
    dtype = torch.float64

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Parameter(torch.randn(V, d, dtype=dtype) * d ** -0.5)
            self.transformer = nn.Transformer(
                d_model=d, nhead=h, num_encoder_layers=layers, num_decoder_layers=layers,
                dim_feedforward=d_ff, dropout=0.0, batch_first=True, norm_first=False,
                dtype=dtype)
            # nn.Transformer adds a final LayerNorm after each stack; the paper's post-LN
            # stacks have none: replace them by the identity.
            self.transformer.encoder.norm = None
            self.transformer.decoder.norm = None
            self.register_buffer("pe", torch.tensor(sinusoidal_encoding(64, d), dtype=dtype))

        def forward(self, src, tgt_in):
            scale = math.sqrt(d)
            x = self.embedding[src] * scale + self.pe[:src.shape[1]]
            y = self.embedding[tgt_in] * scale + self.pe[:tgt_in.shape[1]]
            causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], dtype=dtype)
            out = self.transformer(x, y, tgt_mask=causal)
            return out @ self.embedding.T

    model = Model()
    optimiser = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda n: noam_learning_rate(n + 1, d, 100))
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.1)
    src_t, tgt_t = torch.tensor(src), torch.tensor(tgt)

    def step():
        optimiser.zero_grad()
        logits = model(src_t, tgt_t[:, :-1])
        loss = loss_function(logits.reshape(-1, V), tgt_t[:, 1:].reshape(-1))
        loss.backward()
        optimiser.step()
        schedule.step()
    return step


def main():
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed (it is not a course dependency): NumPy figures only.")
    print(f"one training step (loss, all gradients, Adam), float64, one thread, best of {REPEATS}")
    print(f"{'model':>14} {'d_model':>7} {'heads':>5} {'d_ff':>5} {'layers':>6} {'B x T':>7} "
          f"{'NumPy ms':>9} {'PyTorch ms':>10} {'ratio':>6}")
    for name, V, d, h, d_ff, layers, B, letters in SIZES:
        src, tgt = reversal_batch(np.random.default_rng(0), B, letters, V)
        ours = best_of(numpy_step(V, d, h, d_ff, layers, src, tgt))
        line = (f"{name:>14} {d:7} {h:5} {d_ff:5} {layers:6} {B:>3}x{src.shape[1]:<3} "
                f"{ours:9.2f}")
        if torch is not None:
            theirs = best_of(torch_step(torch, V, d, h, d_ff, layers, src, tgt))
            line += f" {theirs:10.2f} {ours / theirs:6.2f}"
        print(line)


if __name__ == "__main__":
    main()
