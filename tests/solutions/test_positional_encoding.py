"""The reference positional encodings: hand-computed cases and properties."""

import numpy as np
import pytest

from solutions.positional_encoding import (
    add_positional_encoding, frequencies, relative_position_matrix, rotary_embedding,
    sinusoidal_encoding)
from solutions.scaled_dot_product import scaled_dot_product_attention

rng = np.random.default_rng(0)


# -- sinusoidal_encoding -----------------------------------------------------------

def test_sinusoidal_encoding_by_hand():
    # d_model = 4: ω = [1, 1/100]; row p is [sin p, cos p, sin(p/100), cos(p/100)]
    expected = [[0.0, 1.0, 0.0, 1.0],
                [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)],
                [np.sin(2), np.cos(2), np.sin(0.02), np.cos(0.02)]]
    np.testing.assert_allclose(sinusoidal_encoding(3, 4), expected, atol=1e-15)


def test_sinusoidal_encoding_matches_the_papers_formula_term_by_term():
    P, d_model = 30, 12
    PE = sinusoidal_encoding(P, d_model)
    for pos in range(P):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)  # the same 2i/d_model for both
            assert PE[pos, 2 * i] == pytest.approx(np.sin(angle), abs=1e-12)
            assert PE[pos, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-12)


def test_wavelengths_form_a_geometric_progression_from_2pi_to_almost_10000_2pi():
    wavelengths = 2 * np.pi / frequencies(512)
    assert wavelengths[0] == pytest.approx(2 * np.pi)
    assert 2 * np.pi * 10000 ** (510 / 512) == pytest.approx(wavelengths[-1])
    ratios = wavelengths[1:] / wavelengths[:-1]
    np.testing.assert_allclose(ratios, ratios[0])


def test_first_row_is_position_zero_and_values_are_bounded():
    PE = sinusoidal_encoding(100, 64)
    np.testing.assert_array_equal(PE[0], np.tile([0.0, 1.0], 32))
    assert np.all(np.abs(PE) <= 1.0)
    # every pair lies on the unit circle
    np.testing.assert_allclose(PE[:, 0::2] ** 2 + PE[:, 1::2] ** 2, 1.0)


def test_a_longer_encoding_extends_a_shorter_one():
    np.testing.assert_array_equal(sinusoidal_encoding(200, 32)[:50], sinusoidal_encoding(50, 32))
    assert sinusoidal_encoding(0, 8).shape == (0, 8)


@pytest.mark.parametrize("d_model", [1, 5, 513])
def test_odd_d_model_raises_value_error(d_model):
    with pytest.raises(ValueError, match=f"even.*{d_model}"):
        sinusoidal_encoding(4, d_model)


def test_negative_number_of_positions_raises():
    with pytest.raises(ValueError, match="-1"):
        sinusoidal_encoding(-1, 4)


# -- relative_position_matrix --------------------------------------------------------

def test_relative_position_matrix_by_hand():
    c, s = np.cos(1.0), np.sin(1.0)
    np.testing.assert_allclose(relative_position_matrix(1, 2), [[c, -s], [s, c]])
    np.testing.assert_allclose(relative_position_matrix(0, 6), np.eye(6))


@pytest.mark.parametrize("k", [1, 3, -4, 17, 250])
@pytest.mark.parametrize("d_model", [2, 8, 64])
def test_shifting_is_linear_with_a_matrix_that_does_not_depend_on_p(k, d_model):
    PE = sinusoidal_encoding(600, d_model)
    p = np.arange(max(0, -k), 300)
    np.testing.assert_allclose(PE[p] @ relative_position_matrix(k, d_model), PE[p + k],
                               atol=1e-10)


def test_relative_matrices_are_rotations_that_compose():
    M3, M5 = relative_position_matrix(3, 16), relative_position_matrix(5, 16)
    np.testing.assert_allclose(M3 @ M5, relative_position_matrix(8, 16), atol=1e-12)
    np.testing.assert_allclose(M3 @ M3.T, np.eye(16), atol=1e-12)
    np.testing.assert_allclose(relative_position_matrix(-3, 16), M3.T, atol=1e-12)
    assert np.linalg.det(M3) == pytest.approx(1.0)


# -- add_positional_encoding ---------------------------------------------------------

def test_add_positional_encoding_adds_the_same_encoding_to_every_sequence():
    X = rng.normal(size=(2, 3, 5, 8))
    out = add_positional_encoding(X)
    assert out.shape == X.shape
    for index in np.ndindex(2, 3):
        np.testing.assert_allclose(out[index] - X[index], sinusoidal_encoding(5, 8), atol=1e-15)


def test_add_positional_encoding_does_not_modify_its_input():
    X = rng.normal(size=(4, 6))
    copy = X.copy()
    add_positional_encoding(X)
    np.testing.assert_array_equal(X, copy)


@pytest.mark.parametrize("shape", [(8,), (3, 5)])
def test_add_positional_encoding_shapes(shape):
    if len(shape) < 2:
        with pytest.raises(ValueError, match=r"\(8,\)"):
            add_positional_encoding(np.zeros(shape))
    else:
        with pytest.raises(ValueError, match="even"):  # d_model = 5
            add_positional_encoding(np.zeros(shape))


def test_attention_alone_is_permutation_equivariant_but_not_after_adding_the_encoding():
    T, d = 5, 8
    X = rng.normal(size=(T, d))
    W_Q, W_K, W_V = (rng.normal(size=(d, d)) for _ in range(3))

    def self_attention(X):
        return scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)[0]

    order = np.array([3, 0, 4, 1, 2])
    np.testing.assert_allclose(self_attention(X[order]), self_attention(X)[order])
    with_positions = self_attention(add_positional_encoding(X))
    shuffled = self_attention(add_positional_encoding(X[order]))
    assert not np.allclose(shuffled, with_positions[order])


# -- rotary_embedding ----------------------------------------------------------------

def test_rotary_embedding_by_hand():
    # d = 2, θ_0 = 1: token p turns by p radians, counterclockwise
    X = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    expected = [[1.0, 0.0], [np.cos(1), np.sin(1)], [-np.sin(2), np.cos(2)]]
    np.testing.assert_allclose(rotary_embedding(X), expected, atol=1e-15)
    # d = 4: neighbouring pairs (0, 1) and (2, 3), θ = [1, 1/100]
    X = np.array([[1.0, 0.0, 1.0, 0.0]] * 2)
    np.testing.assert_allclose(rotary_embedding(X)[1],
                               [np.cos(1), np.sin(1), np.cos(0.01), np.sin(0.01)])


def test_rotary_embedding_matches_a_loop_over_pairs():
    X = rng.normal(size=(2, 7, 10))
    out = rotary_embedding(X)
    for b, t, i in np.ndindex(2, 7, 5):
        a = t / 10000 ** (2 * i / 10)
        x0, x1 = X[b, t, 2 * i], X[b, t, 2 * i + 1]
        np.testing.assert_allclose(out[b, t, 2 * i:2 * i + 2],
                                   [x0 * np.cos(a) - x1 * np.sin(a), x0 * np.sin(a) + x1 * np.cos(a)])


def test_rotary_embedding_uses_the_rotations_of_the_relative_position_matrix():
    # the same 2 × 2 rotations by p·θ_i; RoPE turns (x[2i], x[2i+1]) counterclockwise,
    # while PE[p] @ M_k turns (sin, cos) forward in time, which is clockwise in that plane
    X = rng.normal(size=(1, 16))
    for p in (0, 1, 5, 300):
        np.testing.assert_allclose(rotary_embedding(X, np.array([p])),
                                   X @ relative_position_matrix(-p, 16), atol=1e-12)


def test_rotary_scores_depend_only_on_the_relative_position():
    d = 32
    q, k = rng.normal(size=(1, d)), rng.normal(size=(1, d))
    for m, n, shift in ((7, 2, 5), (0, 9, 100), (40, 40, -13)):
        score = rotary_embedding(q, np.array([m])) @ rotary_embedding(k, np.array([n])).T
        shifted = (rotary_embedding(q, np.array([m + shift]))
                   @ rotary_embedding(k, np.array([n + shift])).T)
        np.testing.assert_allclose(shifted, score, atol=1e-12)


def test_rotary_scores_of_a_whole_sequence_are_constant_along_diagonals():
    T, d = 12, 16
    Q, K = rng.normal(size=(T, d)), rng.normal(size=(T, d))
    positions = np.arange(T)
    scores = rotary_embedding(Q, positions) @ rotary_embedding(K, positions).T
    shifted = rotary_embedding(Q, positions + 37) @ rotary_embedding(K, positions + 37).T
    np.testing.assert_allclose(shifted, scores, atol=1e-12)
    # the same query and key at every position: a Toeplitz matrix
    same = rotary_embedding(np.tile(Q[:1], (T, 1))) @ rotary_embedding(np.tile(K[:1], (T, 1))).T
    for offset in range(-T + 1, T):
        diagonal = np.diagonal(same, offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)


def test_rotary_embedding_keeps_lengths_and_inverts_with_negative_positions():
    X = rng.normal(size=(3, 6, 8))
    out = rotary_embedding(X)
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(X, axis=-1))
    np.testing.assert_allclose(rotary_embedding(out, -np.arange(6)), X, atol=1e-12)


def test_rotary_positions_broadcast_per_sequence():
    X = rng.normal(size=(2, 4, 6))
    positions = np.array([[0, 1, 2, 3], [5, 5, 6, 7]])
    out = rotary_embedding(X, positions)
    for b in range(2):
        np.testing.assert_allclose(out[b], rotary_embedding(X[b], positions[b]))
    np.testing.assert_allclose(rotary_embedding(X, np.arange(4)), rotary_embedding(X))


def test_split_half_layout_is_the_same_up_to_a_permutation_of_features_but_not_equal():
    d = 8
    X = rng.normal(size=(5, d))
    order = np.array([0, 4, 1, 5, 2, 6, 3, 7])  # neighbours (2i, 2i+1) <- (i, i + d/2)
    theta = frequencies(d)
    a = np.arange(5)[:, None] * theta
    cos, sin = np.tile(np.cos(a), 2), np.tile(np.sin(a), 2)
    split_half = X * cos + np.concatenate([-X[:, d // 2:], X[:, :d // 2]], axis=1) * sin
    assert not np.allclose(split_half, rotary_embedding(X))
    np.testing.assert_allclose(split_half[:, order], rotary_embedding(X[:, order]), atol=1e-12)


def test_rotary_embedding_does_not_modify_its_input():
    X = rng.normal(size=(4, 6))
    copy = X.copy()
    rotary_embedding(X, np.array([3, 1, 4, 1]))
    np.testing.assert_array_equal(X, copy)


def test_rotary_embedding_bad_arguments_raise_value_errors_that_name_the_shapes():
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 4\)"):
        rotary_embedding(np.zeros((2, 4, 6)), np.arange(3))
    with pytest.raises(ValueError, match=r"\(6,\)"):
        rotary_embedding(np.zeros(6))
    with pytest.raises(ValueError, match="even"):
        rotary_embedding(np.zeros((2, 5)))
