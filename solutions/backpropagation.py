"""Backpropagation through attention: the backward of every layer of the Transformer.

Each ``*_backward`` function takes the inputs of its forward function (the
softmax's takes its output ``weights``) and ``grad_output``, the gradient of a
scalar loss ``L`` with respect to the forward's output, recomputes what it
needs with the forward functions of ``solutions/``, and returns the gradients
of ``L`` with respect to the forward's array inputs, each with its input's
shape (a parameter ``dict`` gets a ``dict`` with the same keys). Masks, token
ids and sizes get no gradient; inputs are never modified.

Row-vector convention, as in the forward: ``Y = X @ W`` gives
``grad_X = grad_Y @ W.T`` and ``grad_W = X.T @ grad_Y`` (the shapes say where
the transposes go).
"""

import math

import numpy as np

from .multi_head import merge_heads, split_heads
from .scaled_dot_product import scaled_dot_product_attention
from .transformer_encoder import layer_norm


def softmax_backward(weights, grad_weights, axis=-1):
    """Gradient with respect to the scores of ``weights = softmax(scores, axis)``.

    The Jacobian of the softmax is ``diag(w) − w wᵀ``; its product with a
    vector ``g`` is ``w ⊙ (g − Σ_axis g ⊙ w)``: one sum per row, no
    ``T × T`` Jacobian per row, so no ``T × T × T`` array. Entries of weight 0
    (masked pairs, all-masked rows) get gradient 0.
    """
    weights, grad_weights = np.asarray(weights), np.asarray(grad_weights)
    _check_grad(grad_weights, weights.shape, "grad_weights", "weights")
    dot = np.sum(grad_weights * weights, axis=axis, keepdims=True)  # (..., 1, ...) one per row
    return weights * (grad_weights - dot)


def scaled_dot_product_attention_backward(Q, K, V, grad_output, mask=None):
    """``(grad_Q, grad_K, grad_V)`` through ``output`` of ``scaled_dot_product_attention``.

    ``Q (..., T_q, d_k)``, ``K (..., T_k, d_k)``, ``V (..., T_k, d_v)``,
    ``grad_output (..., T_q, d_v)``; ``mask`` as in the forward. The forward
    is recomputed once and its weights reused. Masked pairs and all-masked
    rows have weight 0, so they pass no gradient (and no NaN).
    """
    Q, K, V, grad_output = (np.asarray(a) for a in (Q, K, V, grad_output))
    output, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    _check_grad(grad_output, output.shape, "grad_output", "output")
    grad_Q, grad_K, grad_V = _attention_backward_from_weights(Q, K, V, weights, grad_output)
    return _sum_to(grad_Q, Q.shape), _sum_to(grad_K, K.shape), _sum_to(grad_V, V.shape)


def _attention_backward_from_weights(Q, K, V, weights, grad_output):
    """The backward of ``softmax(Q Kᵀ / √d_k) V`` given the forward's ``weights``."""
    grad_V = np.swapaxes(weights, -1, -2) @ grad_output          # (..., T_k, d_v)
    grad_weights = grad_output @ np.swapaxes(V, -1, -2)          # (..., T_q, T_k)
    # the scale is a constant factor of the scores: it multiplies their gradient
    grad_scores = softmax_backward(weights, grad_weights) / math.sqrt(Q.shape[-1])
    grad_Q = grad_scores @ K                                     # (..., T_q, d_k)
    grad_K = np.swapaxes(grad_scores, -1, -2) @ Q                # (..., T_k, d_k)
    return grad_Q, grad_K, grad_V


def multi_head_attention_backward(Q, K, V, params, num_heads, grad_output, mask=None):
    """``(grad_Q, grad_K, grad_V, grad_params)`` through ``multi_head_attention``.

    ``grad_output (B, T_q, d_model)``; ``grad_params`` has the keys
    ``W_q W_k W_v W_o b_q b_k b_v b_o``. For self-attention (one array passed
    as ``Q``, ``K`` and ``V``) its gradient is ``grad_Q + grad_K + grad_V``.
    Every head's weights are recomputed once, by the forward, and reused.
    """
    Q, K, V, grad_output = (np.asarray(a) for a in (Q, K, V, grad_output))
    if Q.ndim != 3 or K.ndim != 3 or K.shape != V.shape or K.shape[0] != Q.shape[0] \
            or K.shape[-1] != Q.shape[-1]:
        raise ValueError(f"Q must be (B, T_q, d_model) and K, V (B, T_k, d_model), "
                         f"got Q {Q.shape}, K {K.shape}, V {V.shape}")
    _check_grad(grad_output, Q.shape, "grad_output", "output")
    # the pieces of multi_head_attention, kept for the backward
    q, k, v = (split_heads(X @ params[f"W_{n}"] + params[f"b_{n}"], num_heads)
               for X, n in ((Q, "q"), (K, "k"), (V, "v")))       # (B, h, T, d_head)
    context, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    merged = merge_heads(context)                                # (B, T_q, d_model)
    grads = {"W_o": _param_grad(merged, grad_output),
             "b_o": _bias_grad(grad_output, params["b_o"])}
    grad_context = split_heads(grad_output @ params["W_o"].T, num_heads)
    grad_q, grad_k, grad_v = _attention_backward_from_weights(q, k, v, weights, grad_context)
    grad_inputs = []
    for X, grad_heads, n in ((Q, grad_q, "q"), (K, grad_k, "k"), (V, grad_v, "v")):
        grad_projected = merge_heads(grad_heads)                 # (B, T, d_model)
        grads[f"W_{n}"] = _param_grad(X, grad_projected)
        grads[f"b_{n}"] = _bias_grad(grad_projected, params[f"b_{n}"])
        grad_inputs.append(grad_projected @ params[f"W_{n}"].T)
    grad_params = {key: grads[key] for key in params}
    return (*grad_inputs, grad_params)


def layer_norm_backward(X, gamma, beta, grad_output, eps=1e-5):
    """``(grad_X, grad_gamma, grad_beta)`` through ``layer_norm``.

    With ``x̂ = (X − mean) / σ``, ``σ = √(var + eps)`` (biased variance) and
    ``g = grad_output ⊙ γ``:
    ``grad_X = (g − mean(g) − x̂ · mean(g ⊙ x̂)) / σ``, means over the last
    axis. The two subtracted terms are the paths through the mean and
    through the variance. ``grad_gamma = Σ grad_output ⊙ x̂`` and
    ``grad_beta = Σ grad_output``, summed over all leading axes.
    """
    X, gamma, beta, grad_output = (np.asarray(a) for a in (X, gamma, beta, grad_output))
    d = X.shape[-1]
    if gamma.shape != (d,) or beta.shape != (d,):
        raise ValueError(f"gamma {gamma.shape} and beta {beta.shape} must have shape ({d},) "
                         f"for X of shape {X.shape}")
    _check_grad(grad_output, X.shape, "grad_output", "output")
    # x̂ is layer_norm with gamma = 1 and beta = 0
    normalized = layer_norm(X, np.ones(d, X.dtype), np.zeros(d, X.dtype), eps)
    inv_std = 1 / np.sqrt(X.var(axis=-1, keepdims=True) + eps)   # (..., 1)
    grad_normalized = grad_output * gamma
    grad_X = inv_std * (grad_normalized
                        - grad_normalized.mean(axis=-1, keepdims=True)
                        - normalized * (grad_normalized * normalized).mean(axis=-1, keepdims=True))
    leading = tuple(range(X.ndim - 1))
    return grad_X, np.sum(grad_output * normalized, axis=leading), np.sum(grad_output, axis=leading)


def position_wise_ffn_backward(X, params, grad_output):
    """``(grad_X, grad_params)`` through ``position_wise_ffn`` (keys ``W_1 b_1 W_2 b_2``).

    ReLU passes the gradient where its input is positive; at exactly 0 its
    derivative is taken as 0.
    """
    X, grad_output = np.asarray(X), np.asarray(grad_output)
    expected = X.shape[:-1] + (params["W_2"].shape[-1],)
    _check_grad(grad_output, expected, "grad_output", "output")
    pre_activation = X @ params["W_1"] + params["b_1"]          # (..., d_ff)
    hidden = np.maximum(0.0, pre_activation)
    grad_hidden = (grad_output @ params["W_2"].T) * (pre_activation > 0)
    grads = {"W_1": _param_grad(X, grad_hidden), "b_1": _bias_grad(grad_hidden, params["b_1"]),
             "W_2": _param_grad(hidden, grad_output), "b_2": _bias_grad(grad_output, params["b_2"])}
    return grad_hidden @ params["W_1"].T, {key: grads[key] for key in params}


def cross_entropy(logits, targets, mask=None, label_smoothing=0.0):
    """``(loss, grad_logits)``: mean cross-entropy over the counted positions.

    ``logits (..., V)``, ``targets`` int ``(...)``, ``mask`` bool ``(...)``
    (``True`` = counted; targets elsewhere may hold any integer, e.g. −100).
    The target distribution is ``q = (1 − ε)·onehot(target) + ε / V``
    (label smoothing, Szegedy et al. 2016, section 7; ``ε = label_smoothing``):
    the target class keeps ``1 − ε + ε/V``. ``loss`` (a float) is the mean
    over the ``N`` counted positions of ``−Σ_k q_k log softmax(logits)_k``;
    ``grad_logits = (softmax(logits) − q) / N`` there, 0 elsewhere. No
    counted position: loss 0.0 and zero gradient. The log-softmax is computed
    as ``shifted − log Σ exp(shifted)``, finite for logits of ±1e4.
    """
    logits, targets = np.asarray(logits), np.asarray(targets)
    if not np.issubdtype(logits.dtype, np.floating):
        logits = logits.astype(np.float64)
    if logits.ndim < 1 or targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets of shape {targets.shape} must have the leading shape of "
                         f"logits {logits.shape} (..., V)")
    if targets.size and not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(f"targets must be integers, got dtype {targets.dtype}")
    mask = np.ones(targets.shape, bool) if mask is None else np.asarray(mask)
    if mask.dtype != bool or mask.shape != targets.shape:
        raise ValueError(f"mask must be a boolean array of the targets' shape {targets.shape}, "
                         f"got {mask.dtype} {mask.shape}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1], got {label_smoothing}")
    num_classes = logits.shape[-1]
    counted = targets[mask]
    if counted.size and (counted.min() < 0 or counted.max() >= num_classes):
        raise ValueError(f"counted targets must lie in [0, {num_classes}) for logits of "
                         f"shape {logits.shape}")
    num_counted = int(mask.sum())
    if num_counted == 0:
        return 0.0, np.zeros_like(logits)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (..., V)
    safe_targets = np.where(mask, targets, 0)[..., None]        # any integer where not counted
    target = np.zeros_like(logits)
    np.put_along_axis(target, safe_targets, 1.0, axis=-1)       # one-hot (..., V)
    target = (1 - label_smoothing) * target + label_smoothing / num_classes
    per_position = -np.sum(target * log_probs, axis=-1)         # (...)
    loss = float(np.sum(per_position[mask], dtype=np.float64) / num_counted)
    grad_logits = (np.exp(log_probs) - target) * (mask[..., None] / num_counted)
    return loss, grad_logits.astype(logits.dtype, copy=False)


# -- gradient checking -----------------------------------------------------------

def numerical_gradient(f, X, eps=1e-6):
    """Central differences: the gradient of the scalar ``f(X)`` with respect to ``X``.

    Entry ``i`` is ``(f(X + eps·e_i) − f(X − eps·e_i)) / (2·eps)``, in float64:
    its error is of order ``eps²`` (truncation) plus ``1e-16 / eps``
    (rounding): about 1e-12 and 1e-10 at ``eps = 1e-6``, relative to the
    size of ``f`` and of its derivatives. ``X`` is not modified:
    ``f`` gets a perturbed float64 copy. Costs ``2 · X.size`` calls of ``f``.
    """
    X = np.array(X, dtype=np.float64)  # a copy
    grad = np.zeros_like(X)
    flat, grad_flat = X.reshape(-1), grad.reshape(-1)  # views of the copy
    for i in range(flat.size):
        original = flat[i]
        flat[i] = original + eps
        above = f(X)
        flat[i] = original - eps
        below = f(X)
        flat[i] = original
        grad_flat[i] = (above - below) / (2 * eps)
    return grad


def relative_error(a, b):
    """``‖a − b‖ / (‖a‖ + ‖b‖)`` (Frobenius norms), 0 when both are zero.

    Below 1e-7 in float64 a gradient is right; around 1e-2 or more it is wrong.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare arrays of shapes {a.shape} and {b.shape}")
    scale = np.linalg.norm(a) + np.linalg.norm(b)
    return 0.0 if scale == 0 else float(np.linalg.norm(a - b) / scale)


# -- helpers ---------------------------------------------------------------------

def _check_grad(grad, expected_shape, name, output_name):
    if grad.shape != tuple(expected_shape):
        raise ValueError(f"{name} of shape {grad.shape} does not match the {output_name} "
                         f"of shape {tuple(expected_shape)}")


def _sum_to(grad, shape):
    """Sum ``grad`` over the leading axes that were broadcast to reach it from ``shape``."""
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra))) if extra else grad
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def _param_grad(X, grad_Y):
    """``X.T @ grad_Y`` summed over every leading axis: ``(d_in, d_out)``."""
    return X.reshape(-1, X.shape[-1]).T @ grad_Y.reshape(-1, grad_Y.shape[-1])


def _bias_grad(grad_Y, bias):
    return grad_Y.reshape(-1, grad_Y.shape[-1]).sum(axis=0).reshape(np.shape(bias))
