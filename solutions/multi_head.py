"""Multi-head attention (Vaswani et al. 2017, section 3.2.2).

``MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O`` with
``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``. The ``h`` projections of
size ``d_model × d_head`` (``d_head = d_model / h``) are stored side by side as
one ``d_model × d_model`` matrix: head ``i`` owns columns ``i·d_head …
(i+1)·d_head − 1``, so one matrix product projects for every head at once and
a reshape plus a transpose separates the heads.
"""

import numpy as np

from .scaled_dot_product import scaled_dot_product_attention


def split_heads(X, num_heads):
    """``(B, T, d)`` → ``(B, h, T, d/h)``.

    Head ``i`` takes the features ``i·d/h … (i+1)·d/h − 1`` of every token.

    The reshape to ``(B, T, h, d/h)`` cuts each token's features into ``h``
    consecutive blocks; the transpose then brings the head axis in front of
    the time axis, so that attention runs over ``T`` for each head separately.
    (Reshaping straight to ``(B, h, T, d/h)`` would mix tokens between heads.)
    """
    X = np.asarray(X)
    if X.ndim != 3:
        raise ValueError(f"X must have shape (B, T, d), got {X.shape}")
    B, T, d = X.shape
    _check_heads(d, num_heads)
    return X.reshape(B, T, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def merge_heads(X):
    """``(B, h, T, d_head)`` → ``(B, T, h·d_head)``: undoes ``split_heads``.

    The transpose puts the time axis back in front of the head axis; the
    reshape then lays the heads side by side, head ``i`` in the features
    ``i·d_head … (i+1)·d_head − 1``.
    """
    X = np.asarray(X)
    if X.ndim != 4:
        raise ValueError(f"X must have shape (B, h, T, d_head), got {X.shape}")
    B, h, T, d_head = X.shape
    return X.transpose(0, 2, 1, 3).reshape(B, T, h * d_head)


def multi_head_attention(Q, K, V, params, num_heads, mask=None):
    """Multi-head attention: ``(output, weights)``.

    ``Q (B, T_q, d_model)``, ``K, V (B, T_k, d_model)``. ``params`` holds
    ``W_q W_k W_v W_o (d_model, d_model)`` and ``b_q b_k b_v b_o (d_model,)``.
    Project, split into ``num_heads`` heads, scaled dot-product attention in
    every head (scaled by ``√d_head``, the size of one head's keys), merge,
    then ``@ W_o + b_o``. ``mask`` is passed on as it is given and must
    broadcast to ``(B, h, T_q, T_k)``: a padding mask ``(B, T_k)`` becomes
    ``mask[:, None, None, :]``, a causal mask ``(T, T)`` broadcasts as it is.

    Returns ``output (B, T_q, d_model)`` and ``weights (B, h, T_q, T_k)``.
    """
    Q, K, V = (np.asarray(a) for a in (Q, K, V))
    d_model = Q.shape[-1]
    _check_heads(d_model, num_heads)
    if (Q.ndim != 3 or K.shape != V.shape or K.ndim != 3
            or K.shape[0] != Q.shape[0] or K.shape[-1] != d_model):
        raise ValueError(
            f"Q must be (B, T_q, d_model) and K, V (B, T_k, d_model), "
            f"got Q {Q.shape}, K {K.shape}, V {V.shape}")
    # project, then split: (B, h, T, d_head) for each of q, k, v
    q, k, v = (split_heads(X @ params[f"W_{n}"] + params[f"b_{n}"], num_heads)
               for X, n in ((Q, "q"), (K, "k"), (V, "v")))
    # every head at once; scaled by √d_head, the size of q's last axis
    context, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    # (B, h, T_q, d_head) -> (B, T_q, d_model), then the output projection
    output = merge_heads(context) @ params["W_o"] + params["b_o"]
    return output, weights  # weights: (B, h, T_q, T_k)


def _check_heads(d_model, num_heads):
    if (not isinstance(num_heads, (int, np.integer)) or num_heads < 1
            or d_model % num_heads):
        raise ValueError(
            f"d_model={d_model} must split evenly into num_heads={num_heads} "
            f"heads (d_model % num_heads == 0)")
