"""Hidden checks for the exercise on linear attention and the delta rule, as case tables (`engine.cases`).

The cases: sizes drawn from the grader's secret too, chunk sizes that do not divide ``T``, causal attention with
``T_q ≠ T_k`` both ways, queries that see no key, float32, ``beta`` and ``gate`` at their limits, another
``feature_map`` (``np.exp``: the wire carries it by name) and ``eps``. The reference's ``elu_feature_map`` stands
in (only: the reference's linear_attention would compute the memory cases outside the cap). The resource rule
(``check_*_memory``: ``validate`` runs it too): a state of fixed size, under a hard cap (``call_in_memory``).
"""

import math

import numpy as np

from solutions import linear_attention as reference

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case, changed
from autograder.engine.checking import check
from autograder.engine.harness import seeded

SEED = 20200629  # "Transformers are RNNs" (Katharopoulos et al.) appeared on arXiv on 29 June 2020
# (T, d_k = d_v, the memory beyond the baseline): a quarter of one (T, T) boolean mask at T = 16384; three quarters of
# the T states (T, d_k, d_v) at T = 4096, d = 64 (a limit of its own: the second sandbox's heap keeps what it freed)
MEMORY_CASES = ((16384, 8, 64 * 2 ** 20), (4096, 64, 96 * 2 ** 20))
OTHER_MAP = np.exp  # a feature map other than the default (a NumPy function: the wire carries it by name)
EPS = 1e-6  # the default eps
OTHER_EPS = 0.5  # an eps other than the default, large enough to move every output
FLOAT32 = (1e-4, 1e-5)  # (rtol, atol): float32 keeps about 7 digits; sums of T terms lose some
EMPTY = "a query that sees no key gets an all-zero output (0 / (0 + eps) = 0), and every other output is finite"


def _sees_nothing(causal=False, Q=None, K=None, **_):
    """Whether a query of the case sees no key: causal, with more queries than keys."""
    return bool(causal) and Q is not None and K is not None and np.shape(Q)[-2] > np.shape(K)[-2]


def _facts(finite=None):
    """The facts of every output: of the float dtype of the inputs, finite (`finite` says why; by default, on a
    case where a query sees no key, `EMPTY`)."""
    facts = [Fact("{name} has another dtype than its inputs: the result keeps the float dtype of the inputs.",
                  lambda actual, **arguments: actual.dtype == np.result_type(
                      *(a for a in arguments.values() if hasattr(a, "dtype"))), first=True)]
    if finite is None:
        facts.append(Fact("{name} contains NaN or inf: " + EMPTY + ".", lambda actual, **arguments: not _sees_nothing(
            **arguments) or np.all(np.isfinite(actual)), first=True))
    return facts + [Fact("{name} contains NaN or inf: " + (finite or "every query here sees a key, and every output "
                                                                      "of finite inputs is finite") + ".",
                         lambda actual, **_: np.all(np.isfinite(actual)), first=True)]


def _ignored(variant):
    """The mistakes of a function that ignores the feature_map or the eps it is given."""
    return [Mistake("feature_map is ignored: the function uses elu_feature_map whatever feature_map it is given",
                    changed(variant, feature_map=reference.elu_feature_map)),
            Mistake("eps is ignored: the denominator is φq · z + eps with the eps it is given",
                    changed(variant, eps=EPS))]


def _direct(Q, K, V, feature_map, eps, causal=True, aligned_at_start=False, own_key=True, normalise=True,
            scaled=False, seen=None, **_):
    """Linear attention through its similarities, one step changeable (`seen`: how often query i sees key j)."""
    scale = 1 / math.sqrt(Q.shape[-1]) if scaled else 1.0
    A = feature_map(Q * scale) @ np.swapaxes(feature_map(K * scale), -1, -2)  # (..., T_q, T_k)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if causal:
        positions = np.arange(T_q) if aligned_at_start else T_k - T_q + np.arange(T_q)
        A = A * (positions[:, None] >= np.arange(T_k) + (0 if own_key else 1) if seen is None else seen)
    with np.errstate(all="ignore"):
        return (A @ V) / (A.sum(axis=-1, keepdims=True) + eps) if normalise else A @ V


ATTENTION_MISTAKES = [
    Mistake("the normaliser is missing: divide by φq · z + eps, the sum of the similarities",
            changed(_direct, normalise=False)),
    Mistake("the feature map is not applied: similarities φ(q)·φ(k) with φ = feature_map, never the raw q·k, which "
            "can be negative", changed(_direct, feature_map=lambda X: X)),
    Mistake("eps is left out of the denominator: φq · z + eps", changed(_direct, eps=0.0),
            when=lambda eps, **_: eps == EPS),  # with another eps: as "eps is ignored" gives
    Mistake("Q and K are divided by √d_k before the feature map: linear attention has no 1/√d scale, φ replaces the "
            "softmax's exp and its scale", changed(_direct, scaled=True)),
    Mistake("causal=True is ignored", changed(_direct, causal=False)),
    Mistake("query i does not see the key at its own position: with causal=True it sees the keys j ≤ T_k − T_q + i, "
            "its own included", changed(_direct, own_key=False)),
    Mistake("query i is aligned with key i: with causal=True query i stands at position T_k − T_q + i, as in "
            "sliding_window_mask", changed(_direct, aligned_at_start=True)),
    *_ignored(_direct)]


def _step(q, k, v, state, feature_map, eps, read_first=False, update_z=True, phi_k=True, phi_q=True):
    """The reference step with one step changeable: (output, S, z)."""
    fq, fk = feature_map(q) if phi_q else q, feature_map(k) if phi_k else k
    S, z = state["S"] + fk[..., :, None] * v[..., None, :], state["z"] + fk * update_z
    S_read, z_read = (state["S"], state["z"]) if read_first else (S, z)
    with np.errstate(all="ignore"):
        output = (fq[..., None, :] @ S_read)[..., 0, :] / (np.sum(fq * z_read, axis=-1, keepdims=True) + eps)
    return np.nan_to_num(output), S, z


def _output_and_state(result, description):
    """(output, S, z) of what linear_attention_step returns, (output, {"S": S, "z": z})."""
    state = result[1] if isinstance(result, tuple) and len(result) == 2 else None
    check(isinstance(state, dict) and {"S", "z"} <= set(state), "linear_attention_step should return (output, "
          f'state), state a dict with keys "S" and "z": on {description}, it did not.')
    return result[0], state["S"], state["z"]


def _chunked(seen):
    """Chunked causal linear attention with a mistake: `seen(i, j, start, stop)` says how often query i, of the chunk
    from start to stop, sees key j."""
    def gives(Q, K, V, chunk_size, feature_map, eps):
        i, j = np.arange(Q.shape[-2])[:, None], np.arange(Q.shape[-2])
        start = i // chunk_size * chunk_size
        return _direct(Q, K, V, feature_map, eps, seen=seen(i, j, start, start + chunk_size))
    return gives


def _delta(Q, K, V, beta, gate, erase=True, erase_beta=True, use_gate=True, read_first=False, normalise=False,
           gate_after=False):
    """The delta rule with one step changeable."""
    K = K / np.linalg.norm(K, axis=-1, keepdims=True) if normalise else K
    lead, T = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2]), Q.shape[-2]
    beta, gate = (np.broadcast_to(1.0 if x is None else x, (*lead, T)) for x in (beta, gate if use_gate else None))
    S, outputs = np.zeros((*lead, K.shape[-1], V.shape[-1])), []
    for t in range(T):
        k, v, b, g = K[..., t, :, None], V[..., t, None, :], beta[..., t, None, None], gate[..., t, None, None]
        before = (Q[..., t, None, :] @ S)[..., 0, :]
        removed = (b if erase_beta else 1) * k * (np.swapaxes(k, -1, -2) @ S) if erase else 0
        S = g * (S - removed + b * k * v) if gate_after else g * (S - removed) + b * k * v
        outputs.append(before if read_first else (Q[..., t, None, :] @ S)[..., 0, :])
    return np.stack(outputs, axis=-2)


exercise = Exercise(reference, stand_ins=(reference.elu_feature_map,))
elu_feature_map = exercise.task(
    "elu_feature_map", hint="x + 1 for x > 0, exp(x) elsewhere",
    facts=_facts("φ(x) is finite for every finite x (exp(x) ≤ 1 where x ≤ 0)"), mistakes=[
        Mistake("this is elu(x): φ(x) = elu(x) + 1", lambda X: np.where(X > 0, X, np.expm1(np.minimum(X, 0)))),
        Mistake("this is relu(x): φ(x) = elu(x) + 1, x + 1 for x > 0 and exp(x) elsewhere", lambda X: np.maximum(X, 0)),
        Mistake("x + 1 for every x goes negative below −1: φ(x) = exp(x) for x ≤ 0", lambda X: X + 1),
        Mistake("exp(x) for every x: φ(x) = x + 1 for x > 0", lambda X: np.exp(X))])
linear_attention = exercise.task(
    "linear_attention", facts=_facts(), mistakes=ATTENTION_MISTAKES,
    hint="query i gets (φq_i @ S_i) / (φq_i · z_i + eps), S_i and z_i summed over the keys it sees, φ = feature_map")
step = exercise.task("linear_attention_step", read=_output_and_state, outputs=[
    Output(name, hint, _ignored(_step) + [
        Mistake("the output is read before the token is written: write S and z first, so that the token sees itself "
                "(as in the causal form)", changed(_step, read_first=True)),
        Mistake("z is not updated: z ← z + φ(k)", changed(_step, update_z=False)),
        Mistake("the feature map is not applied to k: S ← S + φ(k)ᵀ v", changed(_step, phi_k=False)),
        Mistake("the feature map is not applied to q", changed(_step, phi_q=False))], _facts())
    for name, hint in (("output", "output = (φq @ S) / (φq · z + eps) with the new S and z, φq = feature_map(q)"),
                       ("S of the new state", "S ← S + φkᵀ v, φk = feature_map(k)"),
                       ("z of the new state", "z ← z + φk"))])
chunked = exercise.task(
    "chunked_linear_attention", hint="it should equal linear_attention(Q, K, V, causal=True)", facts=_facts(),
    mistakes=[Mistake("the state is not carried across chunks: each chunk reads S and z summed over the chunks before "
                      "it", _chunked(lambda i, j, start, stop: (j >= start) & (j <= i))),
              Mistake("inside a chunk the products are not masked: query i sees the keys j ≤ i of its chunk only",
                      _chunked(lambda i, j, start, stop: j < stop)),
              Mistake("the chunk's own keys are added to the state before it is read, and counted twice: read the "
                      "state of the chunks before, add the chunk's keys after",
                      _chunked(lambda i, j, start, stop: (j < stop) + 1 * ((j >= start) & (j <= i)))),
              Mistake("the last, shorter chunk is left out: when chunk_size does not divide T, it holds the remaining "
                      "positions", _chunked(lambda i, j, start, stop: (j <= i) & (stop <= len(i)))),
              *ATTENTION_MISTAKES])
delta_rule = exercise.task(
    "delta_rule", hint="S ← gate_t · (S − beta_t · k_tᵀ (k_t @ S)) + beta_t · k_tᵀ v_t, then output_t = q_t @ S",
    facts=_facts(), mistakes=[
        Mistake("nothing is erased: the delta rule first removes beta_t · k_tᵀ (k_t @ S), what the memory holds for "
                "k_t (this is the sum rule)", changed(_delta, erase=False)),
        Mistake("the erased part is not multiplied by beta_t: S − beta_t · k_tᵀ (k_t @ S)",
                changed(_delta, erase_beta=False)),
        Mistake("the output is read before the write: output_t = q_t @ S after S is updated with k_t, v_t",
                changed(_delta, read_first=True)),
        Mistake("the gate is ignored", changed(_delta, use_gate=False)),
        Mistake("the gate multiplies the new pair too: S ← gate_t · (S − beta_t k_tᵀ(k_t @ S)) + beta_t k_tᵀ v_t, the "
                "write after the gate", changed(_delta, gate_after=True)),
        Mistake("the keys are normalised inside: the delta rule uses the keys as they are given",
                changed(_delta, normalise=True))])


def _other_arguments(rng, **kwargs):
    """The case with feature_map=OTHER_MAP and eps=OTHER_EPS: a function that ignores either fails, and says so."""
    return case(f"T=9, d_k=4, d_v=3, batch 2, feature_map=np.exp, eps={OTHER_EPS}" + ", causal" * kwargs.get(
        "causal", True), *(rng.normal(size=(2, 9, d)) for d in (4, 4, 3)), feature_map=OTHER_MAP, eps=OTHER_EPS,
                **kwargs)


def _memory_cases(**kwargs):
    """The memory cases (``call_in_memory``: a hard cap outside the student's reach)."""
    rng = seeded(SEED + 9)
    return [case(f"T={T}, d_k=d_v={d}" + "".join(f", {key}={value}" for key, value in kwargs.items())
                 + " (a memory case)", *(rng.normal(size=(T, d)) for _ in range(3)), **kwargs).within(limit, (
        f"more memory at once than a state of fixed size needs (its inputs of {3 * T * d * 8 / 2 ** 20:.0f} MiB, "
        f"their features and its output, and a (d_k, d_v) state), where one (T, T) array takes "
        f"{T * T * 8 / 2 ** 20:.0f} MiB ({T * T / 2 ** 20:.0f} MiB as booleans) and one state per position "
        f"(T, d_k, d_v) {T * d * d * 8 / 2 ** 20:.0f} MiB.")) for T, d, limit in MEMORY_CASES]


def check_elu_feature_map(function):
    rng = seeded(SEED)
    elu_feature_map.check(function, [
        case("x = [-2, -0.5, 0, 0.5, 2]", np.array([-2.0, -0.5, 0.0, 0.5, 2.0])),
        case("an array of shape (2, 3, 4)", rng.normal(size=(2, 3, 4))),
        case("large entries (±800, where exp overflows)", np.array([[-800.0, -30.0], [30.0, 800.0]])),
        case(f"a random array of shape {(n := int(rng.integers(2, 9)), 5)}", 3 * rng.normal(size=(n, 5))),
        case("a float32 array", rng.normal(size=(3, 4)).astype(np.float32)).tolerating(*FLOAT32)])


def check_linear_attention(function):
    rng = seeded(SEED + 1)

    def qkv(lead, T_q, T_k, d_k, d_v):
        return [rng.normal(size=(*lead, T, d)) for T, d in ((T_q, d_k), (T_k, d_k), (T_k, d_v))]
    T_q, T_k = (int(n) for n in rng.integers(5, 40, size=2))
    cases = [case(description, *qkv(*sizes), causal=causal) for description, sizes, causal in [
        ("T_q=7 queries and T_k=4 keys, causal (the first 3 queries see no key)", ((), 7, 4, 3, 3), True),
        ("T_q=4, T_k=7, d_k=3, d_v=2, batch 2", ((2,), 4, 7, 3, 2), False),
        ("T_q=T_k=9, d_k=4, d_v=3, two leading axes (2, 3), causal", ((2, 3), 9, 9, 4, 3), True),
        ("T_q=5 queries after T_k=11 keys, causal", ((2,), 5, 11, 4, 2), True),
        ("T_q=T_k=150, d_k=4, d_v=2, causal (longer than 64)", ((), 150, 150, 4, 2), True),
        (f"T_q={T_q}, T_k={T_k}, d_k=5, d_v=4, batch 2", ((2,), T_q, T_k, 5, 4), False),
        (f"T_q={T_q}, T_k={T_k}, d_k=5, d_v=4, batch 2, causal", ((2,), T_q, T_k, 5, 4), True)]]
    Q, K, V = (X.astype(np.float32) for X in qkv((2,), 6, 6, 4, 4))
    cases += [case(f"float32 inputs, T=6, {'causal' if causal else 'not causal'}", Q, K, V,
                   causal=causal).tolerating(*FLOAT32) for causal in (False, True)]
    linear_attention.check(function, cases + [_other_arguments(rng, causal=causal) for causal in (False, True)])


def check_linear_attention_memory(function):
    """The resource rule of linear_attention: a state of fixed size (``validate`` runs it too)."""
    linear_attention.check(function, _memory_cases(causal=False) + _memory_cases(causal=True))


def check_linear_attention_step(function):
    rng = seeded(SEED + 2)

    def token(lead, d_k, d_v):
        return rng.normal(size=(*lead, d_k)), rng.normal(size=(*lead, d_k)), rng.normal(size=(*lead, d_v))

    def after(before, lead, d_k, d_v):
        state = reference.init_linear_attention_state(lead, d_k, d_v)
        for _ in range(before):
            _, state = reference.linear_attention_step(*token(lead, d_k, d_v), state)
        return state
    d_k, d_v = int(rng.integers(3, 7)), int(rng.integers(2, 6))
    for description, lead, d_k, d_v, before in [
            ("batch 2, d_k=3, d_v=2, from the zero state", (2,), 3, 2, 0),
            ("leading axes (2, 3), d_k=4, d_v=4, after 5 tokens", (2, 3), 4, 4, 5),
            (f"no leading axis, d_k={d_k}, d_v={d_v}, after 3 tokens", (), d_k, d_v, 3)]:
        state = after(before, lead, d_k, d_v)
        step.judge(function, case(description, *token(lead, d_k, d_v), state))
    # stepping through a sequence, each step from the state the steps before gave: the causal form, row by row
    T, Q, K, V = 8, rng.normal(size=(2, 8, 3)), rng.normal(size=(2, 8, 3)), rng.normal(size=(2, 8, 2))
    state = reference.init_linear_attention_state((2,), 3, 2)
    for t in range(T):
        got = step.judge(function, case(f"step {t} of a sequence of {T} tokens, batch 2", *(X[:, t] for X in (Q, K, V)),
                                        state))
        state = {"S": got["S of the new state"], "z": got["z of the new state"]}
    q, k, v = token((2,), 4, 3)
    step.judge(function, case(f"batch 2, d_k=4, d_v=3, after 1 token, feature_map=np.exp, eps={OTHER_EPS}", q, k, v,
                              after(1, (2,), 4, 3), feature_map=OTHER_MAP, eps=OTHER_EPS))


def check_chunked_linear_attention(function):
    rng = seeded(SEED + 3)
    T, chunk = int(rng.integers(20, 60)), int(rng.integers(3, 9))
    cases = [case(description, rng.normal(size=(*lead, T, d_k)), rng.normal(size=(*lead, T, d_k)),
                  rng.normal(size=(*lead, T, d_v)), chunk_size=chunk_size)
             for description, lead, T, d_k, d_v, chunk_size in [
                 ("T=12, d_k=4, d_v=3, batch 2, chunk_size=4", (2,), 12, 4, 3, 4),
                 ("T=10, two leading axes (2, 3), chunk_size=3 (which does not divide 10)", (2, 3), 10, 3, 3, 3),
                 ("T=7, chunk_size=1", (), 7, 3, 2, 1),
                 ("T=9, chunk_size=64, larger than T", (1,), 9, 4, 4, 64),
                 (f"T={T}, d_k=5, d_v=4, batch 2, chunk_size={chunk}", (2,), T, 5, 4, chunk)]]
    Q, K, V = (rng.normal(size=(2, 10, 4)).astype(np.float32) for _ in range(3))
    chunked.check(function, cases + [case("float32 inputs, T=10, chunk_size=4", Q, K, V, chunk_size=4).tolerating(
        *FLOAT32), _other_arguments(rng, chunk_size=4)])


def check_chunked_linear_attention_memory(function):
    """The resource rule of chunked_linear_attention: a state of fixed size (``validate`` runs it too)."""
    chunked.check(function, _memory_cases(chunk_size=64))


def check_delta_rule(function):
    rng = seeded(SEED + 4)

    def unit(shape):
        return (keys := rng.normal(size=shape)) / np.linalg.norm(keys, axis=-1, keepdims=True)
    T = int(rng.integers(5, 15))
    cases = []
    for description, lead, T, d_k, d_v, beta_kind, gate_kind, unit_keys in [
            ("batch 2, T=6, d_k=4, d_v=3, beta in [0, 1], no gate", (2,), 6, 4, 3, "random", None, True),
            ("batch 2, T=6, d_k=4, d_v=3, beta and gate random", (2,), 6, 4, 3, "random", "random", True),
            ("leading axes (2, 3), T=5, beta = 1 (each pair stored exactly)", (2, 3), 5, 4, 2, "one", None, True),
            ("T=5, beta = 0 (nothing is written)", (), 5, 3, 3, "zero", None, True),
            ("T=6, gate = 1 everywhere (the delta rule without a gate)", (2,), 6, 3, 2, "random", "one", True),
            ("T=6, gate = 1e-9 at step 3 (all before forgotten)", (), 6, 4, 3, "random", "erase", True),
            ("T=6, keys not of unit length", (2,), 6, 4, 3, "random", "random", False),
            (f"batch 2, T={T}, d_k=5, d_v=4, beta and gate random", (2,), T, 5, 4, "random", "random", True)]:
        Q, V = rng.normal(size=(*lead, T, d_k)), rng.normal(size=(*lead, T, d_v))
        K = unit((*lead, T, d_k)) if unit_keys else rng.uniform(0.5, 1.0, (*lead, T, 1)) * unit((*lead, T, d_k))
        beta = {"random": rng.uniform(0, 1, (*lead, T)), "one": 1.0, "zero": 0.0}[beta_kind] * np.ones((*lead, T))
        gate = None if gate_kind is None else np.ones((*lead, T)) * {  # drawn whatever the kind, as beta
            "random": rng.uniform(0.3, 1, (*lead, T)), "one": 1.0, "erase": np.where(np.arange(T) == 3, 1e-9, 1.0)
        }[gate_kind]
        cases.append(case(description, Q, K, V, beta) if gate is None else case(description, Q, K, V, beta, gate))
    Q, K, V = rng.normal(size=(6, 4)), unit((6, 4)), rng.normal(size=(6, 3))
    beta, gate = rng.uniform(0, 1, 6), rng.uniform(0.3, 1, 6)
    cases.append(case("float32 inputs, T=6", *(X.astype(np.float32) for X in (Q, K, V, beta, gate))).tolerating(
        *FLOAT32))
    cases += [case(f"beta[2] = {value}", Q, K, V, np.where(np.arange(6) == 2, value, beta)).rejected(
        "beta must lie in [0, 1]" + ", and NaN does not" * bool(np.isnan(value))) for value in (1.5, -0.25, np.nan)]
    cases += [case(f"gate[4] = {value}", Q, K, V, beta, np.where(np.arange(6) == 4, value, gate)).rejected(
        "gate must lie in (0, 1]") for value in (0.0, 1.25)]
    delta_rule.check(function, cases)
