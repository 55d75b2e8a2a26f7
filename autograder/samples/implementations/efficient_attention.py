"""What students write for the exercise on attention at scale.

`CORRECT` holds correct implementations written unlike the reference (a loop
over heads with sliced weights, a mask from two triangles, FlashAttention-1's
order of loops, keys outside and queries inside, with the output normalised
at every block): the hidden checks must accept them. `MISTAKES` holds
plausible wrong implementations, each of one task: the hidden checks must
reject every one, and say why. The correct functions and the mistakes of
GRADED_MISTAKES are self-contained, so that their source can go into a
notebook's solution cell: they call only the notebook's given functions
(imported here from solutions/); the other mistakes share private helpers.
"""

import math

import numpy as np

from solutions.backpropagation import scaled_dot_product_attention_backward  # noqa: F401 (given)
from solutions.scaled_dot_product import masked_softmax, scaled_dot_product_attention  # noqa: F401 (given)

# -- correct, by other means -------------------------------------------------------


def kv_cache_bytes(batch_size, seq_len, num_layers, num_kv_heads, d_head, bytes_per_value=2):
    keys = batch_size * seq_len * num_layers * num_kv_heads * d_head
    return 2 * keys * bytes_per_value  # keys and values


def grouped_query_attention(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    # one query head at a time, with the columns of its group's key/value head
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, T_q, d_model = Q.shape
    T_k = K.shape[1]
    d_head = d_model // num_heads
    group = num_heads // num_kv_heads
    if mask is not None:
        mask = np.broadcast_to(mask, (B, num_heads, T_q, T_k))
    heads, all_weights = [], []
    for i in range(num_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        kv_cols = slice((i // group) * d_head, (i // group + 1) * d_head)
        q = Q @ params["W_q"][:, cols] + params["b_q"][cols]
        k = K @ params["W_k"][:, kv_cols] + params["b_k"][kv_cols]
        v = V @ params["W_v"][:, kv_cols] + params["b_v"][kv_cols]
        head, weights = scaled_dot_product_attention(q, k, v, None if mask is None else mask[:, i])
        heads.append(head)
        all_weights.append(weights)
    output = np.concatenate(heads, axis=-1) @ params["W_o"] + params["b_o"]
    return output, np.stack(all_weights, axis=1)


def sliding_window_mask(T_q, T_k, window):
    # on or below the diagonal shifted to the end, and above the one `window` further down
    shift = T_k - T_q
    return np.tri(T_q, T_k, k=shift, dtype=bool) & ~np.tri(T_q, T_k, k=shift - window, dtype=bool)


def flash_attention(Q, K, V, block_size=64, causal=False):
    # FlashAttention-1's order: keys outside, queries inside, the output kept normalised
    T_q, d = Q.shape[-2:]
    T_k = K.shape[-2]
    lead = Q.shape[:-2]
    output = np.zeros((*lead, T_q, V.shape[-1]))
    top = np.full((*lead, T_q, 1), -np.inf)
    total = np.zeros((*lead, T_q, 1))
    for k0 in range(0, T_k, block_size):
        k, v = K[..., k0:k0 + block_size, :], V[..., k0:k0 + block_size, :]
        for q0 in range(0, T_q, block_size):
            rows = slice(q0, q0 + block_size)
            scores = Q[..., rows, :] @ np.swapaxes(k, -1, -2) / math.sqrt(d)
            if causal:
                position = T_k - T_q + np.arange(q0, min(q0 + block_size, T_q))
                scores = np.where(position[:, None] >= np.arange(k0, k0 + k.shape[-2]), scores, -np.inf)
            block_top = scores.max(axis=-1, keepdims=True)
            new_top = np.maximum(top[..., rows, :], block_top)
            safe = np.where(np.isinf(new_top), 0.0, new_top)
            p = np.exp(scores - safe)
            old = total[..., rows, :] * np.exp(top[..., rows, :] - safe)
            new_total = old + p.sum(axis=-1, keepdims=True)
            denominator = np.where(new_total == 0, 1.0, new_total)
            output[..., rows, :] = (old * output[..., rows, :] + p @ v) / denominator
            top[..., rows, :], total[..., rows, :] = new_top, new_total
    with np.errstate(divide="ignore"):
        logsumexp = np.where(total > 0, top + np.log(np.where(total > 0, total, 1.0)), -np.inf)
    return output, logsumexp[..., 0]


def flash_attention_backward(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
    # queries outside, keys inside; dK and dV accumulate in full arrays
    T_q, d = Q.shape[-2:]
    T_k = K.shape[-2]
    grad_Q, grad_K, grad_V = np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)
    D = (grad_output * output).sum(axis=-1)
    for q0 in range(0, T_q, block_size):
        rows = slice(q0, q0 + block_size)
        q, dO = Q[..., rows, :], grad_output[..., rows, :]
        lse = logsumexp[..., rows, None]
        seen = np.isfinite(lse)
        for k0 in range(0, T_k, block_size):
            cols = slice(k0, k0 + block_size)
            k, v = K[..., cols, :], V[..., cols, :]
            scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
            if causal:  # masked before exp: a masked score may be far above logsumexp
                position = T_k - T_q + np.arange(q0, q0 + q.shape[-2])
                scores = np.where(position[:, None] >= np.arange(k0, k0 + k.shape[-2]), scores, -np.inf)
            p = np.where(seen, np.exp(scores - np.where(seen, lse, 0.0)), 0.0)
            grad_V[..., cols, :] += np.swapaxes(p, -1, -2) @ dO
            ds = p * (dO @ np.swapaxes(v, -1, -2) - D[..., rows, None]) / math.sqrt(d)
            grad_Q[..., rows, :] += ds @ k
            grad_K[..., cols, :] += np.swapaxes(ds, -1, -2) @ q
    return grad_Q, grad_K, grad_V


CORRECT = {f.__name__: f for f in (kv_cache_bytes, grouped_query_attention, sliding_window_mask,
                                   flash_attention, flash_attention_backward)}


def flash_backward_keys_scaled_once(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
    # K scaled by 1/√d once, up front (a (T_k, d) array, as large as grad_K): right, and tiled
    T_q, d = Q.shape[-2:]
    T_k = K.shape[-2]
    K_scaled = K / math.sqrt(d)
    grad_Q, grad_K, grad_V = np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)
    D = (grad_output * output).sum(axis=-1)
    for k0 in range(0, T_k, block_size):
        cols = slice(k0, k0 + block_size)
        for q0 in range(0, T_q, block_size):
            rows = slice(q0, q0 + block_size)
            lse = logsumexp[..., rows, None]
            seen = np.isfinite(lse)
            scores = Q[..., rows, :] @ np.swapaxes(K_scaled[..., cols, :], -1, -2)
            if causal:
                position = T_k - T_q + np.arange(q0, q0 + scores.shape[-2])
                scores = np.where(position[:, None] >= np.arange(k0, k0 + scores.shape[-1]), scores, -np.inf)
            p = np.where(seen, np.exp(scores - np.where(seen, lse, 0.0)), 0.0)
            grad_V[..., cols, :] += np.swapaxes(p, -1, -2) @ grad_output[..., rows, :]
            ds = p * (grad_output[..., rows, :] @ np.swapaxes(V[..., cols, :], -1, -2) - D[..., rows, None])
            grad_Q[..., rows, :] += ds @ K_scaled[..., cols, :]
            grad_K[..., cols, :] += np.swapaxes(ds, -1, -2) @ Q[..., rows, :] / math.sqrt(d)
    return grad_Q, grad_K, grad_V


# task -> more correct implementations, which no check (visible or hidden) may fault, nor hint at
ALSO_CORRECT = {"flash_attention_backward": [flash_backward_keys_scaled_once]}


# -- mistakes ----------------------------------------------------------------------

def kv_cache_bytes_no_values(batch_size, seq_len, num_layers, num_kv_heads, d_head, bytes_per_value=2):
    return batch_size * seq_len * num_layers * num_kv_heads * d_head * bytes_per_value


def kv_cache_bytes_counts_values(batch_size, seq_len, num_layers, num_kv_heads, d_head, bytes_per_value=2):
    return 2 * batch_size * seq_len * num_layers * num_kv_heads * d_head


def kv_cache_bytes_float(batch_size, seq_len, num_layers, num_kv_heads, d_head, bytes_per_value=2):
    return 2.0 * batch_size * seq_len * num_layers * num_kv_heads * d_head * bytes_per_value


def _gqa(Q, K, V, params, num_heads, num_kv_heads, mask, tile=False, scale_size=None, use_mask=True):
    B, T_q, d_model = Q.shape
    d_head = d_model // num_heads

    def heads(X, W, b, count):
        return (X @ W + b).reshape(B, X.shape[1], count, d_head).transpose(0, 2, 1, 3)
    q = heads(Q, params["W_q"], params["b_q"], num_heads)
    k, v = (heads(X, params[f"W_{n}"], params[f"b_{n}"], num_kv_heads) for X, n in ((K, "k"), (V, "v")))
    group = num_heads // num_kv_heads
    k, v = ((np.tile(x, (1, group, 1, 1)) if tile else np.repeat(x, group, axis=1)) for x in (k, v))
    weights = masked_softmax(q @ k.swapaxes(-1, -2) / np.sqrt(scale_size or d_head), mask if use_mask else None)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T_q, d_model)
    return context @ params["W_o"] + params["b_o"], weights


def _softmax_max_over_masked(scores, mask=None, axis=-1):
    # its own masked softmax: the maximum taken over every score, the masked ones included, then the
    # masked weights set to 0 (a masked score far above the others leaves 0 / 0)
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    if mask is not None:
        e = np.where(mask, e, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return e / e.sum(axis=axis, keepdims=True)


def gqa_softmax_max_over_masked(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    B, T_q, d_model = Q.shape
    d_head = d_model // num_heads
    group = num_heads // num_kv_heads
    if num_heads % num_kv_heads:
        raise ValueError("num_heads must be a multiple of num_kv_heads")
    q = (Q @ params["W_q"] + params["b_q"]).reshape(B, T_q, num_heads, d_head).transpose(0, 2, 1, 3)
    k, v = ((X @ params[f"W_{n}"] + params[f"b_{n}"]).reshape(B, X.shape[1], num_kv_heads, d_head)
            .transpose(0, 2, 1, 3).repeat(group, axis=1) for X, n in ((K, "k"), (V, "v")))
    weights = _softmax_max_over_masked(q @ k.swapaxes(-1, -2) / np.sqrt(d_head), mask)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T_q, d_model)
    return context @ params["W_o"] + params["b_o"], weights


def gqa_interleaved_groups(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    return _gqa(Q, K, V, params, num_heads, num_kv_heads, mask, tile=True)


def gqa_scaled_by_d_model(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    return _gqa(Q, K, V, params, num_heads, num_kv_heads, mask, scale_size=Q.shape[-1])


def gqa_mask_ignored(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    return _gqa(Q, K, V, params, num_heads, num_kv_heads, mask, use_mask=False)


def gqa_no_value_error(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    # groups of ceil(num_heads / num_kv_heads) heads: no error when they do not divide
    B, T_q, d_model = Q.shape
    d_head = d_model // num_heads
    group = -(-num_heads // num_kv_heads)
    q = (Q @ params["W_q"] + params["b_q"]).reshape(B, T_q, num_heads, d_head).transpose(0, 2, 1, 3)
    k, v = ((X @ params[f"W_{n}"] + params[f"b_{n}"]).reshape(B, X.shape[1], num_kv_heads, d_head)
            .transpose(0, 2, 1, 3).repeat(group, axis=1)[:, :num_heads] for X, n in ((K, "k"), (V, "v")))
    weights = masked_softmax(q @ k.swapaxes(-1, -2) / np.sqrt(d_head), mask)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T_q, d_model)
    return context @ params["W_o"] + params["b_o"], weights


def _band(T_q, T_k, low, high, shift=True):
    """True where low ≤ p − j < high, p = T_k − T_q + i (or i when not shift)."""
    position = (T_k - T_q if shift else 0) + np.arange(T_q)
    distance = position[:, None] - np.arange(T_k)
    return (distance >= low) & (distance < high)


def sliding_window_one_too_many(T_q, T_k, window):
    return _band(T_q, T_k, 0, window + 1)


def sliding_window_one_too_few(T_q, T_k, window):
    return _band(T_q, T_k, 0, window - 1)


def sliding_window_aligned_at_start(T_q, T_k, window):
    return _band(T_q, T_k, 0, window, shift=False)


def sliding_window_not_causal(T_q, T_k, window):
    position = T_k - T_q + np.arange(T_q)
    return np.abs(position[:, None] - np.arange(T_k)) < window


def sliding_window_ints(T_q, T_k, window):
    return _band(T_q, T_k, 0, window).astype(int)


def flash_attention_whole_score_matrix(Q, K, V, block_size=64, causal=False):
    # right values, but the whole (T_q, T_k) matrix at once: not FlashAttention
    T_q, T_k = Q.shape[-2], K.shape[-2]
    mask = None
    if causal:
        position = T_k - T_q + np.arange(T_q)
        mask = position[:, None] >= np.arange(T_k)
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    safe = np.where(np.isinf(top), 0.0, top)
    with np.errstate(divide="ignore"):
        logsumexp = (safe + np.log(np.exp(scores - safe).sum(axis=-1, keepdims=True)))[..., 0]
    return output, logsumexp


def _flash(Q, K, V, block_size, causal, rescale_sum=True, rescale_output=True, scale=True,
           align_start=False, nan_rows=False, lse="right", key_blocks=True, max_over_masked=False):
    """The reference's loops with one step changed."""
    T_q, d = Q.shape[-2:]
    T_k = K.shape[-2]
    lead = Q.shape[:-2]
    output, logsumexp = np.zeros((*lead, T_q, V.shape[-1])), np.zeros((*lead, T_q))
    k_block = block_size if key_blocks else max(T_k, 1)
    for q0 in range(0, T_q, block_size):
        rows = slice(q0, q0 + block_size)
        q = Q[..., rows, :] / (math.sqrt(d) if scale else 1.0)
        n = q.shape[-2]
        top, total = np.full((*lead, n, 1), -np.inf), np.zeros((*lead, n, 1))
        acc = np.zeros((*lead, n, V.shape[-1]))
        for k0 in range(0, T_k, k_block):
            s = raw = q @ np.swapaxes(K[..., k0:k0 + k_block, :], -1, -2)
            if causal:
                position = (0 if align_start else T_k - T_q) + np.arange(q0, q0 + n)
                s = np.where(position[:, None] >= np.arange(k0, k0 + s.shape[-1]), s, -np.inf)
            new_top = np.maximum(top, (raw if max_over_masked else s).max(axis=-1, keepdims=True))
            safe = new_top if nan_rows else np.where(np.isinf(new_top), 0.0, new_top)
            p = np.exp(s - safe)
            correction = np.exp(top - safe)
            total = (correction if rescale_sum else 1.0) * total + p.sum(axis=-1, keepdims=True)
            acc = (correction if rescale_output else 1.0) * acc + p @ V[..., k0:k0 + k_block, :]
            top = new_top
        if nan_rows:
            output[..., rows, :] = acc / total
        else:
            output[..., rows, :] = np.where(total > 0, acc / np.where(total > 0, total, 1.0), 0.0)
        log_total = np.log(np.where(total > 0, total, 0.0))
        logsumexp[..., rows] = {"right": top + log_total, "no max": log_total,
                                "max only": top, "zero": np.where(total > 0, top + log_total, 0.0)}[lse][..., 0]
    return output, logsumexp


def _quiet(function):
    def quiet(Q, K, V, block_size=64, causal=False):
        with np.errstate(all="ignore"):
            return function(Q, K, V, block_size, causal)
    quiet.__name__ = "flash_attention"
    return quiet


flash_attention_sum_not_rescaled = _quiet(lambda *a: _flash(*a, rescale_sum=False))
flash_attention_output_not_rescaled = _quiet(lambda *a: _flash(*a, rescale_output=False))
flash_attention_nothing_rescaled = _quiet(lambda *a: _flash(*a, rescale_sum=False, rescale_output=False))
flash_attention_no_scale = _quiet(lambda *a: _flash(*a, scale=False))
flash_attention_causal_aligned_at_start = _quiet(lambda *a: _flash(*a, align_start=True))
flash_attention_causal_ignored = _quiet(lambda Q, K, V, b, causal: _flash(Q, K, V, b, False))
flash_attention_nan_for_empty_rows = _quiet(lambda *a: _flash(*a, nan_rows=True))
flash_attention_lse_without_max = _quiet(lambda *a: _flash(*a, lse="no max"))
flash_attention_lse_max_only = _quiet(lambda *a: _flash(*a, lse="max only"))
flash_attention_lse_zero_for_empty_rows = _quiet(lambda *a: _flash(*a, lse="zero"))
flash_attention_max_over_masked = _quiet(lambda *a: _flash(*a, max_over_masked=True))
flash_attention_whole_key_rows = _quiet(lambda *a: _flash(*a, key_blocks=False))


def flash_backward_whole_matrices(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
    # right values, through the whole (T_q, T_k) weights of the given backward
    mask = None
    if causal:
        T_q, T_k = Q.shape[-2], K.shape[-2]
        mask = (T_k - T_q + np.arange(T_q))[:, None] >= np.arange(T_k)
    return scaled_dot_product_attention_backward(Q, K, V, grad_output, mask)


def _flash_backward(Q, K, V, output, logsumexp, grad_output, block_size, causal, use_D=True, scale_power=1,
                    use_lse=True, use_causal=True, nan_rows=False):
    T_q, d = Q.shape[-2:]
    T_k = K.shape[-2]
    grads = [np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)]
    D = (grad_output * output).sum(axis=-1)[..., None] if use_D else 0.0
    lse = logsumexp[..., None]
    if not nan_rows:
        lse = np.where(np.isinf(lse), np.inf, lse)
    with np.errstate(all="ignore"):
        for k0 in range(0, T_k, block_size):
            cols = slice(k0, k0 + block_size)
            for q0 in range(0, T_q, block_size):
                rows = slice(q0, q0 + block_size)
                s = Q[..., rows, :] @ np.swapaxes(K[..., cols, :], -1, -2) / math.sqrt(d)
                position = T_k - T_q + np.arange(q0, q0 + s.shape[-2])
                allowed = position[:, None] >= np.arange(k0, k0 + s.shape[-1])
                if causal and nan_rows:  # masked scores set to −inf: exp(−inf − (−inf)) is NaN
                    s = np.where(allowed, s, -np.inf)
                p = np.exp(s - lse[..., rows, :]) if use_lse else np.exp(s)
                if causal and use_causal and not nan_rows:
                    p = np.where(allowed, p, 0.0)
                grads[2][..., cols, :] += np.swapaxes(p, -1, -2) @ grad_output[..., rows, :]
                dP = grad_output[..., rows, :] @ np.swapaxes(V[..., cols, :], -1, -2)
                dS = p * (dP - (D[..., rows, :] if use_D else 0.0)) / math.sqrt(d) ** scale_power
                grads[0][..., rows, :] += dS @ K[..., cols, :]
                grads[1][..., cols, :] += np.swapaxes(dS, -1, -2) @ Q[..., rows, :]
    return tuple(grads)


def _backward(**changes):
    def backward(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
        return _flash_backward(Q, K, V, output, logsumexp, grad_output, block_size, causal, **changes)
    backward.__name__ = "flash_attention_backward"
    return backward


def flash_backward_exp_before_mask(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
    # exp of every score, then the causal mask: exp overflows for a masked score far above logsumexp
    T_q, d = Q.shape[-2:]
    T_k = K.shape[-2]
    grad_Q, grad_K, grad_V = np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)
    D = (grad_output * output).sum(axis=-1)
    for q0 in range(0, T_q, block_size):
        rows = slice(q0, q0 + block_size)
        q, dO = Q[..., rows, :], grad_output[..., rows, :]
        lse = logsumexp[..., rows, None]
        seen = np.isfinite(lse)
        for k0 in range(0, T_k, block_size):
            cols = slice(k0, k0 + block_size)
            k, v = K[..., cols, :], V[..., cols, :]
            scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
            p = np.where(seen, np.exp(scores - np.where(seen, lse, 0.0)), 0.0)
            if causal:
                position = T_k - T_q + np.arange(q0, q0 + q.shape[-2])
                p = p * (position[:, None] >= np.arange(k0, k0 + k.shape[-2]))
            grad_V[..., cols, :] += np.swapaxes(p, -1, -2) @ dO
            ds = p * (dO @ np.swapaxes(v, -1, -2) - D[..., rows, None]) / math.sqrt(d)
            grad_Q[..., rows, :] += ds @ k
            grad_K[..., cols, :] += np.swapaxes(ds, -1, -2) @ q
    return grad_Q, grad_K, grad_V


flash_backward_no_D = _backward(use_D=False)
flash_backward_no_scale = _backward(scale_power=0)
flash_backward_scale_twice = _backward(scale_power=2)
flash_backward_lse_not_subtracted = _backward(use_lse=False)
flash_backward_causal_ignored = _backward(use_causal=False)
flash_backward_nan_for_empty_rows = _backward(nan_rows=True)


def flash_backward_nan_beside_seen_queries(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
    # masked scores set to −inf before exp(S − logsumexp): NaN for a query that sees no key (−inf − (−inf)),
    # except in a block of queries that all see none, which it skips
    T_q, d = Q.shape[-2:]
    T_k = K.shape[-2]
    grad_Q, grad_K, grad_V = np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)
    D = (grad_output * output).sum(axis=-1)[..., None]
    with np.errstate(all="ignore"):
        for q0 in range(0, T_q, block_size):
            rows = slice(q0, q0 + block_size)
            lse = logsumexp[..., rows, None]
            if np.all(np.isneginf(lse)):
                continue  # no query of the block sees a key
            for k0 in range(0, T_k, block_size):
                cols = slice(k0, k0 + block_size)
                s = Q[..., rows, :] @ np.swapaxes(K[..., cols, :], -1, -2) / math.sqrt(d)
                if causal:
                    position = T_k - T_q + np.arange(q0, q0 + s.shape[-2])
                    s = np.where(position[:, None] >= np.arange(k0, k0 + s.shape[-1]), s, -np.inf)
                p = np.exp(s - lse)
                grad_V[..., cols, :] += np.swapaxes(p, -1, -2) @ grad_output[..., rows, :]
                dS = p * (grad_output[..., rows, :] @ np.swapaxes(V[..., cols, :], -1, -2) - D[..., rows, :])
                grad_Q[..., rows, :] += dS @ K[..., cols, :] / math.sqrt(d)
                grad_K[..., cols, :] += np.swapaxes(dS, -1, -2) @ Q[..., rows, :] / math.sqrt(d)
    return grad_Q, grad_K, grad_V


# task -> the hidden checks (in autograder/checks/efficient_attention.py) that grade it
CHECKS_OF_TASK = {task: [f"check_{task}"] for task in CORRECT}
CHECKS_OF_TASK["flash_attention"].append("check_flash_attention_memory")  # the resource rules
CHECKS_OF_TASK["flash_attention_backward"].append("check_flash_attention_backward_memory")

KV, GQA, SW, FLASH, BACKWARD = CHECKS_OF_TASK  # the task names, in order
MEMORY = "did not run within 64 MiB"
# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "kv-no-values": (KV, kv_cache_bytes_no_values, "check_kv_cache_bytes", "hence the factor 2"),
    "kv-counts-values": (KV, kv_cache_bytes_counts_values, "check_kv_cache_bytes", "it counts values, not bytes"),
    "kv-float": (KV, kv_cache_bytes_float, "check_kv_cache_bytes", "should be an int"),
    "gqa-interleaved-groups": (GQA, gqa_interleaved_groups, "check_grouped_query_attention", "np.repeat, not np.tile"),
    "gqa-scaled-by-d-model": (GQA, gqa_scaled_by_d_model, "check_grouped_query_attention", "√d_model"),
    "gqa-mask-ignored": (GQA, gqa_mask_ignored, "check_grouped_query_attention", "the mask is ignored"),
    "gqa-softmax-max-over-masked": (GQA, gqa_softmax_max_over_masked, "check_grouped_query_attention",
                                    "a masked score, however large, must get weight exactly 0"),
    "gqa-no-value-error": (GQA, gqa_no_value_error, "check_grouped_query_attention", "should raise ValueError"),
    "sw-one-too-many": (SW, sliding_window_one_too_many, "check_sliding_window_mask", "keys: the window holds"),
    "sw-one-too-few": (SW, sliding_window_one_too_few, "check_sliding_window_mask", "keys: the window holds"),
    "sw-aligned-at-start": (SW, sliding_window_aligned_at_start, "check_sliding_window_mask",
                            "query i at T_k − T_q + i"),
    "sw-not-causal": (SW, sliding_window_not_causal, "check_sliding_window_mask", "it is not causal"),
    "sw-ints": (SW, sliding_window_ints, "check_sliding_window_mask", "should be a boolean array"),
    "flash-whole-score-matrix": (FLASH, flash_attention_whole_score_matrix, "check_flash_attention_memory",
                                 MEMORY),
    "flash-whole-key-rows": (FLASH, flash_attention_whole_key_rows, "check_flash_attention_memory", MEMORY),
    "flash-sum-not-rescaled": (FLASH, flash_attention_sum_not_rescaled, "check_flash_attention",
                               "the running sum is not rescaled"),
    "flash-output-not-rescaled": (FLASH, flash_attention_output_not_rescaled, "check_flash_attention",
                                  "the accumulated output is not rescaled"),
    "flash-nothing-rescaled": (FLASH, flash_attention_nothing_rescaled, "check_flash_attention",
                               "the running sum and the accumulated output are not rescaled"),
    "flash-no-scale": (FLASH, flash_attention_no_scale, "check_flash_attention", "not divided by √d"),
    "flash-causal-aligned-at-start": (FLASH, flash_attention_causal_aligned_at_start, "check_flash_attention",
                                      "query i is aligned with key i"),
    "flash-causal-ignored": (FLASH, flash_attention_causal_ignored, "check_flash_attention",
                             "causal=True is ignored"),
    "flash-nan-for-empty-rows": (FLASH, flash_attention_nan_for_empty_rows, "check_flash_attention",
                                 "contains NaN or inf"),
    "flash-lse-without-max": (FLASH, flash_attention_lse_without_max, "check_flash_attention",
                              "logsumexp lacks the running maximum"),
    "flash-lse-max-only": (FLASH, flash_attention_lse_max_only, "check_flash_attention",
                           "logsumexp is the running maximum m only"),
    "flash-max-over-masked-scores": (FLASH, flash_attention_max_over_masked, "check_flash_attention",
                                     "where query"),
    "flash-lse-zero-for-empty-rows": (FLASH, flash_attention_lse_zero_for_empty_rows, "check_flash_attention",
                                      "not 0"),
    "backward-whole-matrices": (BACKWARD, flash_backward_whole_matrices, "check_flash_attention_backward_memory",
                                MEMORY),
    "backward-no-D": (BACKWARD, flash_backward_no_D, "check_flash_attention_backward", "D = Σ_d"),
    "backward-no-scale": (BACKWARD, flash_backward_no_scale, "check_flash_attention_backward",
                          "the scale is forgotten"),
    "backward-scale-twice": (BACKWARD, flash_backward_scale_twice, "check_flash_attention_backward",
                             "divided by √d twice"),
    "backward-lse-not-subtracted": (BACKWARD, flash_backward_lse_not_subtracted, "check_flash_attention_backward",
                                    "recomputed as exp(S), not normalised"),
    "backward-causal-ignored": (BACKWARD, flash_backward_causal_ignored, "check_flash_attention_backward",
                                "causal=True is ignored"),
    "backward-nan-for-empty-rows": (BACKWARD, flash_backward_nan_for_empty_rows, "check_flash_attention_backward",
                                    "contains NaN or inf"),
    "backward-exp-before-mask": (BACKWARD, flash_backward_exp_before_mask, "check_flash_attention_backward",
                                 "mask the scores before exp"),
    "backward-nan-beside-seen-queries": (BACKWARD, flash_backward_nan_beside_seen_queries,
                                         "check_flash_attention_backward", "contains NaN or inf"),
}

# Mistakes also graded end to end, in tests/engine/test_grade.py (the two that form whole
# score matrices fail the visible memory checks there, and the hidden ones under a memory cap
# outside the student's process: tests/engine/test_memory.py grades cheats that pass the
# visible ones).
GRADED_MISTAKES = ["kv-no-values", "sw-not-causal", "flash-whole-score-matrix", "backward-whole-matrices"]


# -- two mistakes at once: self-contained, pasted into the notebook by test_double_mistakes.py ----

def gqa_tiled_and_scaled_by_d_model(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    # np.tile for the groups and √d_model for the scale
    if num_heads % num_kv_heads != 0:
        raise ValueError("num_heads must be a multiple of num_kv_heads")
    B, T_q, d_model = Q.shape
    T_k, d_head = K.shape[1], d_model // num_heads
    q = (Q @ params["W_q"] + params["b_q"]).reshape(B, T_q, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (K @ params["W_k"] + params["b_k"]).reshape(B, T_k, num_kv_heads, d_head).transpose(0, 2, 1, 3)
    v = (V @ params["W_v"] + params["b_v"]).reshape(B, T_k, num_kv_heads, d_head).transpose(0, 2, 1, 3)
    k, v = (np.tile(x, (1, num_heads // num_kv_heads, 1, 1)) for x in (k, v))
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(d_model)
    weights = masked_softmax(scores, mask)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T_q, d_model)
    return context @ params["W_o"] + params["b_o"], weights


def sliding_window_one_too_many_aligned_at_start(T_q, T_k, window):
    # 0 ≤ i − j ≤ window, with query i at position i
    distance = np.arange(T_q)[:, None] - np.arange(T_k)
    return (distance >= 0) & (distance <= window)


def flash_attention_unrescaled_and_unscaled(Q, K, V, block_size=64, causal=False):
    # neither the running sum nor the output rescaled when the maximum grows, and no 1/√d
    T_q, T_k = Q.shape[-2], K.shape[-2]
    lead = Q.shape[:-2]
    output, logsumexp = np.zeros((*lead, T_q, V.shape[-1])), np.zeros((*lead, T_q))
    for q0 in range(0, T_q, block_size):
        q = Q[..., q0:q0 + block_size, :]
        n = q.shape[-2]
        top, total = np.full((*lead, n, 1), -np.inf), np.zeros((*lead, n, 1))
        acc = np.zeros((*lead, n, V.shape[-1]))
        for k0 in range(0, T_k, block_size):
            s = q @ np.swapaxes(K[..., k0:k0 + block_size, :], -1, -2)
            if causal:
                position = T_k - T_q + np.arange(q0, q0 + n)
                s = np.where(position[:, None] >= np.arange(k0, k0 + s.shape[-1]), s, -np.inf)
            top = np.maximum(top, s.max(axis=-1, keepdims=True))
            p = np.exp(s - np.where(np.isinf(top), 0.0, top))
            total = total + p.sum(axis=-1, keepdims=True)
            acc = acc + p @ V[..., k0:k0 + block_size, :]
        output[..., q0:q0 + n, :] = np.where(total > 0, acc / np.where(total > 0, total, 1.0), 0.0)
        with np.errstate(divide="ignore"):
            logsumexp[..., q0:q0 + n] = (top + np.log(total))[..., 0]
    return output, logsumexp


def flash_backward_no_D_and_scale_twice(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
    # dS = P ⊙ dP without D, and divided by d instead of √d
    T_q, d = Q.shape[-2:]
    T_k = K.shape[-2]
    grad_Q, grad_K, grad_V = np.zeros(Q.shape), np.zeros(K.shape), np.zeros(V.shape)
    lse = np.where(np.isinf(logsumexp), np.inf, logsumexp)[..., None]
    for k0 in range(0, T_k, block_size):
        cols = slice(k0, k0 + block_size)
        for q0 in range(0, T_q, block_size):
            rows = slice(q0, q0 + block_size)
            s = Q[..., rows, :] @ np.swapaxes(K[..., cols, :], -1, -2) / math.sqrt(d)
            p = np.exp(s - lse[..., rows, :])
            if causal:
                position = T_k - T_q + np.arange(q0, q0 + s.shape[-2])
                p = np.where(position[:, None] >= np.arange(k0, k0 + s.shape[-1]), p, 0.0)
            grad_V[..., cols, :] += np.swapaxes(p, -1, -2) @ grad_output[..., rows, :]
            dS = p * (grad_output[..., rows, :] @ np.swapaxes(V[..., cols, :], -1, -2)) / d
            grad_Q[..., rows, :] += dS @ K[..., cols, :]
            grad_K[..., cols, :] += np.swapaxes(dS, -1, -2) @ Q[..., rows, :]
    return grad_Q, grad_K, grad_V


# name -> ({task: implementation with two mistakes}, the check cell to run, the words a message may name)
DOUBLE_MISTAKES = {
    "gqa-tiled-and-scaled-by-d-model": ({GQA: gqa_tiled_and_scaled_by_d_model}, "test_grouped_query_attention",
                                        ("np.repeat, not np.tile", "√d_model")),
    "sw-one-too-many-and-aligned-at-start": ({SW: sliding_window_one_too_many_aligned_at_start},
                                             "test_sliding_window_mask",
                                             ("keys: the window holds", "query i at T_k − T_q + i")),
    "flash-unrescaled-and-unscaled": ({FLASH: flash_attention_unrescaled_and_unscaled}, "test_flash_attention",
                                      ("not rescaled", "not divided by √d")),
    "backward-no-D-and-scale-twice": ({BACKWARD: flash_backward_no_D_and_scale_twice},
                                      "test_flash_attention_backward", ("D = Σ_d", "divided by √d twice")),
}
