"""The reference Bahdanau attention: hand-computed cases, properties and equivalences."""

import numpy as np
import pytest

from solutions.bahdanau import (
    additive_score, bahdanau_attention, bahdanau_decode_step, bidirectional_encode,
    masked_softmax)
from solutions.rnn_encoder_decoder import encode, gru_cell, rnn_cell

rng = np.random.default_rng(0)


def cell_params(kind, d_in, d_h):
    params = {}
    for gate in ("h" if kind == "rnn" else "zrh"):
        params[f"W_x{gate}"] = rng.normal(size=(d_in, d_h)) / np.sqrt(d_in)
        params[f"W_h{gate}"] = rng.normal(size=(d_h, d_h)) / np.sqrt(d_h)
        params[f"b_{gate}"] = 0.3 * rng.normal(size=d_h)
    return params


def attention_params(d_s, d_h, d_a):
    return {"W_a": rng.normal(size=(d_s, d_a)), "U_a": rng.normal(size=(d_h, d_a)),
            "v_a": rng.normal(size=d_a)}


def scalar_rnn(w_hh):
    """A one-unit RNN h_t = tanh(x_t + w_hh h_{t-1})."""
    return {"W_xh": np.array([[1.0]]), "W_hh": np.array([[w_hh]]), "b_h": np.zeros(1)}


# -- bidirectional_encode -------------------------------------------------------------

def test_bidirectional_encode_by_hand():
    # x = (0, 0, 20). Forward RNN without memory: tanh(x) = (0, 0, 1).
    # Backward RNN h = tanh(x + h_prev) reads 20, 0, 0: 1, tanh 1, tanh tanh 1,
    # which back in source order is (tanh tanh 1, tanh 1, 1).
    X = np.array([[[0.0], [0.0], [20.0]]])
    H = bidirectional_encode(X, scalar_rnn(0.0), scalar_rnn(1.0), cell="rnn")
    t1 = np.tanh(1.0)
    np.testing.assert_allclose(H, [[[0.0, np.tanh(t1)], [0.0, t1], [1.0, 1.0]]])


def test_the_default_cell_is_the_gru():
    # All weights zero but W_xh = 1: z = 1/2 and h = (1 - z) tanh(x) = 0.5 for x = 20,
    # where the plain RNN would give tanh(20) = 1.
    params = {k: np.zeros((1, 1)) for k in ("W_xz", "W_hz", "W_xr", "W_hr", "W_hh")}
    params.update({k: np.zeros(1) for k in ("b_z", "b_r", "b_h")}, W_xh=np.ones((1, 1)))
    np.testing.assert_allclose(bidirectional_encode(np.array([[[20.0]]]), params, params),
                               [[[0.5, 0.5]]])


@pytest.mark.parametrize("cell", ["rnn", "gru"])
def test_bidirectional_encode_matches_two_loops(cell):
    B, T, d_in, d_h = 2, 5, 3, 4
    X = rng.normal(size=(B, T, d_in))
    p_f, p_b = cell_params(cell, d_in, d_h), cell_params(cell, d_in, d_h)
    step = rnn_cell if cell == "rnn" else gru_cell
    H = bidirectional_encode(X, p_f, p_b, cell)
    assert H.shape == (B, T, 2 * d_h)
    h = np.zeros((B, d_h))
    for t in range(T):
        h = step(X[:, t], h, p_f)
        np.testing.assert_allclose(H[:, t, :d_h], h)
    h = np.zeros((B, d_h))
    for t in reversed(range(T)):
        h = step(X[:, t], h, p_b)
        np.testing.assert_allclose(H[:, t, d_h:], h)


def test_each_half_sees_only_its_side_of_the_sentence():
    X = rng.normal(size=(1, 6, 3))
    p_f, p_b = cell_params("gru", 3, 4), cell_params("gru", 3, 4)
    changed = X.copy()
    changed[0, 3] += 1.0  # change x_3
    H, H_changed = bidirectional_encode(X, p_f, p_b), bidirectional_encode(changed, p_f, p_b)
    fwd_moved = np.abs(H_changed[0, :, :4] - H[0, :, :4]).max(axis=-1)
    bwd_moved = np.abs(H_changed[0, :, 4:] - H[0, :, 4:]).max(axis=-1)
    np.testing.assert_array_equal(fwd_moved[:3], 0.0)   # h_fwd_j reads x_0 … x_j
    np.testing.assert_array_equal(bwd_moved[4:], 0.0)   # h_bwd_j reads x_{T-1} … x_j
    assert np.all(fwd_moved[3:] > 0) and np.all(bwd_moved[:4] > 0)


def test_reversing_the_sentence_swaps_the_roles_of_the_two_rnns():
    X = rng.normal(size=(2, 4, 3))
    p_f, p_b = cell_params("gru", 3, 5), cell_params("gru", 3, 5)
    H = bidirectional_encode(X, p_f, p_b)
    H_reversed = bidirectional_encode(X[:, ::-1], p_b, p_f)[:, ::-1]
    np.testing.assert_allclose(H_reversed, np.concatenate([H[..., 5:], H[..., :5]], -1))


def test_padding_at_the_end_changes_only_the_backward_half():
    # The API reads all T positions: the backward RNN reads the padding first.
    X = rng.normal(size=(1, 3, 2))
    padded = np.concatenate([X, np.zeros((1, 2, 2))], axis=1)
    p_f, p_b = cell_params("gru", 2, 3), cell_params("gru", 2, 3)
    H, H_padded = bidirectional_encode(X, p_f, p_b), bidirectional_encode(padded, p_f, p_b)
    np.testing.assert_allclose(H_padded[:, :3, :3], H[..., :3])
    assert not np.allclose(H_padded[:, :3, 3:], H[..., 3:])
    np.testing.assert_allclose(H[..., 3:], encode(X[:, ::-1], p_b, "gru")[0][:, ::-1])


def test_bidirectional_encode_does_not_modify_its_input_and_rejects_bad_shapes():
    X = rng.normal(size=(2, 3, 2))
    copy = X.copy()
    p = cell_params("gru", 2, 3)
    bidirectional_encode(X, p, p)
    np.testing.assert_array_equal(X, copy)
    with pytest.raises(ValueError, match=r"\(3, 2\)"):
        bidirectional_encode(X[0], p, p)
    with pytest.raises(ValueError, match="lstm"):
        bidirectional_encode(X, p, p, cell="lstm")


# -- additive_score -------------------------------------------------------------------

def test_additive_score_by_hand():
    # d_a = 2: W_a sends s to the first unit, U_a sends h to the second, v_a = (1, -1),
    # so e_j = tanh(s) - tanh(h_j) = (tanh 1 - tanh 0, tanh 1 - tanh 1) = (tanh 1, 0).
    params = {"W_a": np.array([[1.0, 0.0]]), "U_a": np.array([[0.0, 1.0]]),
              "v_a": np.array([1.0, -1.0])}
    e = additive_score(np.array([[1.0]]), np.array([[[0.0], [1.0]]]), params)
    np.testing.assert_allclose(e, [[np.tanh(1.0), 0.0]])


def test_additive_score_matches_a_loop_and_the_concatenation_form():
    B, T, d_s, d_h, d_a = 3, 4, 2, 5, 6
    s, H = rng.normal(size=(B, d_s)), rng.normal(size=(B, T, d_h))
    p = attention_params(d_s, d_h, d_a)
    e = additive_score(s, H, p)
    assert e.shape == (B, T)
    for b in range(B):
        for j in range(T):
            np.testing.assert_allclose(
                e[b, j], p["v_a"] @ np.tanh(s[b] @ p["W_a"] + H[b, j] @ p["U_a"]))
    # One matrix on [s ; h_j] is the same network: W = [[W_a], [U_a]].
    pairs = np.concatenate([np.repeat(s[:, None], T, axis=1), H], axis=-1)
    np.testing.assert_allclose(e, np.tanh(pairs @ np.vstack([p["W_a"], p["U_a"]])) @ p["v_a"])


def test_additive_score_is_bounded_by_the_norm_of_v_a():
    s, H = 100 * rng.normal(size=(2, 3)), 100 * rng.normal(size=(2, 4, 5))
    p = attention_params(3, 5, 4)
    assert np.all(np.abs(additive_score(s, H, p)) <= np.abs(p["v_a"]).sum() + 1e-12)


@pytest.mark.parametrize("s_shape, H_shape, W_shape, U_shape, words", [
    ((2, 3), (2, 4, 5), (3, 6), (4, 6), "U_a"),
    ((2, 3), (2, 4, 5), (2, 6), (5, 6), "W_a"),
    ((2, 3), (2, 4, 5), (3, 6), (5, 7), "d_a"),
    ((3,), (2, 4, 5), (3, 6), (5, 6), "s_prev must be"),
    ((2, 3), (3, 4, 5), (3, 6), (5, 6), "s_prev must be"),
])
def test_additive_score_rejects_shapes_that_cannot_work(s_shape, H_shape, W_shape, U_shape,
                                                         words):
    p = {"W_a": np.zeros(W_shape), "U_a": np.zeros(U_shape), "v_a": np.zeros(W_shape[-1])}
    with pytest.raises(ValueError, match=words) as error:
        additive_score(np.zeros(s_shape), np.zeros(H_shape), p)
    assert str(H_shape) in str(error.value)


# -- masked_softmax -------------------------------------------------------------------

def test_masked_softmax_by_hand():
    scores = np.array([[0.0, np.log(3.0), 5.0], [1.0, 2.0, 3.0]])
    mask = np.array([[True, True, False], [False, False, False]])
    with np.errstate(all="raise"):
        np.testing.assert_allclose(masked_softmax(scores, mask), [[0.25, 0.75, 0], [0, 0, 0]])
    np.testing.assert_allclose(masked_softmax(np.array([[0.0], [np.log(3.0)]]), axis=0),
                               [[0.25], [0.75]])


def test_masked_softmax_is_stable_and_keeps_empty_rows_at_zero():
    scores = 1e4 + rng.normal(size=(2, 5))
    mask = np.array([[True] * 5, [False] * 5])
    weights = masked_softmax(scores, mask)
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(axis=-1), [1.0, 0.0])


# -- bahdanau_attention ---------------------------------------------------------------

def hand_attention():
    # e = v_a tanh(h_j U_a) = (0, ln 3) with U_a picking the first feature of h_j
    # and W_a = 0, so the weights are (1/4, 3/4).
    H = np.array([[[0.0, 4.0], [1.0, 0.0]]])
    params = {"W_a": np.zeros((1, 1)), "U_a": np.array([[1.0], [0.0]]),
              "v_a": np.array([np.log(3.0) / np.tanh(1.0)])}
    return np.zeros((1, 1)), H, params


def test_bahdanau_attention_by_hand():
    s, H, params = hand_attention()
    context, weights = bahdanau_attention(s, H, params)
    np.testing.assert_allclose(weights, [[0.25, 0.75]])
    np.testing.assert_allclose(context, [[0.75, 1.0]])   # 1/4 (0, 4) + 3/4 (1, 0)
    context, weights = bahdanau_attention(s, H, params, mask=np.array([[True, False]]))
    np.testing.assert_allclose(weights, [[1.0, 0.0]])
    np.testing.assert_allclose(context, [[0.0, 4.0]])
    context, weights = bahdanau_attention(s, H, params, mask=np.array([[False, False]]))
    np.testing.assert_array_equal(weights, [[0.0, 0.0]])
    np.testing.assert_array_equal(context, [[0.0, 0.0]])


def test_padding_has_no_influence_on_the_context():
    B, T, d_s, d_h = 3, 5, 2, 4
    s, H = rng.normal(size=(B, d_s)), rng.normal(size=(B, T, d_h))
    p = attention_params(d_s, d_h, 3)
    mask = np.arange(T) < np.array([5, 2, 0])[:, None]
    context, weights = bahdanau_attention(s, H, p, mask)
    assert weights.shape == (B, T) and context.shape == (B, d_h)
    np.testing.assert_allclose(weights.sum(axis=-1), [1.0, 1.0, 0.0])
    assert np.all(weights[~mask] == 0) and np.all(context[2] == 0)
    H_changed = np.where(mask[..., None], H, 99.0)
    np.testing.assert_allclose(bahdanau_attention(s, H_changed, p, mask)[0], context)
    # The context of a sequence is a convex combination of its own annotations.
    np.testing.assert_allclose(context[1], weights[1, :2] @ H[1, :2])


# -- bahdanau_decode_step -------------------------------------------------------------

def test_bahdanau_decode_step_by_hand():
    # The attention of hand_attention: weights (1/4, 3/4), context (0.75, 1.0).
    # An RNN cell whose W_xh adds y and the first feature of the context:
    # s_t = tanh(0.5 + 0.75).
    s, H, attention = hand_attention()
    params = {"attention": attention,
              "cell": {"W_xh": np.array([[1.0], [1.0], [0.0]]), "W_hh": np.zeros((1, 1)),
                       "b_h": np.zeros(1)}}
    s_t, context, weights = bahdanau_decode_step(np.array([[0.5]]), s, H, params, cell="rnn")
    np.testing.assert_allclose(weights, [[0.25, 0.75]])
    np.testing.assert_allclose(context, [[0.75, 1.0]])
    np.testing.assert_allclose(s_t, [[np.tanh(1.25)]])


@pytest.mark.parametrize("cell", ["rnn", "gru"])
def test_the_context_comes_from_the_previous_state(cell):
    B, T, d_emb, d_h, d_s = 2, 4, 3, 6, 5
    y, s, H = rng.normal(size=(B, d_emb)), rng.normal(size=(B, d_s)), rng.normal(size=(B, T, d_h))
    params = {"attention": attention_params(d_s, d_h, 4), "cell": cell_params(cell, d_emb + d_h, d_s)}
    mask = np.arange(T) < np.array([4, 2])[:, None]
    s_t, context, weights = bahdanau_decode_step(y, s, H, params, mask, cell)
    expected_context, expected_weights = bahdanau_attention(s, H, params["attention"], mask)
    np.testing.assert_allclose(weights, expected_weights)
    np.testing.assert_allclose(context, expected_context)
    step = rnn_cell if cell == "rnn" else gru_cell
    np.testing.assert_allclose(s_t, step(np.concatenate([y, context], -1), s, params["cell"]))
    assert not np.allclose(weights, bahdanau_attention(s_t, H, params["attention"], mask)[1])


def test_one_matrix_on_the_concatenation_is_the_papers_separate_matrices():
    # Bahdanau et al. write W E y + C c; stacking W over C gives one matrix on [y ; c].
    d_emb, d_c, d_s = 3, 4, 2
    W, C = rng.normal(size=(d_emb, d_s)), rng.normal(size=(d_c, d_s))
    y, c = rng.normal(size=(5, d_emb)), rng.normal(size=(5, d_c))
    np.testing.assert_allclose(np.concatenate([y, c], -1) @ np.vstack([W, C]), y @ W + c @ C)


def test_bahdanau_decode_step_rejects_an_unknown_cell():
    s, H, attention = hand_attention()
    params = {"attention": attention, "cell": cell_params("gru", 3, 1)}
    with pytest.raises(ValueError, match="lstm"):
        bahdanau_decode_step(np.zeros((1, 1)), s, H, params, cell="lstm")
