"""Hidden checks for the positional encoding exercise.

Each ``check_*`` runs the student's function on seeded random inputs and on
the inputs that expose the usual mistakes, compares with the reference in
``solutions/`` and, at the first difference, raises ``CheckFailed`` with one
sentence that names the mistake when it can be recognised from the output
(sine and cosine swapped, halves concatenated, a wrong exponent, positions
from 1, a transposed relative matrix, an encoding of the wrong length, a
rotation the wrong way round, split-half pairs, positions ignored). Any
correct implementation passes: only results are compared, never how they
were computed.
"""

import contextlib
import io
import warnings

import numpy as np

from solutions import positional_encoding as reference

from autograder.engine.checking import CheckFailed, check, check_close, check_shape, close
from autograder.engine.harness import call, seeded, standing_in

SEED = 20210420  # the day RoFormer (Su et al.) appeared on arXiv
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.sinusoidal_encoding, reference.relative_position_matrix, reference.add_positional_encoding,
          reference.rotary_embedding)

# The exponents e_i of the frequencies 1 / 10000^(e_i) that students write
# instead of 2i/d_model (i = 0 … d_model/2 − 1 numbers the pairs).
_EXPONENTS = {
    "2i/d_model": lambda i, d: 2 * i / d,
    "i/d_model": lambda i, d: i / d,
    "(2i+1)/d_model": lambda i, d: (2 * i + 1) / d,
    "2i/512": lambda i, d: 2 * i / 512,
}


# -- sinusoidal_encoding ---------------------------------------------------------

def check_sinusoidal_encoding(sinusoidal_encoding):
    for num_positions, d_model in ((50, 16), (1, 2), (7, 6), (12, 512)):
        name = f"sinusoidal_encoding({num_positions}, {d_model})"
        actual = call(sinusoidal_encoding, num_positions, d_model,
                      on=f"num_positions={num_positions}, d_model={d_model}")
        check_shape(actual, (num_positions, d_model), name)
        if not np.allclose(actual, reference.sinusoidal_encoding(num_positions, d_model),
                           rtol=1e-6, atol=1e-9):
            _diagnose_sinusoid(actual, num_positions, d_model, name)
        check_close(actual, reference.sinusoidal_encoding(num_positions, d_model), name,
                    "PE[p, 2i] should be sin(p / 10000^(2i/d_model)) and PE[p, 2i+1] "
                    "cos(p / 10000^(2i/d_model)), for positions p = 0, 1, …")
    for d_model in (7, 1):
        _check_raises_value_error(
            sinusoidal_encoding, (5, d_model), f"sinusoidal_encoding(5, {d_model})",
            f"d_model={d_model}",
            "an odd d_model cannot be split into (sin, cos) pairs")


def _sinusoid(num_positions, d_model, *, start=0, sin_exponent="2i/d_model",
              cos_exponent="2i/d_model", swapped=False, halves=False):
    """The encoding with one or more of the usual mistakes, for diagnosis only."""
    i = np.arange(d_model // 2)
    p = np.arange(start, start + num_positions)[:, None]
    sines = np.sin(p / 10000.0 ** _EXPONENTS[sin_exponent](i, d_model))
    cosines = np.cos(p / 10000.0 ** _EXPONENTS[cos_exponent](i, d_model))
    first, second = (cosines, sines) if swapped else (sines, cosines)
    if halves:
        return np.concatenate([first, second], axis=1)
    PE = np.empty((num_positions, d_model))
    PE[:, 0::2], PE[:, 1::2] = first, second
    return PE


def _diagnose_sinusoid(actual, num_positions, d_model, name):
    """Fail with the list of mistakes that reproduce `actual`, if some do."""
    variants = []
    for start in (0, 1):
        for swapped in (False, True):
            for halves in (False, True):
                for sin_exponent in _EXPONENTS:
                    for cos_exponent in _EXPONENTS:
                        mistakes = []
                        if start:
                            mistakes.append("positions start at 0, not 1 (the first row is "
                                            "PE[0] = [0, 1, 0, 1, …])")
                        if swapped:
                            mistakes.append("the sine and the cosine are swapped: feature 2i "
                                            "holds the sine, feature 2i+1 the cosine")
                        if halves:
                            mistakes.append("the sines and the cosines are concatenated in two "
                                            "halves instead of interleaved: they alternate, "
                                            "sin in feature 2i and cos in feature 2i+1")
                        mistakes += _exponent_mistakes(sin_exponent, cos_exponent)
                        variants.append((mistakes, dict(
                            start=start, swapped=swapped, halves=halves,
                            sin_exponent=sin_exponent, cos_exponent=cos_exponent)))
    variants.sort(key=lambda variant: len(variant[0]))  # the simplest explanation first
    for mistakes, options in variants:
        if mistakes and np.allclose(actual, _sinusoid(num_positions, d_model, **options),
                                    rtol=1e-6, atol=1e-9):
            check(False, f"{name}: " + "; ".join(mistakes) + ".")


def _exponent_mistakes(sin_exponent, cos_exponent):
    right = ("the sine and the cosine of pair i both use 2i/d_model, for "
             "i = 0 … d_model/2 − 1")
    if sin_exponent == cos_exponent != "2i/d_model":
        return [f"the sine and the cosine use the exponent {sin_exponent}, but {right}"]
    return [f"the {which} uses the exponent {exponent}, but {right}"
            for which, exponent in (("sine", sin_exponent), ("cosine", cos_exponent))
            if exponent != "2i/d_model"]


def _check_raises_value_error(function, args, name, on, reason, stand_ins=()):
    """Check that function(*args) raises ValueError, silencing what it prints; ``stand_ins`` as for
    ``harness.call``."""
    function_name = getattr(function, "__name__", "your function")
    with warnings.catch_warnings(), np.errstate(all="ignore"), \
            contextlib.redirect_stderr(io.StringIO()), standing_in(function, stand_ins) as run:
        warnings.simplefilter("ignore")
        try:
            run(*args)
        except ValueError:
            return
        except NotImplementedError:
            raise CheckFailed(
                f"{function_name} is not implemented yet (it raises NotImplementedError).") from None
        except Exception as error:  # any failure of student code is a failed check
            raise CheckFailed(
                f"{name} raised {type(error).__name__} ({error}), but it should raise "
                f"ValueError: {reason}.") from None
    raise CheckFailed(f"{name} should raise ValueError: {reason}.")


# -- relative_position_matrix ----------------------------------------------------

def check_relative_position_matrix(relative_position_matrix):
    for k, d_model in ((1, 4), (3, 16), (-2, 8), (0, 6), (25, 64), (7, 10)):
        name = f"relative_position_matrix({k}, {d_model})"
        expected = reference.relative_position_matrix(k, d_model)
        actual = call(relative_position_matrix, k, d_model, on=f"k={k}, d_model={d_model}", stand_ins=GRADED)
        check_shape(actual, (d_model, d_model), name)
        if k != 0 and close(actual, expected.T):
            check(False, f"{name} maps PE[p] to PE[p − k]: it is the transpose of the right "
                         "matrix (the column-vector convention), which is also the matrix "
                         "for −k; here vectors are rows, so PE[p + k] = PE[p] @ M.")
        PE = reference.sinusoidal_encoding(abs(k) + 30, d_model)
        p = np.arange(max(0, -k), max(0, -k) + 30)  # p and p + k are both positions
        check(np.allclose(PE[p] @ actual, PE[p + k], atol=1e-9),
              f"{name}: PE[p] @ M should equal PE[p + k] for every position p; M is block "
              "diagonal, with one 2 × 2 rotation by the angle k·ω_i for each pair of "
              "features (2i, 2i+1).")
        check_close(actual, expected, name,
                    "it maps PE[p] to PE[p + k] on these positions but is not the block "
                    "diagonal matrix of 2 × 2 rotations by k·ω_i")


# -- add_positional_encoding -----------------------------------------------------

def check_add_positional_encoding(add_positional_encoding):
    rng = seeded(SEED)
    cases = [
        ("X of shape (5, 8)", rng.normal(size=(5, 8))),
        ("a batch X of shape (3, 5, 8)", rng.normal(size=(3, 5, 8))),
        ("X of shape (2, 3, 4, 6), with two leading axes", rng.normal(size=(2, 3, 4, 6))),
        ("a batch X of shape (4, 9, 16)", rng.normal(size=(4, 9, 16))),
        ("a batch X of shape (6, 2, 4)", rng.normal(size=(6, 2, 4))),
        ("the task's ones of shape (3, 4)", np.ones((3, 4))),
        ("the task's zeros of shape (2, 3, 4)", np.zeros((2, 3, 4))),
    ]
    for description, X in cases:
        name = f"add_positional_encoding on {description}"
        try:
            actual = call(add_positional_encoding, X, on=description, stand_ins=GRADED)
        except CheckFailed as failure:
            message = str(failure)
            if " raised " not in message:
                raise
            raise CheckFailed(
                message.rstrip(".") + ": the encoding is sinusoidal_encoding(T, d_model) with "
                "T, d_model = X.shape[-2:], added to every sequence (it broadcasts over the "
                "leading axes).") from None
        check_shape(actual, X.shape, name)
        expected = reference.add_positional_encoding(X)
        if not close(actual, expected):
            _diagnose_added(actual, X, name)
        check_close(actual, expected, name, "it should be X + PE[:T]")


def _diagnose_added(actual, X, name):
    T, d_model = X.shape[-2:]
    added = actual - X
    sequences = added.reshape(-1, T, d_model)
    run_on = reference.sinusoidal_encoding(len(sequences) * T, d_model).reshape(-1, T, d_model)
    if np.allclose(actual, np.broadcast_to(reference.sinusoidal_encoding(T, d_model), X.shape)):
        check(False, f"{name} returns the encoding alone: return X + PE[:T].")
    if np.allclose(added, reference.sinusoidal_encoding(T + 1, d_model)[1:]):
        check(False, f"{name} adds the encodings of positions 1 … T: the first token of "
                     "every sequence gets PE[0].")
    if len(sequences) > 1 and np.allclose(sequences, run_on):
        check(False, f"{name}: the positions run on from one sequence to the next; every "
                     "sequence starts again at position 0 and gets the same PE[:T].")
    if not np.allclose(sequences, sequences[:1]):
        check(False, f"{name}: different sequences got different encodings; add the same "
                     "PE[:T] to every sequence (it broadcasts over the leading axes).")
    check(False, f"{name}: each sequence gets an encoding, but not PE[:T] = "
                 "sinusoidal_encoding(T, d_model) with T, d_model = X.shape[-2:].")


# -- rotary_embedding ------------------------------------------------------------

def check_rotary_embedding(rotary_embedding):
    """Default positions 0 … T−1: one sequence, a batch, heads, a long sequence."""
    rng = seeded(SEED + 1)
    cases = [
        ("X of shape (6, 8)", rng.normal(size=(6, 8))),
        ("a batch X of shape (2, 5, 16)", rng.normal(size=(2, 5, 16))),
        ("X of shape (2, 3, 4, 6), with batch and head axes", rng.normal(size=(2, 3, 4, 6))),
        ("a long sequence X of shape (60, 64)", rng.normal(size=(60, 64))),
    ]
    for description, X in cases:
        T = X.shape[-2]
        actual = call(rotary_embedding, X, on=description, stand_ins=GRADED)
        _check_rotated(actual, X, np.arange(T), f"rotary_embedding on {description}",
                       from_one=True)


def check_rotary_positions(rotary_embedding):
    """Given positions: shifted, a single token, in any order, one row per sequence."""
    rng = seeded(SEED + 2)
    cases = [
        ("X of shape (4, 8) at positions [5, 6, 7, 8]",
         rng.normal(size=(4, 8)), np.array([5, 6, 7, 8])),
        ("one token, X of shape (1, 6), at position [10]",
         rng.normal(size=(1, 6)), np.array([10])),
        ("X of shape (5, 16) at positions [3, 0, 7, 2, 9]",
         rng.normal(size=(5, 16)), np.array([3, 0, 7, 2, 9])),
        ("a batch X of shape (2, 3, 4, 8) at positions [100, 101, 102, 103]",
         rng.normal(size=(2, 3, 4, 8)), np.arange(100, 104)),
        ("a batch X of shape (2, 5, 6) with positions of shape (2, 5), one row per sequence",
         rng.normal(size=(2, 5, 6)), np.array([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2]])),
    ]
    for description, X, positions in cases:
        name = f"rotary_embedding on {description}"
        actual = call(rotary_embedding, X, positions, on=description, stand_ins=GRADED)
        check_shape(actual, X.shape, name)
        if not np.allclose(actual, reference.rotary_embedding(X, positions),
                           rtol=1e-6, atol=1e-9):
            check(not np.allclose(actual, reference.rotary_embedding(X)),
                  f"{name}: the positions argument is ignored; when it is given, rotate "
                  "token t by the angles positions[t]·θ_i instead of t·θ_i.")
        _check_rotated(actual, X, positions, name, from_one=False)


def _rotate(X, positions, exponent="2i/d_model"):
    """RoPE with another exponent for the frequencies, for diagnosis only."""
    d = X.shape[-1]
    angles = np.asarray(positions)[..., None] / 10000.0 ** _EXPONENTS[exponent](
        np.arange(d // 2), d)
    angles = np.broadcast_to(angles, (*X.shape[:-1], d // 2))
    out = np.empty(X.shape)
    out[..., 0::2] = X[..., 0::2] * np.cos(angles) - X[..., 1::2] * np.sin(angles)
    out[..., 1::2] = X[..., 0::2] * np.sin(angles) + X[..., 1::2] * np.cos(angles)
    return out


def _split_half(X, positions):
    """The GPT-NeoX variant: feature i is paired with i + d/2."""
    d = X.shape[-1]
    order = np.stack([np.arange(d // 2), np.arange(d // 2, d)], axis=1).ravel()  # 0, d/2, 1, …
    return reference.rotary_embedding(X[..., order], positions)[..., np.argsort(order)]


def _check_rotated(actual, X, positions, name, from_one):
    check_shape(actual, X.shape, name)
    expected = reference.rotary_embedding(X, positions)
    if not close(actual, expected):
        d = X.shape[-1]
        positions = np.asarray(positions)

        def like(other):
            return close(actual, other)

        check(not like(reference.rotary_embedding(X, -positions)),
              f"{name}: the rotation goes the wrong way (the signs of the sines are swapped); "
              "out[2i] = x[2i] cos a − x[2i+1] sin a and out[2i+1] = x[2i] sin a + "
              "x[2i+1] cos a.")
        check(not (like(_split_half(X, positions)) or like(_split_half(X, -positions))),
              f"{name}: feature i is paired with feature i + d/2 (the split-half or GPT-NeoX "
              "layout); this course pairs neighbours (2i, 2i+1), as Su et al. do.")
        if from_one:
            check(not like(reference.rotary_embedding(X, positions + 1)),
                  f"{name}: positions start at 0, not 1 (the first token is not rotated).")
        check(not like(X + reference.sinusoidal_encoding(X.shape[-2], d)),
              f"{name} adds the sinusoidal encoding; RoPE rotates each pair of features "
              "instead.")
        for exponent in ("i/d_model", "(2i+1)/d_model"):
            check(not like(_rotate(X, positions, exponent)),
                  f"{name}: the angle of pair i is p·θ_i with θ_i = 10000^(−2i/d), not "
                  f"10000^(−{exponent.replace('d_model', 'd')}).")
        pairs = np.hypot(X[..., 0::2], X[..., 1::2])
        check(np.allclose(np.hypot(actual[..., 0::2], actual[..., 1::2]), pairs),
              f"{name}: a rotation keeps the length of each pair (x[2i], x[2i+1]), but "
              "yours changes it.")
    check_close(actual, expected, name,
                "it should rotate each pair (2i, 2i+1) of token t by the angle p_t·θ_i, "
                "θ_i = 10000^(−2i/d)")
