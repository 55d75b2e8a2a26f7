"""Attention at scale: grouped-query heads, sliding windows, FlashAttention.

- Grouped-query attention (Ainslie et al. 2023): ``num_heads`` query heads
  share ``num_kv_heads`` key/value heads; one shared head is multi-query
  attention (Shazeer 2019). The cache a decoder keeps shrinks by
  ``num_heads / num_kv_heads``.
- Sliding-window attention (Beltagy et al. 2020, Jiang et al. 2023): each
  query sees the last ``window`` positions only.
- FlashAttention (Dao et al. 2022; FlashAttention-2, Dao 2023): exact
  attention computed block by block with the online softmax of Milakov &
  Gimelshein (2018), so that no ``T_q × T_k`` array is ever formed.

Queries stand at the end of the keys: with ``T_q`` queries and ``T_k`` keys,
query ``i`` is at position ``T_k − T_q + i`` (the decoder's view: the keys
hold the past and the new tokens, the queries are the new tokens). Both the
sliding window and ``causal=True`` use this alignment.
"""

import math
import tracemalloc

import numpy as np

from .backpropagation import _check_grad, _sum_to
from .multi_head import _check_heads, merge_heads, split_heads
from .scaled_dot_product import _check_length, _check_qkv, scaled_dot_product_attention


def grouped_query_attention(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    """Grouped-query attention: ``(output, weights)``.

    ``Q (B, T_q, d_model)``, ``K, V (B, T_k, d_model)``; ``d_head = d_model /
    num_heads``. ``params``: ``W_q, W_o (d_model, d_model)``, ``W_k, W_v
    (d_model, num_kv_heads·d_head)`` and biases to match. Query head ``i``
    attends with key/value head ``i // (num_heads // num_kv_heads)``: the
    ``num_heads / num_kv_heads`` query heads of a group share one key and one
    value head. ``num_kv_heads == num_heads`` is ``multi_head_attention``;
    ``num_kv_heads == 1`` is multi-query attention. ``mask`` broadcasts to
    ``(B, num_heads, T_q, T_k)``.

    Returns ``output (B, T_q, d_model)`` and ``weights (B, num_heads, T_q, T_k)``.
    The shared heads are repeated for the arithmetic (as Llama's ``repeat_kv``
    does): the saving is in what is projected and cached, not in the products.
    """
    Q, K, V = (np.asarray(a) for a in (Q, K, V))
    d_model = Q.shape[-1]
    d_head, group = _group_sizes(d_model, num_heads, num_kv_heads)
    if (Q.ndim != 3 or K.shape != V.shape or K.ndim != 3
            or K.shape[0] != Q.shape[0] or K.shape[-1] != d_model):
        raise ValueError(f"Q must be (B, T_q, d_model) and K, V (B, T_k, d_model), "
                         f"got Q {Q.shape}, K {K.shape}, V {V.shape}")
    if params["W_k"].shape != (d_model, num_kv_heads * d_head):
        raise ValueError(f"W_k has shape {params['W_k'].shape}, but {num_kv_heads} key/value heads "
                         f"of size {d_head} need ({d_model}, {num_kv_heads * d_head})")
    q = split_heads(Q @ params["W_q"] + params["b_q"], num_heads)       # (B, h, T_q, d_head)
    k, v = (split_heads(X @ params[f"W_{n}"] + params[f"b_{n}"], num_kv_heads)
            for X, n in ((K, "k"), (V, "v")))                            # (B, g, T_k, d_head)
    # head j of k serves query heads j·group … (j+1)·group − 1
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)      # (B, h, T_k, d_head)
    context, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    return merge_heads(context) @ params["W_o"] + params["b_o"], weights


def kv_cache_bytes(batch_size, seq_len, num_layers, num_kv_heads, d_head, bytes_per_value=2):
    """Bytes of the keys and values a decoder caches: ``2 · B · T · L · g · d_head · bytes``.

    The 2 is one key and one value per position, layer and key/value head;
    ``bytes_per_value=2`` is 16-bit floats (fp16 or bf16). An ``int``, exact.
    """
    sizes = (batch_size, seq_len, num_layers, num_kv_heads, d_head, bytes_per_value)
    for name, size in zip(("batch_size", "seq_len", "num_layers", "num_kv_heads", "d_head",
                           "bytes_per_value"), sizes):
        _check_length(size, name)
    return math.prod((2, *(int(size) for size in sizes)))


def sliding_window_mask(T_q, T_k, window):
    """Boolean ``(T_q, T_k)`` mask: query ``i`` sees the last ``window`` keys up to its position.

    Query ``i`` stands at position ``p = T_k − T_q + i`` and sees key ``j``
    iff ``0 ≤ p − j < window``. ``window ≥ T_k`` is the causal mask. With
    ``T_q > T_k`` the first ``T_q − T_k`` queries stand before every key and
    see none (all-masked rows).
    """
    T_q, T_k = _check_length(T_q, "T_q"), _check_length(T_k, "T_k")
    if _check_length(window, "window") < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    distance = (T_k - T_q + np.arange(T_q))[:, None] - np.arange(T_k)  # (T_q, T_k): p − j
    return (distance >= 0) & (distance < window)


def flash_attention(Q, K, V, block_size=64, causal=False):
    """Exact attention, block by block: ``(output, logsumexp)`` (FlashAttention-2's forward).

    ``Q (..., T_q, d)``, ``K (..., T_k, d)``, ``V (..., T_k, d_v)``.
    ``output (..., T_q, d_v)`` equals ``scaled_dot_product_attention``'s
    (with ``sliding_window_mask(T_q, T_k, T_k)`` when ``causal``);
    ``logsumexp (..., T_q)`` is ``log Σ_j exp(q·k_j / √d)`` over the keys each
    query sees: ``-inf``, with an all-zero output, for a query that sees none.

    For each block of queries, the keys go by in blocks: each block's scores
    raise the running maximum ``m`` where they exceed it; the running sum
    ``Σ exp(s − m)`` and the unnormalised output ``Σ exp(s − m) v`` are
    rescaled by ``exp(m_old − m_new)`` before the block is added; one division
    by the running sum at the end (FlashAttention-2 defers it). No array is
    larger than ``block_size`` along the key axis; the last blocks may be
    shorter.
    """
    Q, K, V = (np.asarray(a) for a in (Q, K, V))
    _check_qkv(Q, K, V)
    block_size = _check_block(block_size)
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    (T_q, d), T_k, d_v = Q.shape[-2:], K.shape[-2], V.shape[-1]
    dtype = np.result_type(Q, K, V, 1.0)
    scale = 1 / math.sqrt(d)
    output = np.zeros((*lead, T_q, d_v), dtype)
    logsumexp = np.full((*lead, T_q), -np.inf, dtype)
    for q_start, q_stop in _blocks(T_q, block_size):
        q = Q[..., q_start:q_stop, :] * scale                     # (..., b_q, d)
        running_max = np.full((*lead, q_stop - q_start, 1), -np.inf, dtype)
        running_sum = np.zeros((*lead, q_stop - q_start, 1), dtype)
        accumulated = np.zeros((*lead, q_stop - q_start, d_v), dtype)
        for k_start, k_stop in _blocks(_keys_seen(T_q, T_k, q_stop, causal), block_size):
            scores = q @ np.swapaxes(K[..., k_start:k_stop, :], -1, -2)   # (..., b_q, b_k)
            if causal and _straddles(T_q, T_k, q_start, k_stop):
                scores = np.where(_causal_block(T_q, T_k, q_start, q_stop, k_start, k_stop),
                                  scores, -np.inf)
            new_max = np.maximum(running_max, scores.max(axis=-1, keepdims=True))
            # a row that has seen no key yet keeps max −inf: shift it by 0, exp gives exact zeros
            shift = np.where(np.isfinite(new_max), new_max, 0.0)
            weights = np.exp(scores - shift)                      # unnormalised, (..., b_q, b_k)
            rescale = np.exp(running_max - shift)                 # (..., b_q, 1), 0 at the start
            running_sum = rescale * running_sum + weights.sum(axis=-1, keepdims=True)
            accumulated = rescale * accumulated + weights @ V[..., k_start:k_stop, :]
            running_max = new_max
        seen = running_sum > 0                                    # False: the query sees no key
        output[..., q_start:q_stop, :] = np.divide(accumulated, running_sum, out=np.zeros_like(accumulated),
                                                   where=seen)
        with np.errstate(divide="ignore"):                        # log 0 = −inf, as it should be
            logsumexp[..., q_start:q_stop] = (running_max + np.log(running_sum))[..., 0]
    return output, logsumexp


def flash_attention_backward(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
    """``(grad_Q, grad_K, grad_V)`` through ``flash_attention``: FlashAttention-2's backward.

    Takes the forward's ``output`` and ``logsumexp`` and ``grad_output``
    (the shape of ``output``). ``D = Σ_d grad_output ⊙ output`` per query
    (it equals ``Σ_j P_ij dP_ij``, the softmax backward's subtraction); then,
    for each block of keys, the blocks of queries go by and each block's
    weights are recomputed, already normalised, as ``P = exp(S − logsumexp)``:
    ``dV += Pᵀ dO``, ``dP = dO Vᵀ``, ``dS = P ⊙ (dP − D)``,
    ``dQ += dS K / √d``, ``dK += dSᵀ Q / √d``. No array has more than
    ``block_size`` along both a query and a key axis. Equals
    ``scaled_dot_product_attention_backward``.
    """
    Q, K, V, output, logsumexp, grad_output = (np.asarray(a) for a in (Q, K, V, output, logsumexp,
                                                                           grad_output))
    _check_qkv(Q, K, V)
    block_size = _check_block(block_size)
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    (T_q, d), T_k, d_v = Q.shape[-2:], K.shape[-2], V.shape[-1]
    _check_grad(output, (*lead, T_q, d_v), "output", "attention output")
    _check_grad(logsumexp, (*lead, T_q), "logsumexp", "queries (..., T_q)")
    _check_grad(grad_output, output.shape, "grad_output", "output")
    dtype = np.result_type(Q, K, V, grad_output, 1.0)
    scale = 1 / math.sqrt(d)
    D = np.sum(grad_output * output, axis=-1)[..., None]           # (..., T_q, 1)
    # a query that sees no key has logsumexp −inf: +inf instead makes its weights exp(−inf) = 0
    lse = np.where(np.isfinite(logsumexp), logsumexp, np.inf)[..., None]
    grad_Q = np.zeros((*lead, T_q, d), dtype)
    grad_K = np.zeros((*lead, T_k, d), dtype)
    grad_V = np.zeros((*lead, T_k, d_v), dtype)
    Q_scaled = Q * scale                                           # scaled once: S = (Q/√d) Kᵀ
    for k_start, k_stop in _blocks(T_k, block_size):
        k, v = K[..., k_start:k_stop, :], V[..., k_start:k_stop, :]  # (..., b_k, d), (..., b_k, d_v)
        grad_k = np.zeros((*lead, k_stop - k_start, d), dtype)
        grad_v = np.zeros((*lead, k_stop - k_start, d_v), dtype)
        for q_start, q_stop in _blocks(T_q, block_size):
            if _keys_seen(T_q, T_k, q_stop, causal) <= k_start:
                continue  # causal: no query of this block sees these keys
            rows = slice(q_start, q_stop)
            q, grad_o = Q_scaled[..., rows, :], grad_output[..., rows, :]
            weights = q @ np.swapaxes(k, -1, -2) - lse[..., rows, :]  # S − logsumexp, (..., b_q, b_k)
            if causal and _straddles(T_q, T_k, q_start, k_stop):
                # mask before exp: a hidden score may exceed logsumexp by more than exp can take
                weights = np.where(_causal_block(T_q, T_k, q_start, q_stop, k_start, k_stop), weights, -np.inf)
            np.exp(weights, out=weights)                             # P, already normalised
            grad_v += np.swapaxes(weights, -1, -2) @ grad_o
            grad_scores = grad_o @ np.swapaxes(v, -1, -2)            # dP (..., b_q, b_k)
            grad_scores -= D[..., rows, :]
            grad_scores *= weights                                   # dS = P ⊙ (dP − D), in place
            grad_Q[..., rows, :] += (grad_scores @ k) * scale
            grad_k += np.swapaxes(grad_scores, -1, -2) @ q           # q carries the 1/√d
        grad_K[..., k_start:k_stop, :] = grad_k
        grad_V[..., k_start:k_stop, :] = grad_v
    return _sum_to(grad_Q, Q.shape), _sum_to(grad_K, K.shape), _sum_to(grad_V, V.shape)


def mean_pool_kv_heads(params, num_heads, num_kv_heads):
    """The GQA paper's conversion (Ainslie et al. 2023, section 2.1): multi-head parameters to grouped.

    The key and value projections of the heads of each group are mean-pooled
    into that group's one head; ``W_q``, ``W_o`` and their biases are kept.
    The converted model is then uptrained briefly (5% of the pre-training
    steps in the paper) to recover what pooling loses.
    """
    d_model = params["W_q"].shape[0]
    d_head, group = _group_sizes(d_model, num_heads, num_kv_heads)
    pooled = dict(params)
    for n in "kv":
        # columns of head i are i·d_head … (i+1)·d_head − 1: average the heads of each group
        W = params[f"W_{n}"].reshape(d_model, num_kv_heads, group, d_head).mean(axis=2)
        pooled[f"W_{n}"] = W.reshape(d_model, num_kv_heads * d_head)
        pooled[f"b_{n}"] = params[f"b_{n}"].reshape(num_kv_heads, group, d_head).mean(axis=1).reshape(-1)
    return pooled


def peak_memory(function, *args, **kwargs):
    """``(function(*args, **kwargs), peak)``: the result, and the most memory the call held at once.

    ``peak`` is in bytes, measured by ``tracemalloc`` (NumPy reports its
    arrays to it) above what was allocated before the call: the arrays the
    call creates, not its inputs. It sees this process only.
    """
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        result = function(*args, **kwargs)
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        if not tracing:
            tracemalloc.stop()


def repeat_kv_heads(params, num_heads, num_kv_heads):
    """Grouped-query parameters as the multi-head parameters that compute the same attention.

    Key/value head ``j``'s columns of ``W_k``, ``W_v`` (and its biases) are
    repeated for the ``num_heads / num_kv_heads`` query heads of group ``j``:
    ``multi_head_attention`` with the result equals ``grouped_query_attention``
    with ``params``, so any model built on ``multi_head_attention`` runs
    grouped. The inverse of ``mean_pool_kv_heads`` on tied heads.
    """
    d_model = params["W_q"].shape[0]
    d_head, group = _group_sizes(d_model, num_heads, num_kv_heads)
    repeated = dict(params)
    for n in "kv":
        W = params[f"W_{n}"].reshape(d_model, num_kv_heads, 1, d_head)
        repeated[f"W_{n}"] = np.repeat(W, group, axis=2).reshape(d_model, d_model)
        repeated[f"b_{n}"] = np.repeat(params[f"b_{n}"].reshape(num_kv_heads, 1, d_head), group, axis=1).reshape(-1)
    return repeated


# -- helpers ---------------------------------------------------------------------

def _group_sizes(d_model, num_heads, num_kv_heads):
    """``(d_head, group)``: the size of a head and how many query heads share a key/value head."""
    _check_heads(d_model, num_heads)
    if (isinstance(num_kv_heads, bool) or not isinstance(num_kv_heads, (int, np.integer))
            or num_kv_heads < 1 or num_heads % num_kv_heads):
        raise ValueError(f"num_heads={num_heads} must be a multiple of num_kv_heads={num_kv_heads} "
                         "(num_heads % num_kv_heads == 0)")
    return d_model // num_heads, num_heads // num_kv_heads


def _check_block(block_size):
    if _check_length(block_size, "block_size") < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    return int(block_size)


def _blocks(T, size):
    """``(start, stop)`` of consecutive blocks of ``size`` covering ``0 … T − 1``; the last may be shorter."""
    return [(start, min(start + size, T)) for start in range(0, T, size)]


def _keys_seen(T_q, T_k, q_stop, causal):
    """How many keys the queries before ``q_stop`` see at most: all, or (causal) up to the last one's position."""
    return T_k if not causal else min(T_k, max(T_k - T_q + q_stop, 0))


def _straddles(T_q, T_k, q_start, k_stop):
    """Whether the causal mask hides a key of the block from a query of the block (else all see all)."""
    return T_k - T_q + q_start < k_stop - 1


def _causal_block(T_q, T_k, q_start, q_stop, k_start, k_stop):
    """The causal mask of one block, ``(b_q, b_k)``: query ``i`` at position ``T_k − T_q + i`` sees keys ``j ≤`` it."""
    positions = T_k - T_q + np.arange(q_start, q_stop)
    return positions[:, None] >= np.arange(k_start, k_stop)
