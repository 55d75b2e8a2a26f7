"""Forward and backward of multi-head attention: time and peak memory, ours and PyTorch's.

    .venv/bin/python benchmarks/backpropagation.py [--repeats 5] [--threads 1]
    PYTHONPATH=$PWD /path/to/venv-with-torch/bin/python benchmarks/backpropagation.py

At B = 8, T = 256, d_model = 512, h = 8 (self-attention, a causal mask), in
float64 and float32, prints the median wall time of ``multi_head_attention``
(the forward) and of ``multi_head_attention_backward`` (which recomputes the
forward's projections and weights, then goes back), their ratio, and the
peak memory each allocates (tracemalloc, which sees NumPy's arrays). Targets:
the backward within 2.5× of our forward (2× is the ideal: every matrix
product of the forward has two in the backward), and within 2× of PyTorch's
CPU backward.

PyTorch is not a dependency of the course: when ``import torch`` works, the
same computation (the same matrix products, written with torch tensors) is
timed forward and through autograd's backward; otherwise that part is skipped
with a note. Timings on a shared machine are noisy: they are medians.

Both libraries use ``--threads`` threads (default 1): on a machine whose
cores are busy with other work, multi-threaded OpenBLAS (NumPy's BLAS) can
be ten times slower than one thread, which would measure the machine's
load, not the code. The thread count is set before NumPy is imported.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

PARSER = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
PARSER.add_argument("--repeats", type=int, default=5, help="timed runs of each (default 5)")
PARSER.add_argument("--threads", type=int, default=1, help="BLAS and PyTorch threads (default 1)")
THREADS = PARSER.parse_known_args()[0].threads
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(THREADS)

import numpy as np  # noqa: E402

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solutions.backpropagation import multi_head_attention_backward  # noqa: E402
from solutions.efficient_attention import peak_memory  # noqa: E402
from solutions.multi_head import multi_head_attention  # noqa: E402
from solutions.scaled_dot_product import causal_mask  # noqa: E402

B, T, D_MODEL, HEADS = 8, 256, 512, 8


def problem(dtype, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(B, T, D_MODEL)).astype(dtype)
    params = {f"W_{n}": (rng.normal(size=(D_MODEL, D_MODEL)) / np.sqrt(D_MODEL)).astype(dtype)
              for n in "qkvo"}
    params |= {f"b_{n}": rng.normal(size=D_MODEL).astype(dtype) for n in "qkvo"}
    grad_output = rng.normal(size=(B, T, D_MODEL)).astype(dtype)
    return X, params, grad_output


def median_time(run, repeats):
    run()  # warm up (first-touch of the memory, BLAS threads)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ours(dtype, repeats):
    X, params, G = problem(dtype)
    mask = causal_mask(T)

    def forward():
        return multi_head_attention(X, X, X, params, HEADS, mask)

    def backward():
        return multi_head_attention_backward(X, X, X, params, HEADS, G, mask)

    return {"forward": median_time(forward, repeats), "backward": median_time(backward, repeats),
            "forward_peak": peak_memory(forward)[1], "backward_peak": peak_memory(backward)[1]}


def pytorch(dtype, repeats):
    """The same forward in torch (the same products), and autograd's backward; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS)
    X, params, G = problem(dtype)
    to_torch = {np.float64: torch.float64, np.float32: torch.float32}[dtype]
    X_t = torch.tensor(X, requires_grad=True)
    p_t = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    G_t = torch.tensor(G)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    d_head = D_MODEL // HEADS
    assert X_t.dtype == to_torch

    def split(Y):
        return Y.reshape(B, T, HEADS, d_head).transpose(1, 2)

    def forward():
        q, k, v = (split(X_t @ p_t[f"W_{n}"] + p_t[f"b_{n}"]) for n in "qkv")
        scores = (q @ k.transpose(-1, -2) / d_head ** 0.5).masked_fill(~mask, float("-inf"))
        context = torch.softmax(scores, dim=-1) @ v
        return context.transpose(1, 2).reshape(B, T, D_MODEL) @ p_t["W_o"] + p_t["b_o"]

    def forward_no_grad():
        with torch.no_grad():
            return forward()

    outputs = []

    def backward():  # autograd's backward only: the forward (with its saved tensors) runs outside
        output = outputs.pop()
        output.backward(G_t)

    def timed_backward():
        times = []
        for _ in range(repeats + 1):
            outputs.append(forward())
            start = time.perf_counter()
            backward()
            times.append(time.perf_counter() - start)
        return statistics.median(times[1:])

    # check that the two compute the same gradient, once
    output = forward()
    output.backward(G_t)
    ours_grads = multi_head_attention_backward(X, X, X, params, HEADS, G, causal_mask(T))
    tolerance = 1e-8 if dtype == np.float64 else 1e-3
    ours_X = ours_grads[0] + ours_grads[1] + ours_grads[2]
    agree = np.abs(ours_X - X_t.grad.numpy()).max() <= tolerance * np.abs(ours_X).max()
    return {"forward": median_time(forward_no_grad, repeats), "forward_with_graph": median_time(forward, repeats),
            "backward": timed_backward(), "threads": torch.get_num_threads(), "agree": bool(agree),
            "version": torch.__version__}


def main(argv=None):
    args = PARSER.parse_args(argv)
    print(f"multi-head self-attention, B={B}, T={T}, d_model={D_MODEL}, h={HEADS}, causal mask; "
          f"median of {args.repeats} runs; {THREADS} thread(s)")
    print(f"the weights of one layer, (B, h, T, T): {B * HEADS * T * T * 8 / 2**20:.0f} MiB in float64, "
          f"{B * HEADS * T * T * 4 / 2**20:.0f} MiB in float32")
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        mine = ours(dtype, args.repeats)
        print(f"\n{name}")
        print(f"  ours     forward  {mine['forward'] * 1e3:8.1f} ms   peak {mine['forward_peak'] / 2**20:6.0f} MiB")
        print(f"  ours     backward {mine['backward'] * 1e3:8.1f} ms   peak {mine['backward_peak'] / 2**20:6.0f} MiB"
              f"   = {mine['backward'] / mine['forward']:.2f}× our forward (target ≤ 2.5×, ideal 2×;"
              " it includes recomputing the forward)")
        torch_figures = pytorch(dtype, args.repeats)
        if torch_figures is None:
            print("  PyTorch: not importable, skipped (it is not a dependency of the course)")
            continue
        t = torch_figures
        print(f"  PyTorch {t['version']} CPU ({t['threads']} threads): forward {t['forward'] * 1e3:.1f} ms "
              f"(no_grad), {t['forward_with_graph'] * 1e3:.1f} ms (recording the graph); "
              f"autograd backward {t['backward'] * 1e3:.1f} ms")
        print(f"  our backward = {mine['backward'] / t['backward']:.2f}× PyTorch's backward (target ≤ 2×); "
              f"our backward = {mine['backward'] / (t['forward_with_graph'] + t['backward']):.2f}× "
              "PyTorch's forward + backward; same gradient: " + ("yes" if t["agree"] else "NO"))


if __name__ == "__main__":
    main()
