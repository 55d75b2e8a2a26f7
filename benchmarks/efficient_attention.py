"""Plain attention, our FlashAttention and PyTorch's: time and peak memory as T grows.

    .venv/bin/python benchmarks/efficient_attention.py [--repeats 3] [--threads 1] [--block-size 128]
    PYTHONPATH=$PWD /path/to/venv-with-torch/bin/python benchmarks/efficient_attention.py

One head, d_head = 64, float32, no mask, at T = 1024, 4096 and 16384: the
median wall time of ``scaled_dot_product_attention`` (plain, where its
T × T arrays fit: skipped at 16384, where they would take 4 GiB), of
``flash_attention`` and of ``flash_attention_backward``, and the peak memory
each allocates (tracemalloc, which sees NumPy's arrays). Targets: our flash's
peak ≤ 1/10 of plain's at T = 4096; its time ≤ 3× plain's; its backward ≤ 3×
its forward.

PyTorch is not a dependency of the course: when ``import torch`` works,
``torch.nn.functional.scaled_dot_product_attention`` (CPU) is timed on the
same inputs, its result compared with ours; otherwise that part is skipped
with a note. Its memory is not measured (tracemalloc does not see torch's
allocator). Timings on a shared machine are noisy: they are medians.

Both libraries use ``--threads`` threads (default 1), set before NumPy is
imported: on a loaded machine multi-threaded BLAS measures the load.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

PARSER = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
PARSER.add_argument("--repeats", type=int, default=3, help="timed runs of each (default 3)")
PARSER.add_argument("--threads", type=int, default=1, help="BLAS and PyTorch threads (default 1)")
PARSER.add_argument("--block-size", type=int, default=128, help="FlashAttention's block size (default 128)")
THREADS = PARSER.parse_known_args()[0].threads
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(THREADS)

import numpy as np  # noqa: E402

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solutions.efficient_attention import flash_attention, flash_attention_backward, peak_memory  # noqa: E402
from solutions.scaled_dot_product import scaled_dot_product_attention  # noqa: E402

LENGTHS, D_HEAD, PLAIN_UP_TO = (1024, 4096, 16384), 64, 8192


def median_time(run, repeats):
    run()  # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def torch_attention(Q, K, V, repeats):
    """(median seconds, output) of PyTorch's scaled_dot_product_attention on CPU, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS)
    q, k, v = (torch.from_numpy(a)[None, None] for a in (Q, K, V))  # (1, 1, T, d)

    def run():
        with torch.no_grad():
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return median_time(run, repeats), run()[0, 0].numpy(), torch.__version__


def main(argv=None):
    args = PARSER.parse_args(argv)
    block = args.block_size
    print(f"one head, d_head={D_HEAD}, float32, no mask; block_size={block}; median of {args.repeats} runs; "
          f"{THREADS} thread(s)")
    rng = np.random.default_rng(0)
    figures = {}
    for T in LENGTHS:
        Q, K, V = (rng.standard_normal((T, D_HEAD), dtype=np.float32) for _ in range(3))
        G = rng.standard_normal((T, D_HEAD), dtype=np.float32)
        row = {}
        (output, logsumexp), row["flash_peak"] = peak_memory(flash_attention, Q, K, V, block)
        row["flash"] = median_time(lambda: flash_attention(Q, K, V, block), args.repeats)
        _, row["backward_peak"] = peak_memory(flash_attention_backward, Q, K, V, output, logsumexp, G, block)
        row["backward"] = median_time(lambda: flash_attention_backward(Q, K, V, output, logsumexp, G, block),
                                      args.repeats)
        line = (f"T={T:6}: flash {row['flash'] * 1e3:9.1f} ms, peak {row['flash_peak'] / 2**20:7.2f} MiB; "
                f"its backward {row['backward'] * 1e3:9.1f} ms (= {row['backward'] / row['flash']:.2f}× its "
                f"forward), peak {row['backward_peak'] / 2**20:7.2f} MiB")
        if T <= PLAIN_UP_TO:
            (plain, _), row["plain_peak"] = peak_memory(scaled_dot_product_attention, Q, K, V)
            row["plain"] = median_time(lambda: scaled_dot_product_attention(Q, K, V), args.repeats)
            difference = float(np.abs(plain - output).max())
            line += (f"\n          plain {row['plain'] * 1e3:9.1f} ms, peak {row['plain_peak'] / 2**20:7.2f} MiB; "
                     f"flash = {row['flash'] / row['plain']:.2f}× plain's time, "
                     f"1/{row['plain_peak'] / row['flash_peak']:.0f} of its peak; largest difference "
                     f"{difference:.1e}")
            del plain
        else:
            line += f"\n          plain skipped: its T × T arrays would take {4 * T * T * 4 / 2**30:.0f} GiB"
        torch_figures = torch_attention(Q, K, V, args.repeats)
        if torch_figures is None:
            line += "\n          PyTorch: not importable, skipped (it is not a dependency of the course)"
        else:
            seconds, torch_output, version = torch_figures
            line += (f"\n          PyTorch {version} scaled_dot_product_attention (CPU): {seconds * 1e3:9.1f} ms; "
                     f"our flash = {row['flash'] / seconds:.1f}× its time; largest difference "
                     f"{float(np.abs(torch_output - output).max()):.1e}")
        print(line, flush=True)
        figures[T] = row
    at = figures[4096]
    print("\ntargets at T=4096: "
          f"flash peak ≤ 1/10 of plain's: {'met' if at['flash_peak'] * 10 <= at['plain_peak'] else 'MISSED'} "
          f"(1/{at['plain_peak'] / at['flash_peak']:.0f}); "
          f"flash time ≤ 3× plain's: {'met' if at['flash'] <= 3 * at['plain'] else 'MISSED'} "
          f"({at['flash'] / at['plain']:.2f}×); "
          f"backward ≤ 3× forward: {'met' if at['backward'] <= 3 * at['flash'] else 'MISSED'} "
          f"({at['backward'] / at['flash']:.2f}×)")


if __name__ == "__main__":
    main()
