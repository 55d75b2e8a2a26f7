"""Hidden checks for the scaled dot-product attention exercise.

Each ``check_*`` runs the student's function on seeded random inputs and on
the inputs that expose the usual mistakes, compares with the reference in
``solutions/`` and, at the first difference, raises ``CheckFailed`` with one
sentence that names the mistake when it can be recognised from the output
(wrong axis, missing or wrong scaling, mask ignored or applied after the
softmax, NaN on a fully masked query). Any correct implementation passes:
only results are compared, never how they were computed. Attention is judged
with the reference's softmax standing in for the student's (``GRADED``): its
points depend on its own code only.
"""

import numpy as np

from solutions import scaled_dot_product as reference
from solutions.scaled_dot_product import masked_softmax

from autograder.engine.checking import check, check_close, check_shape, close
from autograder.engine.harness import call, check_weights, compare, diagnose, quietly, seeded

SEED = 20170612  # the day "Attention is all you need" appeared on arXiv
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.softmax, reference.scaled_dot_product_attention, reference.causal_mask, reference.padding_mask)
# The task's example (visible check): one query, two keys, √d_k = 2
EXAMPLE = (np.array([[np.log(3.0), np.log(3.0), 0.0, 0.0]]), np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]),
           np.array([[4.0, 0.0, 1.0], [0.0, 4.0, 1.0]]))


def check_softmax(softmax):
    rng = seeded(SEED)
    cases = [
        ("a vector of 6 scores", rng.normal(size=6), -1),
        ("a (3, 5) array along the last axis", rng.normal(size=(3, 5)), -1),
        ("a (3, 5) array along axis 0", rng.normal(size=(3, 5)), 0),
        ("a (2, 3, 4) array along axis 1", rng.normal(size=(2, 3, 4)), 1),
        ("scores around 1e4", 1e4 + 5 * rng.normal(size=(2, 5)), -1),
        ("scores around -1e4", -1e4 + 5 * rng.normal(size=(2, 5)), -1),
        ("scores spread from -1e4 to 1e4", rng.uniform(-1e4, 1e4, size=(3, 4)), -1),
    ]
    for description, x, axis in cases:
        name = f"softmax of {description}"
        actual = call(softmax, x, axis=axis, on=description)
        check_shape(actual, x.shape, name)
        if not np.all(np.isfinite(actual)):
            check(not _same_non_finite(actual, quietly(lambda: np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True))),
                  f"{name} contains inf or NaN, as exp(x) / Σ exp(x) gives when exp overflows: "
                  "subtract the maximum along the axis before exp.")
            check(False, f"{name} contains inf or NaN; the softmax of finite scores is finite.")
        check(np.allclose(actual.sum(axis=axis), 1.0),
              f"{name} does not sum to 1 along axis {axis}: normalise along the given axis.")
        check_close(actual, reference.softmax(x, axis=axis), name,
                    "the values differ from exp(x) / sum(exp(x))")


def check_attention(attention):
    """Unmasked attention: shapes, leading axes, d_v != d_k, large scores."""
    rng = seeded(SEED + 1)

    def qkv(lead, T_q, T_k, d_k, d_v, scale=1.0):
        return (scale * rng.normal(size=(*lead, T_q, d_k)),
                scale * rng.normal(size=(*lead, T_k, d_k)),
                rng.normal(size=(*lead, T_k, d_v)))

    cases = [
        ("the task's example", EXAMPLE),
        ("the task's example twice in a batch", tuple(np.stack([a, a]) for a in EXAMPLE)),
        ("one sequence (T_q=3, T_k=4, d_k=5, d_v=2)", qkv((), 3, 4, 5, 2)),
        ("a batch (B=2, T_q=T_k=4, d_k=d_v=8)", qkv((2,), 4, 4, 8, 8)),
        ("two leading axes (2, 3) with T_q=2, T_k=5, d_k=4, d_v=3", qkv((2, 3), 2, 5, 4, 3)),
        ("scores of size about 1e4", qkv((2,), 3, 6, 4, 2, scale=70.0)),
    ]
    for description, (Q, K, V) in cases:
        _check_attention_case(attention, description, Q, K, V, mask=None)


def check_attention_masks(attention):
    """Masked attention: padding, causal, both, a fully masked query, broadcasting."""
    rng = seeded(SEED + 2)
    B, T, d_k, d_v = 3, 5, 4, 6
    Q, K, V = rng.normal(size=(B, T, d_k)), rng.normal(size=(B, T, d_k)), rng.normal(size=(B, T, d_v))
    padding = reference.padding_mask(np.array([5, 3, 1]), T)[:, None, :]   # (B, 1, T_k)
    causal = reference.causal_mask(T)                                      # (T, T)
    fully_masked = np.ones((B, T, T), dtype=bool)
    fully_masked[1, 2, :] = False                                          # query 2 of sequence 1
    heads_Q, heads_K, heads_V = (rng.normal(size=(2, 3, T, d)) for d in (d_k, d_k, d_v))
    cases = [
        ("the task's example with its second key masked", EXAMPLE, np.array([[True, False]])),
        ("the task's example with both keys masked", EXAMPLE, np.array([[False, False]])),
        ("a padding mask of shape (B, 1, T_k)", (Q, K, V), padding),
        ("a causal mask of shape (T, T)", (Q, K, V), causal),
        ("a causal and padding mask combined", (Q, K, V), causal & padding),
        ("a query whose keys are all masked", (Q, K, V), fully_masked),
        ("a mask of shape (1, 1, T_q, T_k) on two leading axes",
         (heads_Q, heads_K, heads_V), causal[None, None]),
        ("scores of size about 1e4 with a causal mask", (70 * Q, 70 * K, V), causal),
    ]
    for description, (Q_, K_, V_), mask in cases:
        _check_attention_case(attention, description, Q_, K_, V_, mask=mask)


def check_causal_mask(causal_mask):
    for T in (1, 2, 5):
        name = f"causal_mask({T})"
        expected = reference.causal_mask(T)
        actual = call(causal_mask, T, on=f"T={T}", stand_ins=GRADED)
        check_shape(actual, (T, T), name)
        if T > 1 and np.array_equal(actual, expected.T):
            check(False, f"{name} is transposed: query i (row) may attend to keys 0…i, "
                         "so True goes on and below the diagonal.")
        if np.array_equal(actual, np.tril(expected, -1)):
            check(False, f"{name} must be True on the diagonal: a position may attend to itself.")
        check_close(actual, expected, name, "it should be True on and below the diagonal")


def check_padding_mask(padding_mask):
    for lengths, T in (([2, 3], 3), ([5, 1, 0, 3], 5), ([4], 6)):
        lengths = np.array(lengths)
        name = f"padding_mask({lengths.tolist()}, {T})"
        expected = reference.padding_mask(lengths, T)
        actual = call(padding_mask, lengths, T, on=f"lengths={lengths.tolist()}, T={T}", stand_ins=GRADED)
        check_shape(actual, (len(lengths), T), name)
        if np.array_equal(actual, ~expected):
            check(False, f"{name} is inverted: True marks the real tokens, positions < length.")
        check_close(actual, expected, name,
                    "position p of a sequence is real (True) exactly when p < its length")


def _check_attention_case(attention, description, Q, K, V, mask):
    expected_output, expected_weights = reference.scaled_dot_product_attention(Q, K, V, mask)
    if mask is None:
        result = call(attention, Q, K, V, on=description, stand_ins=GRADED)
    else:
        result = call(attention, Q, K, V, mask=mask, on=description, stand_ins=GRADED)
    check(isinstance(result, tuple) and len(result) == 2,
          f"scaled_dot_product_attention should return a pair (output, weights), "
          f"but on {description} it returned a {type(result).__name__}.")
    output, weights = result
    if (np.shape(output), np.shape(weights)) == (expected_weights.shape, expected_output.shape) \
            and expected_weights.shape != expected_output.shape:
        check(False, "return (output, weights) in this order, not (weights, output).")
    check_shape(weights, expected_weights.shape, f"the weights on {description}")
    check_shape(output, expected_output.shape, f"the output on {description}")
    allowed = np.ones(expected_weights.shape, dtype=bool) if mask is None \
        else np.broadcast_to(mask, expected_weights.shape)

    def mistakes():
        d_k, d_v = Q.shape[-1], V.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
        found = [(_weights(Q * factor, K, V, mask), mistake) for factor, mistake in (
            (np.sqrt(d_k), "the scores are not divided by √d_k"),
            (1 / np.sqrt(d_k), "divide the scores by √d_k, not by d_k"),
            (np.sqrt(d_k / d_v), "divide by √d_k (the size of queries and keys), not by √d_v"))
            if factor != 1]
        found.append((masked_softmax(scores, mask, axis=-2),
                      "the softmax is taken over the queries: take it over the keys (the last axis)"))
        if mask is not None:
            found += [(reference.softmax(scores) * allowed,
                       "the mask is applied to the weights after the softmax: apply it to the "
                       "scores, before the softmax"),
                      (reference.softmax(scores), "the mask is ignored: masked keys must get weight 0"),
                      (masked_softmax(np.where(allowed, scores, -1e9), None),
                       "a query whose keys are all masked gets a uniform distribution: it must "
                       "get all-zero weights")]
        return found

    if not close(weights, expected_weights):
        diagnose(weights, mistakes(), f"on {description}, ")
    check_weights(weights, allowed, f"the weights on {description}")
    compare(weights, expected_weights, f"the weights on {description}", mistakes,
            hint="each row should be the softmax of its scores Q Kᵀ / √d_k")
    compare(output, weights @ V, f"the output on {description}", hint="it should be weights @ V")


def _same_non_finite(actual, own):
    """Whether ``actual`` equals ``own``, which is not finite everywhere, NaN and inf at the same
    places (to say where a NaN comes from, never to grant a point)."""
    try:
        actual, own = np.asarray(actual, dtype=float), np.asarray(own, dtype=float)
    except (TypeError, ValueError):
        return False
    finite = np.isfinite(own)
    return (actual.shape == own.shape and not finite.all() and np.array_equal(np.isfinite(actual), finite)
            and np.array_equal(actual[~finite], own[~finite], equal_nan=True) and close(actual[finite], own[finite]))


def _weights(Q, K, V, mask):
    return reference.scaled_dot_product_attention(Q, K, V, mask)[1]
