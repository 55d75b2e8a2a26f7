"""What students write for the Luong attention exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (loops, einsum, an explicit concatenation, log-sum-exp, a window
of indices instead of a mask, a scalar p_t for local-m): the hidden checks
must accept them. `MISTAKES` holds plausible wrong implementations, each of
one task: the hidden checks must reject every one, and say why. Each function
is self-contained, so that its source can be put into a notebook's solution
cell as a student would write it there; it may call the other tasks'
functions (`dot_score`, `general_score`, `concat_score`), which the notebook
defines, and `np`.
"""

import numpy as np

# -- correct, by other means -------------------------------------------------


def dot_score(h_t, H_s):
    # a loop over the batch and the source positions
    B, S, _ = H_s.shape
    scores = np.zeros((B, S))
    for b in range(B):
        for s in range(S):
            scores[b, s] = np.dot(h_t[b], H_s[b, s])
    return scores


def general_score(h_t, H_s, W_a):
    # one einsum: h_t[b, i] W_a[i, j] H_s[b, s, j]
    return np.einsum("bi,ij,bsj->bs", h_t, W_a, H_s)


def concat_score(h_t, H_s, W_a, v_a):
    # build [h_t ; h_s] for every position explicitly
    B, S, d = H_s.shape
    pairs = np.concatenate([np.broadcast_to(h_t[:, None, :], (B, S, d)), H_s], axis=-1)
    return np.tanh(pairs @ W_a) @ v_a


def luong_attention(h_t, H_s, params, score="general", mask=None):
    # log-sum-exp softmax, a finite fill value, explicit zeroing of empty rows
    if score == "dot":
        scores = dot_score(h_t, H_s)
    elif score == "general":
        scores = general_score(h_t, H_s, params["W_a"])
    else:
        scores = concat_score(h_t, H_s, params["W_a"], params["v_a"])
    if mask is None:
        mask = np.ones(scores.shape, dtype=bool)
    mask = np.broadcast_to(mask, scores.shape)
    filled = np.where(mask, scores, -1e300)
    top = filled.max(axis=1, keepdims=True)
    log_total = top + np.log(np.sum(np.exp(filled - top) * mask, axis=1, keepdims=True) + 1e-300)
    weights = np.where(mask, np.exp(filled - log_total), 0.0)
    weights[~mask.any(axis=1)] = 0.0
    context = np.einsum("bs,bsd->bd", weights, H_s)
    d = h_t.shape[1]
    W_c = params["W_c"]
    h_tilde = np.tanh(context @ W_c[:d] + h_t @ W_c[d:])  # [c ; h] W_c, split in two
    return h_tilde, context, weights


def predictive_position(h_t, W_p, v_p, S):
    # sigmoid(x) = exp(-log(1 + e^(-x))), stable for any x
    x = np.tanh(h_t @ W_p) @ v_p
    return S * np.exp(-np.logaddexp(0.0, -x))


def local_attention(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    # a loop over the batch and a range of window indices
    B, S, d = H_s.shape
    p_t = np.broadcast_to(np.asarray(p_t, dtype=float), (B,))
    if score == "dot":
        scores = dot_score(h_t, H_s)
    elif score == "general":
        scores = general_score(h_t, H_s, params["W_a"])
    else:
        scores = concat_score(h_t, H_s, params["W_a"], params["v_a"])
    sigma = D / 2
    weights = np.zeros((B, S))
    for b in range(B):
        first = max(0, int(np.ceil(p_t[b] - D)))
        last = min(S - 1, int(np.floor(p_t[b] + D)))
        window = np.arange(first, last + 1)
        if len(window) == 0:
            continue
        e = np.exp(scores[b, window] - scores[b, window].max())
        align = e / e.sum()
        bump = np.exp(-((window - p_t[b]) ** 2) / (2 * sigma**2)) if gaussian else 1.0
        weights[b, window] = align * bump
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return context, weights


CORRECT = {f.__name__: f for f in (dot_score, general_score, concat_score, luong_attention,
                                   predictive_position, local_attention)}


# -- mistakes ------------------------------------------------------------------


def dot_scaled(h_t, H_s):
    # the Transformer's scaling, which Luong's dot score does not have
    return np.einsum("bd,bsd->bs", h_t, H_s) / np.sqrt(h_t.shape[-1])


def dot_transposed(h_t, H_s):
    # (S, B) instead of (B, S)
    return np.einsum("bd,bsd->sb", h_t, H_s)


def general_transposed(h_t, H_s, W_a):
    return np.einsum("bd,bsd->bs", h_t @ W_a.T, H_s)


def general_source_side(h_t, H_s, W_a):
    # (h_s W_a) · h_t: the transpose some explanations write
    return np.einsum("bsd,bd->bs", H_s @ W_a, h_t)


def general_without_W_a(h_t, H_s, W_a):
    return np.einsum("bd,bsd->bs", h_t, H_s)


def concat_swapped(h_t, H_s, W_a, v_a):
    # [h_s ; h_t] instead of [h_t ; h_s]
    B, S, d = H_s.shape
    pairs = np.concatenate([H_s, np.broadcast_to(h_t[:, None, :], (B, S, d))], axis=-1)
    return np.tanh(pairs @ W_a) @ v_a


def concat_without_tanh(h_t, H_s, W_a, v_a):
    B, S, d = H_s.shape
    pairs = np.concatenate([np.broadcast_to(h_t[:, None, :], (B, S, d)), H_s], axis=-1)
    return (pairs @ W_a) @ v_a


def concat_state_not_broadcast(h_t, H_s, W_a, v_a):
    # h_t @ W_top is (B, d_a): added to (B, S, d_a) it lines up with the positions, not the
    # sentences (right for B = 1 only)
    d = h_t.shape[1]
    return np.tanh(h_t @ W_a[:d] + H_s @ W_a[d:]) @ v_a


def attention_softmax_over_batch(h_t, H_s, params, score="general", mask=None):
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - scores.max(axis=0, keepdims=True))
    weights = e / e.sum(axis=0, keepdims=True)  # over the batch, not over S
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), context, weights


def attention_h_tilde_swapped(h_t, H_s, params, score="general", mask=None):
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    if mask is not None:
        scores = np.where(mask, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    context = weights[:, None, :] @ H_s
    context = context[:, 0, :]
    return np.tanh(np.concatenate([h_t, context], axis=-1) @ params["W_c"]), context, weights


def attention_without_tanh(h_t, H_s, params, score="general", mask=None):
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    if mask is not None:
        scores = np.where(mask, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.concatenate([context, h_t], axis=-1) @ params["W_c"], context, weights


def attention_returns_context_first(h_t, H_s, params, score="general", mask=None):
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    if mask is not None:
        scores = np.where(mask, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return context, np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), weights


def attention_always_general(h_t, H_s, params, score="general", mask=None):
    scores = general_score(h_t, H_s, params["W_a"])  # whatever `score` says
    if mask is not None:
        scores = np.where(mask, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), context, weights


def attention_unstable(h_t, H_s, params, score="general", mask=None):
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    e = np.exp(scores)  # overflows for scores of about 1e3 and more
    if mask is not None:
        e = e * mask
    totals = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(totals == 0, 1.0, totals)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), context, weights


def attention_mask_ignored(h_t, H_s, params, score="general", mask=None):
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), context, weights


def attention_mask_after_softmax(h_t, H_s, params, score="general", mask=None):
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    if mask is not None:
        weights = weights * mask
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), context, weights


def attention_max_over_masked(h_t, H_s, params, score="general", mask=None):
    # the maximum of every score, masked ones included, then the masked weights zeroed
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    if mask is not None:
        e = e * mask
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total == 0, 1.0, total)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), context, weights


def attention_uniform_when_fully_masked(h_t, H_s, params, score="general", mask=None):
    # a large negative fill: an all-masked row becomes uniform, not zero
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), context, weights


def attention_nan_when_fully_masked(h_t, H_s, params, score="general", mask=None):
    # -inf fill and a plain max: an all-masked row becomes NaN
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"]), context, weights


def position_without_S(h_t, W_p, v_p, S):
    return 1 / (1 + np.exp(-(np.tanh(h_t @ W_p) @ v_p)))


def position_without_sigmoid(h_t, W_p, v_p, S):
    return S * (np.tanh(h_t @ W_p) @ v_p)


def position_S_minus_one(h_t, W_p, v_p, S):
    # "so that p_t is a valid 0-based index": not the paper's formula
    return (S - 1) / (1 + np.exp(-(np.tanh(h_t @ W_p) @ v_p)))


def position_without_tanh(h_t, W_p, v_p, S):
    return S / (1 + np.exp(-(h_t @ W_p @ v_p)))


def local_window_strict(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    B, S, d = H_s.shape
    distance = np.arange(S)[None, :] - np.broadcast_to(np.asarray(p_t, float), (B,))[:, None]
    window = np.abs(distance) < D  # should be <=
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    scores = np.where(window, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(window, e / e.sum(axis=-1, keepdims=True), 0.0)
    weights = weights * np.exp(-distance**2 / (2 * (D / 2) ** 2))
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_sigma_D(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    B, S, d = H_s.shape
    distance = np.arange(S)[None, :] - np.broadcast_to(np.asarray(p_t, float), (B,))[:, None]
    window = np.abs(distance) <= D
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    scores = np.where(window, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(window, e / e.sum(axis=-1, keepdims=True), 0.0)
    sigma = D  # should be D / 2
    weights = weights * np.exp(-distance**2 / (2 * sigma**2))
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_sigma_D_over_root_2(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    B, S, d = H_s.shape
    distance = np.arange(S)[None, :] - np.broadcast_to(np.asarray(p_t, float), (B,))[:, None]
    window = np.abs(distance) <= D
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    scores = np.where(window, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(window, e / e.sum(axis=-1, keepdims=True), 0.0)
    weights = weights * np.exp(-distance**2 / D**2)  # σ = D/√2, not D/2
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_gaussian_before_softmax(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    B, S, d = H_s.shape
    distance = np.arange(S)[None, :] - np.broadcast_to(np.asarray(p_t, float), (B,))[:, None]
    window = np.abs(distance) <= D
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    scores = scores * np.exp(-distance**2 / (2 * (D / 2) ** 2))  # before the softmax
    scores = np.where(window, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(window, e / e.sum(axis=-1, keepdims=True), 0.0)
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_renormalised(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    B, S, d = H_s.shape
    distance = np.arange(S)[None, :] - np.broadcast_to(np.asarray(p_t, float), (B,))[:, None]
    window = np.abs(distance) <= D
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    scores = np.where(window, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(window, e / e.sum(axis=-1, keepdims=True), 0.0)
    weights = weights * np.exp(-distance**2 / (2 * (D / 2) ** 2))
    weights = weights / weights.sum(axis=-1, keepdims=True)  # the paper does not renormalise
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_softmax_over_all(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    B, S, d = H_s.shape
    distance = np.arange(S)[None, :] - np.broadcast_to(np.asarray(p_t, float), (B,))[:, None]
    window = np.abs(distance) <= D
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    align = e / e.sum(axis=-1, keepdims=True)  # over all S positions
    weights = np.where(window, align * np.exp(-distance**2 / (2 * (D / 2) ** 2)), 0.0)
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_positions_from_1(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    B, S, d = H_s.shape
    positions = np.arange(1, S + 1)  # should be 0 … S-1
    distance = positions[None, :] - np.broadcast_to(np.asarray(p_t, float), (B,))[:, None]
    window = np.abs(distance) <= D
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    scores = np.where(window, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(window, e / e.sum(axis=-1, keepdims=True), 0.0)
    weights = weights * np.exp(-distance**2 / (2 * (D / 2) ** 2))
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_without_gaussian(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    B, S, d = H_s.shape
    distance = np.arange(S)[None, :] - np.broadcast_to(np.asarray(p_t, float), (B,))[:, None]
    window = np.abs(distance) <= D
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    scores = np.where(window, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(window, e / e.sum(axis=-1, keepdims=True), 0.0)
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_p_t_must_be_an_array(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    # correct for an array p_t, but local-m's number p_t = t has no axis to index
    B, S, d = H_s.shape
    distance = np.arange(S)[None, :] - p_t[:, None]
    window = np.abs(distance) <= D
    scores = general_score(h_t, H_s, params["W_a"]) if score == "general" else (
        dot_score(h_t, H_s) if score == "dot"
        else concat_score(h_t, H_s, params["W_a"], params["v_a"]))
    scores = np.where(window, scores, -1e300)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = np.where(window, e / e.sum(axis=-1, keepdims=True), 0.0)
    weights = weights * np.exp(-distance**2 / (2 * (D / 2) ** 2))
    return np.einsum("bs,bsd->bd", weights, H_s), weights


def local_m_with_gaussian(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    # the Gaussian whatever gaussian says: local-m is then not Luong et al.'s Eq. 7
    return local_attention(h_t, H_s, p_t, D, params, score)


def local_gaussian_flag_ignored_for_arrays(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    # "local-m is p_t = t": the Gaussian dropped for a number p_t only, not as gaussian says
    return local_attention(h_t, H_s, p_t, D, params, score, gaussian=np.ndim(p_t) > 0)


# task -> the hidden checks (in autograder/checks/luong.py) that grade it
CHECKS_OF_TASK = {
    "dot_score": ["check_dot_score"],
    "general_score": ["check_general_score"],
    "concat_score": ["check_concat_score"],
    "luong_attention": ["check_luong_attention", "check_luong_attention_masks"],
    "predictive_position": ["check_predictive_position"],
    "local_attention": ["check_local_attention"],
}

# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "luong-dot-scaled": ("dot_score", dot_scaled, "check_dot_score", "not scaled by √d"),
    "luong-dot-transposed": ("dot_score", dot_transposed, "check_dot_score", "shape (B, S)"),
    "luong-general-transposed": ("general_score", general_transposed, "check_general_score",
                                 "transposed"),
    "luong-general-source-side": ("general_score", general_source_side, "check_general_score",
                                  "h_t on the left"),
    "luong-general-without-W_a": ("general_score", general_without_W_a, "check_general_score",
                                  "multiply h_t by W_a"),
    "luong-concat-swapped": ("concat_score", concat_swapped, "check_concat_score",
                             "decoder state first"),
    "luong-concat-without-tanh": ("concat_score", concat_without_tanh, "check_concat_score",
                                  "apply tanh"),
    "luong-concat-state-not-broadcast": ("concat_score", concat_state_not_broadcast, "check_concat_score",
                                         "insert the source axis"),
    "luong-attention-softmax-over-batch": ("luong_attention", attention_softmax_over_batch,
                                           "check_luong_attention", "over the S source positions"),
    "luong-attention-h-tilde-swapped": ("luong_attention", attention_h_tilde_swapped,
                                        "check_luong_attention", "[c_t ; h_t], context first"),
    "luong-attention-without-tanh": ("luong_attention", attention_without_tanh,
                                     "check_luong_attention", "apply tanh"),
    "luong-attention-returns-context-first": ("luong_attention", attention_returns_context_first,
                                              "check_luong_attention", "h_tilde"),
    "luong-attention-always-general": ("luong_attention", attention_always_general,
                                       "check_luong_attention", "as the `score` argument says"),
    "luong-attention-unstable": ("luong_attention", attention_unstable,
                                 "check_luong_attention", "even of about 1e4, is finite"),
    "luong-attention-mask-ignored": ("luong_attention", attention_mask_ignored,
                                     "check_luong_attention_masks",
                                     "the mask is ignored"),
    "luong-attention-mask-after-softmax": ("luong_attention", attention_mask_after_softmax,
                                           "check_luong_attention_masks", "before the softmax"),
    "luong-attention-max-over-masked": ("luong_attention", attention_max_over_masked,
                                        "check_luong_attention_masks", "the maximum subtracted before exp"),
    "luong-attention-uniform-when-fully-masked": ("luong_attention",
                                                  attention_uniform_when_fully_masked,
                                                  "check_luong_attention_masks", "all-zero weights"),
    "luong-attention-nan-when-fully-masked": ("luong_attention", attention_nan_when_fully_masked,
                                              "check_luong_attention_masks", "NaN"),
    "luong-position-without-S": ("predictive_position", position_without_S,
                                 "check_predictive_position", "multiply by S"),
    "luong-position-without-sigmoid": ("predictive_position", position_without_sigmoid,
                                       "check_predictive_position", "apply the sigmoid"),
    "luong-position-S-minus-one": ("predictive_position", position_S_minus_one,
                                   "check_predictive_position", "not S − 1"),
    "luong-position-without-tanh": ("predictive_position", position_without_tanh,
                                    "check_predictive_position", "apply tanh"),
    "luong-local-window-strict": ("local_attention", local_window_strict,
                                  "check_local_attention", "with ≤"),
    "luong-local-sigma-D": ("local_attention", local_sigma_D, "check_local_attention",
                            "σ = D/2"),
    "luong-local-sigma-D-over-root-2": ("local_attention", local_sigma_D_over_root_2,
                                        "check_local_attention", "σ = D/2"),
    "luong-local-gaussian-before-softmax": ("local_attention", local_gaussian_before_softmax,
                                            "check_local_attention", "after the softmax"),
    "luong-local-renormalised": ("local_attention", local_renormalised, "check_local_attention",
                                 "do not renormalise"),
    "luong-local-softmax-over-all": ("local_attention", local_softmax_over_all,
                                     "check_local_attention", "over the window only"),
    "luong-local-positions-from-1": ("local_attention", local_positions_from_1,
                                     "check_local_attention", "0-based"),
    "luong-local-without-gaussian": ("local_attention", local_without_gaussian,
                                     "check_local_attention", "by the Gaussian"),
    "luong-local-m-with-gaussian": ("local_attention", local_m_with_gaussian,
                                    "check_local_attention", "Eq. 7"),
    "luong-local-gaussian-by-the-type-of-p_t": ("local_attention",
                                                local_gaussian_flag_ignored_for_arrays,
                                                "check_local_attention", "with gaussian=True"),
    "luong-local-p_t-must-be-an-array": ("local_attention", local_p_t_must_be_an_array,
                                         "check_local_attention", "raised"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["luong-general-transposed", "luong-attention-h-tilde-swapped",
                   "luong-attention-mask-ignored", "luong-local-sigma-D"]


# -- two mistakes at once ------------------------------------------------------------

def luong_attention_h_t_first_no_tanh(h_t, H_s, params, score="general", mask=None):
    # h_tilde = [h_t ; c_t] @ W_c: the wrong order AND no tanh
    if score == "dot":
        scores = dot_score(h_t, H_s)
    elif score == "general":
        scores = general_score(h_t, H_s, params["W_a"])
    else:
        scores = concat_score(h_t, H_s, params["W_a"], params["v_a"])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return np.concatenate([h_t, context], axis=-1) @ params["W_c"], context, weights


def predictive_position_s_minus_1_no_tanh(h_t, W_p, v_p, S):
    return (S - 1) / (1 + np.exp(-(h_t @ W_p @ v_p)))


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "h-tilde-h-t-first-no-tanh": ({"luong_attention": luong_attention_h_t_first_no_tanh},
                                  "test_luong_attention", ("tanh", "context first", "[c_t ; h_t]", "h_tilde")),
    "p-t-s-minus-1-no-tanh": ({"predictive_position": predictive_position_s_minus_1_no_tanh},
                              "test_predictive_position", ("S − 1", "tanh")),
}
