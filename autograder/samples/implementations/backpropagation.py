"""What students write for the backpropagation exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (an explicit Jacobian, the layer norm's chain rule step by step,
one head at a time with sliced weights): the hidden checks must accept them.
`MISTAKES` holds plausible wrong implementations, each of one task: the hidden
checks must reject every one, and say why. The correct functions and the
mistakes of GRADED_MISTAKES are self-contained, so that their source can go
into a notebook's solution cell: they call only the notebook's given
functions (imported here from solutions/) and the student's earlier tasks
(here: the correct versions below); the other mistakes share private helpers.
"""

import numpy as np

from solutions.multi_head import merge_heads, split_heads  # noqa: F401 (the notebook's given cell)
from solutions.scaled_dot_product import masked_softmax, scaled_dot_product_attention  # noqa: F401 (given)

# -- correct, by other means -------------------------------------------------------


def softmax_backward(weights, grad_weights, axis=-1):
    # the explicit Jacobian diag(w) − w wᵀ of every row, times the row's gradient
    w = np.moveaxis(weights, axis, -1)
    g = np.moveaxis(grad_weights, axis, -1)
    jacobian = w[..., :, None] * np.eye(w.shape[-1]) - w[..., :, None] * w[..., None, :]
    return np.moveaxis(np.einsum("...ij,...j->...i", jacobian, g), -1, axis)


def scaled_dot_product_attention_backward(Q, K, V, grad_output, mask=None):
    scale = 1.0 / np.sqrt(Q.shape[-1])
    weights = masked_softmax(np.einsum("...qd,...kd->...qk", Q, K) * scale, mask)
    grad_V = np.einsum("...qk,...qv->...kv", weights, grad_output)
    grad_weights = np.einsum("...qv,...kv->...qk", grad_output, V)
    grad_scores = softmax_backward(weights, grad_weights) * scale
    return (np.einsum("...qk,...kd->...qd", grad_scores, K),
            np.einsum("...qk,...qd->...kd", grad_scores, Q), grad_V)


def layer_norm_backward(X, gamma, beta, grad_output, eps=1e-5):
    # the forward step by step, then each step's backward in reverse order
    d = X.shape[-1]
    mean = X.mean(axis=-1, keepdims=True)
    centred = X - mean
    variance = (centred ** 2).sum(axis=-1, keepdims=True) / d
    std = np.sqrt(variance + eps)
    normalized = centred / std
    leading = tuple(range(X.ndim - 1))
    grad_gamma = (grad_output * normalized).sum(axis=leading)
    grad_beta = grad_output.sum(axis=leading)
    grad_normalized = grad_output * gamma
    grad_std = -(grad_normalized * centred).sum(axis=-1, keepdims=True) / std ** 2
    grad_variance = grad_std / (2 * std)
    grad_centred = grad_normalized / std + grad_variance * 2 * centred / d
    grad_X = grad_centred - grad_centred.mean(axis=-1, keepdims=True)
    return grad_X, grad_gamma, grad_beta


def cross_entropy(logits, targets, mask=None, label_smoothing=0.0):
    V = logits.shape[-1]
    if mask is None:
        mask = np.ones(targets.shape, dtype=bool)
    rows, labels = logits[mask], targets[mask]  # the counted positions only, (N, V) and (N,)
    grad = np.zeros_like(logits)
    if len(labels) == 0:
        return 0.0, grad
    top = rows.max(axis=-1, keepdims=True)
    log_probs = rows - (top + np.log(np.exp(rows - top).sum(axis=-1, keepdims=True)))
    q = np.full(rows.shape, label_smoothing / V)
    q[np.arange(len(labels)), labels] += 1 - label_smoothing
    loss = -(q * log_probs).sum() / len(labels)
    grad[mask] = (np.exp(log_probs) - q) / len(labels)
    return float(loss), grad


def multi_head_attention_backward(Q, K, V, params, num_heads, grad_output, mask=None):
    # one head at a time, with head i's columns of W_q, W_k, W_v and rows of W_o
    B, T_q, d_model = Q.shape
    T_k = K.shape[1]
    size = d_model // num_heads
    if mask is not None:
        mask = np.broadcast_to(mask, (B, num_heads, T_q, T_k))
    grads = {"W_o": np.zeros_like(params["W_o"]), "b_o": grad_output.sum(axis=(0, 1))}
    grad_inputs = [np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)]
    for n in "qkv":
        grads[f"W_{n}"], grads[f"b_{n}"] = np.zeros_like(params["W_q"]), np.zeros(d_model)
    for i in range(num_heads):
        cols = slice(i * size, (i + 1) * size)
        q, k, v = (X @ params[f"W_{n}"][:, cols] + params[f"b_{n}"][cols]
                   for X, n in ((Q, "q"), (K, "k"), (V, "v")))
        weights = masked_softmax(q @ np.swapaxes(k, 1, 2) / np.sqrt(size),
                                 None if mask is None else mask[:, i])
        head = weights @ v
        grads["W_o"][cols] = np.einsum("btd,bte->de", head, grad_output)
        grad_head = grad_output @ params["W_o"][cols].T
        head_grads = scaled_dot_product_attention_backward(
            q, k, v, grad_head, None if mask is None else mask[:, i])
        for j, (X, n) in enumerate(((Q, "q"), (K, "k"), (V, "v"))):
            grads[f"W_{n}"][:, cols] = np.einsum("btd,bte->de", X, head_grads[j])
            grads[f"b_{n}"][cols] = head_grads[j].sum(axis=(0, 1))
            grad_inputs[j] = grad_inputs[j] + head_grads[j] @ params[f"W_{n}"][:, cols].T
    return (*grad_inputs, grads)


CORRECT = {f.__name__: f for f in (softmax_backward, scaled_dot_product_attention_backward,
                                   layer_norm_backward, cross_entropy, multi_head_attention_backward)}


# -- mistakes ----------------------------------------------------------------------


def softmax_backward_no_subtraction(weights, grad_weights, axis=-1):
    return weights * grad_weights


def softmax_backward_axis_zero(weights, grad_weights, axis=-1):
    return weights * (grad_weights - np.sum(grad_weights * weights, axis=0, keepdims=True))


def softmax_backward_diagonal_only(weights, grad_weights, axis=-1):
    return weights * (1 - weights) * grad_weights


def sdpa_backward_no_scale(Q, K, V, grad_output, mask=None):
    weights = masked_softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), mask)
    grad_scores = softmax_backward(weights, grad_output @ np.swapaxes(V, -1, -2))
    # forgets that the scores were divided by √d_k
    return grad_scores @ K, np.swapaxes(grad_scores, -1, -2) @ Q, np.swapaxes(weights, -1, -2) @ grad_output


def sdpa_backward_mask_ignored(Q, K, V, grad_output, mask=None):
    scale = 1 / np.sqrt(Q.shape[-1])
    weights = masked_softmax(Q @ np.swapaxes(K, -1, -2) * scale)  # the mask is forgotten
    grad_scores = softmax_backward(weights, grad_output @ np.swapaxes(V, -1, -2)) * scale
    return grad_scores @ K, np.swapaxes(grad_scores, -1, -2) @ Q, np.swapaxes(weights, -1, -2) @ grad_output


def sdpa_backward_no_subtraction(Q, K, V, grad_output, mask=None):
    scale = 1 / np.sqrt(Q.shape[-1])
    weights = masked_softmax(Q @ np.swapaxes(K, -1, -2) * scale, mask)
    grad_scores = weights * (grad_output @ np.swapaxes(V, -1, -2)) * scale
    return grad_scores @ K, np.swapaxes(grad_scores, -1, -2) @ Q, np.swapaxes(weights, -1, -2) @ grad_output


def sdpa_backward_nan_on_empty_rows(Q, K, V, grad_output, mask=None):
    scale = 1 / np.sqrt(Q.shape[-1])
    scores = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    exps = np.exp(scores - scores.max(axis=-1, keepdims=True))  # -inf - -inf = NaN
    weights = exps / exps.sum(axis=-1, keepdims=True)
    grad_scores = softmax_backward(weights, grad_output @ np.swapaxes(V, -1, -2)) * scale
    return grad_scores @ K, np.swapaxes(grad_scores, -1, -2) @ Q, np.swapaxes(weights, -1, -2) @ grad_output


def layer_norm_backward_no_mean_term(X, gamma, beta, grad_output, eps=1e-5):
    normalized = (X - X.mean(axis=-1, keepdims=True)) / np.sqrt(X.var(axis=-1, keepdims=True) + eps)
    std = np.sqrt(X.var(axis=-1, keepdims=True) + eps)
    g = grad_output * gamma
    grad_X = (g - normalized * (g * normalized).mean(axis=-1, keepdims=True)) / std
    leading = tuple(range(X.ndim - 1))
    return grad_X, (grad_output * normalized).sum(axis=leading), grad_output.sum(axis=leading)


def layer_norm_backward_no_variance_term(X, gamma, beta, grad_output, eps=1e-5):
    std = np.sqrt(X.var(axis=-1, keepdims=True) + eps)
    normalized = (X - X.mean(axis=-1, keepdims=True)) / std
    g = grad_output * gamma
    grad_X = (g - g.mean(axis=-1, keepdims=True)) / std
    leading = tuple(range(X.ndim - 1))
    return grad_X, (grad_output * normalized).sum(axis=leading), grad_output.sum(axis=leading)


def layer_norm_backward_unbiased(X, gamma, beta, grad_output, eps=1e-5):
    std = np.sqrt(X.var(axis=-1, ddof=1, keepdims=True) + eps)  # divides by d − 1
    normalized = (X - X.mean(axis=-1, keepdims=True)) / std
    g = grad_output * gamma
    grad_X = (g - g.mean(axis=-1, keepdims=True)
              - normalized * (g * normalized).mean(axis=-1, keepdims=True)) / std
    leading = tuple(range(X.ndim - 1))
    return grad_X, (grad_output * normalized).sum(axis=leading), grad_output.sum(axis=leading)


def layer_norm_backward_gamma_not_summed(X, gamma, beta, grad_output, eps=1e-5):
    std = np.sqrt(X.var(axis=-1, keepdims=True) + eps)
    normalized = (X - X.mean(axis=-1, keepdims=True)) / std
    g = grad_output * gamma
    grad_X = (g - g.mean(axis=-1, keepdims=True)
              - normalized * (g * normalized).mean(axis=-1, keepdims=True)) / std
    return grad_X, grad_output * normalized, grad_output.sum(axis=tuple(range(X.ndim - 1)))


def layer_norm_backward_no_gamma(X, gamma, beta, grad_output, eps=1e-5):
    std = np.sqrt(X.var(axis=-1, keepdims=True) + eps)
    normalized = (X - X.mean(axis=-1, keepdims=True)) / std
    g = grad_output  # γ forgotten
    grad_X = (g - g.mean(axis=-1, keepdims=True)
              - normalized * (g * normalized).mean(axis=-1, keepdims=True)) / std
    leading = tuple(range(X.ndim - 1))
    return grad_X, (grad_output * normalized).sum(axis=leading), grad_output.sum(axis=leading)


def _smoothed_cross_entropy(logits, targets, mask, q_of, divide_by_all=False, mask_grad=True):
    """A cross-entropy whose target distribution is q_of(onehot, V)."""
    V = logits.shape[-1]
    mask = np.ones(targets.shape, bool) if mask is None else mask
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    q = q_of(np.eye(V)[np.where(mask, targets, 0)], V)
    N = mask.size if divide_by_all else max(mask.sum(), 1)
    loss = -(q * log_probs).sum(axis=-1)[mask].sum() / N
    grad = (np.exp(log_probs) - q) / N
    return float(loss), grad * mask[..., None] if mask_grad else grad


def cross_entropy_smoothing_over_V_minus_1(logits, targets, mask=None, label_smoothing=0.0):
    V = logits.shape[-1]
    mask = np.ones(targets.shape, bool) if mask is None else mask
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    onehot = np.eye(V)[np.where(mask, targets, 0)]
    q = (1 - label_smoothing) * onehot + label_smoothing / (V - 1) * (1 - onehot)  # off-target only
    N = max(mask.sum(), 1)
    loss = -(q * log_probs).sum(axis=-1)[mask].sum() / N
    return float(loss), (np.exp(log_probs) - q) * mask[..., None] / N


def cross_entropy_mean_over_padded(logits, targets, mask=None, label_smoothing=0.0):
    eps = label_smoothing
    return _smoothed_cross_entropy(logits, targets, mask, lambda onehot, V: (1 - eps) * onehot + eps / V,
                                   divide_by_all=True)


def cross_entropy_padded_positions_get_gradient(logits, targets, mask=None, label_smoothing=0.0):
    eps = label_smoothing
    return _smoothed_cross_entropy(logits, targets, mask, lambda onehot, V: (1 - eps) * onehot + eps / V,
                                   mask_grad=False)


def cross_entropy_smoothing_ignored(logits, targets, mask=None, label_smoothing=0.0):
    return _smoothed_cross_entropy(logits, targets, mask, lambda onehot, V: onehot)


def cross_entropy_log_of_softmax(logits, targets, mask=None, label_smoothing=0.0):
    V = logits.shape[-1]
    mask = np.ones(targets.shape, bool) if mask is None else mask
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    q = (1 - label_smoothing) * np.eye(V)[np.where(mask, targets, 0)] + label_smoothing / V
    N = max(mask.sum(), 1)
    loss = -(q * np.log(probs)).sum(axis=-1)[mask].sum() / N  # log 0 = -inf at ±1e4
    return float(loss), (probs - q) * mask[..., None] / N


def cross_entropy_summed(logits, targets, mask=None, label_smoothing=0.0):
    V = logits.shape[-1]
    mask = np.ones(targets.shape, bool) if mask is None else mask
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    q = (1 - label_smoothing) * np.eye(V)[np.where(mask, targets, 0)] + label_smoothing / V
    loss = -(q * log_probs).sum(axis=-1)[mask].sum()  # no division by N
    return float(loss), (np.exp(log_probs) - q) * mask[..., None]


def _mha_backward(Q, K, V, params, num_heads, grad_output, mask, input_W, grad_W, bias_axes):
    """A multi-head backward with the three usual choices made by the caller."""
    qkv = [(Q, "q"), (K, "k"), (V, "v")]
    q, k, v = (split_heads(X @ params[f"W_{n}"] + params[f"b_{n}"], num_heads) for X, n in qkv)
    context = scaled_dot_product_attention(q, k, v, mask)[0]
    grads = {"W_o": grad_W(merge_heads(context), grad_output), "b_o": grad_output.sum(axis=bias_axes)}
    grad_context = split_heads(grad_output @ params["W_o"].T, num_heads)
    head_grads = scaled_dot_product_attention_backward(q, k, v, grad_context, mask)
    grad_inputs = []
    for (X, n), grad in zip(qkv, head_grads):
        grad = merge_heads(grad)
        grads[f"W_{n}"], grads[f"b_{n}"] = grad_W(X, grad), grad.sum(axis=bias_axes)
        grad_inputs.append(grad @ input_W(params[f"W_{n}"]))
    return (*grad_inputs, grads)


def _xt_g(X, G):
    return np.einsum("btd,bte->de", X, G)


def mha_backward_W_not_transposed(Q, K, V, params, num_heads, grad_output, mask=None):
    return _mha_backward(Q, K, V, params, num_heads, grad_output, mask,
                         lambda W: W, _xt_g, (0, 1))


def mha_backward_grad_W_transposed(Q, K, V, params, num_heads, grad_output, mask=None):
    return _mha_backward(Q, K, V, params, num_heads, grad_output, mask,
                         lambda W: W.T, lambda X, G: _xt_g(X, G).T, (0, 1))


def mha_backward_bias_not_summed_over_batch(Q, K, V, params, num_heads, grad_output, mask=None):
    return _mha_backward(Q, K, V, params, num_heads, grad_output, mask,
                         lambda W: W.T, _xt_g, 1)


def mha_backward_projection_bias_grads_zero(Q, K, V, params, num_heads, grad_output, mask=None):
    # b_o's gradient right, but those of b_q, b_k and b_v taken for 0, as b_k's is
    grad_Q, grad_K, grad_V, grads = multi_head_attention_backward(Q, K, V, params, num_heads, grad_output, mask)
    return grad_Q, grad_K, grad_V, {**grads, **{f"b_{n}": np.zeros_like(params[f"b_{n}"]) for n in "qkv"}}


def mha_backward_mask_ignored(Q, K, V, params, num_heads, grad_output, mask=None):
    return _mha_backward(Q, K, V, params, num_heads, grad_output, None,
                         lambda W: W.T, _xt_g, (0, 1))


# task -> the hidden checks (in autograder/checks/backpropagation.py) that grade it
CHECKS_OF_TASK = {
    "softmax_backward": ["check_softmax_backward"],
    "scaled_dot_product_attention_backward": ["check_scaled_dot_product_attention_backward"],
    "layer_norm_backward": ["check_layer_norm_backward"],
    "cross_entropy": ["check_cross_entropy"],
    "multi_head_attention_backward": ["check_multi_head_attention_backward"],
}

SB, SDPA, LN, CE, MHA = CHECKS_OF_TASK  # the task names, in order
# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "softmax-no-subtraction": (SB, softmax_backward_no_subtraction, "check_softmax_backward",
                               "the term − Σ_j g_j w_j is missing"),
    "softmax-sum-over-axis-0": (SB, softmax_backward_axis_zero, "check_softmax_backward",
                                "is taken over axis"),
    "softmax-diagonal-only": (SB, softmax_backward_diagonal_only, "check_softmax_backward",
                              "only the diagonal"),
    "sdpa-no-scale": (SDPA, sdpa_backward_no_scale, "check_scaled_dot_product_attention_backward",
                      "the scale is forgotten in the backward"),
    "sdpa-mask-ignored": (SDPA, sdpa_backward_mask_ignored, "check_scaled_dot_product_attention_backward",
                          "the mask is ignored"),
    "sdpa-no-subtraction": (SDPA, sdpa_backward_no_subtraction,
                            "check_scaled_dot_product_attention_backward", "lacks its subtraction term"),
    "sdpa-nan-on-empty-rows": (SDPA, sdpa_backward_nan_on_empty_rows,
                               "check_scaled_dot_product_attention_backward", "contains NaN"),
    "ln-no-mean-term": (LN, layer_norm_backward_no_mean_term, "check_layer_norm_backward",
                        "the term through the mean is dropped"),
    "ln-no-variance-term": (LN, layer_norm_backward_no_variance_term, "check_layer_norm_backward",
                            "the term through the variance is dropped"),
    "ln-unbiased-variance": (LN, layer_norm_backward_unbiased, "check_layer_norm_backward",
                             "unbiased"),
    "ln-gamma-not-summed": (LN, layer_norm_backward_gamma_not_summed, "check_layer_norm_backward",
                            "sum it over all the leading axes"),
    "ln-no-gamma": (LN, layer_norm_backward_no_gamma, "check_layer_norm_backward", "γ is missing"),
    "ce-smoothing-over-V-minus-1": (CE, cross_entropy_smoothing_over_V_minus_1, "check_cross_entropy",
                                    "ε/(V−1)"),
    "ce-mean-over-padded": (CE, cross_entropy_mean_over_padded, "check_cross_entropy",
                            "the mean is taken over padded positions"),
    "ce-padded-positions-get-gradient": (CE, cross_entropy_padded_positions_get_gradient,
                                         "check_cross_entropy", "the padded positions get a gradient"),
    "ce-smoothing-ignored": (CE, cross_entropy_smoothing_ignored, "check_cross_entropy",
                             "label_smoothing is ignored"),
    "ce-log-of-softmax": (CE, cross_entropy_log_of_softmax, "check_cross_entropy", "not finite"),
    "ce-summed": (CE, cross_entropy_summed, "check_cross_entropy", "summed over the positions"),
    "mha-W-not-transposed": (MHA, mha_backward_W_not_transposed, "check_multi_head_attention_backward",
                             "without the transpose"),
    "mha-grad-W-transposed": (MHA, mha_backward_grad_W_transposed,
                              "check_multi_head_attention_backward", "it is transposed"),
    "mha-bias-not-summed": (MHA, mha_backward_bias_not_summed_over_batch,
                            "check_multi_head_attention_backward", "sum it over the batch and time axes"),
    "mha-projection-bias-grads-zero": (MHA, mha_backward_projection_bias_grads_zero,
                                       "check_multi_head_attention_backward", "it is 0: for Y = X @ W + b"),
    "mha-mask-ignored": (MHA, mha_backward_mask_ignored, "check_multi_head_attention_backward",
                         "the mask is ignored"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["softmax-no-subtraction", "sdpa-no-scale", "ln-unbiased-variance",
                   "ce-smoothing-over-V-minus-1"]


# -- two mistakes at once ------------------------------------------------------------

def sdpa_backward_diagonal_and_unscaled(Q, K, V, grad_output, mask=None):
    # the softmax backward written as s(1 − s) AND the scale forgotten (issue 23's student):
    # on the hand check grad_Q comes out right by coincidence, grad_K does not
    _, weights = scaled_dot_product_attention(Q, K, V, mask)
    grad_V = np.swapaxes(weights, -1, -2) @ grad_output
    grad_weights = grad_output @ np.swapaxes(V, -1, -2)
    grad_scores = weights * (1 - weights) * grad_weights
    return grad_scores @ K, np.swapaxes(grad_scores, -1, -2) @ Q, grad_V


def softmax_backward_s_one_minus_s(weights, grad_weights, axis=-1):
    return weights * (1 - weights) * grad_weights


def sdpa_backward_with_own_softmax_backward(Q, K, V, grad_output, mask=None):
    # right, but for the student's softmax_backward (which is s(1 − s) here)
    _, weights = scaled_dot_product_attention(Q, K, V, mask)
    grad_scores = softmax_backward(weights, grad_output @ np.swapaxes(V, -1, -2)) / np.sqrt(Q.shape[-1])
    return grad_scores @ K, np.swapaxes(grad_scores, -1, -2) @ Q, np.swapaxes(weights, -1, -2) @ grad_output


def layer_norm_backward_unbiased_no_gamma(X, gamma, beta, grad_output, eps=1e-5):
    d = X.shape[-1]
    centred = X - X.mean(axis=-1, keepdims=True)
    std = np.sqrt((centred ** 2).sum(axis=-1, keepdims=True) / (d - 1) + eps)
    normalized = centred / std
    g = grad_output  # γ forgotten
    grad_X = (g - g.mean(axis=-1, keepdims=True)
              - normalized * (g * normalized).mean(axis=-1, keepdims=True)) / std
    leading = tuple(range(X.ndim - 1))
    return grad_X, (grad_output * normalized).sum(axis=leading), grad_output.sum(axis=leading)


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "sdpa-diagonal-softmax-and-unscaled": (
        {SDPA: sdpa_backward_diagonal_and_unscaled}, "test_scaled_dot_product_attention_backward",
        ("only the diagonal", "the scale is forgotten")),
    "softmax-backward-wrong-only": (
        {SB: softmax_backward_s_one_minus_s, SDPA: sdpa_backward_with_own_softmax_backward},
        "test_scaled_dot_product_attention_backward", ("only the diagonal", "softmax_backward")),
    "ln-unbiased-and-no-gamma": (
        {LN: layer_norm_backward_unbiased_no_gamma}, "test_layer_norm_backward",
        ("unbiased", "γ is missing")),
}
