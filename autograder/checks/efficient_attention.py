"""Hidden checks for the exercise on attention at scale, as case tables (`engine.cases`).

The cases: sizes drawn from the grader's secret too, block sizes that do not divide the lengths, causal attention with
``T_q ≠ T_k`` both ways, queries that see no key, a masked score far above the others. No stand-ins: the memory rules
are measured in the student's process (``check_*_memory``, which ``validate`` runs too: ``call_in_memory`` caps it
where the whole (T_q, T_k) score matrix takes 512 MiB), and a stand-in's work would be done outside the cap.
"""

import math

import numpy as np

from solutions import efficient_attention as reference

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case, changed
from autograder.engine.harness import seeded

SEED = 20220527  # FlashAttention (Dao et al.) appeared on arXiv on 27 May 2022
MEMORY_CASE = (512, 131072, 1, 512)  # T_q, T_k, d (= d_v), block_size of the memory check
MEMORY_LIMIT = 64 * 2 ** 20  # bytes beyond the baseline: half of one (T_q, T_k) float16 array
FLOAT32 = (1e-4, 1e-5)  # (rtol, atol): float32 agrees to about 1e-4
GRADS = ("grad_Q", "grad_K", "grad_V")


def _finite(why, where=lambda **_: True):
    """The fact, checked first, that a value has no NaN, and no inf where `where(**arguments)`: `why` says why."""
    return Fact("{name} contains NaN or inf: " + why + ".", lambda actual, **arguments: not np.any(np.isnan(actual))
                and np.all(np.isfinite(actual[np.broadcast_to(where(**arguments), actual.shape)])), first=True)


def _interleaved(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    """Query head i with key/value head i % num_kv_heads: the reference with its query heads moved (and back)."""
    heads = np.arange(num_heads).reshape(-1, num_kv_heads).T.reshape(-1)  # the query head at each place
    columns = np.arange(Q.shape[-1]).reshape(num_heads, -1)[heads].reshape(-1)
    moved = params | {"W_q": params["W_q"][:, columns], "b_q": params["b_q"][columns], "W_o": params["W_o"][columns]}
    output, weights = reference.grouped_query_attention(Q, K, V, moved, num_heads, num_kv_heads, mask)
    return output, weights[:, np.argsort(heads)]


def _plain(Q, K, V, causal, block_size=1, mask=None, scale=None, rescale_sum=True, rescale_output=True,
           lse=lambda logsumexp, top: logsumexp, **_):
    """(output, logsumexp, weights, masked scores) of plain attention, causal as in sliding_window_mask; a mistake: the
    online softmax over blocks of block_size keys without a rescaling (a weight keeps its block's maximum), `lse`."""
    T_k = K.shape[-2]
    mask = reference.sliding_window_mask(Q.shape[-2], T_k, max(T_k, 1)) if mask is None and causal else mask
    scores = Q @ K.swapaxes(-1, -2) / math.sqrt(scale or Q.shape[-1])
    kept = scores if mask is None else np.where(mask, scores, -np.inf)
    blocks = np.maximum.reduceat(kept, np.arange(0, T_k, block_size), axis=-1)
    running = np.repeat(np.maximum.accumulate(blocks, axis=-1), block_size, axis=-1)[..., :T_k]
    top = running[..., -1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        late, final = (np.exp(kept - np.where(np.isfinite(m), m, 0.0)) for m in (running, top))
        total = (final if rescale_sum else late).sum(axis=-1, keepdims=True)
        weights = np.where(total > 0, (final if rescale_output else late) / np.where(total > 0, total, 1), 0.0)
        return weights @ V, lse((top + np.log(total))[..., 0], top[..., 0]), weights, kept


def _backward(Q, K, V, grad_output, causal, use_D=True, scale_power=1, use_lse=True, mask_ignored=False, **_):
    """The gradients of plain attention with one step of the FlashAttention backward changed."""
    with np.errstate(all="ignore"):  # exp(S) overflows for large scores: that mistake gives inf
        output, logsumexp, weights, _ = _plain(Q, K, V, causal)
        scores = Q @ K.swapaxes(-1, -2) / math.sqrt(Q.shape[-1])
        if mask_ignored:  # every key gets exp(S − logsumexp), logsumexp over the keys the query sees
            weights = np.exp(scores - np.where(np.isfinite(logsumexp), logsumexp, np.inf)[..., None])
        if not use_lse:
            weights = np.where(weights > 0, np.exp(np.where(weights > 0, scores, 0.0)), 0.0)
        D = np.sum(grad_output * output, axis=-1, keepdims=True) if use_D else 0.0
        grad_scores = weights * (grad_output @ V.swapaxes(-1, -2) - D) / math.sqrt(Q.shape[-1]) ** scale_power
        return grad_scores @ K, grad_scores.swapaxes(-1, -2) @ Q, weights.swapaxes(-1, -2) @ grad_output


exercise = Exercise(reference, stand_ins=())
kv_cache_bytes = exercise.task(
    "kv_cache_bytes", hint="2 · B · T · L · g · d_head · bytes_per_value", mistakes=[
        Mistake("a decoder caches a key and a value, hence the factor 2",
                lambda **arguments: reference.kv_cache_bytes(**arguments) // 2),
        Mistake("it counts values, not bytes (multiply by bytes_per_value)",
                lambda **arguments: reference.kv_cache_bytes(**arguments) // arguments["bytes_per_value"])],
    facts=[Fact("{name} should be an int (a number of bytes).",
                lambda actual, **_: np.issubdtype(actual.dtype, np.integer), first=True)])
GQA_MISTAKES = [
    Mistake("the scores are divided by √d_model: divide by √d_head, the size of one head",
            lambda params, num_heads, **rest: reference.grouped_query_attention(num_heads=num_heads, **rest, params=(
                params | {n: params[n] / math.sqrt(num_heads) for n in ("W_q", "b_q")}))),  # the queries / √h
    Mistake(lambda num_kv_heads, **_: f"query head i uses key/value head i % {num_kv_heads}: it uses head i // "
            "(num_heads // num_kv_heads), so that consecutive query heads share one (np.repeat, not np.tile)",
            _interleaved),
    Mistake("the mask is ignored: pass it to the attention as it is given",
            changed(reference.grouped_query_attention, mask=None))]
GQA_HINT = ("project, split the queries into num_heads heads and the keys and values into num_kv_heads heads, attend "
            "with key/value head i // (num_heads // num_kv_heads), merge, then @ W_o + b_o")
GQA_FINITE = Fact("{name} contains NaN or inf: every query here sees a key, and a masked score, however large, must "
                  "get weight exactly 0 (mask the scores before the softmax takes its maximum).",
                  lambda actual, mask=None, **_: mask is None or np.all(np.isfinite(actual)), first=True)
grouped_query_attention = exercise.task("grouped_query_attention", order=("weight array", "output"), outputs=[
    Output("output", GQA_HINT, GQA_MISTAKES, [GQA_FINITE]),
    Output("weight array", GQA_HINT, GQA_MISTAKES, [GQA_FINITE])])
sliding_window_mask = exercise.task(
    "sliding_window_mask", hint="query i stands at position p = T_k − T_q + i and sees key j iff 0 ≤ p − j < window",
    mistakes=[Mistake(lambda window, step=step, **_: f"each query sees {window + step} keys: the window holds the "
                      f"query's own position and the {window - 1} before it (0 ≤ p − j < window)",
                      lambda T_q, T_k, window, step=step: reference.sliding_window_mask(T_q, T_k, window + step))
              for step in (1, -1)]
    + [Mistake("it is not causal: a query sees the window before its position, never the keys after it",
               lambda T_q, T_k, window: np.abs((T_k - T_q + np.arange(T_q))[:, None] - np.arange(T_k)) < window),
       Mistake(lambda T_q, T_k, **_: f"query i stands at position i: with T_q={T_q} queries and T_k={T_k} keys the "
               "queries are the last positions, query i at T_k − T_q + i", lambda T_q, T_k, window:
               reference.sliding_window_mask(max(T_q, T_k), max(T_q, T_k), window)[:T_q, :T_k])])
FLASH_MISTAKES = [
    Mistake("the scores are not divided by √d", changed(_plain, scale=1)),
    Mistake("causal=True is ignored", changed(_plain, causal=False)),
    Mistake("query i is aligned with key i: with causal=True query i stands at position T_k − T_q + i, as in "
            "sliding_window_mask", lambda Q, K, V, block_size, causal: _plain(
                Q, K, V, False, mask=np.tri(Q.shape[-2], K.shape[-2], dtype=bool)), when=lambda causal, **_: causal),
    *(Mistake(f"{what} not rescaled by exp(m_old − m_new) when the running maximum grows",
              changed(_plain, rescale_sum=rescale_sum, rescale_output=rescale_output))
      for rescale_sum, rescale_output, what in ((False, True, "the running sum is"),
                                                (True, False, "the accumulated output is"),
                                                (False, False, "the running sum and the accumulated output are"))),
    Mistake("logsumexp lacks the running maximum: it is m + log ℓ",
            changed(_plain, lse=lambda logsumexp, top: logsumexp - np.where(np.isfinite(top), top, 0.0))),
    Mistake("logsumexp is the running maximum m only: it is m + log ℓ",
            changed(_plain, lse=lambda logsumexp, top: top)),
    Mistake("a query that sees no key has logsumexp −inf (the log of an empty sum), not 0",
            changed(_plain, lse=lambda logsumexp, top: np.where(np.isfinite(logsumexp), logsumexp, 0.0)))]
flash_attention = exercise.task("flash_attention", outputs=[
    Output("output", "it should equal scaled_dot_product_attention's output (with the causal mask aligned as in "
           "sliding_window_mask when causal)", FLASH_MISTAKES,
           [_finite("a query that sees no key (causal, before the first key) has an all-zero output")]),
    Output("logsumexp", "it should be log Σ_j exp(q·k_j/√d) over the keys each query sees, m + log ℓ at the end",
           FLASH_MISTAKES, [_finite("it is finite for every query that sees a key",
                                    lambda **arguments: np.isfinite(reference.flash_attention(**arguments)[1]))])])
BACKWARD_HINT = ("it should equal scaled_dot_product_attention_backward's: P = exp(S − logsumexp), dV = Pᵀ dO, "
                 "dS = P ⊙ (dO Vᵀ − D), dQ = dS K/√d, dK = dSᵀ Q/√d")
BACKWARD_MISTAKES = [
    Mistake("D = Σ_d grad_output ⊙ output is not subtracted: dS = P ⊙ (dP − D)", changed(_backward, use_D=False)),
    Mistake("the scale is forgotten in the backward: the scores are Q Kᵀ/√d, so dQ and dK are divided by √d too",
            changed(_backward, scale_power=0)),
    Mistake("the gradient is divided by √d twice (once is right)", changed(_backward, scale_power=2)),
    Mistake("the weights are recomputed as exp(S), not normalised: P = exp(S − logsumexp)",
            changed(_backward, use_lse=False)),
    Mistake("causal=True is ignored when the weights are recomputed", changed(_backward, mask_ignored=True))]
flash_attention_backward = exercise.task("flash_attention_backward", outputs=[
    Output(name, BACKWARD_HINT, BACKWARD_MISTAKES, [_finite(
        "a query whose logsumexp is −inf sees no key: its weights are 0, and so are the gradients through it")] + [
        Fact("{name}: a query that sees no key has weights 0, so its gradient is exactly 0.",
             lambda actual, logsumexp, **_: not np.any(actual[np.isneginf(logsumexp)]), first=True)
    ] * (name == "grad_Q")) for name in GRADS])


def _values_only(name, outputs):
    """The task `name` judged on its values alone (no mistake named): the reference's on float64 inputs."""
    function = getattr(reference, name)
    return exercise.task(name, graded=False, outputs=[Output(
        output, "it should equal plain attention's on the same inputs", facts=[Fact(
            "{name} contains NaN or inf: every query here sees a key, and a masked score, however large, must get "
            "weight exactly 0 (mask the scores before exp).",
            lambda actual, causal, **_: not causal or np.all(np.isfinite(actual)), first=True), _finite(
            "every query here sees a key, so it is finite")], expected=lambda got, i=i, **arguments: function(**{
                key: value.astype(float) if isinstance(value, np.ndarray) else value for key, value in arguments.items()
            })[i]) for i, output in enumerate(outputs)])


flash_values, backward_values = _values_only("flash_attention", ("output", "logsumexp")), _values_only(
    "flash_attention_backward", GRADS)


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


def _far_above_cases(rng):
    """Causal cases where query i must not see a key j > i whose score, 1800, is about 1e3 above those it sees."""
    cases = []
    for dtype in (np.float64, np.float32):
        T, block_size = int(rng.integers(5, 10)), int(rng.integers(1, 5))
        i = int(rng.integers(0, T - 1))
        j = int(rng.integers(i + 1, T))
        Q, K, V = rng.normal(size=(T, 4)), rng.normal(size=(T, 4)), rng.normal(size=(T, 3))
        Q[i] = K[j] = 30.0
        cases.append((f"causal, T_q=T_k={T}, block_size={block_size}, {np.dtype(dtype).name}, where query {i} "
                      f"must not see key {j} whose score is about 1e3 above the ones it sees",
                      *(X.astype(dtype) for X in (Q, K, V)), block_size, True))
    return cases


def _cases(rng, cases, backward=False):
    """The cases (description, Q, K, V, block_size, causal), of the backward after the reference's forward."""
    made = []
    for description, Q, K, V, block_size, causal in cases:
        forward = reference.flash_attention(Q, K, V, block_size, causal) if backward else ()
        gradient = (rng.normal(size=forward[0].shape).astype(Q.dtype),) if backward else ()
        made.append(case(description, Q, K, V, *forward, *gradient, block_size=block_size, causal=causal).tolerating(
            *(FLOAT32 if Q.dtype == np.float32 else ())))
    return made


def _memory_case(backward=False):
    """The memory case (``call_in_memory``: a hard cap outside the student's reach)."""
    rng = seeded(SEED + 9)
    T_q, T_k, d, block_size = MEMORY_CASE
    [each] = _cases(rng, [(f"T_q={T_q}, T_k={T_k}, d={d}, block_size={block_size} (the memory case)",
                           *(rng.normal(size=(T, d)) for T in (T_q, T_k, T_k)), block_size, False)], backward)
    return each.within(MEMORY_LIMIT, (
        f"more memory at once than a tiled computation needs (its outputs, a few {block_size} × {block_size} blocks "
        f"of 2 MiB each, and its inputs), where the whole (T_q, T_k) score matrix, which is also one row block of it "
        f"here, takes 512 MiB (128 MiB even in float16). " + ("No array may have more than block_size along both a "
        "query axis and a key axis." if backward else "No array may be longer than block_size along the key axis.")))


def check_kv_cache_bytes(function):
    rng = seeded(SEED)
    kv_cache_bytes.check(function, [
        case(f"batch_size, seq_len, num_layers, num_kv_heads, d_head = {args}"
             + "".join(f", bytes_per_value={value}" for value in kwargs.values()), *args, **kwargs)
        for args, kwargs in [((3, 5, 2, 1, 7), dict(bytes_per_value=4)), ((1, 4096, 80, 8, 128), {}),
                             ((4, 2048, 96, 96, 128), dict(bytes_per_value=2)), ((1,) * 5, dict(bytes_per_value=1)),
                             (tuple(int(n) for n in rng.integers(1, 50, size=5)),
                              dict(bytes_per_value=int(rng.integers(1, 5))))]])


def check_grouped_query_attention(function):
    rng = seeded(SEED + 1)

    def params(d_model, num_heads, num_kv_heads):
        d_kv = d_model // num_heads * num_kv_heads
        W = {f"W_{n}": rng.normal(size=(d_model, d_kv if n in "kv" else d_model)) / math.sqrt(d_model) for n in "qokv"}
        return W | {f"b_{n}": rng.normal(size=W[f"W_{n}"].shape[1]) for n in "qkvo"}
    h_secret = int(rng.choice([4, 6, 8]))
    g_secret = int(rng.choice([g for g in range(2, h_secret) if h_secret % g == 0]))
    cases = []
    for description, B, T_q, T_k, d_model, h, g, mask in [
            ("self-attention, B=2, T=5, d_model=16, 4 heads, 2 key/value heads", 2, 5, 5, 16, 4, 2, None),
            ("cross-attention, B=2, T_q=3, T_k=6, d_model=12, 6 heads, 3 key/value heads, a padding mask",
             2, 3, 6, 12, 6, 3, (np.arange(6) < np.array([[6], [2]]))[:, None, None, :]),
            ("multi-query attention (1 key/value head), B=1, T=4, d_model=8, 4 heads, a sliding window mask of 2",
             1, 4, 4, 8, 4, 1, reference.sliding_window_mask(4, 4, 2)),
            ("as many key/value heads as heads, B=2, T=3, d_model=8, 2 heads", 2, 3, 3, 8, 2, 2, None),
            (f"B=2, T_q=4, T_k=7, d_model={2 * h_secret}, {h_secret} heads, {g_secret} key/value heads",
             2, 4, 7, 2 * h_secret, h_secret, g_secret, None)]:
        Q, K = rng.normal(size=(B, T_q, d_model)), rng.normal(size=(B, T_k, d_model))
        V = K if T_q == T_k else rng.normal(size=(B, T_k, d_model))
        cases.append(case(description, Q, K, V, params(d_model, h, g), h, g, mask=mask))
    # a masked key (padding) whose scores are far from the others, about 1e3 above them for some query and head
    T_far = int(rng.integers(4, 7))
    far = int(rng.integers(0, T_far))
    Q, K = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, T_far, 8))
    K[:, far] *= 1000.0
    cases.append(case(f"B=2, T_q=3, T_k={T_far}, d_model=8, 4 heads, 2 key/value heads, where the masked key {far} "
                      "has scores about 1e3 away from the others (above, for some queries)", Q, K, K,
                      params(8, 4, 2), 4, 2, mask=(np.arange(T_far) != far)[None, None, None, :]))
    Q = rng.normal(size=(1, 2, 8))
    grouped_query_attention.check(function, cases + [case("num_heads=4, num_kv_heads=3", Q, Q, Q, params(8, 4, 3), 4, 3)
                                                     .rejected("4 query heads cannot be split into 3 equal groups")])


def check_sliding_window_mask(function):
    rng = seeded(SEED + 2)
    T_secret = int(rng.integers(5, 12))
    sliding_window_mask.check(function, [
        case(f"T_q={T_q}, T_k={T_k}, window={window}", T_q, T_k, window)
        for T_q, T_k, window in [(6, 6, 3), (3, 7, 2), (5, 5, 5), (4, 4, 10), (2, 6, 3), (6, 3, 2), (1, 4, 1),
                                 (T_secret, T_secret + int(rng.integers(1, 5)), int(rng.integers(2, T_secret)))]])


def check_flash_attention(function):
    rng = seeded(SEED + 3)
    flash_attention.check(function, _cases(rng, _attention_cases(rng)))
    flash_values.check(function, _cases(rng, _far_above_cases(rng)))


def check_flash_attention_memory(function):
    flash_values.judge(function, _memory_case())


def check_flash_attention_backward(function):
    rng = seeded(SEED + 4)
    flash_attention_backward.check(function, _cases(rng, _attention_cases(rng), backward=True))
    backward_values.check(function, _cases(rng, _far_above_cases(rng), backward=True))


def check_flash_attention_backward_memory(function):
    backward_values.judge(function, _memory_case(backward=True))
