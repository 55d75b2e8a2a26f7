"""What students write for the multi-head attention exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (slices in a loop, concatenation, one attention call per head with
sliced weight matrices and the output as a sum over heads): the hidden checks
must accept them. `MISTAKES` holds plausible wrong implementations, each of
one task: the hidden checks must reject every one, and say why. Each function
is self-contained, so that its source can be put into a notebook's solution
cell as a student would write it there; it may call `split_heads`,
`merge_heads` and the given `scaled_dot_product_attention`, which the notebook
defines (here: the correct versions below and the reference).
"""

import numpy as np

from solutions.scaled_dot_product import scaled_dot_product_attention  # noqa: F401 (the notebook's given cell)

# -- correct, by other means -------------------------------------------------


def split_heads(X, num_heads):
    # one slice of consecutive features per head, stacked on a new axis 1
    size = X.shape[-1] // num_heads
    return np.stack([X[:, :, i * size:(i + 1) * size] for i in range(num_heads)], axis=1)


def merge_heads(X):
    # the heads side by side along the features
    return np.concatenate([X[:, i] for i in range(X.shape[1])], axis=-1)


def multi_head_attention(Q, K, V, params, num_heads, mask=None):
    # h separate single-head attentions with sliced weights; the output
    # projection as a sum over heads of head_i @ (rows i of W_o)
    B, T_q, d_model = Q.shape
    T_k = K.shape[1]
    size = d_model // num_heads
    if mask is not None:
        mask = np.broadcast_to(mask, (B, num_heads, T_q, T_k))
    output = np.zeros((B, T_q, d_model)) + params["b_o"]
    weights = np.zeros((B, num_heads, T_q, T_k))
    for i in range(num_heads):
        cols = slice(i * size, (i + 1) * size)
        q = Q @ params["W_q"][:, cols] + params["b_q"][cols]
        k = K @ params["W_k"][:, cols] + params["b_k"][cols]
        v = V @ params["W_v"][:, cols] + params["b_v"][cols]
        head, weights[:, i] = scaled_dot_product_attention(
            q, k, v, None if mask is None else mask[:, i])
        output = output + head @ params["W_o"][cols, :]
    return output, weights


CORRECT = {f.__name__: f for f in (split_heads, merge_heads, multi_head_attention)}


# -- mistakes ------------------------------------------------------------------


def split_without_transpose(X, num_heads):
    B, T, d = X.shape
    return X.reshape(B, num_heads, T, d // num_heads)


def split_strided(X, num_heads):
    return np.stack([X[..., i::num_heads] for i in range(num_heads)], axis=1)


def split_missing_transpose(X, num_heads):
    B, T, d = X.shape
    return X.reshape(B, T, num_heads, d // num_heads)


def merge_without_transpose(X):
    B, h, T, d_head = X.shape
    return X.reshape(B, T, h * d_head)


def merge_wrong_axes(X):
    B, h, T, d_head = X.shape
    return X.transpose(0, 2, 3, 1).reshape(B, T, h * d_head)


def merge_missing_reshape(X):
    return X.transpose(0, 2, 1, 3)


def mha_no_biases(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"], num_heads)
    k = split_heads(K @ params["W_k"], num_heads)
    v = split_heads(V @ params["W_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context) @ params["W_o"], weights


def mha_no_value_bias(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context) @ params["W_o"] + params["b_o"], weights


def mha_no_output_projection(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context), weights


def mha_no_output_bias(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context) @ params["W_o"], weights


def mha_scaled_by_d_model(Q, K, V, params, num_heads, mask=None):
    d_model = Q.shape[-1]
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_model)  # should be √d_head
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return merge_heads(weights @ v) @ params["W_o"] + params["b_o"], weights


def mha_unscaled(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    scores = q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return merge_heads(weights @ v) @ params["W_o"] + params["b_o"], weights


def mha_split_without_transpose(Q, K, V, params, num_heads, mask=None):
    # splits and merges with reshapes alone: tokens are mixed between heads
    def split(X):
        B, T, d = X.shape
        return X.reshape(B, num_heads, T, d // num_heads)
    q = split(Q @ params["W_q"] + params["b_q"])
    k = split(K @ params["W_k"] + params["b_k"])
    v = split(V @ params["W_v"] + params["b_v"])
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    B, h, T, d_head = context.shape
    return context.reshape(B, T, h * d_head) @ params["W_o"] + params["b_o"], weights


def mha_split_strided(Q, K, V, params, num_heads, mask=None):
    # head i takes every h-th feature
    def split(X):
        return np.stack([X[..., i::num_heads] for i in range(num_heads)], axis=1)
    q = split(Q @ params["W_q"] + params["b_q"])
    k = split(K @ params["W_k"] + params["b_k"])
    v = split(V @ params["W_v"] + params["b_v"])
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context) @ params["W_o"] + params["b_o"], weights


def mha_merge_without_transpose(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    B, h, T, d_head = context.shape
    return context.reshape(B, T, h * d_head) @ params["W_o"] + params["b_o"], weights


def mha_mask_ignored(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v)
    return merge_heads(context) @ params["W_o"] + params["b_o"], weights


def mha_mask_head_axis_added(Q, K, V, params, num_heads, mask=None):
    # "adds the head axis" to a mask that already broadcasts
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    if mask is not None:
        mask = mask[:, None]
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context) @ params["W_o"] + params["b_o"], weights


def mha_mask_whole_in_each_head(Q, K, V, params, num_heads, mask=None):
    # a loop over heads that gives every head the whole mask
    size = Q.shape[-1] // num_heads
    heads, weights = [], []
    for i in range(num_heads):
        cols = slice(i * size, (i + 1) * size)
        q = Q @ params["W_q"][:, cols] + params["b_q"][cols]
        k = K @ params["W_k"][:, cols] + params["b_k"][cols]
        v = V @ params["W_v"][:, cols] + params["b_v"][cols]
        head, w = scaled_dot_product_attention(q, k, v, mask)
        heads.append(head)
        weights.append(w)
    output = np.concatenate(heads, axis=-1) @ params["W_o"] + params["b_o"]
    return output, np.stack(weights, axis=1)


def mha_mask_transposed(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    if mask is not None:
        mask = np.swapaxes(mask, -1, -2)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context) @ params["W_o"] + params["b_o"], weights


def mha_weights_averaged(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context) @ params["W_o"] + params["b_o"], weights.mean(axis=1)


def mha_weights_wrong_axes(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return merge_heads(context) @ params["W_o"] + params["b_o"], weights.transpose(0, 2, 1, 3)


def mha_returns_weights_first(Q, K, V, params, num_heads, mask=None):
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    context, weights = scaled_dot_product_attention(q, k, v, mask)
    return weights, merge_heads(context) @ params["W_o"] + params["b_o"]


def mha_modifies_params(Q, K, V, params, num_heads, mask=None):
    W_q = params["W_q"]
    W_q /= np.sqrt(Q.shape[-1] // num_heads)  # folds the scaling into the caller's W_q
    q = split_heads(Q @ W_q + params["b_q"] / np.sqrt(Q.shape[-1] // num_heads), num_heads)
    k = split_heads(K @ params["W_k"] + params["b_k"], num_heads)
    v = split_heads(V @ params["W_v"] + params["b_v"], num_heads)
    scores = q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return merge_heads(weights @ v) @ params["W_o"] + params["b_o"], weights


# task -> the hidden checks (in autograder/checks/multi_head.py) that grade it
CHECKS_OF_TASK = {
    "split_heads": ["check_split_heads"],
    "merge_heads": ["check_merge_heads"],
    "multi_head_attention": ["check_multi_head_attention", "check_multi_head_attention_masks"],
}

MHA = "multi_head_attention"
# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "split-without-transpose": ("split_heads", split_without_transpose, "check_split_heads",
                                "mixes the tokens between heads"),
    "split-strided": ("split_heads", split_strided, "check_split_heads", "every h-th feature"),
    "split-missing-transpose": ("split_heads", split_missing_transpose, "check_split_heads",
                                "before the time axis"),
    "merge-without-transpose": ("merge_heads", merge_without_transpose, "check_merge_heads",
                                "a reshape alone does not undo split_heads"),
    "merge-wrong-axes": ("merge_heads", merge_wrong_axes, "check_merge_heads", "interleaves"),
    "merge-missing-reshape": ("merge_heads", merge_missing_reshape, "check_merge_heads",
                              "reshape it to (B, T, h·d_head)"),
    "mha-no-biases": (MHA, mha_no_biases, "check_multi_head_attention", "the biases are missing"),
    "mha-no-value-bias": (MHA, mha_no_value_bias, "check_multi_head_attention",
                          "b_v is missing"),
    "mha-no-output-projection": (MHA, mha_no_output_projection, "check_multi_head_attention",
                                 "the output projection W_o and its bias b_o are missing"),
    "mha-no-output-bias": (MHA, mha_no_output_bias, "check_multi_head_attention",
                           "b_o is missing"),
    "mha-scaled-by-d-model": (MHA, mha_scaled_by_d_model, "check_multi_head_attention",
                              "divided by √d_model"),
    "mha-unscaled": (MHA, mha_unscaled, "check_multi_head_attention", "not divided by √d_head"),
    "mha-split-without-transpose": (MHA, mha_split_without_transpose,
                                    "check_multi_head_attention", "split by a reshape alone"),
    "mha-split-strided": (MHA, mha_split_strided, "check_multi_head_attention",
                          "every h-th feature"),
    "mha-merge-without-transpose": (MHA, mha_merge_without_transpose,
                                    "check_multi_head_attention", "merged by a reshape alone"),
    "mha-weights-averaged": (MHA, mha_weights_averaged, "check_multi_head_attention",
                             "averaged over the heads"),
    "mha-weights-wrong-axes": (MHA, mha_weights_wrong_axes, "check_multi_head_attention",
                               "(B, T_q, h, T_k)"),
    "mha-returns-weights-first": (MHA, mha_returns_weights_first, "check_multi_head_attention",
                                  "in this order"),
    "mha-modifies-params": (MHA, mha_modifies_params, "check_multi_head_attention",
                            "modified its input"),
    "mha-mask-ignored": (MHA, mha_mask_ignored, "check_multi_head_attention_masks",
                         "the mask is ignored"),
    "mha-mask-head-axis-added": (MHA, mha_mask_head_axis_added,
                                 "check_multi_head_attention_masks", "as it is given"),
    "mha-mask-whole-in-each-head": (MHA, mha_mask_whole_in_each_head,
                                    "check_multi_head_attention_masks", "as it is given"),
    "mha-mask-transposed": (MHA, mha_mask_transposed, "check_multi_head_attention_masks",
                            "instead of the keys"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["split-without-transpose", "merge-wrong-axes", "mha-scaled-by-d-model",
                   "mha-weights-averaged"]


# -- two mistakes at once ------------------------------------------------------------

def split_strided_without_transpose(X, num_heads):
    # every h-th feature to a head AND a reshape alone
    B, T, d_model = X.shape
    return X.reshape(B, T, d_model // num_heads, num_heads).reshape(B, num_heads, T, d_model // num_heads)


def mha_no_biases_no_output_bias(Q, K, V, params, num_heads, mask=None):
    B, T_q, d_model = Q.shape
    size = d_model // num_heads

    def heads(X):
        return X.reshape(X.shape[0], X.shape[1], num_heads, size).transpose(0, 2, 1, 3)
    context, weights = scaled_dot_product_attention(heads(Q @ params["W_q"]), heads(K @ params["W_k"]),
                                                    heads(V @ params["W_v"]), mask)
    return context.transpose(0, 2, 1, 3).reshape(B, T_q, d_model) @ params["W_o"], weights


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "split-strided-without-transpose": ({"split_heads": split_strided_without_transpose},
                                        "test_split_heads", ("every h-th", "mixes the tokens", "reshape")),
    "mha-no-biases-at-all": ({"multi_head_attention": mha_no_biases_no_output_bias},
                             "test_multi_head_attention", ("biases", "b_o", "b_v")),
}
