"""Scaled dot-product attention (Vaswani et al. 2017, section 3.2.1).

Row-vector convention: a sequence of ``T`` vectors of size ``d`` is an array
of shape ``(..., T, d)``. Masks are boolean, ``True`` = "may attend".
"""

import math

import numpy as np


def softmax(x, axis=-1):
    """Numerically stable softmax of ``x`` along ``axis``.

    Subtracting the maximum first leaves the result unchanged (softmax is
    invariant to adding a constant) and keeps ``exp`` from overflowing, so
    scores of ``1e4`` or ``-1e4`` give finite weights.
    """
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)


def masked_softmax(scores, mask=None, axis=-1):
    """Softmax of ``scores`` along ``axis`` where masked entries get weight 0.

    ``mask`` is boolean and broadcasts against ``scores``; ``True`` keeps an
    entry. A row whose entries are all masked gets all-zero weights (not NaN):
    such a query has nothing to attend to, so it takes nothing.
    """
    scores = np.asarray(scores)
    if mask is None:
        return softmax(scores, axis=axis)
    mask = _check_mask(mask, scores.shape)
    masked = np.where(mask, scores, -np.inf)
    row_max = np.max(masked, axis=axis, keepdims=True)
    # An all-masked row has max -inf; shift it by 0 instead so that exp gives
    # exact zeros and no "invalid value" warning.
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exps = np.exp(masked - row_max)
    totals = np.sum(exps, axis=axis, keepdims=True)
    return np.divide(exps, totals, out=np.zeros_like(exps), where=totals > 0)


def scaled_dot_product_attention(Q, K, V, mask=None):
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V.

    Parameters
    ----------
    Q : array (..., T_q, d_k)
        One query per row.
    K : array (..., T_k, d_k)
        One key per row; keys and queries share the size ``d_k``.
    V : array (..., T_k, d_v)
        One value per key; ``d_v`` may differ from ``d_k``.
    mask : bool array broadcasting to (..., T_q, T_k), optional
        ``True`` where query ``i`` may attend to key ``j``. Masked pairs get
        weight exactly 0; a query with no allowed key gets all-zero weights
        and an all-zero output.

    Returns
    -------
    output : array (..., T_q, d_v)
        Row ``i`` is the average of the values weighted by row ``i`` of
        ``weights``.
    weights : array (..., T_q, T_k)
        Each row sums to 1 over the keys (0 for a fully masked row).

    The leading axes ``...`` (batch, heads, ...) broadcast as in ``np.matmul``.
    Dividing by √d_k keeps the variance of the scores near 1 whatever d_k:
    with unit-variance independent entries, q·k has variance d_k.
    """
    Q, K, V = (np.asarray(a) for a in (Q, K, V))
    _check_qkv(Q, K, V)
    d_k = Q.shape[-1]
    # math.sqrt gives a Python float, which keeps float32 inputs float32.
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
    weights = masked_softmax(scores, mask, axis=-1)      # over the keys
    output = weights @ V                                 # (..., T_q, d_v)
    return output, weights


def causal_mask(T):
    """Boolean ``(T, T)`` mask, ``True`` on and below the diagonal.

    Query ``i`` may attend to keys ``0 … i``: position ``i`` never sees the
    future. It broadcasts against scores of shape ``(..., T, T)``.
    """
    T = _check_length(T, "T")
    return np.tril(np.ones((T, T), dtype=bool))


def padding_mask(lengths, T):
    """Boolean ``(B, T)`` mask, ``True`` where position < length.

    ``lengths (B,)`` holds the number of real tokens in each sequence of a
    batch padded to ``T``. To mask keys in scores of shape
    ``(B, T_q, T)``, insert the query axis: ``padding_mask(lengths, T)[:, None, :]``.
    """
    T = _check_length(T, "T")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(
            f"lengths must be a 1-D integer array of shape (B,), got shape "
            f"{lengths.shape} and dtype {lengths.dtype}"
        )
    if np.any(lengths < 0) or np.any(lengths > T):
        raise ValueError(f"lengths must lie between 0 and T={T}, got {lengths.tolist()}")
    return np.arange(T) < lengths[:, None]  # (B, T)


def _check_qkv(Q, K, V):
    if Q.ndim < 2 or K.ndim < 2 or V.ndim < 2:
        raise ValueError(
            f"Q, K and V need at least 2 axes (..., T, d); got shapes "
            f"Q {Q.shape}, K {K.shape}, V {V.shape}"
        )
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same size d_k: Q {Q.shape} has "
            f"d_k={Q.shape[-1]}, K {K.shape} has d_k={K.shape[-1]}"
        )
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(
            f"there must be one value per key: K {K.shape} has T_k={K.shape[-2]}, "
            f"V {V.shape} has T_k={V.shape[-2]}"
        )
    try:
        np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the leading axes of Q {Q.shape}, K {K.shape} and V {V.shape} do not broadcast"
        ) from None


def _check_mask(mask, scores_shape):
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(
            f"mask must be a boolean array (True = may attend), got dtype {mask.dtype}"
        )
    try:
        np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        raise ValueError(
            f"mask of shape {mask.shape} does not broadcast against scores of "
            f"shape {scores_shape} (..., T_q, T_k)"
        ) from None
    return mask


def _check_length(T, name):
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {T!r}")
    return int(T)
