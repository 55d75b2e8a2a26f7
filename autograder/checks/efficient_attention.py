"""Hidden checks for the exercise on attention at scale.

Each ``check_*`` runs the student's function on seeded inputs (sizes drawn
from the grader's secret too, block sizes that do not divide the lengths,
causal attention with ``T_q ≠ T_k`` both ways, queries that see no key),
compares with the reference in ``solutions/efficient_attention.py`` with the
harness's ``compare``: at a difference it names a mistake only when that
mistake alone (computed here with one step changed) gives the student's
values; otherwise it shows the expected and the actual values.

Whether ``flash_attention`` (and its backward) really tile is measured, not
read from the code, and where the student's code cannot reach the
measurement: ``harness.call_in_memory`` runs the call under a hard cap on its
process's address space (under ``grade``, a second sandbox of the submission
whose runner sets the cap before the notebook's first cell; in plain nbgrader
and the tests, a forked child), ``MEMORY_LIMIT`` = 64 MiB beyond that
process's baseline, on the memory case ``T_q = block_size = 512``,
``T_k = 131072``, ``d = d_v = 1``. There the whole ``(T_q, T_k)`` score matrix,
which is also one row block ``block_size × T_k``, takes 512 MiB in float64,
256 MiB in float32 and 128 MiB in float16: it cannot fit. The values are
checked there too (a function that catches the MemoryError must still give
the right answer). Measured (2 cores, NumPy 2 with OpenBLAS, one thread): the
sandbox's baseline is about 129 MiB of address space (after NumPy and BLAS's
32 MiB work buffer); the notebook's own cells add about 12 MiB; the tiled
FlashAttention-1 of the tests then peaks at 24 MiB above the baseline in the
forward and 32 MiB in the backward (its inputs and their transfer included),
half the cap; the reference takes 0.27 s (forward) and 0.41 s (backward) of
CPU time there. Nothing the notebook measures (``tracemalloc``, its given
``peak_memory``) decides a point: the visible check cell measures the same rule
as well as the student's process allows (a smaller case, against a budget of
a few times what the reference holds there) and fails when it is broken. The
memory checks are ``check_flash_attention_memory`` and
``check_flash_attention_backward_memory``, in a hidden block of their own that
starts with ``# resource rule``: ``validate`` runs them too.
"""

import math

import numpy as np

from solutions import efficient_attention as reference
from solutions.backpropagation import scaled_dot_product_attention_backward
from solutions.scaled_dot_product import masked_softmax, padding_mask, scaled_dot_product_attention

from autograder.engine.checking import CheckFailed, check, check_close, check_shape, shown
import contextlib
import io
import warnings

from autograder.engine.harness import OutOfMemory, call, call_in_memory, compare, seeded, standing_in

# No stand-ins in these checks: the memory rules are measured in the student's process, and a stand-in's
# work is done in the grader, outside the cap; no reference function here calls another graded function
SEED = 20220527  # FlashAttention (Dao et al.) appeared on arXiv on 27 May 2022
MEMORY_CASE = (512, 131072, 1, 512)  # T_q, T_k, d (= d_v), block_size of the memory check
MEMORY_LIMIT = 64 * 2 ** 20  # bytes beyond the baseline: half of one (T_q, T_k) float16 array
EMPTY = "a query that sees no key (causal, before the first key) has an all-zero output"


def _compare(actual, expected, name, mistakes, hint, finite=None):
    """Shape, then (if ``finite`` says why) no NaN or inf, then ``compare``: the values, a mistake
    only when it alone gives them, else the expected and the actual values."""
    check_shape(actual, expected.shape, name)
    if finite:
        check(not np.any(np.isnan(actual)) and np.all(np.isfinite(actual[np.isfinite(expected)])),
              f"{name} contains NaN or inf: {finite}.")
    compare(actual, expected, name, mistakes, hint=hint)


def _unpack(result, names, function, description):
    name = getattr(function, "__name__", "your function")
    check(isinstance(result, (tuple, list)) and len(result) == len(names),
          f"{name} should return a tuple ({', '.join(names)}), but on {description} it returned "
          f"{type(result).__name__}" + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
          + ".")
    return result


def _check_raises_value_error(function, args, name, on, reason, stand_ins=()):
    """Check that function(*args) raises ValueError, silencing what it prints; ``stand_ins`` as for
    ``harness.call``."""
    function_name = getattr(function, "__name__", "your function")
    with warnings.catch_warnings(), np.errstate(all="ignore"), \
            contextlib.redirect_stderr(io.StringIO()), standing_in(function, stand_ins) as run:
        warnings.simplefilter("ignore")
        try:
            run(*args)
        except ValueError:
            return
        except NotImplementedError:
            raise CheckFailed(
                f"{function_name} is not implemented yet (it raises NotImplementedError).") from None
        except Exception as error:  # any failure of student code is a failed check
            raise CheckFailed(
                f"{name} raised {type(error).__name__} ({error}), but it should raise "
                f"ValueError: {reason}.") from None
    raise CheckFailed(f"{name} should raise ValueError: {reason}.")


# -- the cache -----------------------------------------------------------------------

def check_kv_cache_bytes(kv_cache_bytes):
    rng = seeded(SEED)
    cases = [((3, 5, 2, 1, 7), {"bytes_per_value": 4}), ((1, 4096, 80, 8, 128), {}),
             ((4, 2048, 96, 96, 128), {"bytes_per_value": 2}), ((1, 1, 1, 1, 1), {"bytes_per_value": 1}),
             (tuple(int(n) for n in rng.integers(1, 50, size=5)), {"bytes_per_value": int(rng.integers(1, 5))})]
    for args, kwargs in cases:
        description = (f"batch_size, seq_len, num_layers, num_kv_heads, d_head = {args}"
                       + (f", bytes_per_value={kwargs['bytes_per_value']}" if kwargs else ""))
        actual = call(kv_cache_bytes, *args, on=description, **kwargs)
        expected = reference.kv_cache_bytes(*args, **kwargs)
        check(isinstance(actual, (int, np.integer)) and not isinstance(actual, bool),
              f"kv_cache_bytes({description}) should be an int (a number of bytes), not "
              f"{type(actual).__name__}.")
        per_value = kwargs.get("bytes_per_value", 2)
        # with 2 bytes per value either mistake halves the result: then neither is named
        check_close(actual, expected, f"kv_cache_bytes({description})",
                    "2 · B · T · L · g · d_head · bytes_per_value",
                    mistakes=[(expected // 2, "a decoder caches a key and a value, hence the factor 2"),
                              (expected // per_value, "it counts values, not bytes (multiply by "
                                                      "bytes_per_value)")])


# -- grouped-query attention ---------------------------------------------------------

def _gqa_params(rng, d_model, num_heads, num_kv_heads):
    d_kv = d_model // num_heads * num_kv_heads
    params = {"W_q": rng.normal(size=(d_model, d_model)), "W_o": rng.normal(size=(d_model, d_model)),
              "W_k": rng.normal(size=(d_model, d_kv)), "W_v": rng.normal(size=(d_model, d_kv))}
    params = {key: value / math.sqrt(d_model) for key, value in params.items()}
    return params | {f"b_{n}": rng.normal(size=params[f"W_{n}"].shape[1]) for n in "qkvo"}


def _gqa_variant(Q, K, V, params, h, g, mask, interleaved=False, scale_size=None):
    """Grouped-query attention with one step changed (for the mistakes)."""
    d_model = Q.shape[-1]
    d_head = d_model // h
    B, T_q, T_k = Q.shape[0], Q.shape[1], K.shape[1]
    q = (Q @ params["W_q"] + params["b_q"]).reshape(B, T_q, h, d_head).transpose(0, 2, 1, 3)
    k, v = ((X @ params[f"W_{n}"] + params[f"b_{n}"]).reshape(B, T_k, g, d_head).transpose(0, 2, 1, 3)
            for X, n in ((K, "k"), (V, "v")))
    repeat = (lambda x: np.tile(x, (1, h // g, 1, 1))) if interleaved else (
        lambda x: np.repeat(x, h // g, axis=1))
    k, v = repeat(k), repeat(v)
    scale = math.sqrt(scale_size or d_head)
    weights = masked_softmax(q @ k.swapaxes(-1, -2) / scale, mask)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T_q, d_model)
    return context @ params["W_o"] + params["b_o"], weights


def check_grouped_query_attention(grouped_query_attention):
    rng = seeded(SEED + 1)
    h_secret = int(rng.choice([4, 6, 8]))
    g_secret = int(rng.choice([g for g in range(2, h_secret) if h_secret % g == 0]))
    cases = [  # description, B, T_q, T_k, d_model, h, g, mask
        ("self-attention, B=2, T=5, d_model=16, 4 heads, 2 key/value heads", 2, 5, 5, 16, 4, 2, None),
        ("cross-attention, B=2, T_q=3, T_k=6, d_model=12, 6 heads, 3 key/value heads, a padding mask",
         2, 3, 6, 12, 6, 3, padding_mask(np.array([6, 2]), 6)[:, None, None, :]),
        ("multi-query attention (1 key/value head), B=1, T=4, d_model=8, 4 heads, a sliding window "
         "mask of 2", 1, 4, 4, 8, 4, 1, reference.sliding_window_mask(4, 4, 2)),
        ("as many key/value heads as heads, B=2, T=3, d_model=8, 2 heads", 2, 3, 3, 8, 2, 2, None),
        (f"B=2, T_q=4, T_k=7, d_model={2 * h_secret}, {h_secret} heads, {g_secret} key/value heads",
         2, 4, 7, 2 * h_secret, h_secret, g_secret, None),
    ]
    for description, B, T_q, T_k, d_model, h, g, mask in cases:
        Q, K = rng.normal(size=(B, T_q, d_model)), rng.normal(size=(B, T_k, d_model))
        V = K if T_q == T_k else rng.normal(size=(B, T_k, d_model))
        params = _gqa_params(rng, d_model, h, g)
        result = call(grouped_query_attention, Q, K, V, params, h, g, mask=mask, on=description)
        output, weights = _unpack(result, ("output", "weights"), grouped_query_attention, description)
        expected = reference.grouped_query_attention(Q, K, V, params, h, g, mask)
        mistakes = [(_gqa_variant(Q, K, V, params, h, g, mask, scale_size=d_model),
                     "the scores are divided by √d_model: divide by √d_head, the size of one head")]
        if 1 < g < h:
            mistakes.append((_gqa_variant(Q, K, V, params, h, g, mask, interleaved=True),
                             f"query head i uses key/value head i % {g}: it uses head "
                             f"i // (num_heads // num_kv_heads), so that consecutive query heads "
                             "share one (np.repeat, not np.tile)"))
        if mask is not None:
            mistakes.append((reference.grouped_query_attention(Q, K, V, params, h, g),
                             "the mask is ignored: pass it to the attention as it is given"))
        for i, (actual, name) in enumerate(((weights, "weight array"), (output, "output"))):
            _compare(actual, expected[1 - i], f"the {name} on {description}",
                     [(wrong[1 - i], mistake) for wrong, mistake in mistakes],
                     "project, split the queries into num_heads heads and the keys and values into "
                     "num_kv_heads heads, attend with key/value head i // (num_heads // num_kv_heads), "
                     "merge, then @ W_o + b_o")
    Q = rng.normal(size=(1, 2, 8))
    _check_raises_value_error(grouped_query_attention, (Q, Q, Q, _gqa_params(rng, 8, 4, 3), 4, 3),
                              "grouped_query_attention with num_heads=4 and num_kv_heads=3",
                              "num_heads=4, num_kv_heads=3", "4 query heads cannot be split into 3 equal groups")


# -- the sliding window --------------------------------------------------------------

def check_sliding_window_mask(sliding_window_mask):
    rng = seeded(SEED + 2)
    T_secret = int(rng.integers(5, 12))
    cases = [(6, 6, 3), (3, 7, 2), (5, 5, 5), (4, 4, 10), (2, 6, 3), (6, 3, 2), (1, 4, 1),
             (T_secret, T_secret + int(rng.integers(1, 5)), int(rng.integers(2, T_secret)))]
    for T_q, T_k, window in cases:
        description = f"sliding_window_mask(T_q={T_q}, T_k={T_k}, window={window})"
        actual = call(sliding_window_mask, T_q, T_k, window, on=f"T_q={T_q}, T_k={T_k}, window={window}")
        expected = reference.sliding_window_mask(T_q, T_k, window)
        distance = np.arange(T_q)[:, None] - np.arange(T_k)
        mistakes = [(reference.sliding_window_mask(T_q, T_k, window + 1),
                     f"each query sees {window + 1} keys: the window holds the query's own position and "
                     f"the {window - 1} before it (0 ≤ p − j < window)"),
                    (np.abs((T_k - T_q + np.arange(T_q))[:, None] - np.arange(T_k)) < window,
                     "it is not causal: a query sees the window before its position, never the keys after it")]
        if window > 1:
            mistakes.append((reference.sliding_window_mask(T_q, T_k, window - 1),
                             f"each query sees {window - 1} keys: the window holds the query's own "
                             f"position and the {window - 1} before it (0 ≤ p − j < window)"))
        if T_q != T_k:
            mistakes.append(((distance >= 0) & (distance < window),
                             f"query i stands at position i: with T_q={T_q} queries and T_k={T_k} keys the "
                             "queries are the last positions, query i at T_k − T_q + i"))
        check_close(actual, expected, description,
                    "query i stands at position p = T_k − T_q + i and sees key j iff 0 ≤ p − j < window",
                    mistakes)


# -- FlashAttention ------------------------------------------------------------------

def _attention_cases(rng):
    """(description, Q, K, V, block_size, causal) covering the cases of the API."""
    def qkv(lead, T_q, T_k, d, d_v, scale=1.0):
        return (scale * rng.normal(size=(*lead, T_q, d)), scale * rng.normal(size=(*lead, T_k, d)),
                rng.normal(size=(*lead, T_k, d_v)))
    T_q, T_k = (int(n) for n in rng.integers(9, 40, size=2))
    block, causal = int(rng.integers(2, 8)), bool(rng.integers(2))
    return [
        ("T_q=T_k=12, d=4, d_v=3, batch 2, block_size=4", *qkv((2,), 12, 12, 4, 3), 4, False),
        ("T_q=T_k=10, d=4, two leading axes (2, 3), causal, block_size=3 (which does not divide 10)",
         *qkv((2, 3), 10, 10, 4, 4), 3, True),
        ("T_q=5 queries after T_k=11 keys, causal, block_size=4", *qkv((2,), 5, 11, 8, 2), 4, True),
        ("T_q=7 queries and T_k=4 keys, causal (the first 3 queries see no key), block_size=3",
         *qkv((), 7, 4, 4, 3), 3, True),
        ("T_q=7 queries and T_k=4 keys, causal, block_size=2 (query 2 sees no key, query 3 of its block "
         "sees one)", *qkv((2,), 7, 4, 4, 3), 2, True),
        ("large scores (entries of Q and K about 30), T_q=6, T_k=9, block_size=2",
         *qkv((), 6, 9, 4, 2, scale=30.0), 2, False),
        ("T_q=T_k=9 with block_size=64, larger than T", *qkv((1,), 9, 9, 4, 4), 64, True),
        (f"T_q={T_q}, T_k={T_k}, d=6, d_v=5, batch 2, {'causal, ' if causal else ''}block_size={block}",
         *qkv((2,), T_q, T_k, 6, 5), block, causal),
    ]


def _plain(Q, K, V, causal, mask=None, scale=None):
    """(output, logsumexp, weights) of plain attention, causal aligned as in sliding_window_mask."""
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if mask is None and causal:
        mask = reference.sliding_window_mask(T_q, T_k, max(T_k, 1))
    scores = Q @ K.swapaxes(-1, -2) / math.sqrt(scale or Q.shape[-1])
    weights = masked_softmax(scores, mask)
    kept = scores if mask is None else np.where(mask, scores, -np.inf)
    top = kept.max(axis=-1, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        log_sum = np.log(np.exp(kept - shift).sum(axis=-1))
    return weights @ V, log_sum + shift[..., 0], weights, top[..., 0]


def _flash_mistakes(Q, K, V, block_size, causal):
    """((output, logsumexp), what is wrong) for the usual mistakes of flash_attention."""
    T_q, T_k = Q.shape[-2], K.shape[-2]
    right_output, right_lse, _, top = _plain(Q, K, V, causal)
    mistakes = [(_plain(Q, K, V, causal, scale=1)[:2], "the scores are not divided by √d")]
    if causal:
        mistakes.append((_plain(Q, K, V, False)[:2], "causal=True is ignored"))
        if T_q != T_k:
            mistakes.append((_plain(Q, K, V, False, mask=np.tri(T_q, T_k, dtype=bool))[:2],
                             "query i is aligned with key i: with causal=True query i stands at position "
                             "T_k − T_q + i, as in sliding_window_mask"))
    for rescale_sum, rescale_output, what in ((False, True, "the running sum"),
                                              (True, False, "the accumulated output"),
                                              (False, False, "the running sum and the accumulated output")):
        mistakes.append((_online_without_rescaling(Q, K, V, block_size, causal, rescale_sum, rescale_output),
                         f"{what} {'is' if 'and' not in what else 'are'} not rescaled by exp(m_old − m_new) "
                         "when the running maximum grows"))
    with np.errstate(invalid="ignore"):
        mistakes += [((right_output, right_lse - np.where(np.isfinite(top), top, 0.0)),
                      "logsumexp lacks the running maximum: it is m + log ℓ"),
                     ((right_output, top), "logsumexp is the running maximum m only: it is m + log ℓ"),
                     ((right_output, np.where(np.isfinite(right_lse), right_lse, 0.0)),
                      "a query that sees no key has logsumexp −inf (the log of an empty sum), not 0")]
    return mistakes


def _online_without_rescaling(Q, K, V, block_size, causal, rescale_sum, rescale_output):
    """The online softmax of the reference with one of its rescalings left out."""
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scores = Q @ K.swapaxes(-1, -2) / math.sqrt(Q.shape[-1])
    if causal:
        scores = np.where(reference.sliding_window_mask(T_q, T_k, max(T_k, 1)), scores, -np.inf)
    top = np.full((*scores.shape[:-1], 1), -np.inf)
    total, accumulated = np.zeros_like(top), np.zeros((*scores.shape[:-1], V.shape[-1]))
    with np.errstate(invalid="ignore", divide="ignore"):
        for start in range(0, T_k, block_size):
            block = scores[..., start:start + block_size]
            new_top = np.maximum(top, block.max(axis=-1, keepdims=True))
            shift = np.where(np.isfinite(new_top), new_top, 0.0)
            weights = np.exp(block - shift)
            rescale = np.exp(top - shift)
            total = (rescale if rescale_sum else 1) * total + weights.sum(axis=-1, keepdims=True)
            accumulated = (rescale if rescale_output else 1) * accumulated + weights @ V[..., start:start + block_size, :]
            top = new_top
        output = np.where(total > 0, accumulated / np.where(total > 0, total, 1), 0.0)
        return output, (top + np.log(total))[..., 0]


def _check_tiled(function, backward=False):
    """Fail a function that cannot run within MEMORY_LIMIT on the memory case (``call_in_memory``:
    a hard cap outside the student's reach), or that gives wrong values there."""
    rng = seeded(SEED + 9)
    T_q, T_k, d, block_size = MEMORY_CASE
    Q, K, V = rng.normal(size=(T_q, d)), rng.normal(size=(T_k, d)), rng.normal(size=(T_k, d))
    description = f"T_q={T_q}, T_k={T_k}, d={d}, block_size={block_size} (the memory case)"
    expected = reference.flash_attention(Q, K, V, block_size)
    if backward:
        G = rng.normal(size=expected[0].shape)
        args = (Q, K, V, *expected, G, block_size)
        expected = reference.flash_attention_backward(*args)
        names = ("grad_Q", "grad_K", "grad_V")
    else:
        args, names = (Q, K, V, block_size), ("output", "logsumexp")
    try:
        result = call_in_memory(function, *args, on=description, limit_bytes=MEMORY_LIMIT)
    except OutOfMemory as failure:
        name = getattr(function, "__name__", "your function")
        raise CheckFailed(
            f"{name} did not run within {MEMORY_LIMIT / 2 ** 20:.0f} MiB on {description}: more memory at once "
            f"than a tiled computation needs (its outputs, a few {block_size} × {block_size} blocks of "
            f"{block_size ** 2 * 8 / 2 ** 20:.0f} MiB each, and its inputs), where the whole (T_q, T_k) score "
            f"matrix, which is also one row block of it here, takes {T_q * T_k * 8 / 2 ** 20:.0f} MiB "
            f"({T_q * T_k * 2 / 2 ** 20:.0f} MiB even in float16). " + (
                "No array may have more than block_size along both a query axis and a key axis." if backward
                else "No array may be longer than block_size along the key axis.")) from failure
    values = _unpack(result, names, function, description)
    for actual, right, name in zip(values, expected, names):
        _compare(actual, right, f"{name} on {description}", [], "it should equal plain attention's",
                 finite="every query sees every key here")


def _far_above_cases(rng):
    """(description, Q, K, V, block_size, i, j): causal, query i and a key j > i it must not see
    with a score q_i·k_j/√d = 1800, about 1e3 above those it sees; in float64 and float32."""
    cases = []
    for dtype in (np.float64, np.float32):
        T, block_size = int(rng.integers(5, 10)), int(rng.integers(1, 5))
        i = int(rng.integers(0, T - 1))
        j = int(rng.integers(i + 1, T))
        Q, K, V = rng.normal(size=(T, 4)), rng.normal(size=(T, 4)), rng.normal(size=(T, 3))
        Q[i] = K[j] = 30.0
        cases.append((f"causal, T_q=T_k={T}, block_size={block_size}, {np.dtype(dtype).name}, where query {i} "
                      f"must not see key {j} whose score is about 1e3 above the ones it sees",
                      *(X.astype(dtype) for X in (Q, K, V)), block_size))
    return cases


def _check_far_above(actual, expected, name, dtype):
    """Finite, then the values: at float64's tolerance, or float32's (relative 1e-4)."""
    check_shape(actual, expected.shape, name)
    check(np.all(np.isfinite(actual)), f"{name} contains NaN or inf: a masked score, however large, "
                                       "must get weight exactly 0 (mask the scores before exp).")
    if dtype == np.float64:
        compare(actual, expected, name, hint="masked keys get weight 0, whatever their score")
    elif not np.allclose(np.asarray(actual, float), expected, rtol=1e-4, atol=1e-5):
        raise CheckFailed(f"{name}: {shown(np.asarray(actual, float), expected)} (masked keys get weight 0, "
                          "whatever their score; float32 agrees to about 1e-4).")


def check_flash_attention(flash_attention):
    rng = seeded(SEED + 3)
    for description, Q, K, V, block_size, causal in _attention_cases(rng):
        result = call(flash_attention, Q, K, V, block_size=block_size, causal=causal, on=description)
        output, logsumexp = _unpack(result, ("output", "logsumexp"), flash_attention, description)
        expected = _plain(Q, K, V, causal)
        mistakes = _flash_mistakes(Q, K, V, block_size, causal)
        _compare(output, expected[0], f"the output on {description}", [(w[0], m) for w, m in mistakes],
                 "it should equal scaled_dot_product_attention's output (with the causal mask aligned "
                 "as in sliding_window_mask when causal)", finite=EMPTY)
        _compare(logsumexp, expected[1], f"logsumexp on {description}", [(w[1], m) for w, m in mistakes],
                 "it should be log Σ_j exp(q·k_j/√d) over the keys each query sees, m + log ℓ at the end",
                 finite="it is finite for every query that sees a key")
    for description, Q, K, V, block_size in _far_above_cases(rng):
        result = call(flash_attention, Q, K, V, block_size=block_size, causal=True, on=description)
        output, logsumexp = _unpack(result, ("output", "logsumexp"), flash_attention, description)
        expected = _plain(*(X.astype(float) for X in (Q, K, V)), True)
        _check_far_above(output, expected[0], f"the output on {description}", Q.dtype)
        _check_far_above(logsumexp, expected[1], f"logsumexp on {description}", Q.dtype)


def check_flash_attention_memory(flash_attention):
    """The resource rule of flash_attention: the memory case within MEMORY_LIMIT (``validate`` runs it too)."""
    _check_tiled(flash_attention)


def _backward_variant(Q, K, V, grad_output, causal, mask=None, use_D=True, scale_power=1, use_lse=True,
                      mask_ignored=False):
    """The gradients of plain attention with one step of the FlashAttention backward changed."""
    with np.errstate(all="ignore"):  # exp(S) overflows for large scores: that mistake gives inf
        return _backward_steps(Q, K, V, grad_output, causal, mask, use_D, scale_power, use_lse, mask_ignored)


def _backward_steps(Q, K, V, grad_output, causal, mask, use_D, scale_power, use_lse, mask_ignored):
    output, logsumexp, weights, _ = _plain(Q, K, V, causal, mask)
    scores = Q @ K.swapaxes(-1, -2) / math.sqrt(Q.shape[-1])
    if mask_ignored:  # every key gets exp(S − logsumexp), logsumexp over the keys the query sees
        weights = np.exp(scores - np.where(np.isfinite(logsumexp), logsumexp, np.inf)[..., None])
    if not use_lse:
        allowed = weights > 0
        weights = np.where(allowed, np.exp(np.where(allowed, scores, 0.0)), 0.0)
    grad_weights = grad_output @ V.swapaxes(-1, -2)
    D = np.sum(grad_output * output, axis=-1, keepdims=True) if use_D else 0.0
    grad_scores = weights * (grad_weights - D) / math.sqrt(Q.shape[-1]) ** scale_power
    return (grad_scores @ K, grad_scores.swapaxes(-1, -2) @ Q, weights.swapaxes(-1, -2) @ grad_output)


def check_flash_attention_backward(flash_attention_backward):
    rng = seeded(SEED + 4)
    for description, Q, K, V, block_size, causal in _attention_cases(rng):
        output, logsumexp = reference.flash_attention(Q, K, V, block_size, causal)
        G = rng.normal(size=output.shape)
        result = call(flash_attention_backward, Q, K, V, output, logsumexp, G, block_size=block_size,
                      causal=causal, on=description)
        grads = _unpack(result, ("grad_Q", "grad_K", "grad_V"), flash_attention_backward, description)
        mask = reference.sliding_window_mask(Q.shape[-2], K.shape[-2], K.shape[-2]) if causal else None
        expected = scaled_dot_product_attention_backward(Q, K, V, G, mask)
        mistakes = [(_backward_variant(Q, K, V, G, causal, use_D=False),
                     "D = Σ_d grad_output ⊙ output is not subtracted: dS = P ⊙ (dP − D)"),
                    (_backward_variant(Q, K, V, G, causal, scale_power=0),
                     "the scale is forgotten in the backward: the scores are Q Kᵀ/√d, so dQ and dK "
                     "are divided by √d too"),
                    (_backward_variant(Q, K, V, G, causal, scale_power=2),
                     "the gradient is divided by √d twice (once is right)"),
                    (_backward_variant(Q, K, V, G, causal, use_lse=False),
                     "the weights are recomputed as exp(S), not normalised: P = exp(S − logsumexp)")]
        if causal:
            mistakes.append((_backward_variant(Q, K, V, G, causal, mask_ignored=True),
                             "causal=True is ignored when the weights are recomputed"))
        for i, name in enumerate(("grad_Q", "grad_K", "grad_V")):
            _compare(grads[i], expected[i], f"{name} on {description}", [(w[i], m) for w, m in mistakes],
                     "it should equal scaled_dot_product_attention_backward's: P = exp(S − logsumexp), "
                     "dV = Pᵀ dO, dS = P ⊙ (dO Vᵀ − D), dQ = dS K/√d, dK = dSᵀ Q/√d",
                     finite="a query whose logsumexp is −inf sees no key: its weights are 0, and so "
                            "are the gradients through it")
        unseen = Q.shape[-2] - K.shape[-2] if causal else 0  # the first queries see no key
        check(unseen <= 0 or not np.any(np.asarray(grads[0])[..., :unseen, :]),
              f"grad_Q on {description}: a query that sees no key has weights 0, so its gradient is "
              "exactly 0.")
    for description, Q, K, V, block_size in _far_above_cases(rng):
        output, logsumexp = reference.flash_attention(Q, K, V, block_size, causal=True)
        G = rng.normal(size=output.shape).astype(Q.dtype)
        result = call(flash_attention_backward, Q, K, V, output, logsumexp, G, block_size=block_size, causal=True,
                      on=description)
        grads = _unpack(result, ("grad_Q", "grad_K", "grad_V"), flash_attention_backward, description)
        T = Q.shape[-2]
        expected = scaled_dot_product_attention_backward(*(X.astype(float) for X in (Q, K, V, G)),
                                                         np.tri(T, T, dtype=bool))
        for actual, right, name in zip(grads, expected, ("grad_Q", "grad_K", "grad_V")):
            _check_far_above(actual, right, f"{name} on {description}", Q.dtype)


def check_flash_attention_backward_memory(flash_attention_backward):
    """The resource rule of flash_attention_backward: the memory case within MEMORY_LIMIT."""
    _check_tiled(flash_attention_backward, backward=True)

