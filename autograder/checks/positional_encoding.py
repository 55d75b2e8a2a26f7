"""Hidden checks for the positional encoding exercise, as case tables (`engine.cases`).

The known mistakes: sine and cosine swapped, halves concatenated, a wrong exponent, positions from 1
(each combination of them named at once), a transposed relative matrix, an encoding of the wrong
length, a rotation the wrong way round, split-half pairs, positions ignored.
"""

import itertools

import numpy as np

from solutions import positional_encoding as reference

from autograder.engine.cases import Exercise, Fact, Mistake, case
from autograder.engine.harness import seeded

SEED = 20210420  # the day RoFormer (Su et al.) appeared on arXiv
# The exponents e_i of the frequencies 1 / 10000^(e_i) that students write instead of 2i/d_model
# (i = 0 … d_model/2 − 1 numbers the pairs).
_EXPONENTS = {"2i/d_model": lambda i, d: 2 * i / d, "i/d_model": lambda i, d: i / d,
              "(2i+1)/d_model": lambda i, d: (2 * i + 1) / d, "2i/512": lambda i, d: 2 * i / 512}
_RIGHT = "the sine and the cosine of pair i both use 2i/d_model, for i = 0 … d_model/2 − 1"


def _sinusoid(num_positions, d_model, start, swapped, halves, sin_exponent, cos_exponent):
    """The encoding with one or more of the usual mistakes."""
    i, p = np.arange(d_model // 2), np.arange(start, start + num_positions)[:, None]
    sines = np.sin(p / 10000.0 ** _EXPONENTS[sin_exponent](i, d_model))
    cosines = np.cos(p / 10000.0 ** _EXPONENTS[cos_exponent](i, d_model))
    first, second = (cosines, sines) if swapped else (sines, cosines)
    return np.concatenate([first, second], axis=1) if halves else np.stack([first, second], axis=-1).reshape(
        num_positions, d_model)


def _sinusoid_mistake(start, swapped, halves, sin_exponent, cos_exponent):
    """The Mistake of that combination of the usual mistakes, named by all it makes."""
    said = ["positions start at 0, not 1 (the first row is PE[0] = [0, 1, 0, 1, …])"] * start
    said += ["the sine and the cosine are swapped: feature 2i holds the sine, feature 2i+1 the cosine"] * swapped
    said += ["the sines and the cosines are concatenated in two halves instead of interleaved: they alternate, "
             "sin in feature 2i and cos in feature 2i+1"] * halves
    if sin_exponent == cos_exponent != "2i/d_model":
        said.append(f"the sine and the cosine use the exponent {sin_exponent}, but {_RIGHT}")
    else:
        said += [f"the {which} uses the exponent {exponent}, but {_RIGHT}" for which, exponent in
                 (("sine", sin_exponent), ("cosine", cos_exponent)) if exponent != "2i/d_model"]
    options = (start, swapped, halves, sin_exponent, cos_exponent)
    return Mistake("; ".join(said), lambda num_positions, d_model: _sinusoid(num_positions, d_model, *options))


def _positions(X, positions):
    return np.arange(X.shape[-2]) if positions is None else np.asarray(positions)


def _rotate(X, positions, exponent):
    """RoPE with another exponent for the frequencies."""
    d = X.shape[-1]
    angles = np.broadcast_to(_positions(X, positions)[..., None] / 10000.0 ** _EXPONENTS[exponent](
        np.arange(d // 2), d), (*X.shape[:-1], d // 2))
    return np.stack([X[..., 0::2] * np.cos(angles) - X[..., 1::2] * np.sin(angles),
                     X[..., 0::2] * np.sin(angles) + X[..., 1::2] * np.cos(angles)], axis=-1).reshape(X.shape)


def _split_half(X, positions):
    """The GPT-NeoX layout: feature i is paired with i + d/2."""
    d = X.shape[-1]
    order = np.stack([np.arange(d // 2), np.arange(d // 2, d)], axis=1).ravel()  # 0, d/2, 1, …
    return reference.rotary_embedding(X[..., order], positions)[..., np.argsort(order)]


exercise = Exercise(reference)
sinusoidal_encoding = exercise.task(
    "sinusoidal_encoding", hint="PE[p, 2i] should be sin(p / 10000^(2i/d_model)) and PE[p, 2i+1] "
                                "cos(p / 10000^(2i/d_model)), for positions p = 0, 1, …",
    mistakes=[_sinusoid_mistake(*options) for options in itertools.product(
        (0, 1), (False, True), (False, True), _EXPONENTS, _EXPONENTS)
        if options != (0, False, False, "2i/d_model", "2i/d_model")])  # every combination but the right one
relative_position_matrix = exercise.task(
    "relative_position_matrix", hint="it maps PE[p] to PE[p + k] on these positions but is not the block diagonal "
                                     "matrix of 2 × 2 rotations by k·ω_i", mistakes=[
        Mistake("it maps PE[p] to PE[p − k]: it is the transpose of the right matrix (the column-vector convention), "
                "which is also the matrix for −k; here vectors are rows, so PE[p + k] = PE[p] @ M",
                lambda k, d_model: reference.relative_position_matrix(-k, d_model))],
    facts=[Fact("{name}: PE[p] @ M should equal PE[p + k] for every position p; M is block diagonal, with one 2 × 2 "
                "rotation by the angle k·ω_i for each pair of features (2i, 2i+1).",
                lambda actual, k, d_model: np.allclose(
                    reference.sinusoidal_encoding(abs(k) + 30, d_model)[max(0, -k):max(0, -k) + 30] @ actual,
                    reference.sinusoidal_encoding(abs(k) + 30, d_model)[max(0, k):max(0, k) + 30], atol=1e-9))])
add_positional_encoding = exercise.task(
    "add_positional_encoding", hint="each sequence should get PE[:T] = sinusoidal_encoding(T, d_model) with "
                                    "T, d_model = X.shape[-2:]: X + PE[:T]", mistakes=[
        Mistake("it returns the encoding alone: return X + PE[:T]",
                lambda X: np.broadcast_to(reference.sinusoidal_encoding(*X.shape[-2:]), X.shape)),
        Mistake("it adds the encodings of positions 1 … T: the first token of every sequence gets PE[0]",
                lambda X: X + reference.sinusoidal_encoding(X.shape[-2] + 1, X.shape[-1])[1:]),
        Mistake("the positions run on from one sequence to the next; every sequence starts again at position 0 and "
                "gets the same PE[:T]", lambda X: X + reference.sinusoidal_encoding(
                    X.size // X.shape[-1], X.shape[-1]).reshape(X.shape))],
    facts=[Fact("{name}: different sequences got different encodings; add the same PE[:T] to every sequence (it "
                "broadcasts over the leading axes).",
                lambda actual, X: np.allclose((added := (actual - X).reshape(-1, *X.shape[-2:])), added[:1]))])
rotary_embedding = exercise.task(
    "rotary_embedding", hint="it should rotate each pair (2i, 2i+1) of token t by the angle p_t·θ_i, "
                             "θ_i = 10000^(−2i/d)", mistakes=[
        Mistake("the positions argument is ignored; when it is given, rotate token t by the angles positions[t]·θ_i "
                "instead of t·θ_i", lambda X, positions: reference.rotary_embedding(X),
                when=lambda X, positions: positions is not None),
        Mistake("the rotation goes the wrong way (the signs of the sines are swapped); out[2i] = x[2i] cos a − "
                "x[2i+1] sin a and out[2i+1] = x[2i] sin a + x[2i+1] cos a",
                lambda X, positions: reference.rotary_embedding(X, -_positions(X, positions))),
        *(Mistake("feature i is paired with feature i + d/2 (the split-half or GPT-NeoX layout); this course pairs "
                  "neighbours (2i, 2i+1), as Su et al. do",
                  lambda X, positions, sign=sign: _split_half(X, sign * _positions(X, positions))) for sign in (1, -1)),
        Mistake("positions start at 0, not 1 (the first token is not rotated)",
                lambda X, positions: reference.rotary_embedding(X, _positions(X, positions) + 1),
                when=lambda X, positions: positions is None),
        Mistake("it adds the sinusoidal encoding; RoPE rotates each pair of features instead",
                lambda X, positions: X + reference.sinusoidal_encoding(*X.shape[-2:])),
        *(Mistake(f"the angle of pair i is p·θ_i with θ_i = 10000^(−2i/d), not 10000^(−{exponent})",
                  lambda X, positions, exponent=exponent: _rotate(X, positions, exponent + "_model"))
          for exponent in ("i/d", "(2i+1)/d"))],
    facts=[Fact("{name}: a rotation keeps the length of each pair (x[2i], x[2i+1]), but yours changes it.",
                lambda actual, X, positions: np.allclose(np.hypot(actual[..., 0::2], actual[..., 1::2]),
                                                         np.hypot(X[..., 0::2], X[..., 1::2])))])


def check_sinusoidal_encoding(function):
    sinusoidal_encoding.check(function, [
        *(case(f"num_positions={n}, d_model={d}", n, d) for n, d in ((50, 16), (1, 2), (7, 6), (12, 512))),
        *(case(f"num_positions=5, d_model={d}", 5, d).rejected("an odd d_model cannot be split into (sin, cos) pairs")
          for d in (7, 1))])


def check_relative_position_matrix(function):
    relative_position_matrix.check(function, [case(f"k={k}, d_model={d_model}", k, d_model) for k, d_model in
                                              ((1, 4), (3, 16), (-2, 8), (0, 6), (25, 64), (7, 10))])


def check_add_positional_encoding(function):
    rng = seeded(SEED)
    add_positional_encoding.check(function, [each.on_raise(
        "the encoding is sinusoidal_encoding(T, d_model) with T, d_model = X.shape[-2:], added to every sequence "
        "(it broadcasts over the leading axes)") for each in [
        case("X of shape (5, 8)", rng.normal(size=(5, 8))),
        case("a batch X of shape (3, 5, 8)", rng.normal(size=(3, 5, 8))),
        case("X of shape (2, 3, 4, 6), with two leading axes", rng.normal(size=(2, 3, 4, 6))),
        case("a batch X of shape (4, 9, 16)", rng.normal(size=(4, 9, 16))),
        case("a batch X of shape (6, 2, 4)", rng.normal(size=(6, 2, 4))),
        case("the task's ones of shape (3, 4)", np.ones((3, 4))),
        case("the task's zeros of shape (2, 3, 4)", np.zeros((2, 3, 4))),
        case("the task's batch of zeros and ones, shape (2, 3, 4)", np.stack([np.zeros((3, 4)), np.ones((3, 4))]))]])


def check_rotary_embedding(function):
    """Default positions 0 … T−1: one sequence, a batch, heads, a long sequence."""
    rng = seeded(SEED + 1)
    rotary_embedding.check(function, [
        case("X of shape (6, 8)", rng.normal(size=(6, 8))),
        case("a batch X of shape (2, 5, 16)", rng.normal(size=(2, 5, 16))),
        case("X of shape (2, 3, 4, 6), with batch and head axes", rng.normal(size=(2, 3, 4, 6))),
        case("a long sequence X of shape (60, 64)", rng.normal(size=(60, 64))),
        case("the task's batch of two sequences of three tokens, [1, 0] and [0, 1] (B=2, T=3, d=2)",
             np.stack([np.tile([1.0, 0.0], (3, 1)), np.tile([0.0, 1.0], (3, 1))]))])


def check_rotary_positions(function):
    """Given positions: shifted, a single token, in any order, one row per sequence."""
    rng = seeded(SEED + 2)
    rotary_embedding.check(function, [
        case("X of shape (4, 8) at positions [5, 6, 7, 8]", rng.normal(size=(4, 8)), np.array([5, 6, 7, 8])),
        case("one token, X of shape (1, 6), at position [10]", rng.normal(size=(1, 6)), np.array([10])),
        case("X of shape (5, 16) at positions [3, 0, 7, 2, 9]", rng.normal(size=(5, 16)), np.array([3, 0, 7, 2, 9])),
        case("a batch X of shape (2, 3, 4, 8) at positions [100, 101, 102, 103]", rng.normal(size=(2, 3, 4, 8)),
             np.arange(100, 104)),
        case("a batch X of shape (2, 5, 6) with positions of shape (2, 5), one row per sequence",
             rng.normal(size=(2, 5, 6)), np.array([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2]])),
        case("the task's batch of [1, 0] tokens and [0, 1] tokens at positions [[0, 1], [2, 3]]",
             np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]]), np.array([[0, 1], [2, 3]]))])
