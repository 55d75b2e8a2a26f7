"""Hidden checks for the scaled dot-product attention exercise, as case tables (`engine.cases`).

Each task declares what is right (the reference in ``solutions/``), the mistakes it knows (wrong
axis, missing or wrong scaling, mask ignored or applied after the softmax, a uniform row where
every key is masked, the maximum taken over the masked scores too) and the facts every right value
has (`cases.weight_facts`); each check lists its cases. Attention
is judged with the reference's softmax standing in for the student's.
"""

import numpy as np

from solutions import scaled_dot_product as reference
from solutions.scaled_dot_product import masked_softmax

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case, mask_mistakes, weight_facts
from autograder.engine.harness import seeded

SEED = 20170612  # the day "Attention is all you need" appeared on arXiv
# The task's example (visible check): one query, two keys, √d_k = 2
EXAMPLE = (np.array([[np.log(3.0), np.log(3.0), 0.0, 0.0]]), np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]),
           np.array([[4.0, 0.0, 1.0], [0.0, 4.0, 1.0]]))
# The visible batch of two different problems: the example, then its keys swapped (scores [ln 3, 0])
PAIR = (np.stack([EXAMPLE[0]] * 2), np.stack([EXAMPLE[1], EXAMPLE[1][::-1]]), np.stack([EXAMPLE[2]] * 2))
# The visible masked score of 1e4: d_k = 1, scores [0, 1e4, ln 3] with the second key masked
LARGE_MASKED = (np.array([[1.0]]), np.array([[0.0], [1e4], [np.log(3.0)]]),
                np.array([[4.0, 0.0, 1.0], [100.0, 100.0, 100.0], [0.0, 4.0, 1.0]]))


def _unstable(x, axis):
    """exp(x) / Σ exp(x), without the maximum subtracted: inf or NaN where exp overflows."""
    with np.errstate(all="ignore"):
        return np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)


def max_over_masked(inputs, keys="keys"):
    """The mistake of a masked softmax of `inputs(**arguments)` = (scores, mask, axis) that subtracts the
    maximum of every score, masked ones included, then zeroes the masked weights: a masked score of 1e4
    underflows the kept ones to 0 (the luong and bahdanau checks list it too)."""
    def weights(scores, mask, axis):
        with np.errstate(all="ignore"):
            exps = np.exp(scores - np.max(scores, axis=axis, keepdims=True)) * np.broadcast_to(mask, scores.shape)
            totals = np.sum(exps, axis=axis, keepdims=True)
            return np.divide(exps, totals, out=np.zeros_like(exps), where=totals > 0)

    return Mistake(f"the maximum subtracted before exp is taken over every score, masked {keys} included: a masked "
                   f"score of 1e4 makes exp underflow to 0 everywhere else; take the maximum over the kept scores "
                   f"(set the masked scores to -inf first)",
                   lambda **arguments: weights(*inputs(**arguments)),
                   when=lambda **arguments: inputs(**arguments)[1] is not None)


def _scores(Q, K):
    return Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])


def _scaled(factor):
    """The weights with the scores multiplied by `factor(d_k, d_v)` more than they should be."""
    return lambda Q, K, V, mask: reference.scaled_dot_product_attention(Q * factor(Q.shape[-1], V.shape[-1]),
                                                                        K, V, mask)[1]


exercise = Exercise(reference)
softmax = exercise.task(
    "softmax", hint="the values differ from exp(x) / sum(exp(x))",
    mistakes=[Mistake("it contains inf or NaN, as exp(x) / Σ exp(x) gives when exp overflows: "
                      "subtract the maximum along the axis before exp", _unstable)],
    facts=[Fact("{name} contains inf or NaN; the softmax of finite scores is finite.",
                lambda actual, x, axis: np.all(np.isfinite(actual))),
           Fact("{name} does not sum to 1 along axis {axis}: normalise along the given axis.",
                lambda actual, x, axis: np.allclose(actual.sum(axis=axis), 1.0))])
attention = exercise.task("scaled_dot_product_attention", order=("weights", "output"), outputs=[
    Output("output", hint="it should be weights @ V",
           expected=lambda got, Q, K, V, mask: np.asarray(got["weights"]) @ V),
    Output("weights", hint="each row should be the softmax of its scores Q Kᵀ / √d_k", mistakes=[
        Mistake("the scores are not divided by √d_k", _scaled(lambda d_k, d_v: np.sqrt(d_k)),
                when=lambda Q, K, V, mask: Q.shape[-1] != 1),
        Mistake("divide the scores by √d_k, not by d_k", _scaled(lambda d_k, d_v: 1 / np.sqrt(d_k)),
                when=lambda Q, K, V, mask: Q.shape[-1] != 1),
        Mistake("divide by √d_k (the size of queries and keys), not by √d_v",
                _scaled(lambda d_k, d_v: np.sqrt(d_k / d_v)), when=lambda Q, K, V, mask: Q.shape[-1] != V.shape[-1]),
        Mistake("the softmax is taken over the queries: take it over the keys (the last axis)",
                lambda Q, K, V, mask: masked_softmax(_scores(Q, K), mask, axis=-2)),
        *mask_mistakes(masked_softmax, lambda Q, K, V, mask: (_scores(Q, K), mask, -1)),
        max_over_masked(lambda Q, K, V, mask: (_scores(Q, K), mask, -1))],
        facts=weight_facts())])
causal_mask = exercise.task("causal_mask", hint="it should be True on and below the diagonal", mistakes=[
    Mistake("it is transposed: query i (row) may attend to keys 0…i, so True goes on and below the diagonal",
            lambda T: np.triu(np.ones((T, T), dtype=bool)), when=lambda T: T > 1),
    Mistake("it must be True on the diagonal: a position may attend to itself",
            lambda T: np.tril(np.ones((T, T), dtype=bool), -1))])
padding_mask = exercise.task(
    "padding_mask", hint="position p of a sequence is real (True) exactly when p < its length", mistakes=[
        Mistake("it is inverted: True marks the real tokens, positions < length",
                lambda lengths, T: ~reference.padding_mask(lengths, T))])


def check_softmax(function):
    rng = seeded(SEED)
    softmax.check(function, [
        case("a vector of 6 scores", rng.normal(size=6), axis=-1),
        case("a (3, 5) array along the last axis", rng.normal(size=(3, 5)), axis=-1),
        case("a (3, 5) array along axis 0", rng.normal(size=(3, 5)), axis=0),
        case("a (2, 3, 4) array along axis 1", rng.normal(size=(2, 3, 4)), axis=1),
        case("scores around 1e4", 1e4 + 5 * rng.normal(size=(2, 5)), axis=-1),
        case("scores around -1e4", -1e4 + 5 * rng.normal(size=(2, 5)), axis=-1),
        case("scores spread from -1e4 to 1e4", rng.uniform(-1e4, 1e4, size=(3, 4)), axis=-1),
    ])


def check_attention(function):
    """Unmasked attention: shapes, leading axes, d_v != d_k, large scores."""
    rng = seeded(SEED + 1)

    def qkv(lead, T_q, T_k, d_k, d_v, scale=1.0):
        return (scale * rng.normal(size=(*lead, T_q, d_k)), scale * rng.normal(size=(*lead, T_k, d_k)),
                rng.normal(size=(*lead, T_k, d_v)))

    attention.check(function, [
        case("the task's example", *EXAMPLE),
        case("the task's example twice in a batch", *(np.stack([a, a]) for a in EXAMPLE)),
        case("the task's batch of two different problems", *PAIR),
        case("one sequence (T_q=3, T_k=4, d_k=5, d_v=2)", *qkv((), 3, 4, 5, 2)),
        case("a batch (B=2, T_q=T_k=4, d_k=d_v=8)", *qkv((2,), 4, 4, 8, 8)),
        case("two leading axes (2, 3) with T_q=2, T_k=5, d_k=4, d_v=3", *qkv((2, 3), 2, 5, 4, 3)),
        case("scores of size about 1e4", *qkv((2,), 3, 6, 4, 2, scale=70.0)),
    ])


def check_attention_masks(function):
    """Masked attention: padding, causal, both, a fully masked query, broadcasting."""
    rng = seeded(SEED + 2)
    B, T, d_k, d_v = 3, 5, 4, 6
    Q, K, V = rng.normal(size=(B, T, d_k)), rng.normal(size=(B, T, d_k)), rng.normal(size=(B, T, d_v))
    padding = reference.padding_mask(np.array([5, 3, 1]), T)[:, None, :]   # (B, 1, T_k)
    causal = reference.causal_mask(T)                                      # (T, T)
    fully_masked = np.ones((B, T, T), dtype=bool)
    fully_masked[1, 2, :] = False                                          # query 2 of sequence 1
    heads = [rng.normal(size=(2, 3, T, d)) for d in (d_k, d_k, d_v)]
    Q_1, K_1, V_1 = rng.normal(size=(2, 3, 1)), rng.normal(size=(2, 4, 1)), rng.normal(size=(2, 4, 3))
    Q_1[0, 0, 0], K_1[0, 3, 0] = 1.0, 1e4                                  # a score of 1e4 on a masked key
    attention.check(function, [
        case("the task's example with its second key masked", *EXAMPLE, mask=np.array([[True, False]])),
        case("the task's example with both keys masked", *EXAMPLE, mask=np.array([[False, False]])),
        case("a padding mask of shape (B, 1, T_k)", Q, K, V, mask=padding),
        case("a causal mask of shape (T, T)", Q, K, V, mask=causal),
        case("a causal and padding mask combined", Q, K, V, mask=causal & padding),
        case("a query whose keys are all masked", Q, K, V, mask=fully_masked),
        case("a mask of shape (1, 1, T_q, T_k) on two leading axes", *heads, mask=causal[None, None]),
        case("a batch whose masked key 3 of sequence 0 has the score 1e4 (lengths 3, 2)", Q_1, K_1, V_1,
             mask=reference.padding_mask(np.array([3, 2]), 4)[:, None, :]),
        case("the task's masked score of 1e4", *LARGE_MASKED, mask=np.array([[True, False, True]])),
        case("scores of size about 1e4 with a causal mask", 70 * Q, 70 * K, V, mask=causal),
    ])


def check_causal_mask(function):
    causal_mask.check(function, [case(f"T={T}", T) for T in (1, 2, 5)])


def check_padding_mask(function):
    padding_mask.check(function, [case(f"lengths={lengths}, T={T}", np.array(lengths), T)
                                  for lengths, T in (([2, 3], 3), ([5, 1, 0, 3], 5), ([4], 6))])
