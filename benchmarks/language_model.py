"""The language-model chapter's model: generation with and without the cache, and one training step.

1. Tokens per second generating 256 tokens (batch 1, greedy) from a one-token
   prompt, with the key/value cache (`language_model_step`, one position per
   step) and without it (`language_model_logits` on the whole prefix at every
   step): the chapter's model and one 4× wider.
2. One training step (next-token loss, every gradient, Adam) against PyTorch
   CPU of the same architecture (pre-LN blocks, a final layer norm, no
   dropout, sinusoidal positions, the embedding scaled by √d_model and tied
   to the output), float64, one thread. PyTorch is not a course dependency:
   without it only the NumPy figures are printed. Run:

    PYTHONPATH=$PWD python benchmarks/language_model.py
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from solutions.language_model import (  # noqa: E402
    init_language_model, init_language_model_cache, language_model_logits,
    language_model_loss_and_grads, language_model_step)
from solutions.positional_encoding import sinusoidal_encoding  # noqa: E402
from solutions.training import adam_step  # noqa: E402

from benchmarks.training import best_of  # noqa: E402

# (name, vocab, d_model, heads, d_ff, layers): the chapter's character model, then 4× wider.
SIZES = [("chapter", 131, 32, 4, 128, 2), ("4x wider", 131, 128, 4, 512, 2)]
NEW_TOKENS = 256
BATCH, SEQ_LEN = 32, 32      # the chapter's training batch
REPEATS = 10


def generate_greedy(params, heads, use_cache):
    """256 greedy tokens after token 0; returns the seconds it took."""
    start = time.perf_counter()
    tokens = np.zeros((1, 1), dtype=int)
    cache = init_language_model_cache(params, 1, heads)
    for _ in range(NEW_TOKENS):
        if use_cache:
            logits, cache = language_model_step(tokens[:, -1], cache, params, heads)
        else:
            logits = language_model_logits(tokens, params, heads)[:, -1]
        tokens = np.concatenate([tokens, np.argmax(logits, axis=-1)[:, None]], axis=1)
    return time.perf_counter() - start


def numpy_step(V, d, h, d_ff, layers, tokens):
    state = {"params": init_language_model(V, d, d_ff, layers, seed=0), "adam": None}

    def step():
        _, grads = language_model_loss_and_grads(tokens, state["params"], h)
        state["params"], state["adam"] = adam_step(state["params"], grads, state["adam"], lr=1e-3)
    return step


def torch_step(torch, V, d, h, d_ff, layers, tokens):
    torch.set_num_threads(1)
    nn = torch.nn
    dtype = torch.float64

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Parameter(torch.randn(V, d, dtype=dtype) * d ** -0.5)
            layer = nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True,
                                               norm_first=True, dtype=dtype)
            self.blocks = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d, dtype=dtype),
                                                enable_nested_tensor=False)
            self.register_buffer("pe", torch.tensor(sinusoidal_encoding(SEQ_LEN + 1, d), dtype=dtype))

        def forward(self, x):
            h_ = self.embedding[x] * math.sqrt(d) + self.pe[:x.shape[1]]
            causal = nn.Transformer.generate_square_subsequent_mask(x.shape[1], dtype=dtype)
            return self.blocks(h_, mask=causal, is_causal=True) @ self.embedding.T

    model = Model()
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    loss_function = nn.CrossEntropyLoss()
    tokens_t = torch.tensor(tokens)

    def step():
        optimiser.zero_grad()
        logits = model(tokens_t[:, :-1])
        loss_function(logits.reshape(-1, V), tokens_t[:, 1:].reshape(-1)).backward()
        optimiser.step()
    return step


def main():
    try:
        import torch
    except ImportError:
        torch = None
    print(f"generating {NEW_TOKENS} tokens, batch 1, greedy, float64, one thread")
    print(f"{'model':>9} {'d_model':>7} {'layers':>6} {'with cache tok/s':>17} "
          f"{'without tok/s':>14} {'speed-up':>8}")
    for name, V, d, h, d_ff, layers in SIZES:
        params = init_language_model(V, d, d_ff, layers, seed=0)
        cached = min(generate_greedy(params, h, True) for _ in range(3))
        uncached = min(generate_greedy(params, h, False) for _ in range(3))
        print(f"{name:>9} {d:7} {layers:6} {NEW_TOKENS / cached:17.0f} {NEW_TOKENS / uncached:14.0f} "
              f"{uncached / cached:8.1f}")
    if torch is None:
        print("PyTorch is not installed (it is not a course dependency): NumPy figures only.")
    print(f"\none training step (next-token loss, all gradients, Adam), float64, one thread, "
          f"best of {REPEATS}")
    print(f"{'model':>9} {'d_model':>7} {'B x T':>7} {'NumPy ms':>9} {'PyTorch ms':>10} {'ratio':>6}")
    for name, V, d, h, d_ff, layers in SIZES:
        tokens = np.random.default_rng(0).integers(0, V, size=(BATCH, SEQ_LEN + 1))
        ours = best_of(numpy_step(V, d, h, d_ff, layers, tokens), REPEATS)
        line = f"{name:>9} {d:7} {BATCH:>3}x{SEQ_LEN:<3} {ours:9.2f}"
        if torch is not None:
            theirs = best_of(torch_step(torch, V, d, h, d_ff, layers, tokens), REPEATS)
            line += f" {theirs:10.2f} {ours / theirs:6.2f}"
        print(line)


if __name__ == "__main__":
    main()
