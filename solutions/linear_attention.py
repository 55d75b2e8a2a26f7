"""Attention as a recurrence: linear attention and the delta rule.

- Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"):
  the similarity ``exp(q·k/√d)`` is replaced by ``φ(q)·φ(k)`` with a positive
  feature map ``φ``; by associativity ``(φQ φKᵀ) V = φQ (φKᵀ V)``, so the
  keys and values are summed once into a ``(d_k, d_v)`` state ``S`` and a
  ``(d_k,)`` normaliser ``z``, and the cost is linear in the lengths.
- Its causal form is a recurrence, one step per token, with a state that
  does not grow; the chunked form computes it in parallel (Hua et al. 2022;
  Sun et al. 2023): quadratic inside a chunk, the state across chunks.
- The delta rule (Schlag et al. 2021; DeltaNet, Yang et al. 2024) writes
  into the same kind of state by one step of online regression, and the
  gate of Gated DeltaNet (Yang et al. 2025) forgets.

A state maps keys to values: ``S (..., d_k, d_v)``, read as ``q @ S``. With
``T_q`` queries and ``T_k`` keys, query ``i`` stands at position
``T_k − T_q + i``, as in ``sliding_window_mask``; with ``causal=True`` it
sees the keys up to its position.
"""

import numpy as np

from .scaled_dot_product import _check_length, _check_qkv


def elu_feature_map(X):
    """``φ(x) = elu(x) + 1``: ``x + 1`` for ``x > 0``, else ``exp(x)``; elementwise, always positive.

    The feature map of Katharopoulos et al. (their Eq. 7): a similarity
    ``φ(q)·φ(k)`` must not be negative, or the normaliser ``φ(q)·z`` could
    reach 0. ``np.minimum`` keeps ``exp`` from overflowing on large ``x``,
    whose branch is not taken.
    """
    X = np.asarray(X)
    X = X if np.issubdtype(X.dtype, np.floating) else X.astype(float)
    return np.where(X > 0, X + 1, np.exp(np.minimum(X, 0)))


def linear_attention(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    """Linear attention: query ``i`` gets ``(φq_i @ S_i) / (φq_i · z_i + eps)``.

    ``Q (..., T_q, d_k)``, ``K (..., T_k, d_k)``, ``V (..., T_k, d_v)``;
    returns ``(..., T_q, d_v)``. ``S_i = Σ_j φk_jᵀ v_j`` (outer products,
    ``(d_k, d_v)``) and ``z_i = Σ_j φk_j`` over the keys query ``i`` sees: all
    of them, or with ``causal`` the keys ``j ≤ T_k − T_q + i``. No ``1/√d``:
    the feature map replaces the softmax's ``exp`` and its scale. A query that
    sees no key gets zeros.

    No ``(T_q, T_k)`` array is formed: without ``causal`` the state is summed
    once; with it, the queries go in chunks of 64 (``_causal_chunks``).
    """
    Q, K, V = (np.asarray(a) for a in (Q, K, V))
    _check_qkv(Q, K, V)
    phi_Q, phi_K = feature_map(Q), feature_map(K)
    if causal:
        return _causal_chunks(phi_Q, phi_K, V, 64, eps)
    S = np.swapaxes(phi_K, -1, -2) @ V                 # (..., d_k, d_v): Σ_j φk_jᵀ v_j
    z = phi_K.sum(axis=-2)[..., None]                  # (..., d_k, 1):   Σ_j φk_j
    return _read(phi_Q @ S, phi_Q @ z, eps)


def init_linear_attention_state(batch_shape, d_k, d_v, dtype=float):
    """The state before the first token: ``{"S": zeros (*batch_shape, d_k, d_v), "z": zeros (*batch_shape, d_k)}``."""
    batch_shape = (batch_shape,) if isinstance(batch_shape, (int, np.integer)) else tuple(batch_shape)
    d_k, d_v = _check_length(d_k, "d_k"), _check_length(d_v, "d_v")
    return {"S": np.zeros((*batch_shape, d_k, d_v), dtype), "z": np.zeros((*batch_shape, d_k), dtype)}


def linear_attention_step(q, k, v, state, feature_map=elu_feature_map, eps=1e-6):
    """One step of causal linear attention: ``(output, new_state)``.

    ``q, k (..., d_k)``, ``v (..., d_v)``; ``state = {"S": (..., d_k, d_v),
    "z": (..., d_k)}``. ``S ← S + φkᵀ v``, ``z ← z + φk``, then ``output =
    (φq @ S) / (φq · z + eps)``: write first, so that the token sees itself,
    as in the causal parallel form. The input state is not modified.
    """
    q, k, v = (np.asarray(a) for a in (q, k, v))
    S, z = np.asarray(state["S"]), np.asarray(state["z"])
    if q.shape[-1] != k.shape[-1] or S.shape[-2:] != (k.shape[-1], v.shape[-1]) or z.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} and k {k.shape} need the same d_k, and the state S {S.shape}, "
                         f"z {z.shape} must be (..., d_k, d_v) and (..., d_k) with v {v.shape}")
    phi_q, phi_k = feature_map(q), feature_map(k)
    S = S + phi_k[..., :, None] * v[..., None, :]       # (..., d_k, d_v): a rank-one write
    z = z + phi_k
    output = _read((phi_q[..., None, :] @ S)[..., 0, :], np.sum(phi_q * z, axis=-1, keepdims=True), eps)
    return output, {"S": S, "z": z}


def chunked_linear_attention(Q, K, V, chunk_size=64, feature_map=elu_feature_map, eps=1e-6):
    """Causal linear attention computed chunk by chunk (``T_q = T_k = T``): ``(..., T, d_v)``.

    Within a chunk, the masked ``(chunk, chunk)`` products, as in softmax
    attention; across chunks, the state ``S, z`` of the chunks before. Equals
    ``linear_attention(..., causal=True)``. No array has more than
    ``chunk_size`` along both a query and a key axis; the last chunk may be
    shorter.
    """
    Q, K, V = (np.asarray(a) for a in (Q, K, V))
    _check_qkv(Q, K, V)
    if Q.shape[-2] != K.shape[-2]:
        raise ValueError(f"chunked_linear_attention is self-attention: Q {Q.shape} and K {K.shape} "
                         "need the same length T")
    if _check_length(chunk_size, "chunk_size") < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    return _causal_chunks(feature_map(Q), feature_map(K), V, int(chunk_size), eps)


def delta_rule(Q, K, V, beta, gate=None):
    """The (gated) delta rule: ``output_t = q_t @ S_t``, ``(..., T, d_v)``.

    ``Q, K (..., T, d_k)``, ``V (..., T, d_v)``, ``beta (..., T)`` in
    ``[0, 1]``, ``gate (..., T)`` in ``(0, 1]`` or ``None`` (all ones). From
    ``S = 0``, for ``t = 0 … T−1``:
    ``S ← gate_t · (S − beta_t · k_tᵀ (k_t @ S)) + beta_t · k_tᵀ v_t``.
    ``k_t @ S`` is what the memory returns for ``k_t`` now; the write moves it
    towards ``v_t`` by the step ``beta_t`` (one step of online regression,
    Widrow–Hoff). No feature map and no normalisation: the caller passes
    unit keys, for which ``I − beta k_tᵀk_t`` never grows ``S`` and, with
    ``beta = 1``, reading ``k_t`` returns ``v_t`` exactly.
    """
    Q, K, V = (np.asarray(a) for a in (Q, K, V))
    _check_qkv(Q, K, V)
    if Q.shape[-2] != K.shape[-2]:
        raise ValueError(f"the delta rule reads at every step: Q {Q.shape} and K {K.shape} need the same T")
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    T = Q.shape[-2]
    beta = _check_rate(beta, "beta", (*lead, T), lambda b: (b >= 0) & (b <= 1), "[0, 1]")
    gate = (np.ones((*lead, T)) if gate is None
            else _check_rate(gate, "gate", (*lead, T), lambda g: (g > 0) & (g <= 1), "(0, 1]"))
    dtype = np.result_type(Q, K, V, 1.0)
    beta, gate = beta.astype(dtype), gate.astype(dtype)  # float32 inputs stay float32
    S = np.zeros((*lead, K.shape[-1], V.shape[-1]), dtype)
    output = np.zeros((*lead, T, V.shape[-1]), dtype)
    for t in range(T):
        k, v = K[..., t, :, None], V[..., t, None, :]          # (..., d_k, 1), (..., 1, d_v)
        b, g = beta[..., t, None, None], gate[..., t, None, None]
        S = g * (S - b * k * (np.swapaxes(k, -1, -2) @ S)) + b * k * v
        output[..., t, :] = (Q[..., t, None, :] @ S)[..., 0, :]
    return output


# -- helpers ---------------------------------------------------------------------

def _read(numerator, denominator, eps):
    """``numerator / (denominator + eps)``; 0 where both are 0 (a query that sees no key)."""
    denominator = denominator + eps
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator != 0)


def _causal_chunks(phi_Q, phi_K, V, chunk_size, eps):
    """Causal linear attention of features ``phi_Q (..., T_q, d_k)``, ``phi_K (..., T_k, d_k)``, in chunks of queries.

    Query ``i`` stands at position ``p = T_k − T_q + i``. For a chunk of
    queries at positions ``p0 … p1 − 1``, the state holds the keys before
    ``p0``; the keys ``p0 … p1 − 1`` (those that exist) are the chunk's own,
    seen through the causal mask of a ``(chunk, chunk)`` block, then added to
    the state.
    """
    lead = np.broadcast_shapes(phi_Q.shape[:-2], phi_K.shape[:-2], V.shape[:-2])
    (T_q, d_k), T_k, d_v = phi_Q.shape[-2:], phi_K.shape[-2], V.shape[-1]
    dtype = np.result_type(phi_Q, phi_K, V, 1.0)
    offset = T_k - T_q                                   # the position of query 0
    # the keys before the first query's position: seen by every query, summed at once
    start = min(max(offset, 0), T_k)
    S = np.zeros((*lead, d_k, d_v), dtype) + np.swapaxes(phi_K[..., :start, :], -1, -2) @ V[..., :start, :]
    z = np.zeros((*lead, d_k), dtype) + phi_K[..., :start, :].sum(axis=-2)
    output = np.zeros((*lead, T_q, d_v), dtype)
    for q0 in range(0, T_q, chunk_size):
        q1 = min(q0 + chunk_size, T_q)
        k0, k1 = min(max(offset + q0, 0), T_k), min(max(offset + q1, 0), T_k)  # the chunk's own keys
        q, k, v = phi_Q[..., q0:q1, :], phi_K[..., k0:k1, :], V[..., k0:k1, :]
        positions = offset + np.arange(q0, q1)
        scores = (q @ np.swapaxes(k, -1, -2)) * (positions[:, None] >= np.arange(k0, k1))  # (..., c, ≤ c)
        numerator = q @ S + scores @ v                    # the chunks before, then this one
        denominator = q @ z[..., None] + scores.sum(axis=-1, keepdims=True)
        output[..., q0:q1, :] = _read(numerator, denominator, eps)
        S = S + np.swapaxes(k, -1, -2) @ v
        z = z + k.sum(axis=-2)
    return output


def _check_rate(rate, name, shape, inside, interval):
    """``rate`` broadcast to ``shape`` (``(..., T)``), every entry checked to lie in ``interval``."""
    rate = np.asarray(rate, dtype=float)
    try:
        rate = np.broadcast_to(rate, shape)
    except ValueError:
        raise ValueError(f"{name} of shape {rate.shape} does not broadcast to {shape} (..., T)") from None
    outside = ~inside(rate)                             # NaN is outside too
    if outside.any():
        raise ValueError(f"{name} must lie in {interval}, but one of its entries is {rate[outside].flat[0]}")
    return rate
