"""Hidden checks for the Luong attention exercise.

Each ``check_*`` runs the student's function on seeded random inputs and on
the inputs that expose the usual mistakes, compares with the reference in
``solutions/`` and, at the first difference, raises ``CheckFailed`` with one
sentence that names the mistake when it can be recognised from the output:
a transposed ``W_a``, ``[h_s ; h_t]`` instead of ``[h_t ; h_s]``, ``[h_t ; c_t]``
instead of ``[c_t ; h_t]``, a missing tanh, sigmoid or factor ``S``, a softmax
over the wrong axis, an ignored mask, a window off by one, a wrong ``σ``, a
Gaussian applied before the softmax, renormalised weights, 1-based positions,
a local-m (gaussian=False) that still applies the Gaussian.
A mistake is named only when the answer is wrong and equals what that mistake
gives; any correct implementation passes, since only results are compared.
Every task is judged with the reference's earlier graded functions (and those its
reference calls) standing in for the student's (``GRADED``): both attentions with
the reference's score functions, a ``general_score`` written with the student's
``dot_score`` with the reference's; on cases that include the tasks' visible examples.
"""

import numpy as np

from solutions import luong as reference
from solutions.rnn_encoder_decoder import sigmoid
from solutions.scaled_dot_product import masked_softmax

from autograder.engine.checking import check, check_close, check_shape, close
from autograder.engine.harness import call, check_weights, compare, diagnose, seeded

SEED = 150804025  # the paper's arXiv number, 1508.04025
SCORES = ("dot", "general", "concat")
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.dot_score, reference.general_score, reference.concat_score, reference.luong_attention,
          reference.predictive_position, reference.local_attention)
# The tasks' visible examples: two source states, the dot score, W_c sends [c ; h] to [c_0, h_0]
EXAMPLE = (np.array([[np.log(3.0), 0.0]]), np.array([[[0.0, 0.0], [1.0, 0.0]]]),
           {"W_c": np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])})


# -- the three scores --------------------------------------------------------


def check_dot_score(dot_score):
    rng = seeded(SEED)
    cases = [
        ("a batch (B=2, S=5, d=3)", *_states(rng, 2, 5, 3)),
        ("one source position (B=1, S=1, d=4)", *_states(rng, 1, 1, 4)),
        ("B=3, S=6, d=2 with large states", *_states(rng, 3, 6, 2, scale=30.0)),
    ]
    for description, h_t, H_s in cases:
        name = f"dot_score on {description}"
        actual = call(dot_score, h_t, H_s, on=description)
        expected = reference.dot_score(h_t, H_s)
        _check_scores_shape(actual, expected, name)
        if not close(actual, expected):
            d = h_t.shape[1]
            check(not close(actual, expected / np.sqrt(d)),
                  f"{name}: Luong's dot score is h_t · h_s, not scaled by √d "
                  "(the scaling comes later, in the Transformer).")
        check_close(actual, expected, name, "each score should be the dot product h_t · h_s")


def check_general_score(general_score):
    rng = seeded(SEED + 1)
    cases = [
        ("a batch (B=2, S=5, d=3)", *_states(rng, 2, 5, 3), rng.normal(size=(3, 3))),
        ("B=1, S=4, d=4", *_states(rng, 1, 4, 4), rng.normal(size=(4, 4))),
        ("B=3, S=2, d=2", *_states(rng, 3, 2, 2), rng.normal(size=(2, 2))),
    ]
    for description, h_t, H_s, W_a in cases:
        name = f"general_score on {description}"
        actual = call(general_score, h_t, H_s, W_a, on=description, stand_ins=GRADED)
        expected = reference.general_score(h_t, H_s, W_a)
        _check_scores_shape(actual, expected, name)
        if not close(actual, expected):
            check(not close(actual, reference.general_score(h_t, H_s, W_a.T)),
                  f"{name}: W_a is used transposed; the score is (h_t @ W_a) · h_s, "
                  "with h_t on the left of W_a, not (h_s @ W_a) · h_t.")
            check(not close(actual, reference.dot_score(h_t, H_s)),
                  f"{name}: the scores are plain dot products; multiply h_t by W_a first.")
        check_close(actual, expected, name, "each score should be (h_t @ W_a) · h_s")


def check_concat_score(concat_score):
    rng = seeded(SEED + 2)
    cases = [
        ("a batch (B=2, S=5, d=3, d_a=4)", 2, 5, 3, 4, 1.0),
        ("B=1, S=3, d=2, d_a=1", 1, 3, 2, 1, 1.0),
        ("B=3, S=4, d=4, d_a=7", 3, 4, 4, 7, 1.0),
        ("B=2, S=6, d=2, d_a=3 with large states", 2, 6, 2, 3, 20.0),
    ]
    for description, B, S, d, d_a, scale in cases:
        h_t, H_s = _states(rng, B, S, d, scale)
        W_a, v_a = rng.normal(size=(2 * d, d_a)), rng.normal(size=d_a)
        name = f"concat_score on {description}"
        actual = call(concat_score, h_t, H_s, W_a, v_a, on=description, stand_ins=GRADED)
        expected = reference.concat_score(h_t, H_s, W_a, v_a)
        _check_scores_shape(actual, expected, name)
        if not close(actual, expected):
            check(not close(actual, reference.concat_score(h_t, H_s, _swap_halves(W_a), v_a)),
                  f"{name}: concatenate [h_t ; h_s], decoder state first: the first d rows "
                  "of W_a multiply h_t and the last d rows multiply h_s.")
            linear = _concat_pre_activation(h_t, H_s, W_a) @ v_a
            check(not close(actual, linear),
                  f"{name}: apply tanh to [h_t ; h_s] @ W_a before the dot product with v_a.")
        check_close(actual, expected, name, "each score should be v_a · tanh([h_t ; h_s] @ W_a)")


# -- global attention ----------------------------------------------------------


def check_luong_attention(luong_attention):
    """Unmasked global attention with each score, the default score, large scores."""
    rng = seeded(SEED + 3)
    cases = [
        ("score='dot' (B=2, S=5, d=3)", "dot", _problem(rng, 2, 5, 3)),
        ("score='general' (B=3, S=4, d=3)", "general", _problem(rng, 3, 4, 3)),
        ("score='concat' (B=2, S=6, d=2, d_a=5)", "concat", _problem(rng, 2, 6, 2, d_a=5)),
        ("the default score (B=2, S=4, d=3)", None, _problem(rng, 2, 4, 3)),
        ("one source position (B=1, S=1, d=2)", "general", _problem(rng, 1, 1, 2)),
        ("score='dot' with scores of about 1e4", "dot", _problem(rng, 2, 5, 4, scale=60.0)),
    ]
    h_t, H_s, params = EXAMPLE
    cases += [("the task's example", "dot", EXAMPLE),
              ("the task's example with score='general'", "general", (h_t, H_s, {**params, "W_a": 2 * np.eye(2)})),
              ("the task's example twice in a batch", "dot", (np.concatenate([h_t, h_t]), np.concatenate([H_s, H_s]),
                                                              params))]
    for description, score, (h_t, H_s, params) in cases:
        _check_attention_case(luong_attention, description, h_t, H_s, params, score, mask=None)


def check_luong_attention_masks(luong_attention):
    """Padding masks, a fully masked row, masks with large scores and with concat."""
    rng = seeded(SEED + 4)
    B, S, d = 3, 5, 3
    padding = np.arange(S) < np.array([5, 3, 1])[:, None]  # (B, S)
    fully_masked = np.ones((B, S), dtype=bool)
    fully_masked[1] = False
    concat_mask = np.array([[True, False, True, True], [False, True, True, False]])
    cases = [
        ("a padding mask (lengths 5, 3, 1)", "general", _problem(rng, B, S, d), padding),
        ("a batch whose second row is all masked", "dot", _problem(rng, B, S, d), fully_masked),
        ("a mask with score='concat'", "concat", _problem(rng, 2, 4, 2, d_a=3), concat_mask),
        ("a padding mask with scores of about 1e4", "dot", _problem(rng, B, S, 4, scale=60.0),
         padding),
        ("a mask that is all True", "general", _problem(rng, B, S, d), np.ones((B, S), bool)),
        ("the task's example with h_1 masked", "dot", EXAMPLE, np.array([[True, False]])),
        ("the task's example with every position masked", "dot", EXAMPLE, np.array([[False, False]])),
    ]
    for description, score, (h_t, H_s, params), mask in cases:
        _check_attention_case(luong_attention, description, h_t, H_s, params, score, mask)


def _check_attention_case(luong_attention, description, h_t, H_s, params, score, mask):
    kwargs = {} if score is None else {"score": score}
    if mask is not None:
        kwargs["mask"] = mask
    result = call(luong_attention, h_t, H_s, params, on=description, stand_ins=GRADED, **kwargs)
    check(isinstance(result, tuple) and len(result) == 3,
          f"luong_attention should return a triple (h_tilde, context, weights), "
          f"but on {description} it returned a {type(result).__name__}"
          + (f" of length {len(result)}." if isinstance(result, tuple) else "."))
    h_tilde, context, weights = result
    score = score or "general"
    expected_h_tilde, expected_context, expected_weights = reference.luong_attention(
        h_t, H_s, params, score, mask)
    B, S, d = H_s.shape
    if np.shape(h_tilde) == (B, S) and np.shape(weights) == (B, d) and S != d:
        check(False, "return (h_tilde, context, weights) in this order.")
    check_shape(weights, (B, S), f"the weights on {description}")
    check_shape(context, (B, d), f"the context on {description}")
    check_shape(h_tilde, (B, d), f"h_tilde on {description}")

    allowed = np.ones((B, S), dtype=bool) if mask is None else np.broadcast_to(mask, (B, S))

    def weight_mistakes():
        found = [(_global_weights(h_t, H_s, params, other, mask),
                  f"the weights are those of the {other} score: use the {score} score, as the "
                  "`score` argument says" + (" (its default is 'general')" if "score" not in kwargs else ""))
                 for other in _usable_scores(params) if other != score]
        scores = _scores(h_t, H_s, params, score)
        if B > 1:
            found.append((masked_softmax(scores, mask, axis=0), "the softmax is taken over the batch: "
                                                                "take it over the S source positions (the last axis)"))
        if mask is not None:
            found += [(masked_softmax(scores, None) * allowed,
                       "the mask is applied to the weights after the softmax: apply it to the "
                       "scores, before the softmax"),
                      (masked_softmax(scores, None), "the mask is ignored: masked positions must get weight 0"),
                      (masked_softmax(np.where(allowed, scores, -1e9), None),
                       "a row whose positions are all masked gets a uniform distribution: it must "
                       "get all-zero weights")]
        return found

    if not close(weights, expected_weights):
        diagnose(weights, weight_mistakes(), f"on {description}, ")
    check_weights(weights, allowed, f"the weights on {description}", keys="positions", row="a row")

    compare(weights, expected_weights, f"the weights on {description}", weight_mistakes,
            hint=f"they should be the softmax of the {score} scores over the source positions")
    if not close(context, expected_context):
        check(not (close(context, expected_h_tilde) and close(h_tilde, expected_context)),
              "return (h_tilde, context, weights) in this order: h_tilde first.")
    compare(context, expected_context, f"the context on {description}",
            hint="it should be Σ_s weights_s h_s")

    def h_tilde_mistakes():
        pre = np.concatenate([expected_context, h_t], axis=-1) @ params["W_c"]
        swapped = np.concatenate([h_t, expected_context], axis=-1) @ params["W_c"]
        return [(np.tanh(swapped), "concatenate [c_t ; h_t], context first, before multiplying by W_c"),
                (pre, "apply tanh: h_tilde = tanh([c_t ; h_t] @ W_c)"),
                (swapped, "h_tilde = tanh([c_t ; h_t] @ W_c): put the context first and apply tanh")]

    compare(h_tilde, expected_h_tilde, f"h_tilde on {description}", h_tilde_mistakes,
            hint="it should be tanh([c_t ; h_t] @ W_c)")


# -- local attention -------------------------------------------------------------


def check_predictive_position(predictive_position):
    rng = seeded(SEED + 5)
    cases = [
        ("B=3, d=4, d_p=5, S=7", 3, 4, 5, 7, 1.0),
        ("B=1, d=2, d_p=1, S=12", 1, 2, 1, 12, 1.0),
        ("B=4, d=3, d_p=2, S=20", 4, 3, 2, 20, 1.0),
        ("B=4, d=3, d_p=3, S=9 where the sigmoid saturates", 4, 3, 3, 9, 500.0),
    ]
    for description, B, d, d_p, S, v_scale in cases:
        h_t = rng.normal(size=(B, d))
        W_p, v_p = rng.normal(size=(d, d_p)), v_scale * rng.normal(size=d_p)
        name = f"p_t on {description}"
        actual = call(predictive_position, h_t, W_p, v_p, S, on=description, stand_ins=GRADED)
        expected = reference.predictive_position(h_t, W_p, v_p, S)
        check_shape(actual, (B,), name)
        check(np.all(np.isfinite(actual)),
              f"{name} contains NaN or inf: compute the sigmoid without overflow.")
        if not close(actual, expected):
            logit = np.tanh(h_t @ W_p) @ v_p
            for candidate, mistake in (
                    (expected / S, "multiply by S, the source length, so that p_t lies in [0, S]"),
                    (expected * (S - 1) / S, "multiply by S (the source length), not S − 1: "
                                             "the paper's p_t lies in [0, S]"),
                    (S * logit, "apply the sigmoid: p_t = S · σ(tanh(h_t @ W_p) @ v_p)"),
                    (S * sigmoid(h_t @ W_p @ v_p),
                     "apply tanh to h_t @ W_p before the product with v_p"),
                    (expected + 1, "positions are 0-based: p_t = S · σ(…) with nothing added"),
                    (expected - 1, "positions are 0-based: p_t = S · σ(…) with nothing subtracted")):
                check(not close(actual, candidate), f"{name}: {mistake}.")
        check_close(actual, expected, name, "p_t should be S · σ(tanh(h_t @ W_p) @ v_p)")


def check_local_attention(local_attention):
    rng = seeded(SEED + 6)

    def problem(B, S, d, d_a=None, scale=1.0):
        return _problem(rng, B, S, d, d_a=d_a, scale=scale)

    p_dot = problem(2, 9, 3)
    W_p, v_p = rng.normal(size=(3, 4)), rng.normal(size=4)
    cases = [  # description, (h_t, H_s, params), p_t, D, score, gaussian (None: not passed)
        ("local-p with real p_t = [2.3, 6.7, 11.6], D=3, score='general'",
         problem(3, 12, 4), np.array([2.3, 6.7, 11.6]), 3, "general", None),
        ("local-p with p_t from predictive_position, D=2, score='dot'",
         p_dot, reference.predictive_position(p_dot[0], W_p, v_p, 9), 2, "dot", None),
        ("local-p at both ends, p_t = [0, S] = [0, 10], D=2, score='concat'",
         problem(2, 10, 3, d_a=4), np.array([0.0, 10.0]), 2, "concat", None),
        ("p_t = 4 (a number, for every sentence), D=2, score='general'",
         problem(2, 10, 3), 4, 2, "general", None),
        ("p_t = 0 (a number, for every sentence), D=3, score='dot'",
         problem(2, 8, 3), 0, 3, "dot", None),
        ("p_t = [3.0, 5.0], D=1, score='general'",
         problem(2, 9, 4), np.array([3.0, 5.0]), 1, "general", None),
        ("the default score, p_t = [1.5, 4.0], D=2",
         problem(2, 7, 3), np.array([1.5, 4.0]), 2, None, None),
        ("scores of about 1e4, p_t = [5.0, 2.0], D=3, score='dot'",
         problem(2, 9, 4, scale=60.0), np.array([5.0, 2.0]), 3, "dot", None),
        # Local-m as Luong et al. define it (Eq. 7): p_t = t, the window's softmax alone.
        ("local-m (gaussian=False) with p_t = t = 4, D=2, score='general'",
         problem(2, 10, 3), 4, 2, "general", False),
        ("local-m (gaussian=False) with p_t = t = 0, D=3, score='dot'",
         problem(2, 8, 3), 0, 3, "dot", False),
        ("gaussian=False with real p_t = [1.5, 6.2], D=2, score='concat'",
         problem(2, 8, 3, d_a=4), np.array([1.5, 6.2]), 2, "concat", False),
        ("gaussian=True given explicitly, p_t = [2.0, 3.4], D=2, score='dot'",
         problem(2, 7, 3), np.array([2.0, 3.4]), 2, "dot", True),
        # the task's examples: h_s = [s] for s = 0 … 6, h_t = [0]
        ("the task's example, p_t = 3, D = 2", (np.zeros((1, 1)), np.arange(7.0).reshape(1, 7, 1), {}),
         3, 2, "dot", None),
        ("the task's example with gaussian=False", (np.zeros((1, 1)), np.arange(7.0).reshape(1, 7, 1), {}),
         3, 2, "dot", False),
        ("the task's example twice, p_t = [3, 0.5]", (np.zeros((2, 1)), np.arange(7.0).reshape(1, 7, 1)[[0, 0]], {}),
         np.array([3.0, 0.5]), 2, "dot", None),
    ]
    for description, (h_t, H_s, params), p_t, D, score, gaussian in cases:
        _check_local_case(local_attention, description, h_t, H_s, p_t, D, params, score, gaussian)


def _check_local_case(local_attention, description, h_t, H_s, p_t, D, params, score, gaussian):
    kwargs = {} if score is None else {"score": score}
    if gaussian is not None:
        kwargs["gaussian"] = gaussian
    result = call(local_attention, h_t, H_s, p_t, D, params, on=description, stand_ins=GRADED, **kwargs)
    check(isinstance(result, tuple) and len(result) == 2,
          f"local_attention should return a pair (context, weights), "
          f"but on {description} it returned a {type(result).__name__}.")
    context, weights = result
    score = score or "general"
    with_gaussian = gaussian is not False
    expected_context, expected_weights = reference.local_attention(h_t, H_s, p_t, D, params, score,
                                                                   gaussian=with_gaussian)
    B, S, d = H_s.shape
    if np.shape(context) == (B, S) and np.shape(weights) == (B, d) and S != d:
        check(False, "return (context, weights) in this order.")
    check_shape(weights, (B, S), f"the weights on {description}")
    check_shape(context, (B, d), f"the context on {description}")
    check(np.all(np.isfinite(weights)),
          f"the weights on {description} contain NaN or inf: make the softmax numerically "
          "stable (subtract the window's maximum score before exp).")

    if not close(weights, expected_weights):
        args = (h_t, H_s, p_t, D, params, score)
        if not with_gaussian:
            check(not close(weights, _local_weights(*args)),
                  f"on {description}, the weights are multiplied by the Gaussian: with "
                  "gaussian=False (local-m, Luong et al.'s Eq. 7) they are the window's softmax "
                  "alone; the Gaussian is local-p's (Eq. 10, gaussian=True).")
        gaussian_form = "the Gaussian is exp(−(s − p_t)² / (2σ²)) with σ = D/2"
        variants = [
            (dict(strict=True), "the window is |s − p_t| ≤ D, with ≤: a position exactly D "
                                "away from p_t belongs to it"),
            (dict(offset=1), "positions s are 0-based: the first source state is s = 0"),
            (dict(softmax_over="all"), "take the softmax of the scores over the window only, "
                                       "not over all S positions"),
            (dict(softmax_over="all", zero_outside=False),
             "take the softmax of the scores over the window only (0 outside it), "
             "not over all S positions"),
        ]
        if with_gaussian:
            variants += [
                (dict(renormalise=True), "do not renormalise: the weights are the window's "
                                         "softmax times the Gaussian, as in the paper, and sum "
                                         "to less than 1"),
                (dict(gaussian="before"), "apply the Gaussian after the softmax: weights = "
                                          "softmax over the window × exp(−(s − p_t)² / (2σ²))"),
                (dict(gaussian="none"), "with gaussian=True (local-p, Eq. 10) multiply the "
                                        "window's softmax by the Gaussian exp(−(s − p_t)² / "
                                        "(2σ²)), σ = D/2"),
            ] + [(dict(sigma=sigma), gaussian_form)
                 for sigma in (D, D / np.sqrt(2), D / 4, 2 * D, D / (2 * np.sqrt(2)), np.sqrt(D / 2))]
        bump = "after" if with_gaussian else "none"
        for options, mistake in variants:
            check(not close(weights, _local_weights(*args, **{"gaussian": bump, **options})),
                  f"on {description}, {mistake}.")
        for other in _usable_scores(params):
            if other != score:
                check(not close(weights, reference.local_attention(
                          h_t, H_s, p_t, D, params, other, gaussian=with_gaussian)[1]),
                      f"on {description}, the weights are those of the {other} score: "
                      f"use the {score} score, as the `score` argument says"
                      + (" (its default is 'general')." if "score" not in kwargs else "."))
        p = np.broadcast_to(np.asarray(p_t, dtype=float), (B,))
        outside = np.abs(np.arange(S)[None, :] - p[:, None]) > D
        check(np.allclose(weights[outside], 0.0),
              f"on {description}, positions outside the window |s − p_t| ≤ D must get weight 0.")
        if with_gaussian:
            check(not np.allclose(weights.sum(axis=-1), 1.0),
                  f"on {description}, the weights sum to 1: they are the window's softmax times "
                  "the Gaussian, not renormalised.")
    check_close(weights, expected_weights, f"the weights on {description}",
                f"they should be the softmax of the {score} scores over the window |s − p_t| ≤ D"
                + (", times exp(−(s − p_t)² / (2σ²)) with σ = D/2" if with_gaussian
                   else ", without the Gaussian (gaussian=False)"))
    check_close(context, expected_context, f"the context on {description}",
                "the weights are right but the context is not Σ_s weights_s h_s")


# -- helpers -------------------------------------------------------------------------


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


def _usable_scores(params):
    """The scores that `params` can feed: general needs W_a (d, d), concat W_a (2d, ·) and v_a."""
    if "v_a" in params:
        return ("dot", "concat")
    return ("dot", "general")


def _scores(h_t, H_s, params, score):
    if score == "dot":
        return reference.dot_score(h_t, H_s)
    if score == "general":
        return reference.general_score(h_t, H_s, params["W_a"])
    return reference.concat_score(h_t, H_s, params["W_a"], params["v_a"])


def _global_weights(h_t, H_s, params, score, mask):
    return masked_softmax(_scores(h_t, H_s, params, score), mask, axis=-1)


def _local_weights(h_t, H_s, p_t, D, params, score, *, sigma=None, strict=False, offset=0,
                   softmax_over="window", zero_outside=True, gaussian="after", renormalise=False):
    """Local weights as the reference computes them, or as a known mistake does."""
    B, S, _ = H_s.shape
    p = np.broadcast_to(np.asarray(p_t, dtype=float), (B,))
    distance = np.arange(S)[None, :] + offset - p[:, None]
    window = np.abs(distance) < D if strict else np.abs(distance) <= D
    sigma = D / 2 if sigma is None else sigma
    bump = np.exp(-distance ** 2 / (2 * sigma ** 2))
    scores = _scores(h_t, H_s, params, score)
    if gaussian == "before":
        scores = scores * bump
    align = masked_softmax(scores, window if softmax_over == "window" else None, axis=-1)
    weights = align * bump if gaussian == "after" else align
    if zero_outside:
        weights = np.where(window, weights, 0.0)
    if renormalise:
        totals = weights.sum(axis=-1, keepdims=True)
        weights = np.divide(weights, totals, out=np.zeros_like(weights), where=totals > 0)
    return weights


def _swap_halves(W):
    half = W.shape[0] // 2
    return np.concatenate([W[half:], W[:half]], axis=0)


def _concat_pre_activation(h_t, H_s, W_a):
    d = h_t.shape[1]
    return (h_t @ W_a[:d])[:, None, :] + H_s @ W_a[d:]


def _check_scores_shape(actual, expected, name):
    B, S = expected.shape
    if B != S and np.shape(actual) == (S, B):
        check(False, f"{name} has shape (S, B) = {(S, B)}: return one row of S scores per "
                     f"batch element, shape (B, S) = {(B, S)}.")
    check_shape(actual, expected.shape, name)
    check(np.all(np.isfinite(actual)), f"{name} contains NaN or inf.")


