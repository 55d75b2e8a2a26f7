"""What students write for the scaled dot-product exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (loops, einsum, log-sum-exp, a large negative fill instead of -inf):
the hidden checks must accept them. `MISTAKES` holds plausible wrong
implementations, each of one task: the hidden checks must reject every one,
and say why. Each function is self-contained, so that its source can be put
into a notebook's solution cell as a student would write it there (a mistake
may call `softmax`, which the notebook defines).
"""

import numpy as np

# -- correct, by other means -------------------------------------------------


def softmax(x, axis=-1):
    # log-sum-exp instead of dividing by the sum
    x = np.asarray(x, dtype=float)
    top = np.max(x, axis=axis, keepdims=True)
    log_total = top + np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True))
    return np.exp(x - log_total)


def scaled_dot_product_attention(Q, K, V, mask=None):
    # einsum, a finite fill value, and explicit zeroing of fully masked rows
    d_k = Q.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(d_k)
    if mask is None:
        mask = np.ones(scores.shape, dtype=bool)
    mask = np.broadcast_to(mask, np.broadcast_shapes(mask.shape, scores.shape))
    scores = np.where(mask, scores, -1e300)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores) * mask
    totals = weights.sum(axis=-1, keepdims=True)
    weights = weights / np.where(totals == 0, 1.0, totals)
    return np.einsum("...qk,...kv->...qv", weights, V), weights


def causal_mask(T):
    mask = np.zeros((T, T), dtype=bool)
    for i in range(T):
        for j in range(i + 1):
            mask[i, j] = True
    return mask


def padding_mask(lengths, T):
    return np.array([[position < length for position in range(T)] for length in lengths])


CORRECT = {f.__name__: f for f in (softmax, scaled_dot_product_attention, causal_mask, padding_mask)}


# -- mistakes ------------------------------------------------------------------


def softmax_wrong_axis(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=0, keepdims=True)


def softmax_unstable(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def attention_unscaled(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def attention_scaled_by_d_k(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / Q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def attention_softmax_over_queries(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-2)
    return weights @ V, weights


def attention_transpose_all_axes(Q, K, V, mask=None):
    # K.T reverses every axis: right for one sequence, wrong with a batch
    scores = Q @ K.T / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def attention_mask_ignored(Q, K, V, mask=None):
    weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), axis=-1)
    return weights @ V, weights


def attention_mask_after_softmax(Q, K, V, mask=None):
    weights = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), axis=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ V, weights


def attention_max_over_masked(Q, K, V, mask=None):
    # the maximum of every score, masked ones included, then the masked weights zeroed
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    if mask is not None:
        e = e * mask
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total == 0, 1.0, total)
    return weights @ V, weights


def attention_uniform_when_fully_masked(Q, K, V, mask=None):
    # a large negative fill: a fully masked row becomes uniform, not zero
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def attention_nan_when_fully_masked(Q, K, V, mask=None):
    # -inf fill with a plain softmax: a fully masked row becomes NaN
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ V, weights


def attention_returns_weights_first(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    return weights, weights @ V


def attention_modifies_input(Q, K, V, mask=None):
    Q /= np.sqrt(Q.shape[-1])  # scales the caller's array in place
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def causal_mask_upper(T):
    return np.triu(np.ones((T, T), dtype=bool))


def causal_mask_without_diagonal(T):
    return np.tril(np.ones((T, T), dtype=bool), k=-1)


def causal_mask_of_ints(T):
    return np.tril(np.ones((T, T)))


def padding_mask_inverted(lengths, T):
    return np.arange(T) >= np.asarray(lengths)[:, None]


def padding_mask_off_by_one(lengths, T):
    return np.arange(T) <= np.asarray(lengths)[:, None]


# task -> the hidden checks (in autograder/checks/scaled_dot_product.py) that grade it
CHECKS_OF_TASK = {
    "softmax": ["check_softmax"],
    "scaled_dot_product_attention": ["check_attention", "check_attention_masks"],
    "causal_mask": ["check_causal_mask"],
    "padding_mask": ["check_padding_mask"],
}

# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "softmax-wrong-axis": ("softmax", softmax_wrong_axis, "check_softmax", "along axis"),
    "softmax-unstable": ("softmax", softmax_unstable, "check_softmax", "subtract the maximum"),
    "attention-unscaled": ("scaled_dot_product_attention", attention_unscaled,
                           "check_attention", "not divided by √d_k"),
    "attention-scaled-by-d_k": ("scaled_dot_product_attention", attention_scaled_by_d_k,
                                "check_attention", "not by d_k"),
    "attention-softmax-over-queries": ("scaled_dot_product_attention", attention_softmax_over_queries,
                                       "check_attention", "taken over the queries"),
    "attention-transpose-all-axes": ("scaled_dot_product_attention", attention_transpose_all_axes,
                                     "check_attention", "raised ValueError"),
    "attention-returns-weights-first": ("scaled_dot_product_attention", attention_returns_weights_first,
                                        "check_attention", "in this order"),
    "attention-modifies-input": ("scaled_dot_product_attention", attention_modifies_input,
                                 "check_attention", "modified its input"),
    "attention-mask-ignored": ("scaled_dot_product_attention", attention_mask_ignored,
                               "check_attention_masks", "the mask is ignored"),
    "attention-mask-after-softmax": ("scaled_dot_product_attention", attention_mask_after_softmax,
                                     "check_attention_masks", "before the softmax"),
    "attention-max-over-masked": ("scaled_dot_product_attention", attention_max_over_masked,
                                  "check_attention_masks", "the maximum subtracted before exp"),
    "attention-uniform-when-fully-masked": ("scaled_dot_product_attention",
                                            attention_uniform_when_fully_masked,
                                            "check_attention_masks", "all-zero weights"),
    "attention-nan-when-fully-masked": ("scaled_dot_product_attention", attention_nan_when_fully_masked,
                                        "check_attention_masks", "NaN"),
    "causal-mask-upper": ("causal_mask", causal_mask_upper, "check_causal_mask", "transposed"),
    "causal-mask-without-diagonal": ("causal_mask", causal_mask_without_diagonal,
                                     "check_causal_mask", "on the diagonal"),
    "causal-mask-of-ints": ("causal_mask", causal_mask_of_ints, "check_causal_mask", "boolean"),
    "padding-mask-inverted": ("padding_mask", padding_mask_inverted, "check_padding_mask", "inverted"),
    "padding-mask-off-by-one": ("padding_mask", padding_mask_off_by_one, "check_padding_mask",
                                "< its length"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["softmax-wrong-axis", "attention-unscaled", "attention-softmax-over-queries",
                   "attention-mask-after-softmax", "attention-nan-when-fully-masked",
                   "causal-mask-upper", "padding-mask-off-by-one"]


# -- two mistakes at once ------------------------------------------------------------

def attention_with_own_softmax(Q, K, V, mask=None):
    # right, but for the student's softmax (normalised over axis 0 here, issue 23's student)
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    if mask is not None:  # a query with no key to attend to takes nothing
        weights = np.where(np.broadcast_to(mask, weights.shape).any(axis=-1, keepdims=True), weights, 0.0)
    return weights @ V, weights


def attention_unscaled_over_queries(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-2)
    return weights @ V, weights


def attention_d_k_and_mask_after(Q, K, V, mask=None):
    weights = softmax(Q @ np.swapaxes(K, -1, -2) / Q.shape[-1], axis=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ V, weights


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "softmax-wrong-only": ({"softmax": softmax_wrong_axis,
                            "scaled_dot_product_attention": attention_with_own_softmax},
                           "test_attention", ("along axis", "axis 0", "NaN")),  # its softmax gives NaN on large scores
    "attention-unscaled-over-queries": ({"scaled_dot_product_attention": attention_unscaled_over_queries},
                                        "test_attention", ("√d_k", "over the queries", "over the keys")),
    "attention-d_k-and-mask-after-softmax": ({"scaled_dot_product_attention": attention_d_k_and_mask_after},
                                             "test_attention_masks", ("d_k", "before the softmax", "sum to 1")),
}
