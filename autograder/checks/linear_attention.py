"""Hidden checks for the exercise on linear attention and the delta rule.

Each ``check_*`` runs the student's function on seeded inputs (sizes drawn
from the grader's secret too, chunk sizes that do not divide ``T``, causal
attention with ``T_q ≠ T_k`` both ways, queries that see no key, float32 and
float64, ``beta`` and ``gate`` at their limits), compares with the reference
in ``solutions/linear_attention.py`` with the harness's ``compare``: at a
difference it names a mistake only when that mistake alone (computed here
with one step changed) gives the student's values; otherwise it shows the
expected and the actual values.

``linear_attention``, ``linear_attention_step`` and ``chunked_linear_attention``
use the student's own ``elu_feature_map`` by default: they are judged with the
reference's standing in for it (``FEATURE_MAP``), so that a wrong, unfinished or
degenerate first task costs only its own point, and one right except on the
memory cases' inputs (zeros there, which make the output 0 at no cost) earns
nothing. Each is also called with a feature map and an ``eps`` other than the
defaults (``feature_map=np.exp``, a NumPy function the wire carries by name, and
``eps=0.5``): a function that ignores either fails. The cases include those of
the tasks' visible checks (``np.exp`` with and without ``causal``, queries that
see no key, float32, inputs left unchanged).

Whether ``linear_attention`` and ``chunked_linear_attention`` keep a state of
fixed size is decided outside the student's reach, by the memory the call may
have (``check_linear_attention_memory``, ``check_chunked_linear_attention_memory``,
in a hidden block of their own that starts with ``# resource rule``, which
``validate`` runs too): beyond their ``O(T·d)`` inputs, features and output,
they may hold ``O(d_k·d_v)`` state, never a ``(T_q, T_k)`` array nor one state
per position. ``harness.call_in_memory`` runs the call under a hard cap (a
second sandbox under ``grade``, a forked child for a plain function) on two
cases: 64 MiB at ``T = 16384, d = 8``, where one ``(T, T)`` array of float64
takes 2 GiB (a boolean mask 256 MiB), and 96 MiB at ``T = 4096, d = 64``,
where the ``T`` states ``(T, d_k, d_v)`` of a cumulative sum of outer products
take 128 MiB (and a ``(T, T)`` float64 array as much); the reference holds a
few MiB there beyond its inputs.
The notebook's check cells measure the same rule with ``peak_memory`` on
smaller cases and fail beyond three times the size of the inputs.
"""

import math

import numpy as np

from solutions import linear_attention as reference

from autograder.engine.checking import CheckFailed, check, check_shape
from autograder.engine.harness import OutOfMemory, call, call_in_memory, compare, seeded
from .efficient_attention import _check_raises_value_error, _unpack

SEED = 20200629  # "Transformers are RNNs" (Katharopoulos et al.) appeared on arXiv on 29 June 2020
# The stand-ins: each check calls the student's function with the reference's elu_feature_map (only: the
# reference's linear_attention would compute the memory cases outside the memory cap)
FEATURE_MAP = (reference.elu_feature_map,)
# (T, d_k = d_v, the memory the call may have beyond the baseline): a quarter of one (T, T) boolean mask at
# T = 16384; three quarters of the T states (T, d_k, d_v) at T = 4096, d = 64, where the inputs are 6 MiB (a
# limit of its own: the second sandbox serves the calls of one limit, and its heap keeps what they freed)
MEMORY_CASES = ((16384, 8, 64 * 2 ** 20), (4096, 64, 96 * 2 ** 20))
MEMORY_CHUNK = 64
OTHER_MAP = np.exp  # a feature map other than the default (a NumPy function: the wire carries it by name)
OTHER_EPS = 0.5  # an eps other than the default, large enough to move every output
IGNORED = {"feature_map": "feature_map is ignored: the function uses elu_feature_map whatever feature_map it is given",
           "eps": "eps is ignored: the denominator is φq · z + eps with the eps it is given"}
FLOAT32_RTOL, FLOAT32_ATOL = 1e-4, 1e-5  # float32 keeps about 7 digits; sums of T terms lose some
EMPTY = ("a query that sees no key gets an all-zero output (0 / (0 + eps) = 0), and every other "
         "output is finite")
ELU_FINITE = "φ(x) is finite for every finite x (exp(x) ≤ 1 where x ≤ 0)"


def _compare(actual, expected, name, mistakes=(), hint="", dtype=np.float64, finite=EMPTY):
    """The shape and dtype, then no NaN or inf (``finite`` says why), then ``compare`` (float64), or
    closeness (float32)."""
    check_shape(actual, expected.shape, name)
    check(actual.dtype == dtype, f"{name} has dtype {actual.dtype}, but its inputs are {np.dtype(dtype)}: the "
                                 "result keeps the float dtype of the inputs.")
    check(np.all(np.isfinite(actual)), f"{name} contains NaN or inf: {finite}.")
    if dtype == np.float32:
        largest = float(np.max(np.abs(actual - np.asarray(expected, np.float64)), initial=0.0))
        check(np.allclose(actual, np.asarray(expected, np.float64), rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL),
              f"{name}: the largest difference from the expected values is {largest:.3g}, more than "
              f"float32's rounding" + (f" ({hint})." if hint else "."))
        return
    compare(actual, expected, name, mistakes, hint=hint)


# -- the feature map -----------------------------------------------------------------

def _elu_mistakes(X):
    with np.errstate(all="ignore"):
        return [(np.where(X > 0, X, np.expm1(np.minimum(X, 0))), "this is elu(x): φ(x) = elu(x) + 1"),
                (np.maximum(X, 0), "this is relu(x): φ(x) = elu(x) + 1, x + 1 for x > 0 and exp(x) "
                                   "elsewhere"),
                (X + 1, "x + 1 for every x goes negative below −1: φ(x) = exp(x) for x ≤ 0"),
                (np.exp(X), "exp(x) for every x: φ(x) = x + 1 for x > 0")]


def check_elu_feature_map(elu_feature_map):
    rng = seeded(SEED)
    cases = [("x = [-2, -0.5, 0, 0.5, 2]", np.array([-2.0, -0.5, 0.0, 0.5, 2.0])),
             ("an array of shape (2, 3, 4)", rng.normal(size=(2, 3, 4))),
             ("large entries (±800, where exp overflows)", np.array([[-800.0, -30.0], [30.0, 800.0]])),
             (f"a random array of shape {(n := int(rng.integers(2, 9)), 5)}", 3 * rng.normal(size=(n, 5)))]
    for description, X in cases:
        actual = call(elu_feature_map, X, on=description)
        _compare(actual, reference.elu_feature_map(X), f"elu_feature_map on {description}", _elu_mistakes(X),
                 "x + 1 for x > 0, exp(x) elsewhere", finite=ELU_FINITE)
    X = rng.normal(size=(3, 4)).astype(np.float32)
    _compare(call(elu_feature_map, X, on="a float32 array"), reference.elu_feature_map(X),
             "elu_feature_map on a float32 array", dtype=np.float32, finite=ELU_FINITE)


# -- linear attention ----------------------------------------------------------------

def _direct(Q, K, V, causal, feature_map=reference.elu_feature_map, eps=1e-6, aligned_at_start=False,
            own_key=True, normalise=True, scale=1.0):
    """Linear attention through its (T_q, T_k) matrix of similarities, with one step changeable."""
    phi_Q, phi_K = feature_map(Q * scale), feature_map(K * scale)
    A = phi_Q @ np.swapaxes(phi_K, -1, -2)                           # (..., T_q, T_k)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if causal:
        positions = np.arange(T_q) if aligned_at_start else T_k - T_q + np.arange(T_q)
        seen = positions[:, None] >= np.arange(T_k) + (0 if own_key else 1)
        A = A * seen
    if not normalise:
        return A @ V
    with np.errstate(all="ignore"):
        return (A @ V) / (A.sum(axis=-1, keepdims=True) + eps)


def _attention_mistakes(Q, K, V, causal):
    mistakes = [(_direct(Q, K, V, causal, normalise=False),
                 "the normaliser is missing: divide by φq · z + eps, the sum of the similarities"),
                (_direct(Q, K, V, causal, feature_map=lambda X: X),
                 "the feature map is not applied: similarities φ(q)·φ(k) with φ = feature_map, never "
                 "the raw q·k, which can be negative"),
                (_direct(Q, K, V, causal, eps=0.0), "eps is left out of the denominator: φq · z + eps"),
                (_direct(Q, K, V, causal, scale=1 / math.sqrt(Q.shape[-1])),
                 "Q and K are divided by √d_k before the feature map: linear attention has no 1/√d "
                 "scale, φ replaces the softmax's exp and its scale")]
    if causal:
        T_q, T_k = Q.shape[-2], K.shape[-2]
        mistakes += [(_direct(Q, K, V, False), "causal=True is ignored"),
                     (_direct(Q, K, V, True, own_key=False),
                      "query i does not see the key at its own position: with causal=True it sees the "
                      "keys j ≤ T_k − T_q + i, its own included")]
        if T_q != T_k:
            mistakes.append((_direct(Q, K, V, True, aligned_at_start=True),
                             "query i is aligned with key i: with causal=True query i stands at position "
                             "T_k − T_q + i, as in sliding_window_mask"))
    return mistakes


def _attention_cases(rng):
    """(description, Q, K, V, causal)."""
    def qkv(lead, T_q, T_k, d_k, d_v):
        return rng.normal(size=(*lead, T_q, d_k)), rng.normal(size=(*lead, T_k, d_k)), \
            rng.normal(size=(*lead, T_k, d_v))
    T_q, T_k = (int(n) for n in rng.integers(5, 40, size=2))
    return [
        ("T_q=7 queries and T_k=4 keys, causal (the first 3 queries see no key)", *qkv((), 7, 4, 3, 3), True),
        ("T_q=4, T_k=7, d_k=3, d_v=2, batch 2", *qkv((2,), 4, 7, 3, 2), False),
        ("T_q=T_k=9, d_k=4, d_v=3, two leading axes (2, 3), causal", *qkv((2, 3), 9, 9, 4, 3), True),
        ("T_q=5 queries after T_k=11 keys, causal", *qkv((2,), 5, 11, 4, 2), True),
        ("T_q=T_k=150, d_k=4, d_v=2, causal (longer than 64)", *qkv((), 150, 150, 4, 2), True),
        (f"T_q={T_q}, T_k={T_k}, d_k=5, d_v=4, batch 2", *qkv((2,), T_q, T_k, 5, 4), False),
        (f"T_q={T_q}, T_k={T_k}, d_k=5, d_v=4, batch 2, causal", *qkv((2,), T_q, T_k, 5, 4), True),
    ]


def check_linear_attention(linear_attention):
    rng = seeded(SEED + 1)
    for description, Q, K, V, causal in _attention_cases(rng):
        actual = call(linear_attention, Q, K, V, causal=causal, on=description, stand_ins=FEATURE_MAP)
        _compare(actual, _direct(Q, K, V, causal), f"the output on {description}",
                 lambda: _attention_mistakes(Q, K, V, causal),
                 "query i gets (φq_i @ S_i) / (φq_i · z_i + eps), S_i and z_i summed over the keys it sees")
    Q, K, V = (rng.normal(size=(2, 6, 4)).astype(np.float32) for _ in range(3))
    for causal in (False, True):
        description = f"float32 inputs, T=6, {'causal' if causal else 'not causal'}"
        _compare(call(linear_attention, Q, K, V, causal=causal, on=description, stand_ins=FEATURE_MAP),
                 _direct(Q, K, V, causal), f"the output on {description}", dtype=np.float32)
    for causal in (False, True):
        _check_other_arguments(linear_attention, rng, causal=causal)


def check_linear_attention_memory(linear_attention):
    """The resource rule of linear_attention: a state of fixed size (``validate`` runs it too)."""
    for causal in (False, True):
        _check_linear_memory(linear_attention, causal=causal)


def _check_other_arguments(function, rng, **kwargs):
    """The function called with feature_map=OTHER_MAP and eps=OTHER_EPS: a function that ignores either
    fails, and says so."""
    causal = kwargs.get("causal", True)
    Q, K, V = rng.normal(size=(2, 9, 4)), rng.normal(size=(2, 9, 4)), rng.normal(size=(2, 9, 3))
    description = f"T=9, d_k=4, d_v=3, batch 2, feature_map=np.exp, eps={OTHER_EPS}" + (", causal" if causal else "")
    actual = call(function, Q, K, V, feature_map=OTHER_MAP, eps=OTHER_EPS, on=description, stand_ins=FEATURE_MAP, **kwargs)
    ignored = [(_direct(Q, K, V, causal, eps=OTHER_EPS), IGNORED["feature_map"]),
               (_direct(Q, K, V, causal, feature_map=OTHER_MAP), IGNORED["eps"])]
    _compare(actual, _direct(Q, K, V, causal, feature_map=OTHER_MAP, eps=OTHER_EPS), f"the output on {description}",
             ignored, "it should use the feature_map and eps it is given: φQ = feature_map(Q), φK = feature_map(K)")


# -- one step ------------------------------------------------------------------------

def _step(q, k, v, state, read_first=False, update_z=True, phi_k=True, phi_q=True, eps=1e-6):
    """The reference step with one step changeable: (output, S, z)."""
    fq = reference.elu_feature_map(q) if phi_q else q
    fk = reference.elu_feature_map(k) if phi_k else k
    S_new = state["S"] + fk[..., :, None] * v[..., None, :]
    z_new = state["z"] + fk if update_z else state["z"]
    S_read, z_read = (state["S"], state["z"]) if read_first else (S_new, z_new)
    with np.errstate(all="ignore"):
        output = (fq[..., None, :] @ S_read)[..., 0, :] / (np.sum(fq * z_read, axis=-1, keepdims=True) + eps)
    return np.nan_to_num(output), S_new, z_new


def _step_mistakes(q, k, v, state):
    return [(_step(q, k, v, state, read_first=True),
             "the output is read before the token is written: write S and z first, so that the token "
             "sees itself (as in the causal form)"),
            (_step(q, k, v, state, update_z=False), "z is not updated: z ← z + φ(k)"),
            (_step(q, k, v, state, phi_k=False), "the feature map is not applied to k: S ← S + φ(k)ᵀ v"),
            (_step(q, k, v, state, phi_q=False), "the feature map is not applied to q")]


def _unpack_step(result, description):
    output, state = _unpack(result, ("output", "state"), reference.linear_attention_step, description)
    check(isinstance(state, dict) and {"S", "z"} <= set(state),
          f"linear_attention_step should return (output, state) with state a dict with keys \"S\" and "
          f"\"z\", but on {description} the state is {type(state).__name__}"
          + (f" with keys {sorted(state)}" if isinstance(state, dict) else "") + ".")
    return output, state["S"], state["z"]


def check_linear_attention_step(linear_attention_step):
    rng = seeded(SEED + 2)
    d_k, d_v = int(rng.integers(3, 7)), int(rng.integers(2, 6))
    cases = [("batch 2, d_k=3, d_v=2, from the zero state", (2,), 3, 2, 0),
             ("leading axes (2, 3), d_k=4, d_v=4, after 5 tokens", (2, 3), 4, 4, 5),
             (f"no leading axis, d_k={d_k}, d_v={d_v}, after 3 tokens", (), d_k, d_v, 3)]
    for description, lead, d_k, d_v, before in cases:
        state = reference.init_linear_attention_state(lead, d_k, d_v)
        for _ in range(before):
            _, state = reference.linear_attention_step(*_token(rng, lead, d_k, d_v), state)
        q, k, v = _token(rng, lead, d_k, d_v)
        result = _unpack_step(call(linear_attention_step, q, k, v, state, on=description, stand_ins=FEATURE_MAP),
                              description)
        expected = _step_with(q, k, v, state)
        mistakes = _step_mistakes(q, k, v, state)
        hints = ("output = (φq @ S) / (φq · z + eps) with the new S and z", "S ← S + φkᵀ v", "z ← z + φk")
        for i, name in enumerate(("output", "S of the new state", "z of the new state")):
            _compare(result[i], expected[i], f"{name} on {description}",
                     [(wrong[i], mistake) for wrong, mistake in mistakes], hints[i])
    # stepping through a sequence gives the causal form, row by row
    T, Q, K, V = 8, rng.normal(size=(2, 8, 3)), rng.normal(size=(2, 8, 3)), rng.normal(size=(2, 8, 2))
    state, outputs = reference.init_linear_attention_state((2,), 3, 2), []
    for t in range(T):
        description = f"step {t} of a sequence of {T} tokens, batch 2"
        output, S, z = _unpack_step(call(linear_attention_step, Q[:, t], K[:, t], V[:, t], state, on=description,
                                         stand_ins=FEATURE_MAP), description)
        outputs.append(output)
        state = {"S": S, "z": z}
    _compare(np.stack(outputs, axis=1), _direct(Q, K, V, True), f"the outputs of {T} steps from the zero state",
             hint="they should equal linear_attention(Q, K, V, causal=True)")
    q, k, v = _token(rng, (2,), 4, 3)
    state = reference.init_linear_attention_state((2,), 4, 3)
    _, state = reference.linear_attention_step(*_token(rng, (2,), 4, 3), state)
    description = f"batch 2, d_k=4, d_v=3, after 1 token, feature_map=np.exp, eps={OTHER_EPS}"
    result = _unpack_step(call(linear_attention_step, q, k, v, state, feature_map=OTHER_MAP, eps=OTHER_EPS,
                               on=description, stand_ins=FEATURE_MAP), description)
    ignored = [(_step_with(q, k, v, state, eps=OTHER_EPS), IGNORED["feature_map"]),
               (_step_with(q, k, v, state, OTHER_MAP), IGNORED["eps"])]
    for i, name in enumerate(("output", "S of the new state", "z of the new state")):
        _compare(result[i], _step_with(q, k, v, state, OTHER_MAP, OTHER_EPS)[i], f"{name} on {description}",
                 [(wrong[i], mistake) for wrong, mistake in ignored],
                 "it should use the feature_map and eps it is given: φq = feature_map(q), φk = feature_map(k)")


def _token(rng, lead, d_k, d_v):
    return rng.normal(size=(*lead, d_k)), rng.normal(size=(*lead, d_k)), rng.normal(size=(*lead, d_v))


def _step_with(q, k, v, state, feature_map=reference.elu_feature_map, eps=1e-6):
    output, state = reference.linear_attention_step(q, k, v, state, feature_map=feature_map, eps=eps)
    return output, state["S"], state["z"]


# -- the chunked form ----------------------------------------------------------------

def _chunked_variant(Q, K, V, chunk_size, carry=True, mask=True, twice=False, last=True):
    """Chunked causal linear attention with one step changeable."""
    phi_Q, phi_K = reference.elu_feature_map(Q), reference.elu_feature_map(K)
    T = Q.shape[-2]
    S = np.zeros((*phi_Q.shape[:-2], Q.shape[-1], V.shape[-1]))
    z = np.zeros((*phi_Q.shape[:-2], Q.shape[-1]))
    output = np.zeros((*phi_Q.shape[:-2], T, V.shape[-1]))
    for start in range(0, T, chunk_size):
        stop = min(start + chunk_size, T)
        if not last and stop - start < chunk_size:
            break
        q, k, v = phi_Q[..., start:stop, :], phi_K[..., start:stop, :], V[..., start:stop, :]
        if not carry:
            S, z = np.zeros_like(S), np.zeros_like(z)
        if twice:  # the chunk's keys added to the state before it is read
            S, z = S + np.swapaxes(k, -1, -2) @ v, z + k.sum(axis=-2)
        scores = q @ np.swapaxes(k, -1, -2)
        if mask:
            scores = scores * np.tri(stop - start)
        with np.errstate(all="ignore"):
            output[..., start:stop, :] = (q @ S + scores @ v) / (q @ z[..., None] + scores.sum(-1, keepdims=True) + 1e-6)
        if not twice:
            S, z = S + np.swapaxes(k, -1, -2) @ v, z + k.sum(axis=-2)
    return output


def _chunked_mistakes(Q, K, V, chunk_size):
    return [(_chunked_variant(Q, K, V, chunk_size, carry=False),
             "the state is not carried across chunks: each chunk reads S and z summed over the chunks "
             "before it"),
            (_chunked_variant(Q, K, V, chunk_size, mask=False),
             "inside a chunk the products are not masked: query i sees the keys j ≤ i of its chunk only"),
            (_chunked_variant(Q, K, V, chunk_size, twice=True),
             "the chunk's own keys are added to the state before it is read, and counted twice: read "
             "the state of the chunks before, add the chunk's keys after"),
            (_chunked_variant(Q, K, V, chunk_size, last=False),
             "the last, shorter chunk is left out: when chunk_size does not divide T, it holds the "
             "remaining positions")]


def check_chunked_linear_attention(chunked_linear_attention):
    rng = seeded(SEED + 3)
    T, chunk = int(rng.integers(20, 60)), int(rng.integers(3, 9))
    cases = [("T=12, d_k=4, d_v=3, batch 2, chunk_size=4", (2,), 12, 4, 3, 4),
             ("T=10, two leading axes (2, 3), chunk_size=3 (which does not divide 10)", (2, 3), 10, 3, 3, 3),
             ("T=7, chunk_size=1", (), 7, 3, 2, 1),
             ("T=9, chunk_size=64, larger than T", (1,), 9, 4, 4, 64),
             (f"T={T}, d_k=5, d_v=4, batch 2, chunk_size={chunk}", (2,), T, 5, 4, chunk)]
    for description, lead, T, d_k, d_v, chunk_size in cases:
        Q, K, V = rng.normal(size=(*lead, T, d_k)), rng.normal(size=(*lead, T, d_k)), rng.normal(size=(*lead, T, d_v))
        actual = call(chunked_linear_attention, Q, K, V, chunk_size=chunk_size, on=description, stand_ins=FEATURE_MAP)
        _compare(actual, _direct(Q, K, V, True), f"the output on {description}",
                 lambda: _chunked_mistakes(Q, K, V, chunk_size) + _attention_mistakes(Q, K, V, True),
                 "it should equal linear_attention(Q, K, V, causal=True)")
    Q, K, V = (rng.normal(size=(2, 10, 4)).astype(np.float32) for _ in range(3))
    description = "float32 inputs, T=10, chunk_size=4"
    _compare(call(chunked_linear_attention, Q, K, V, chunk_size=4, on=description, stand_ins=FEATURE_MAP),
             _direct(Q, K, V, True), f"the output on {description}", dtype=np.float32)
    _check_other_arguments(chunked_linear_attention, rng, chunk_size=4)


def check_chunked_linear_attention_memory(chunked_linear_attention):
    """The resource rule of chunked_linear_attention: a state of fixed size (``validate`` runs it too)."""
    _check_linear_memory(chunked_linear_attention, chunk_size=MEMORY_CHUNK)


# -- the memory, decided outside the student's code ------------------------------------

def _check_linear_memory(function, **kwargs):
    """Fail a function that cannot run within its limit on each of MEMORY_CASES (``call_in_memory``: a hard
    cap outside the student's reach), or that gives wrong values there."""
    rng = seeded(SEED + 9)
    causal = kwargs.get("causal", True)  # chunked_linear_attention is causal
    name = getattr(function, "__name__", "your function")
    for T, d, limit in MEMORY_CASES:
        Q, K, V = (rng.normal(size=(T, d)) for _ in range(3))
        description = (f"T={T}, d_k=d_v={d}" + "".join(f", {key}={value}" for key, value in kwargs.items())
                       + " (a memory case)")
        try:
            result = call_in_memory(function, Q, K, V, on=description, limit_bytes=limit, stand_ins=FEATURE_MAP, **kwargs)
        except OutOfMemory as failure:
            raise CheckFailed(
                f"{name} did not run within {limit / 2 ** 20:.0f} MiB on {description}: more memory at "
                f"once than a state of fixed size needs (its inputs of {3 * Q.nbytes / 2 ** 20:.0f} MiB, their "
                f"features and its output, and a (d_k, d_v) state), where one (T, T) array takes "
                f"{T * T * 8 / 2 ** 20:.0f} MiB ({T * T / 2 ** 20:.0f} MiB as booleans) and one state per "
                f"position (T, d_k, d_v) {T * d * d * 8 / 2 ** 20:.0f} MiB.") from failure
        _compare(result, reference.linear_attention(Q, K, V, causal=causal), f"the output on {description}",
                 hint="it should equal the reference's")


# -- the delta rule ------------------------------------------------------------------

def _delta_variant(Q, K, V, beta, gate=None, erase=True, erase_beta=True, use_gate=True, read_first=False,
                   normalise=False, gate_after=False):
    """The delta rule with one step changeable."""
    if normalise:
        K = K / np.linalg.norm(K, axis=-1, keepdims=True)
    lead, T = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2]), Q.shape[-2]
    beta = np.broadcast_to(beta, (*lead, T))
    gate = np.ones((*lead, T)) if gate is None or not use_gate else np.broadcast_to(gate, (*lead, T))
    S = np.zeros((*lead, K.shape[-1], V.shape[-1]))
    output = np.zeros((*lead, T, V.shape[-1]))
    for t in range(T):
        k, v = K[..., t, :, None], V[..., t, None, :]
        b, g = beta[..., t, None, None], gate[..., t, None, None]
        if read_first:
            output[..., t, :] = (Q[..., t, None, :] @ S)[..., 0, :]
        removed = (b if erase_beta else 1) * k * (np.swapaxes(k, -1, -2) @ S) if erase else 0
        S = g * (S - removed + b * k * v) if gate_after else g * (S - removed) + b * k * v
        if not read_first:
            output[..., t, :] = (Q[..., t, None, :] @ S)[..., 0, :]
    return output


def _delta_mistakes(Q, K, V, beta, gate, unit):
    mistakes = [(_delta_variant(Q, K, V, beta, gate, erase=False),
                 "nothing is erased: the delta rule first removes beta_t · k_tᵀ (k_t @ S), what the "
                 "memory holds for k_t (this is the sum rule)"),
                (_delta_variant(Q, K, V, beta, gate, erase_beta=False),
                 "the erased part is not multiplied by beta_t: S − beta_t · k_tᵀ (k_t @ S)"),
                (_delta_variant(Q, K, V, beta, gate, read_first=True),
                 "the output is read before the write: output_t = q_t @ S after S is updated with k_t, v_t")]
    if gate is not None:
        mistakes += [(_delta_variant(Q, K, V, beta, gate, use_gate=False), "the gate is ignored"),
                     (_delta_variant(Q, K, V, beta, gate, gate_after=True),
                      "the gate multiplies the new pair too: S ← gate_t · (S − beta_t k_tᵀ(k_t @ S)) "
                      "+ beta_t k_tᵀ v_t, the write after the gate")]
    if not unit:
        mistakes.append((_delta_variant(Q, K, V, beta, gate, normalise=True),
                         "the keys are normalised inside: the delta rule uses the keys as they are given"))
    return mistakes


def _unit(rng, shape):
    keys = rng.normal(size=shape)
    return keys / np.linalg.norm(keys, axis=-1, keepdims=True)


def check_delta_rule(delta_rule):
    rng = seeded(SEED + 4)
    T = int(rng.integers(5, 15))
    cases = [  # description, lead, T, d_k, d_v, beta, gate, unit keys
        ("batch 2, T=6, d_k=4, d_v=3, beta in [0, 1], no gate", (2,), 6, 4, 3, "random", None, True),
        ("batch 2, T=6, d_k=4, d_v=3, beta and gate random", (2,), 6, 4, 3, "random", "random", True),
        ("leading axes (2, 3), T=5, beta = 1 (each pair stored exactly)", (2, 3), 5, 4, 2, "one", None, True),
        ("T=5, beta = 0 (nothing is written)", (), 5, 3, 3, "zero", None, True),
        ("T=6, gate = 1 everywhere (the delta rule without a gate)", (2,), 6, 3, 2, "random", "one", True),
        ("T=6, gate = 1e-9 at step 3 (all before forgotten)", (), 6, 4, 3, "random", "erase", True),
        ("T=6, keys not of unit length", (2,), 6, 4, 3, "random", "random", False),
        (f"batch 2, T={T}, d_k=5, d_v=4, beta and gate random", (2,), T, 5, 4, "random", "random", True),
    ]
    for description, lead, T, d_k, d_v, beta_kind, gate_kind, unit in cases:
        Q, V = rng.normal(size=(*lead, T, d_k)), rng.normal(size=(*lead, T, d_v))
        K = _unit(rng, (*lead, T, d_k)) if unit else rng.uniform(0.5, 1.0, (*lead, T, 1)) * _unit(rng, (*lead, T, d_k))
        beta = {"random": rng.uniform(0, 1, (*lead, T)), "one": np.ones((*lead, T)),
                "zero": np.zeros((*lead, T))}[beta_kind]
        gate = None if gate_kind is None else {
            "random": rng.uniform(0.3, 1, (*lead, T)), "one": np.ones((*lead, T)),
            "erase": np.where(np.arange(T) == 3, 1e-9, 1.0) * np.ones((*lead, T))}[gate_kind]
        args = (Q, K, V, beta) if gate is None else (Q, K, V, beta, gate)
        actual = call(delta_rule, *args, on=description, stand_ins=FEATURE_MAP)
        _compare(actual, reference.delta_rule(*args), f"the output on {description}",
                 lambda: _delta_mistakes(Q, K, V, beta, gate, unit),
                 "S ← gate_t · (S − beta_t · k_tᵀ (k_t @ S)) + beta_t · k_tᵀ v_t, then output_t = q_t @ S")
    Q, K, V = rng.normal(size=(6, 4)), _unit(rng, (6, 4)), rng.normal(size=(6, 3))
    beta, gate = rng.uniform(0, 1, 6), rng.uniform(0.3, 1, 6)
    args32 = (Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32), beta.astype(np.float32),
              gate.astype(np.float32))
    _compare(call(delta_rule, *args32, on="float32 inputs, T=6", stand_ins=FEATURE_MAP),
             reference.delta_rule(Q, K, V, beta, gate), "the output on float32 inputs, T=6", dtype=np.float32)
    for value, reason in ((1.5, "beta must lie in [0, 1]"), (-0.25, "beta must lie in [0, 1]"),
                          (np.nan, "beta must lie in [0, 1], and NaN does not")):
        bad = np.where(np.arange(6) == 2, value, beta)
        _check_raises_value_error(delta_rule, (Q, K, V, bad), f"delta_rule with beta[2] = {value}",
                                  f"beta[2] = {value}", reason, stand_ins=FEATURE_MAP)
    for value in (0.0, 1.25):
        bad = np.where(np.arange(6) == 4, value, gate)
        _check_raises_value_error(delta_rule, (Q, K, V, beta, bad), f"delta_rule with gate[4] = {value}",
                                  f"gate[4] = {value}", "gate must lie in (0, 1]", stand_ins=FEATURE_MAP)
