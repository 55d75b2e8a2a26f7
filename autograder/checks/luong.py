"""Hidden checks for the Luong attention exercise, as case tables (`engine.cases`): per task the
mistakes it knows (a transposed W_a, [h_s ; h_t] instead of [h_t ; h_s], [h_t ; c_t] instead of
[c_t ; h_t], a decoder state not repeated over the source positions, a missing tanh, sigmoid or
factor S, a softmax over the wrong axis, an ignored mask, a maximum taken over masked scores too, a
window off by one, a wrong σ, a Gaussian before the softmax, renormalised weights, 1-based positions,
a local-m that still applies the Gaussian) and the facts of every right value; per check its cases.
Both attentions are judged with the reference's score functions standing in for the student's.
"""

import numpy as np

from solutions import luong as reference
from solutions.rnn_encoder_decoder import sigmoid
from solutions.scaled_dot_product import masked_softmax

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case, given, mask_mistakes, weight_facts
from autograder.engine.harness import seeded
from .scaled_dot_product import max_over_masked

SEED = 150804025  # the paper's arXiv number, 1508.04025
# The tasks' visible examples: two source states, the dot score, W_c sends [c ; h] to [c_0, h_0]
EXAMPLE = (np.array([[np.log(3.0), 0.0]]), np.array([[[0.0, 0.0], [1.0, 0.0]]]),
           {"W_c": np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])})


def _states(rng, B, S, d, scale=1.0):
    return scale * rng.normal(size=(B, d)), scale * rng.normal(size=(B, S, d))


def _problem(rng, B, S, d, d_a=None, scale=1.0):
    """h_t, H_s and the params of every score (W_a fits `concat` when d_a is given)."""
    h_t, H_s = _states(rng, B, S, d, scale)
    params = {"W_c": rng.normal(size=(2 * d, d))}
    if d_a is None:
        params["W_a"] = rng.normal(size=(d, d))
    else:
        params["W_a"], params["v_a"] = rng.normal(size=(2 * d, d_a)), rng.normal(size=d_a)
    return h_t, H_s, params


def _transposed(score):
    return Mistake("the scores have shape (S, B): return one row of S scores per batch element, shape (B, S)",
                   lambda **arguments: score(**arguments).T)


def _other_scores(attention):
    """The weights `attention(score=other, **arguments)` gives with each other score than the case's."""
    return [Mistake(f"the weights are those of the {other} score: use the score as the `score` argument says "
                    "(its default is 'general')",
                    lambda other=other, **arguments: attention(**arguments | {"score": other}))
            for other in reference.SCORES]


def _h_tilde(first, activation=np.tanh):
    """h_tilde with [h_t ; c_t] when `first` is "h_t" ([c_t ; h_t] otherwise), and `activation`."""
    def h_tilde(h_t, H_s, params, score, mask):
        context = reference.luong_attention(h_t, H_s, params, score, mask)[1]
        return activation(np.concatenate([h_t, context] if first == "h_t" else [context, h_t], -1) @ params["W_c"])
    return h_tilde


def _local_weights(h_t, H_s, p_t, D, params, score, *, sigma=lambda D: D / 2, strict=False, offset=0,
                   softmax_over="window", zero_outside=True, gaussian="after", renormalise=False):
    """Local weights as the reference computes them, or as a known mistake does (σ = `sigma(D)`)."""
    B, S, _ = H_s.shape
    distance = np.arange(S)[None, :] + offset - np.broadcast_to(np.asarray(p_t, dtype=float), (B,))[:, None]
    window = np.abs(distance) < D if strict else np.abs(distance) <= D
    bump = np.exp(-distance ** 2 / (2 * sigma(D) ** 2))
    scores = reference._score(h_t, H_s, params, score) * (bump if gaussian == "before" else 1)
    weights = masked_softmax(scores, window if softmax_over == "window" else None, axis=-1)
    weights = np.where(window | (not zero_outside), weights * (bump if gaussian == "after" else 1), 0.0)
    if renormalise:
        totals = weights.sum(axis=-1, keepdims=True)
        weights = np.divide(weights, totals, out=np.zeros_like(weights), where=totals > 0)
    return weights


def _local(message, with_gaussian=None, **options):
    """The mistake of local attention with `options`, on the cases whose `gaussian` is `with_gaussian`
    (None: every case), its Gaussian applied after the softmax where the case's `gaussian` says."""
    return Mistake(message, lambda gaussian, **arguments: _local_weights(
        **arguments, **{"gaussian": "after" if gaussian else "none", **options}),
        when=None if with_gaussian is None else lambda gaussian, **_: bool(gaussian) == with_gaussian)


def _outside_window(actual, h_t, H_s, p_t, D, **_):
    p = np.broadcast_to(np.asarray(p_t, dtype=float), (H_s.shape[0],))
    return np.abs(np.arange(H_s.shape[1])[None, :] - p[:, None]) > D


exercise = Exercise(reference)
dot_score = exercise.task("dot_score", hint="each score should be the dot product h_t · h_s", mistakes=[
    Mistake("Luong's dot score is h_t · h_s, not scaled by √d (the scaling comes later, in the Transformer)",
            lambda h_t, H_s: reference.dot_score(h_t, H_s) / np.sqrt(h_t.shape[1])),
    _transposed(reference.dot_score)])
general_score = exercise.task("general_score", hint="each score should be (h_t @ W_a) · h_s", mistakes=[
    Mistake("W_a is used transposed; the score is (h_t @ W_a) · h_s, with h_t on the left of W_a, not "
            "(h_s @ W_a) · h_t", lambda h_t, H_s, W_a: reference.general_score(h_t, H_s, W_a.T)),
    Mistake("the scores are plain dot products; multiply h_t by W_a first",
            lambda h_t, H_s, W_a: reference.dot_score(h_t, H_s)),
    _transposed(reference.general_score)])
concat_score = exercise.task("concat_score", hint="each score should be v_a · tanh([h_t ; h_s] @ W_a)", mistakes=[
    Mistake("concatenate [h_t ; h_s], decoder state first: the first d rows of W_a multiply h_t and the last d rows "
            "multiply h_s", lambda h_t, H_s, W_a, v_a: reference.concat_score(
                h_t, H_s, np.concatenate(np.split(W_a, 2)[::-1]), v_a)),
    Mistake("apply tanh to [h_t ; h_s] @ W_a before the dot product with v_a", lambda h_t, H_s, W_a, v_a: (
        (h_t @ W_a[:h_t.shape[1]])[:, None, :] + H_s @ W_a[h_t.shape[1]:]) @ v_a),
    Mistake("the decoder state h_t is not repeated over the source positions: h_t[b] goes with every position of "
            "sentence b; insert the source axis, h_t[:, None, :], before combining it with H_s",
            lambda h_t, H_s, W_a, v_a: np.tanh(h_t @ W_a[:h_t.shape[1]] + H_s @ W_a[h_t.shape[1]:]) @ v_a,
            when=lambda h_t, H_s, **_: h_t.shape[0] == H_s.shape[1]),
    _transposed(reference.concat_score)])
luong_attention = exercise.task("luong_attention", order=("weights", "context", "h_tilde"), outputs=[
    Output("h_tilde", hint="it should be tanh([c_t ; h_t] @ W_c)", mistakes=[
        Mistake("concatenate [c_t ; h_t], context first, before multiplying by W_c", _h_tilde("h_t")),
        Mistake("apply tanh: h_tilde = tanh([c_t ; h_t] @ W_c)", _h_tilde("context", activation=lambda a: a)),
        Mistake("h_tilde = tanh([c_t ; h_t] @ W_c): put the context first and apply tanh",
                _h_tilde("h_t", activation=lambda a: a))]),
    Output("context", hint="it should be Σ_s weights_s h_s", mistakes=[
        Mistake("return (h_tilde, context, weights) in this order: h_tilde first",
                lambda **arguments: reference.luong_attention(**arguments)[0])]),
    Output("weights", hint="they should be the softmax over the source positions of the scores that `score` names",
           mistakes=[*_other_scores(lambda **arguments: reference.luong_attention(**arguments)[2]),
                     Mistake("return (h_tilde, context, weights) in this order",
                             lambda **arguments: reference.luong_attention(**arguments)[0]),
                     Mistake("the softmax is taken over the batch: take it over the S source positions (the last axis)",
                             lambda h_t, H_s, params, score, mask: masked_softmax(
                                 reference._score(h_t, H_s, params, score), mask, axis=0),
                             when=lambda h_t, **_: len(h_t) > 1),
                     *mask_mistakes(masked_softmax, lambda h_t, H_s, params, score, mask: (
                         reference._score(h_t, H_s, params, score), mask, -1), keys="positions", row="a row"),
                     max_over_masked(lambda h_t, H_s, params, score, mask: (
                         reference._score(h_t, H_s, params, score), mask, -1), keys="positions")],
           facts=weight_facts(keys="positions", row="a row"))])
predictive_position = exercise.task(
    "predictive_position", hint="p_t should be S · σ(tanh(h_t @ W_p) @ v_p)", mistakes=[
        Mistake("multiply by S, the source length, so that p_t lies in [0, S]",
                lambda h_t, W_p, v_p, S: reference.predictive_position(h_t, W_p, v_p, S) / S),
        Mistake("multiply by S (the source length), not S − 1: the paper's p_t lies in [0, S]",
                lambda h_t, W_p, v_p, S: reference.predictive_position(h_t, W_p, v_p, S - 1)),
        Mistake("apply the sigmoid: p_t = S · σ(tanh(h_t @ W_p) @ v_p)",
                lambda h_t, W_p, v_p, S: S * (np.tanh(h_t @ W_p) @ v_p)),
        Mistake("apply tanh to h_t @ W_p before the product with v_p",
                lambda h_t, W_p, v_p, S: S * sigmoid(h_t @ W_p @ v_p)),
        Mistake("positions are 0-based: p_t = S · σ(…) with nothing added",
                lambda h_t, W_p, v_p, S: reference.predictive_position(h_t, W_p, v_p, S) + 1),
        Mistake("positions are 0-based: p_t = S · σ(…) with nothing subtracted",
                lambda h_t, W_p, v_p, S: reference.predictive_position(h_t, W_p, v_p, S) - 1)],
    facts=[Fact("{name} contains NaN or inf: compute the sigmoid without overflow.",
                lambda actual, **_: np.all(np.isfinite(actual)))])
local_attention = exercise.task("local_attention", order=("weights", "context"), outputs=[
    Output("context", hint="the weights are right but the context is not Σ_s weights_s h_s"),
    Output("weights", hint="they should be the softmax of the scores over the window |s − p_t| ≤ D, times "
                           "exp(−(s − p_t)² / (2σ²)) with σ = D/2 where gaussian is True", mistakes=[
        _local("the weights are multiplied by the Gaussian: with gaussian=False (local-m, Luong et al.'s Eq. 7) they "
               "are the window's softmax alone; the Gaussian is local-p's (Eq. 10, gaussian=True)", False,
               gaussian="after"),
        _local("the window is |s − p_t| ≤ D, with ≤: a position exactly D away from p_t belongs to it", strict=True),
        _local("positions s are 0-based: the first source state is s = 0", offset=1),
        _local("take the softmax of the scores over the window only, not over all S positions", softmax_over="all"),
        _local("take the softmax of the scores over the window only (0 outside it), not over all S positions",
               softmax_over="all", zero_outside=False),
        _local("do not renormalise: the weights are the window's softmax times the Gaussian, as in the paper, and sum "
               "to less than 1", True, renormalise=True),
        _local("apply the Gaussian after the softmax: weights = softmax over the window × exp(−(s − p_t)² / (2σ²))",
               True, gaussian="before"),
        _local("with gaussian=True (local-p, Eq. 10) multiply the window's softmax by the Gaussian exp(−(s − p_t)² / "
               "(2σ²)), σ = D/2", True, gaussian="none"),
        *[_local("the Gaussian is exp(−(s − p_t)² / (2σ²)) with σ = D/2", True, sigma=sigma)
          for sigma in (lambda D: D, lambda D: D / np.sqrt(2), lambda D: D / 4, lambda D: 2 * D,
                        lambda D: D / (2 * np.sqrt(2)), lambda D: np.sqrt(D / 2))],
        *_other_scores(lambda **arguments: reference.local_attention(**arguments)[1])],
        facts=[Fact("{name} contain NaN or inf: make the softmax numerically stable (subtract the window's maximum "
                    "score before exp).", lambda actual, **_: np.all(np.isfinite(actual))),
               Fact("{name}: positions outside the window |s − p_t| ≤ D must get weight 0.",
                    lambda actual, **arguments: np.allclose(actual[_outside_window(actual, **arguments)], 0.0)),
               Fact("{name} sum to 1: they are the window's softmax times the Gaussian, not renormalised.",
                    lambda actual, gaussian, **_: not (gaussian and np.allclose(actual.sum(axis=-1), 1.0)))])])


def check_dot_score(function):
    rng = seeded(SEED)
    dot_score.check(function, [
        case("a batch (B=2, S=5, d=3)", *_states(rng, 2, 5, 3)),
        case("one source position (B=1, S=1, d=4)", *_states(rng, 1, 1, 4)),
        case("B=3, S=6, d=2 with large states", *_states(rng, 3, 6, 2, scale=30.0))])


def check_general_score(function):
    rng = seeded(SEED + 1)
    general_score.check(function, [
        case("a batch (B=2, S=5, d=3)", *_states(rng, 2, 5, 3), rng.normal(size=(3, 3))),
        case("B=1, S=4, d=4", *_states(rng, 1, 4, 4), rng.normal(size=(4, 4))),
        case("B=3, S=2, d=2", *_states(rng, 3, 2, 2), rng.normal(size=(2, 2)))])


def check_concat_score(function):
    rng = seeded(SEED + 2)
    cases = []
    for description, B, S, d, d_a, scale in [
            ("a batch with B = S = 3 (d=2, d_a=3)", 3, 3, 2, 3, 1.0),
            ("a batch (B=2, S=5, d=3, d_a=4)", 2, 5, 3, 4, 1.0), ("B=1, S=3, d=2, d_a=1", 1, 3, 2, 1, 1.0),
            ("B=3, S=4, d=4, d_a=7", 3, 4, 4, 7, 1.0), ("B=2, S=6, d=2, d_a=3 with large states", 2, 6, 2, 3, 20.0)]:
        h_t, H_s = _states(rng, B, S, d, scale)
        cases.append(case(description, h_t, H_s, rng.normal(size=(2 * d, d_a)), rng.normal(size=d_a)))
    task = (np.array([[1.0], [-1.0]]), np.array([[[1.0], [0.0]], [[1.0], [0.0]]]), np.array([[1.0], [-1.0]]),
            np.array([1.0]))
    concat_score.check(function, cases + [case("the task's two sentences (B = S = 2, d = d_a = 1)", *task)])


def _attention_case(description, score, problem, mask=None):
    return case(description, *problem, **given(score=score, mask=mask))


def check_luong_attention(function):
    """Unmasked global attention with each score, the default score, large scores, the task's examples."""
    rng = seeded(SEED + 3)
    h_t, H_s, params = EXAMPLE
    luong_attention.check(function, [
        _attention_case("score='dot' (B=2, S=5, d=3)", "dot", _problem(rng, 2, 5, 3)),
        _attention_case("score='general' (B=3, S=4, d=3)", "general", _problem(rng, 3, 4, 3)),
        _attention_case("score='concat' (B=2, S=6, d=2, d_a=5)", "concat", _problem(rng, 2, 6, 2, d_a=5)),
        _attention_case("the default score (B=2, S=4, d=3)", None, _problem(rng, 2, 4, 3)),
        _attention_case("one source position (B=1, S=1, d=2)", "general", _problem(rng, 1, 1, 2)),
        _attention_case("score='dot' with scores of about 1e4", "dot", _problem(rng, 2, 5, 4, scale=60.0)),
        _attention_case("the task's example", "dot", EXAMPLE),
        _attention_case("the task's example with score='general'", "general",
                        (h_t, H_s, {**params, "W_a": 2 * np.eye(2)})),
        _attention_case("the task's example twice in a batch", "dot",
                        (np.concatenate([h_t, h_t]), np.concatenate([H_s, H_s]), params)),
        _attention_case("the task's batch of two different sentences", "dot",
                        (np.array([[np.log(3.0), 0.0], [0.0, 0.0]]), np.concatenate([H_s, H_s]), params))])


def check_luong_attention_masks(function):
    """Padding masks, a fully masked row, masks with large scores and with concat."""
    rng = seeded(SEED + 4)
    B, S, d = 3, 5, 3
    padding = np.arange(S) < np.array([5, 3, 1])[:, None]  # (B, S)
    fully_masked = np.ones((B, S), dtype=bool)
    fully_masked[1] = False
    large = _problem(rng, B, S, 4)
    large[0][0] = [1.0, 0.0, 0.0, 0.0]
    large[1][0, 4] = [1e4, 0.0, 0.0, 0.0]                    # the score 1e4, masked: sentence 0 has length 4
    luong_attention.check(function, [
        _attention_case("a padding mask (lengths 5, 3, 1)", "general", _problem(rng, B, S, d), padding),
        _attention_case("a batch whose second row is all masked", "dot", _problem(rng, B, S, d), fully_masked),
        _attention_case("a masked position whose score is 1e4 (lengths 4, 3, 1)", "dot", large,
                        np.arange(S) < np.array([4, 3, 1])[:, None]),
        _attention_case("a mask with score='concat'", "concat", _problem(rng, 2, 4, 2, d_a=3),
                        np.array([[True, False, True, True], [False, True, True, False]])),
        _attention_case("a padding mask with scores of about 1e4", "dot", _problem(rng, B, S, 4, scale=60.0), padding),
        _attention_case("a mask that is all True", "general", _problem(rng, B, S, d), np.ones((B, S), bool)),
        _attention_case("the task's example with h_1 masked", "dot", EXAMPLE, np.array([[True, False]])),
        _attention_case("the task's example with every position masked", "dot", EXAMPLE, np.array([[False, False]]))])


def check_predictive_position(function):
    rng = seeded(SEED + 5)
    cases = []
    for description, B, d, d_p, S, v_scale in [
            ("B=3, d=4, d_p=5, S=7", 3, 4, 5, 7, 1.0), ("B=1, d=2, d_p=1, S=12", 1, 2, 1, 12, 1.0),
            ("B=4, d=3, d_p=2, S=20", 4, 3, 2, 20, 1.0),
            ("B=4, d=3, d_p=3, S=9 where the sigmoid saturates", 4, 3, 3, 9, 500.0)]:
        h_t = rng.normal(size=(B, d))
        cases.append(case(description, h_t, rng.normal(size=(d, d_p)), v_scale * rng.normal(size=d_p), S))
    predictive_position.check(function, cases)


def check_local_attention(function):
    rng = seeded(SEED + 6)

    def local(description, problem, p_t, D, score, gaussian=None):
        h_t, H_s, params = problem
        return case(description, h_t, H_s, p_t, D, params, **given(score=score, gaussian=gaussian))

    p_dot = _problem(rng, 2, 9, 3)
    W_p, v_p = rng.normal(size=(3, 4)), rng.normal(size=4)
    example = (np.zeros((1, 1)), np.arange(7.0).reshape(1, 7, 1), {})  # the task's: h_s = [s] for s = 0 … 6, h_t = [0]
    local_attention.check(function, [local(*arguments) for arguments in [
        ("local-p with real p_t = [2.3, 6.7, 11.6], D=3, score='general'", _problem(rng, 3, 12, 4),
         np.array([2.3, 6.7, 11.6]), 3, "general"),
        ("local-p with p_t from predictive_position, D=2, score='dot'", p_dot,
         reference.predictive_position(p_dot[0], W_p, v_p, 9), 2, "dot"),
        ("local-p at both ends, p_t = [0, S] = [0, 10], D=2, score='concat'", _problem(rng, 2, 10, 3, d_a=4),
         np.array([0.0, 10.0]), 2, "concat"),
        ("p_t = 4 (a number, for every sentence), D=2, score='general'", _problem(rng, 2, 10, 3), 4, 2, "general"),
        ("p_t = 0 (a number, for every sentence), D=3, score='dot'", _problem(rng, 2, 8, 3), 0, 3, "dot"),
        ("p_t = [3.0, 5.0], D=1, score='general'", _problem(rng, 2, 9, 4), np.array([3.0, 5.0]), 1, "general"),
        ("the default score, p_t = [1.5, 4.0], D=2", _problem(rng, 2, 7, 3), np.array([1.5, 4.0]), 2, None),
        ("scores of about 1e4, p_t = [5.0, 2.0], D=3, score='dot'", _problem(rng, 2, 9, 4, scale=60.0),
         np.array([5.0, 2.0]), 3, "dot"),
        # Local-m as Luong et al. define it (Eq. 7): p_t = t, the window's softmax alone.
        ("local-m (gaussian=False) with p_t = t = 4, D=2, score='general'", _problem(rng, 2, 10, 3), 4, 2, "general",
         False),
        ("local-m (gaussian=False) with p_t = t = 0, D=3, score='dot'", _problem(rng, 2, 8, 3), 0, 3, "dot", False),
        ("gaussian=False with real p_t = [1.5, 6.2], D=2, score='concat'", _problem(rng, 2, 8, 3, d_a=4),
         np.array([1.5, 6.2]), 2, "concat", False),
        ("gaussian=True given explicitly, p_t = [2.0, 3.4], D=2, score='dot'", _problem(rng, 2, 7, 3),
         np.array([2.0, 3.4]), 2, "dot", True),
        ("the task's example, p_t = 3, D = 2", example, 3, 2, "dot"),
        ("the task's example with gaussian=False", example, 3, 2, "dot", False),
        ("the task's example twice, p_t = [3, 0.5]", (np.zeros((2, 1)), example[1][[0, 0]], {}),
         np.array([3.0, 0.5]), 2, "dot")]])
