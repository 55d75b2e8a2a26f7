"""What students write for the exercise on linear attention and the delta rule.

`CORRECT` holds correct implementations written unlike the reference (the
feature map through ``np.piecewise``-like masks, causal linear attention by
running sums of the outer products (one state, updated key by key), a step with ``np.einsum``, the chunked
form keeping the state as a running sum of chunk states, the delta rule
written as ``S + beta k (v − k S)`` with the gate first): the hidden checks
must accept them. `MISTAKES` holds plausible wrong implementations, each of
one task (among them those of the chapter's pitfalls box: the missing
normaliser, a feature map that goes negative, the causal sum off by one,
keys normalised inside the delta rule): the hidden checks must reject every
one, and say why. The correct functions and the mistakes of GRADED_MISTAKES
are self-contained, so that their source can go into a notebook's solution
cell; the other mistakes share private helpers.
"""

import numpy as np

# -- correct, by other means -------------------------------------------------------


def elu_feature_map(X):
    X = np.asarray(X)
    out = np.exp(np.where(X > 0, 0, X))  # exp only where it is used
    return np.where(X > 0, X + 1, out)


def linear_attention(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    # causal: running sums of the outer products, one (d_k, d_v) state updated key by key (linear in T)
    fQ, fK = feature_map(Q), feature_map(K)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if not causal:
        S = np.einsum("...jk,...jv->...kv", fK, V)
        z = fK.sum(axis=-2)
        num = np.einsum("...ik,...kv->...iv", fQ, S)
        den = np.einsum("...ik,...k->...i", fQ, z)[..., None] + eps
        return num / den
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    out = np.zeros((*lead, T_q, V.shape[-1]), dtype=np.result_type(Q, K, V))
    S = np.zeros((*lead, K.shape[-1], V.shape[-1]), dtype=out.dtype)
    z = np.zeros((*lead, K.shape[-1]), dtype=out.dtype)
    j = 0
    for i in range(T_q):
        last = T_k - T_q + i          # the last key query i sees
        while j <= last:
            S = S + fK[..., j, :, None] * V[..., j, None, :]
            z = z + fK[..., j, :]
            j += 1
        if last < 0:
            continue                  # sees no key: zeros
        num = np.einsum("...k,...kv->...v", fQ[..., i, :], S)
        out[..., i, :] = num / (np.einsum("...k,...k->...", fQ[..., i, :], z)[..., None] + eps)
    return out


def linear_attention_step(q, k, v, state, feature_map=elu_feature_map, eps=1e-6):
    fq, fk = feature_map(q), feature_map(k)
    S = state["S"] + np.einsum("...k,...v->...kv", fk, v)
    z = state["z"] + fk
    output = np.einsum("...k,...kv->...v", fq, S) / (np.einsum("...k,...k->...", fq, z)[..., None] + eps)
    return output, {"S": S, "z": z}


def chunked_linear_attention(Q, K, V, chunk_size=64, feature_map=elu_feature_map, eps=1e-6):
    fQ, fK = feature_map(Q), feature_map(K)
    T = Q.shape[-2]
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    S = np.zeros((*lead, K.shape[-1], V.shape[-1]), dtype=np.result_type(Q, K, V))
    z = np.zeros((*lead, K.shape[-1]), dtype=S.dtype)
    pieces = []
    for start in range(0, T, chunk_size):
        q, k, v = fQ[..., start:start + chunk_size, :], fK[..., start:start + chunk_size, :], V[..., start:start + chunk_size, :]
        n = q.shape[-2]
        A = np.tril(q @ np.swapaxes(k, -1, -2))      # (n, n): the chunk's own keys, causal
        num = q @ S + A @ v
        den = (q * z[..., None, :]).sum(-1, keepdims=True) + A.sum(-1, keepdims=True) + eps
        pieces.append(num / den)
        S = S + np.swapaxes(k, -1, -2) @ v
        z = z + k.sum(axis=-2)
        assert n <= chunk_size
    return np.concatenate(pieces, axis=-2)


def delta_rule(Q, K, V, beta, gate=None):
    beta = np.asarray(beta)
    if np.any(~((beta >= 0) & (beta <= 1))):
        raise ValueError("beta must be in [0, 1]")
    if gate is not None:
        gate = np.asarray(gate)
        if np.any(~((gate > 0) & (gate <= 1))):
            raise ValueError("gate must be in (0, 1]")
    T = Q.shape[-2]
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    dtype = np.result_type(Q, K, V)
    S = np.zeros((*lead, K.shape[-1], V.shape[-1]), dtype=dtype)
    outs = []
    for t in range(T):
        k, v, q = K[..., t, :], V[..., t, :], Q[..., t, :]
        b = np.broadcast_to(beta, (*lead, T))[..., t].astype(dtype)
        if gate is not None:
            S = S * np.broadcast_to(gate, (*lead, T))[..., t, None, None].astype(dtype)
        # gate·(S − β kᵀ(kS)) + β kᵀv = S' + β kᵀ(v − k S') with S' = gate·S
        error = v - np.einsum("...k,...kv->...v", k, S)
        S = S + b[..., None, None] * np.einsum("...k,...v->...kv", k, error)
        outs.append(np.einsum("...k,...kv->...v", q, S))
    return np.stack(outs, axis=-2)


CORRECT = {f.__name__: f for f in (elu_feature_map, linear_attention, linear_attention_step,
                                   chunked_linear_attention, delta_rule)}


# -- mistakes --------------------------------------------------------------------------

def elu_without_plus_one(X):
    return np.where(X > 0, X, np.exp(np.minimum(X, 0)) - 1)


def elu_relu(X):
    return np.maximum(X, 0)


def elu_x_plus_one_everywhere(X):
    return X + 1


def elu_float64(X):
    X = np.asarray(X, dtype=np.float64)
    return np.where(X > 0, X + 1, np.exp(np.minimum(X, 0)))


def elu_exp_everywhere(X):
    return np.exp(X)


def _linear(Q, K, V, causal, normalise=True, phi=True, own_key=True, aligned_at_start=False, eps=1e-6,
            scale=1.0):
    """Causal linear attention by running sums, with one step changeable (linear memory)."""
    f = (lambda X: np.where(X > 0, X + 1, np.exp(np.minimum(X, 0)))) if phi else (lambda X: X)
    fQ, fK = f(Q * scale), f(K * scale)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    out = np.zeros((*lead, T_q, V.shape[-1]), dtype=np.result_type(Q, K, V))
    S = np.zeros((*lead, K.shape[-1], V.shape[-1]))
    z = np.zeros((*lead, K.shape[-1]))
    j = 0
    for i in range(T_q):
        last = T_k - 1 if not causal else (i if aligned_at_start else T_k - T_q + i) - (0 if own_key else 1)
        while j <= min(last, T_k - 1):
            S, z = S + fK[..., j, :, None] * V[..., j, None, :], z + fK[..., j, :]
            j += 1
        num = (fQ[..., i, None, :] @ S)[..., 0, :]
        if not normalise:
            out[..., i, :] = num
        else:
            den = (fQ[..., i, :] * z).sum(-1, keepdims=True) + eps
            with np.errstate(all="ignore"):
                out[..., i, :] = num / den
    return out


def linear_attention_no_normaliser(Q, K, V, causal=False, feature_map=None, eps=1e-6):
    return _linear(Q, K, V, causal, normalise=False)


def linear_attention_no_feature_map(Q, K, V, causal=False, feature_map=None, eps=1e-6):
    return _linear(Q, K, V, causal, phi=False)


def linear_attention_scaled(Q, K, V, causal=False, feature_map=None, eps=1e-6):
    return _linear(Q, K, V, causal, scale=1 / np.sqrt(Q.shape[-1]))


def linear_attention_causal_ignored(Q, K, V, causal=False, feature_map=None, eps=1e-6):
    return _linear(Q, K, V, False)


def linear_attention_off_by_one(Q, K, V, causal=False, feature_map=None, eps=1e-6):
    # the exclusive cumulative sum: query i sees the keys before its position, not its own
    return _linear(Q, K, V, causal, own_key=False)


def linear_attention_aligned_at_start(Q, K, V, causal=False, feature_map=None, eps=1e-6):
    return _linear(Q, K, V, causal, aligned_at_start=True)


def linear_attention_without_eps(Q, K, V, causal=False, feature_map=None, eps=1e-6):
    # 0/0 = NaN for a query that sees no key
    return _linear(Q, K, V, causal, eps=0.0)


def linear_attention_whole_matrix(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    # through the (T_q, T_k) matrix of similarities: right values, quadratic memory
    fQ, fK = feature_map(Q), feature_map(K)
    A = fQ @ np.swapaxes(fK, -1, -2)
    if causal:
        T_q, T_k = Q.shape[-2], K.shape[-2]
        A = A * ((T_k - T_q + np.arange(T_q))[:, None] >= np.arange(T_k))
    return (A @ V) / (A.sum(axis=-1, keepdims=True) + eps)


def linear_attention_ignores_feature_map(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    # elu_feature_map whatever feature_map it is given (right with the default)
    fQ, fK = elu_feature_map(Q), elu_feature_map(K)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    S = np.zeros((*fK.shape[:-2], K.shape[-1], V.shape[-1]), dtype=np.result_type(Q, K, V))
    z = np.zeros((*fK.shape[:-2], K.shape[-1]), dtype=S.dtype)
    out = np.zeros((*np.broadcast_shapes(Q.shape[:-2], S.shape[:-2]), T_q, V.shape[-1]), dtype=S.dtype)
    j = 0
    for i in range(T_q):
        last = T_k - T_q + i if causal else T_k - 1   # the last key query i sees
        while j <= last:
            S, z = S + fK[..., j, :, None] * V[..., j, None, :], z + fK[..., j, :]
            j += 1
        if last >= 0:
            out[..., i, :] = (fQ[..., i, None, :] @ S)[..., 0, :] / ((fQ[..., i, :] * z).sum(-1, keepdims=True) + eps)
    return out


def linear_attention_ignores_feature_map_unless_causal(Q, K, V, causal=False, feature_map=elu_feature_map,
                                                       eps=1e-6):
    # the causal branch uses feature_map; the other, written first, elu_feature_map whatever it is given
    if causal:
        return linear_attention(Q, K, V, causal=True, feature_map=feature_map, eps=eps)
    fQ, fK = elu_feature_map(Q), elu_feature_map(K)
    return (fQ @ (np.swapaxes(fK, -1, -2) @ V)) / (fQ @ fK.sum(axis=-2)[..., None] + eps)


def linear_attention_ignores_eps(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    return linear_attention(Q, K, V, causal, feature_map)  # the default eps, whatever eps it is given


def linear_attention_cumulative_states(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    # causal: every prefix state at once, a cumulative sum of the outer products (..., T_k, d_k, d_v):
    # right values, but memory O(T·d_k·d_v) where a state of fixed size needs O(d_k·d_v)
    fQ, fK = feature_map(Q), feature_map(K)
    if not causal:
        S, z = np.swapaxes(fK, -1, -2) @ V, fK.sum(axis=-2)
        return (fQ @ S) / ((fQ * z[..., None, :]).sum(-1, keepdims=True) + eps)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    states = np.cumsum(fK[..., :, :, None] * V[..., :, None, :], axis=-3)   # (..., T_k, d_k, d_v)
    sums = np.cumsum(fK, axis=-2)                                           # (..., T_k, d_k)
    last = T_k - T_q + np.arange(T_q)                                       # the last key query i sees
    index = np.maximum(last, 0)
    numerator = np.einsum("...ik,...ikv->...iv", fQ, states[..., index, :, :])
    denominator = np.einsum("...ik,...ik->...i", fQ, sums[..., index, :])[..., None] + eps
    return np.where((last >= 0)[:, None], numerator / denominator, 0.0)


def _step(read_first=False, update_z=True, phi_k=True, in_place=False):
    def step(q, k, v, state, feature_map=None, eps=1e-6):
        f = lambda X: np.where(X > 0, X + 1, np.exp(np.minimum(X, 0)))  # noqa: E731
        fq, fk = f(q), f(k) if phi_k else k
        if in_place:
            state["S"] += fk[..., :, None] * v[..., None, :]
            state["z"] += fk
            S, z = state["S"], state["z"]
            old_S, old_z = S, z
        else:
            old_S, old_z = state["S"], state["z"]
            S = state["S"] + fk[..., :, None] * v[..., None, :]
            z = state["z"] + fk if update_z else state["z"]
        read_S, read_z = (old_S, old_z) if read_first else (S, z)
        with np.errstate(all="ignore"):
            output = np.nan_to_num((fq[..., None, :] @ read_S)[..., 0, :]
                                   / ((fq * read_z).sum(-1, keepdims=True) + eps))
        return output, {"S": S, "z": z}
    return step


step_read_before_write = _step(read_first=True)
step_z_not_updated = _step(update_z=False)
step_no_feature_map_on_k = _step(phi_k=False)
step_modifies_state = _step(in_place=True)


def step_ignores_feature_map(q, k, v, state, feature_map=elu_feature_map, eps=1e-6):
    fq, fk = elu_feature_map(q), elu_feature_map(k)   # whatever feature_map it is given
    S = state["S"] + fk[..., :, None] * v[..., None, :]
    z = state["z"] + fk
    return (fq[..., None, :] @ S)[..., 0, :] / ((fq * z).sum(-1, keepdims=True) + eps), {"S": S, "z": z}


def step_ignores_eps(q, k, v, state, feature_map=elu_feature_map, eps=1e-6):
    return linear_attention_step(q, k, v, state, feature_map)  # the default eps, whatever eps it is given


def _chunked(carry=True, mask=True, own_key=True, twice=False, last=True):
    def chunked(Q, K, V, chunk_size=64, feature_map=None, eps=1e-6):
        f = lambda X: np.where(X > 0, X + 1, np.exp(np.minimum(X, 0)))  # noqa: E731
        fQ, fK = f(Q), f(K)
        T = Q.shape[-2]
        lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
        S, z = np.zeros((*lead, Q.shape[-1], V.shape[-1])), np.zeros((*lead, Q.shape[-1]))
        out = np.zeros((*lead, T, V.shape[-1]), dtype=np.result_type(Q, K, V))
        for start in range(0, T, chunk_size):
            stop = min(start + chunk_size, T)
            if not last and stop - start < chunk_size:
                break
            q, k, v = fQ[..., start:stop, :], fK[..., start:stop, :], V[..., start:stop, :]
            if not carry:
                S, z = np.zeros_like(S), np.zeros_like(z)
            if twice:
                S, z = S + np.swapaxes(k, -1, -2) @ v, z + k.sum(-2)
            A = q @ np.swapaxes(k, -1, -2)
            if mask:
                A = A * np.tri(stop - start, k=0 if own_key else -1)
            out[..., start:stop, :] = (q @ S + A @ v) / (q @ z[..., None] + A.sum(-1, keepdims=True) + eps)
            if not twice:
                S, z = S + np.swapaxes(k, -1, -2) @ v, z + k.sum(-2)
        return out
    return chunked


chunked_state_not_carried = _chunked(carry=False)
chunked_unmasked = _chunked(mask=False)
chunked_off_by_one = _chunked(own_key=False)
chunked_counted_twice = _chunked(twice=True)
chunked_last_chunk_dropped = _chunked(last=False)


def chunked_ignores_feature_map(Q, K, V, chunk_size=64, feature_map=elu_feature_map, eps=1e-6):
    fQ, fK = elu_feature_map(Q), elu_feature_map(K)   # whatever feature_map it is given
    S = np.zeros((*fK.shape[:-2], K.shape[-1], V.shape[-1]), dtype=np.result_type(Q, K, V))
    z = np.zeros((*fK.shape[:-2], K.shape[-1]), dtype=S.dtype)
    pieces = []
    for start in range(0, Q.shape[-2], chunk_size):
        q, k, v = (X[..., start:start + chunk_size, :] for X in (fQ, fK, V))
        A = np.tril(q @ np.swapaxes(k, -1, -2))
        pieces.append((q @ S + A @ v) / ((q * z[..., None, :]).sum(-1, keepdims=True) + A.sum(-1, keepdims=True) + eps))
        S, z = S + np.swapaxes(k, -1, -2) @ v, z + k.sum(axis=-2)
    return np.concatenate(pieces, axis=-2)


def chunked_ignores_eps(Q, K, V, chunk_size=64, feature_map=elu_feature_map, eps=1e-6):
    return chunked_linear_attention(Q, K, V, chunk_size, feature_map)  # the default eps, whatever eps it is given


def chunked_whole_matrix(Q, K, V, chunk_size=64, feature_map=elu_feature_map, eps=1e-6):
    # one chunk of the whole length: right values, a (T, T) matrix
    fQ, fK = feature_map(Q), feature_map(K)
    A = np.tril(fQ @ np.swapaxes(fK, -1, -2))
    return (A @ V) / (A.sum(axis=-1, keepdims=True) + eps)


def _delta(erase=True, erase_beta=True, use_gate=True, read_first=False, normalise=False, gate_after=False,
           validate=True):
    def delta(Q, K, V, beta, gate=None):
        beta = np.asarray(beta, dtype=float)
        if validate and (np.any(~((beta >= 0) & (beta <= 1)))
                         or (gate is not None and np.any(~((np.asarray(gate) > 0) & (np.asarray(gate) <= 1))))):
            raise ValueError("beta or gate out of range")
        if normalise:
            K = K / np.linalg.norm(K, axis=-1, keepdims=True)
        T = Q.shape[-2]
        lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
        beta = np.broadcast_to(beta, (*lead, T))
        gate = np.ones((*lead, T)) if gate is None or not use_gate else np.broadcast_to(gate, (*lead, T))
        S = np.zeros((*lead, K.shape[-1], V.shape[-1]))
        out = np.zeros((*lead, T, V.shape[-1]), dtype=np.result_type(Q, K, V))
        for t in range(T):
            k, v = K[..., t, :, None], V[..., t, None, :]
            b, g = beta[..., t, None, None], gate[..., t, None, None]
            if read_first:
                out[..., t, :] = (Q[..., t, None, :] @ S)[..., 0, :]
            removed = (b if erase_beta else 1) * k * (np.swapaxes(k, -1, -2) @ S) if erase else 0
            S = g * (S - removed + b * k * v) if gate_after else g * (S - removed) + b * k * v
            if not read_first:
                out[..., t, :] = (Q[..., t, None, :] @ S)[..., 0, :]
        return out
    return delta


delta_sum_rule = _delta(erase=False)
delta_erase_without_beta = _delta(erase_beta=False)
delta_gate_ignored = _delta(use_gate=False)
delta_read_before_write = _delta(read_first=True)
delta_normalises_keys = _delta(normalise=True)
delta_gate_after_write = _delta(gate_after=True)
delta_no_value_error = _delta(validate=False)


def delta_rule_float64(Q, K, V, beta, gate=None):
    # right values, computed and returned in float64 whatever the inputs' dtype
    beta = np.asarray(beta, dtype=np.float64)
    gate = np.ones_like(beta) if gate is None else np.asarray(gate, dtype=np.float64)
    if np.any(~((beta >= 0) & (beta <= 1))) or np.any(~((gate > 0) & (gate <= 1))):
        raise ValueError("beta must be in [0, 1] and gate in (0, 1]")
    S = np.zeros((*K.shape[:-2], K.shape[-1], V.shape[-1]))
    outs = []
    for t in range(Q.shape[-2]):
        k, b, g = K[..., t, :, None], beta[..., t, None, None], gate[..., t, None, None]
        S = g * (S - b * k * (np.swapaxes(k, -1, -2) @ S)) + b * k * V[..., t, None, :]
        outs.append((Q[..., t, None, :] @ S)[..., 0, :])
    return np.stack(outs, axis=-2)


def delta_rule_accepts_nan_beta(Q, K, V, beta, gate=None):
    # the range tested as "outside": NaN is neither below 0 nor above 1, so it passes
    if np.any((np.asarray(beta) < 0) | (np.asarray(beta) > 1)):
        raise ValueError("beta must be in [0, 1]")
    if gate is not None and np.any((np.asarray(gate) <= 0) | (np.asarray(gate) > 1)):
        raise ValueError("gate must be in (0, 1]")
    with np.errstate(invalid="ignore"):
        return _delta(validate=False)(Q, K, V, beta, gate)


def delta_rule_no_erase(Q, K, V, beta, gate=None):
    # the sum rule, gated: nothing is erased before the write (self-contained, graded end to end)
    beta = np.asarray(beta)
    if np.any(~((beta >= 0) & (beta <= 1))) or (gate is not None and np.any(~((gate > 0) & (gate <= 1)))):
        raise ValueError("beta or gate out of range")
    T = Q.shape[-2]
    S = np.zeros((*K.shape[:-2], K.shape[-1], V.shape[-1]))
    outs = []
    for t in range(T):
        g = 1.0 if gate is None else gate[..., t, None, None]
        S = g * S + beta[..., t, None, None] * K[..., t, :, None] * V[..., t, None, :]
        outs.append((Q[..., t, None, :] @ S)[..., 0, :])
    return np.stack(outs, axis=-2)


# task -> the hidden checks (in autograder/checks/linear_attention.py) that grade it
CHECKS_OF_TASK = {task: [f"check_{task}"] for task in CORRECT}
CHECKS_OF_TASK["linear_attention"].append("check_linear_attention_memory")  # the resource rules
CHECKS_OF_TASK["chunked_linear_attention"].append("check_chunked_linear_attention_memory")

ELU, LINEAR, STEP, CHUNKED, DELTA = CHECKS_OF_TASK  # the task names, in order
MEMORY = "did not run within 64 MiB"
# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "elu-without-plus-one": (ELU, elu_without_plus_one, "check_elu_feature_map", "this is elu(x)"),
    "elu-relu": (ELU, elu_relu, "check_elu_feature_map", "this is relu(x)"),
    "elu-x-plus-one-everywhere": (ELU, elu_x_plus_one_everywhere, "check_elu_feature_map", "goes negative"),
    "elu-exp-everywhere": (ELU, elu_exp_everywhere, "check_elu_feature_map", "exp(x) for every x"),
    "elu-float64": (ELU, elu_float64, "check_elu_feature_map", "keeps the float dtype"),
    "linear-no-normaliser": (LINEAR, linear_attention_no_normaliser, "check_linear_attention",
                             "the normaliser is missing"),
    "linear-no-feature-map": (LINEAR, linear_attention_no_feature_map, "check_linear_attention",
                              "the feature map is not applied"),
    "linear-scaled": (LINEAR, linear_attention_scaled, "check_linear_attention", "no 1/√d"),
    "linear-causal-ignored": (LINEAR, linear_attention_causal_ignored, "check_linear_attention",
                              "causal=True is ignored"),
    "linear-off-by-one": (LINEAR, linear_attention_off_by_one, "check_linear_attention",
                          "does not see the key at its own position"),
    "linear-aligned-at-start": (LINEAR, linear_attention_aligned_at_start, "check_linear_attention",
                                "query i is aligned with key i"),
    "linear-without-eps": (LINEAR, linear_attention_without_eps, "check_linear_attention",
                           "a query that sees no key gets an all-zero output"),
    "linear-whole-matrix": (LINEAR, linear_attention_whole_matrix, "check_linear_attention_memory", MEMORY),
    "linear-cumulative-states": (LINEAR, linear_attention_cumulative_states, "check_linear_attention_memory",
                                 "did not run within 96 MiB on T=4096, d_k=d_v=64"),
    "linear-ignores-feature-map": (LINEAR, linear_attention_ignores_feature_map, "check_linear_attention",
                                   "feature_map is ignored"),
    "linear-ignores-feature-map-unless-causal": (LINEAR, linear_attention_ignores_feature_map_unless_causal,
                                                 "check_linear_attention", "feature_map is ignored"),
    "linear-ignores-eps": (LINEAR, linear_attention_ignores_eps, "check_linear_attention", "eps is ignored"),
    "step-read-before-write": (STEP, step_read_before_write, "check_linear_attention_step",
                               "read before the token is written"),
    "step-z-not-updated": (STEP, step_z_not_updated, "check_linear_attention_step", "z is not updated"),
    "step-no-feature-map-on-k": (STEP, step_no_feature_map_on_k, "check_linear_attention_step",
                                 "not applied to k"),
    "step-modifies-state": (STEP, step_modifies_state, "check_linear_attention_step", "modified its input"),
    "step-ignores-feature-map": (STEP, step_ignores_feature_map, "check_linear_attention_step",
                                 "feature_map is ignored"),
    "step-ignores-eps": (STEP, step_ignores_eps, "check_linear_attention_step", "eps is ignored"),
    "chunked-state-not-carried": (CHUNKED, chunked_state_not_carried, "check_chunked_linear_attention",
                                  "not carried across chunks"),
    "chunked-unmasked": (CHUNKED, chunked_unmasked, "check_chunked_linear_attention", "not masked"),
    "chunked-off-by-one": (CHUNKED, chunked_off_by_one, "check_chunked_linear_attention",
                           "does not see the key at its own position"),
    "chunked-counted-twice": (CHUNKED, chunked_counted_twice, "check_chunked_linear_attention",
                              "counted twice"),
    "chunked-last-chunk-dropped": (CHUNKED, chunked_last_chunk_dropped, "check_chunked_linear_attention",
                                   "the last, shorter chunk is left out"),
    "chunked-whole-matrix": (CHUNKED, chunked_whole_matrix, "check_chunked_linear_attention_memory", MEMORY),
    "chunked-ignores-feature-map": (CHUNKED, chunked_ignores_feature_map, "check_chunked_linear_attention",
                                    "feature_map is ignored"),
    "chunked-ignores-eps": (CHUNKED, chunked_ignores_eps, "check_chunked_linear_attention", "eps is ignored"),
    "delta-sum-rule": (DELTA, delta_sum_rule, "check_delta_rule", "nothing is erased"),
    "delta-erase-without-beta": (DELTA, delta_erase_without_beta, "check_delta_rule",
                                 "not multiplied by beta_t"),
    "delta-gate-ignored": (DELTA, delta_gate_ignored, "check_delta_rule", "the gate is ignored"),
    "delta-gate-after-write": (DELTA, delta_gate_after_write, "check_delta_rule", "multiplies the new pair"),
    "delta-read-before-write": (DELTA, delta_read_before_write, "check_delta_rule", "read before the write"),
    "delta-normalises-keys": (DELTA, delta_normalises_keys, "check_delta_rule", "normalised inside"),
    "delta-no-value-error": (DELTA, delta_no_value_error, "check_delta_rule", "should raise ValueError"),
    "delta-float64": (DELTA, delta_rule_float64, "check_delta_rule", "keeps the float dtype of the inputs"),
    "delta-accepts-nan-beta": (DELTA, delta_rule_accepts_nan_beta, "check_delta_rule", "NaN does not"),
}

# Mistakes also graded end to end, in tests/engine/test_grade.py (the one that forms the whole
# (T, T) matrix fails the visible memory check there, and the hidden one in call_in_memory's second sandbox).
GRADED_MISTAKES = ["elu-relu", "linear-whole-matrix", "delta-no-erase"]
MISTAKES["delta-no-erase"] = (DELTA, delta_rule_no_erase, "check_delta_rule", "nothing is erased")


# -- two mistakes at once: self-contained, pasted into the notebook by test_double_mistakes.py ----

def linear_attention_no_normaliser_off_by_one(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    # no normaliser, and the exclusive cumulative sum
    fQ, fK = feature_map(Q), feature_map(K)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if not causal:
        return fQ @ (np.swapaxes(fK, -1, -2) @ V)
    S = np.zeros((*fK.shape[:-2], fK.shape[-1], V.shape[-1]))
    out = np.zeros((*fQ.shape[:-2], T_q, V.shape[-1]))
    j = 0
    for i in range(T_q):
        while j < T_k - T_q + i:
            S = S + fK[..., j, :, None] * V[..., j, None, :]
            j += 1
        out[..., i, :] = (fQ[..., i, None, :] @ S)[..., 0, :]
    return out


def delta_rule_gate_ignored_read_first(Q, K, V, beta, gate=None):
    # the gate ignored, and each output read before its write
    beta = np.asarray(beta)
    if np.any(~((beta >= 0) & (beta <= 1))) or (gate is not None and np.any(~((gate > 0) & (gate <= 1)))):
        raise ValueError("beta or gate out of range")
    S = np.zeros((*K.shape[:-2], K.shape[-1], V.shape[-1]))
    outs = []
    for t in range(Q.shape[-2]):
        outs.append((Q[..., t, None, :] @ S)[..., 0, :])
        k, b = K[..., t, :, None], beta[..., t, None, None]
        S = S - b * k * (np.swapaxes(k, -1, -2) @ S) + b * k * V[..., t, None, :]
    return np.stack(outs, axis=-2)


# name -> ({task: implementation with two mistakes}, the check cell to run, the words a message may name)
DOUBLE_MISTAKES = {
    "linear-no-normaliser-off-by-one": ({LINEAR: linear_attention_no_normaliser_off_by_one},
                                        "test_linear_attention",
                                        ("the normaliser is missing", "does not see the key at its own position")),
    "delta-gate-ignored-read-first": ({DELTA: delta_rule_gate_ignored_read_first}, "test_delta_rule",
                                      ("the gate is ignored", "read before the write")),
}
