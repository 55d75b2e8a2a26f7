"""Linear attention's three forms against softmax attention and FlashAttention: time, peak memory,
and the cost of generating one token with a state or with a cache.

    .venv/bin/python benchmarks/linear_attention.py [--repeats 3] [--chunk-size 64]

One head, d = 64, float32, causal, one thread, at T = 1024 … 16384: the
least CPU time of ``--repeats`` runs (the machine is shared: wall time would
measure the other jobs) and the peak memory (tracemalloc, which sees NumPy's
arrays) of the recurrent form (``linear_attention_step`` once per token),
the chunked form (``chunked_linear_attention``), the parallel form (the
masked ``(T, T)`` product of the features, as the chapter writes it), plain
softmax attention with the causal mask, and ``flash_attention``
(``block_size=128``, causal). The two ``(T, T)`` forms stop at 8192, where
their arrays take a GiB each. Then generation: the time of one new token at
position ``T``, with the state (one ``linear_attention_step``) and with a
cache of ``T`` keys and values (``scaled_dot_product_attention`` of one
query), and the bytes each keeps.

Targets (issue 31): the chunked form ≥ 10× faster than the recurrent one at
T = 4096, and faster than softmax attention at T ≥ 4096; generation with a
state constant in T (within 20% from 1024 to 16384).
"""

import argparse
import os
import sys
import time
from pathlib import Path

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = "1"  # on a shared machine multi-threaded BLAS measures the load

import numpy as np  # noqa: E402

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from solutions.efficient_attention import flash_attention, peak_memory  # noqa: E402
from solutions.linear_attention import (  # noqa: E402
    chunked_linear_attention, elu_feature_map, init_linear_attention_state, linear_attention_step)
from solutions.scaled_dot_product import causal_mask, scaled_dot_product_attention  # noqa: E402

PARSER = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
PARSER.add_argument("--repeats", type=int, default=3, help="timed runs of each (default 3)")
PARSER.add_argument("--chunk-size", type=int, default=64, help="the chunked form's chunk size (default 64)")
LENGTHS, D, QUADRATIC_UP_TO = (1024, 2048, 4096, 8192, 16384), 64, 8192
MiB = 2 ** 20


def cpu_time(run, repeats):
    """The least CPU time (``time.process_time``) of ``repeats`` runs, after a warm-up: on a machine that
    other jobs share, wall time measures them too, and even CPU time only gets slower."""
    run()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def recurrent(Q, K, V):
    state, rows = init_linear_attention_state((), Q.shape[-1], V.shape[-1], Q.dtype), []
    for t in range(len(Q)):
        output, state = linear_attention_step(Q[t], K[t], V[t], state)
        rows.append(output)
    return np.stack(rows)


def parallel(Q, K, V, eps=1e-6):
    A = (elu_feature_map(Q) @ elu_feature_map(K).T) * causal_mask(len(Q))  # (T, T)
    return (A @ V) / (A.sum(axis=-1, keepdims=True) + eps)


def main(argv=None):
    args = PARSER.parse_args(argv)
    forms = {"recurrent": recurrent,
             f"chunked (C={args.chunk_size})": lambda Q, K, V: chunked_linear_attention(Q, K, V, args.chunk_size),
             "parallel (T×T)": parallel,
             "softmax": lambda Q, K, V: scaled_dot_product_attention(Q, K, V, causal_mask(len(Q)))[0],
             "flash (block 128)": lambda Q, K, V: flash_attention(Q, K, V, 128, causal=True)[0]}
    print(f"one head, d={D}, float32, causal, one thread; the least CPU time of {args.repeats} runs")
    print(f"{'T':>6}  " + "".join(f"{name:>24}" for name in forms) + "   (ms, peak MiB)")
    rng = np.random.default_rng(0)
    seconds = {}
    for T in LENGTHS:
        Q, K, V = (rng.standard_normal((T, D), dtype=np.float32) for _ in range(3))
        reference, cells = parallel(Q[:1024], K[:1024], V[:1024]) if T == LENGTHS[0] else None, []
        for name, form in forms.items():
            if T > QUADRATIC_UP_TO and name.startswith(("parallel", "softmax")):
                cells.append(f"{f'skipped ({T * T * 4 / 2 ** 30:.0f} GiB per T×T)':>24}")
                continue
            result, peak = peak_memory(form, Q, K, V)
            if reference is not None and not name.startswith(("softmax", "flash")):
                assert np.allclose(result, reference, rtol=1e-3, atol=1e-4), name  # the three forms agree
            seconds[name, T] = cpu_time(lambda: form(Q, K, V), args.repeats)
            cells.append(f"{seconds[name, T] * 1e3:12.1f} ms {peak / MiB:7.1f} MiB")
        print(f"{T:6}  " + "".join(f"{cell:>24}" for cell in cells), flush=True)

    print("\ngeneration, one new token at position T (the least CPU time of 15 rounds of 200 calls; the rounds "
          "go through the lengths in turn, so that the machine's load falls on all of them alike):")
    state_bytes, contexts = (D * D + D) * 4, (1024, 4096, 16384)
    calls = {}
    for T in contexts:
        keys, values = (rng.standard_normal((T, D), dtype=np.float32) for _ in range(2))
        q, k, v = (rng.standard_normal(D, dtype=np.float32) for _ in range(3))
        state = {"S": rng.standard_normal((D, D), dtype=np.float32),  # any state after T tokens: same size
                 "z": np.abs(rng.standard_normal(D, dtype=np.float32)) * T}
        calls["state", T] = lambda q=q, k=k, v=v, state=state: linear_attention_step(q, k, v, state)
        calls["cache", T] = lambda q=q, keys=keys, values=values: scaled_dot_product_attention(q[None], keys, values)
    per_call = {key: [] for key in calls}
    for _ in range(15):
        for key, run in calls.items():
            per_call[key].append(cpu_time(lambda: [run() for _ in range(200)], 1) / 200)
    per_token = {T: min(per_call["state", T]) for T in contexts}
    for T in contexts:
        print(f"  T={T:6}: with a state {per_token[T] * 1e6:7.1f} µs ({state_bytes / 1024:.1f} KiB kept); "
              f"with a cache {min(per_call['cache', T]) * 1e6:8.1f} µs ({2 * T * D * 4 / MiB:.1f} MiB kept)")

    chunked = f"chunked (C={args.chunk_size})"
    ratio = seconds["recurrent", 4096] / seconds[chunked, 4096]
    faster = {T: seconds["softmax", T] / seconds[chunked, T] for T in LENGTHS if ("softmax", T) in seconds and T >= 4096}
    drift = max(per_token.values()) / min(per_token.values()) - 1
    print("\ntargets:")
    print(f"  chunked ≥ 10× faster than recurrent at T=4096: {'met' if ratio >= 10 else 'MISSED'} ({ratio:.1f}×)")
    print(f"  chunked faster than softmax at T ≥ 4096: {'met' if all(f > 1 for f in faster.values()) else 'MISSED'} ("
          + ", ".join(f"T={T}: {f:.1f}×" for T, f in faster.items()) + "; softmax skipped beyond 8192)")
    print(f"  generation with a state constant within 20% from T=1024 to 16384: {'met' if drift <= 0.2 else 'MISSED'} "
          f"(largest / smallest − 1 = {drift:.0%})")


if __name__ == "__main__":
    main()
