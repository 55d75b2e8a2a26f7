"""The reference Luong attention: hand-computed cases, properties, equivalences, errors."""

import numpy as np
import pytest

from solutions.bahdanau import additive_score
from solutions.luong import (
    concat_score, dot_score, general_score, local_attention, luong_attention, predictive_position)

rng = np.random.default_rng(0)
LN3 = np.log(3.0)


def random_problem(B=2, S=5, d=3, d_a=None):
    h_t, H_s = rng.normal(size=(B, d)), rng.normal(size=(B, S, d))
    params = {"W_c": rng.normal(size=(2 * d, d))}
    if d_a is None:
        params["W_a"] = rng.normal(size=(d, d))
    else:
        params["W_a"], params["v_a"] = rng.normal(size=(2 * d, d_a)), rng.normal(size=d_a)
    return h_t, H_s, params


# -- scores -------------------------------------------------------------------------

def test_scores_by_hand():
    h_t = np.array([[1.0, 2.0]])
    H_s = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    np.testing.assert_allclose(dot_score(h_t, H_s), [[1.0, 2.0, 3.0]])
    W_a = np.array([[1.0, 0.0], [1.0, 1.0]])  # h_t @ W_a = [3, 2]
    np.testing.assert_allclose(general_score(h_t, H_s, W_a), [[3.0, 2.0, 5.0]])
    # d = 1: [h_t ; h_s] @ [[1], [-1]] = h_t - h_s
    scores = concat_score(np.array([[1.0]]), np.array([[[1.0], [0.0], [2.0]]]),
                          np.array([[1.0], [-1.0]]), np.array([1.0]))
    np.testing.assert_allclose(scores, [[0.0, np.tanh(1.0), np.tanh(-1.0)]])


def test_scores_match_a_loop_over_positions():
    h_t, H_s, _ = random_problem(B=3, S=4, d=3)
    W_a = rng.normal(size=(3, 3))
    W_cat, v_a = rng.normal(size=(6, 5)), rng.normal(size=5)
    for b in range(3):
        for s in range(4):
            h, hs = h_t[b], H_s[b, s]
            assert np.isclose(dot_score(h_t, H_s)[b, s], h @ hs)
            assert np.isclose(general_score(h_t, H_s, W_a)[b, s], h @ W_a @ hs)
            assert np.isclose(concat_score(h_t, H_s, W_cat, v_a)[b, s],
                              v_a @ np.tanh(np.concatenate([h, hs]) @ W_cat))


def test_general_with_the_identity_is_dot_and_uses_W_a_on_the_decoder_side():
    h_t, H_s, _ = random_problem()
    np.testing.assert_allclose(general_score(h_t, H_s, np.eye(3)), dot_score(h_t, H_s))
    W_a = rng.normal(size=(3, 3))
    np.testing.assert_allclose(general_score(h_t, H_s, W_a), dot_score(h_t @ W_a, H_s))
    assert not np.allclose(general_score(h_t, H_s, W_a), general_score(h_t, H_s, W_a.T))


def test_concat_is_bahdanaus_additive_score_with_W_a_split_in_two():
    h_t, H_s, _ = random_problem(B=2, S=6, d=4)
    W_a, v_a = rng.normal(size=(8, 5)), rng.normal(size=5)
    additive = additive_score(h_t, H_s, {"W_a": W_a[:4], "U_a": W_a[4:], "v_a": v_a})
    np.testing.assert_allclose(concat_score(h_t, H_s, W_a, v_a), additive)


# -- global attention -----------------------------------------------------------------

def test_global_attention_by_hand():
    # dot scores [0, ln 3] -> weights [1/4, 3/4] -> context [3/4, 0];
    # W_c sends [c0, c1, h0, h1] to [c0, h0], so h_tilde = tanh([3/4, ln 3]).
    h_t = np.array([[LN3, 0.0]])
    H_s = np.array([[[0.0, 0.0], [1.0, 0.0]]])
    W_c = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    h_tilde, context, weights = luong_attention(h_t, H_s, {"W_c": W_c}, score="dot")
    np.testing.assert_allclose(weights, [[0.25, 0.75]])
    np.testing.assert_allclose(context, [[0.75, 0.0]])
    np.testing.assert_allclose(h_tilde, [[np.tanh(0.75), 0.8]])  # tanh(ln 3) = 0.8
    # general with W_a = 2 I: scores [0, ln 9] -> weights [0.1, 0.9]
    _, _, weights = luong_attention(h_t, H_s, {"W_c": W_c, "W_a": 2 * np.eye(2)})
    np.testing.assert_allclose(weights, [[0.1, 0.9]])


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_global_attention_is_softmax_of_the_score_then_the_concat_layer(score):
    h_t, H_s, params = random_problem(B=3, S=5, d=3, d_a=4 if score == "concat" else None)
    h_tilde, context, weights = luong_attention(h_t, H_s, params, score=score)
    scores = {"dot": lambda: dot_score(h_t, H_s),
              "general": lambda: general_score(h_t, H_s, params["W_a"]),
              "concat": lambda: concat_score(h_t, H_s, params["W_a"], params["v_a"])}[score]()
    expected = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(weights, expected)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(context, np.stack([w @ H for w, H in zip(weights, H_s)]))
    np.testing.assert_allclose(h_tilde, np.tanh(np.hstack([context, h_t]) @ params["W_c"]))


def test_default_score_is_general_and_unknown_scores_are_refused():
    h_t, H_s, params = random_problem()
    for a, b in zip(luong_attention(h_t, H_s, params), luong_attention(h_t, H_s, params, "general")):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="score must be one of"):
        luong_attention(h_t, H_s, params, score="location")


def test_masked_positions_get_zero_weight_and_an_empty_row_gets_zeros_not_nan():
    h_t, H_s, params = random_problem(B=3, S=4)
    mask = np.array([[True, True, False, False], [False, False, False, False],
                     [True, True, True, True]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        h_tilde, context, weights = luong_attention(h_t, H_s, params, mask=mask)
    assert np.all(weights[~mask] == 0)
    np.testing.assert_allclose(weights.sum(axis=1), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(context[1], 0.0)
    # with no context, h_tilde still sees h_t
    np.testing.assert_allclose(h_tilde[1], np.tanh(h_t[1] @ params["W_c"][3:]))
    # a masked position's state has no influence
    H_changed = H_s.copy()
    H_changed[0, 3] += 100.0
    np.testing.assert_allclose(luong_attention(h_t, H_changed, params, mask=mask)[1][0], context[0])


def test_large_scores_stay_finite():
    h_t, H_s, params = random_problem(B=2, S=5, d=4)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        _, _, weights = luong_attention(60 * h_t, 60 * H_s, params, score="dot")
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)


# -- local attention -------------------------------------------------------------------

def test_predictive_position_by_hand_and_its_range():
    W_p, v_p = np.eye(2), np.array([LN3, 0.0])
    # tanh(0) = 0 -> σ(0) = 1/2 -> S/2; tanh(100) = 1 -> σ(ln 3) = 3/4 -> 3S/4
    np.testing.assert_allclose(predictive_position(np.array([[0.0, 0.0], [100.0, 0.0]]), W_p, v_p, 10),
                               [5.0, 7.5])
    h_t = rng.normal(size=(50, 3))
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        p = predictive_position(h_t, rng.normal(size=(3, 4)), 1000 * rng.normal(size=4), 12)
    assert p.shape == (50,) and np.all((0 <= p) & (p <= 12))
    assert np.isclose(p.min(), 0.0) and np.isclose(p.max(), 12.0)  # saturated both ways


def test_local_attention_by_hand():
    # dot scores are all 0, so the window's softmax is uniform: 1/5 on s = 1…5
    # (p_t = 3, D = 2); σ = 1 gives the Gaussian exp(-(s-3)²/2).
    H_s = np.arange(7.0).reshape(1, 7, 1)
    context, weights = local_attention(np.zeros((1, 1)), H_s, 3, 2, {}, score="dot")
    gauss = np.exp(-((np.arange(7) - 3.0) ** 2) / 2)
    expected = np.where(np.abs(np.arange(7) - 3) <= 2, 0.2 * gauss, 0.0)
    np.testing.assert_allclose(weights, [expected])
    np.testing.assert_allclose(context, [[expected @ np.arange(7.0)]])
    assert weights[0, 1] > 0 and weights[0, 5] > 0      # |s - p_t| = D is inside
    assert weights[0, 0] == 0 and weights[0, 6] == 0
    assert weights.sum() < 1                            # not renormalised


def test_local_weights_are_the_window_softmax_times_the_gaussian():
    h_t, H_s, params = random_problem(B=3, S=12, d=3)
    p_t, D = np.array([0.0, 6.4, 12.0]), 3
    _, weights = local_attention(h_t, H_s, p_t, D, params)
    scores = general_score(h_t, H_s, params["W_a"])
    for b in range(3):
        window = [s for s in range(12) if abs(s - p_t[b]) <= D]
        align = np.exp(scores[b, window]) / np.exp(scores[b, window]).sum()
        gauss = np.exp(-((np.array(window) - p_t[b]) ** 2) / (2 * (D / 2) ** 2))
        expected = np.zeros(12)
        expected[window] = align * gauss
        np.testing.assert_allclose(weights[b], expected)


def test_a_window_covering_everything_is_global_attention_times_the_gaussian():
    h_t, H_s, params = random_problem(B=2, S=6, d=3, d_a=2)
    _, _, global_weights = luong_attention(h_t, H_s, params, score="concat")
    _, weights = local_attention(h_t, H_s, np.array([2.5, 2.5]), 100, params, score="concat")
    np.testing.assert_allclose(weights, global_weights * np.exp(-(np.arange(6) - 2.5) ** 2 / 5000))


def test_local_m_takes_a_number_for_p_t():
    h_t, H_s, params = random_problem(B=2, S=8)
    for a, b in zip(local_attention(h_t, H_s, 4, 2, params, "dot"),
                    local_attention(h_t, H_s, np.array([4.0, 4.0]), 2, params, "dot")):
        np.testing.assert_array_equal(a, b)


def test_local_m_without_the_gaussian_is_the_window_softmax_alone_eq_7():
    # dot scores all 0, p_t = 3, D = 2: uniform 1/5 on s = 1…5, summing to 1
    H_s = np.arange(7.0).reshape(1, 7, 1)
    context, weights = local_attention(np.zeros((1, 1)), H_s, 3, 2, {}, "dot", gaussian=False)
    expected = np.where(np.abs(np.arange(7) - 3) <= 2, 0.2, 0.0)
    np.testing.assert_allclose(weights, [expected])
    np.testing.assert_allclose(context, [[3.0]])
    # on random states: the softmax over the window, rows summing to 1
    h_t, H_s, params = random_problem(B=3, S=12, d=3)
    p_t, D = np.array([0.0, 6.4, 11.0]), 3
    _, weights = local_attention(h_t, H_s, p_t, D, params, gaussian=False)
    _, with_gaussian = local_attention(h_t, H_s, p_t, D, params)
    scores = general_score(h_t, H_s, params["W_a"])
    for b in range(3):
        window = np.abs(np.arange(12) - p_t[b]) <= D
        expected = np.zeros(12)
        expected[window] = np.exp(scores[b, window]) / np.exp(scores[b, window]).sum()
        np.testing.assert_allclose(weights[b], expected)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(with_gaussian, weights * np.exp(-(np.arange(12) - p_t[:, None]) ** 2 / 4.5))


def test_a_window_outside_the_source_gives_zero_weights_and_context():
    h_t, H_s, params = random_problem(B=2, S=5)
    for gaussian in (True, False):
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            context, weights = local_attention(h_t, H_s, 20, 2, params, gaussian=gaussian)
        np.testing.assert_array_equal(weights, 0.0)
        np.testing.assert_array_equal(context, 0.0)


def test_local_attention_with_large_scores_and_unchanged_inputs():
    h_t, H_s, params = random_problem(B=2, S=9, d=4)
    h_t, H_s = 60 * h_t, 60 * H_s
    copies = h_t.copy(), H_s.copy()
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        context, weights = local_attention(h_t, H_s, np.array([5.0, 2.0]), 3, params, "dot")
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    np.testing.assert_array_equal(h_t, copies[0])
    np.testing.assert_array_equal(H_s, copies[1])


# -- shapes that cannot work -------------------------------------------------------------

def test_impossible_shapes_raise_errors_that_name_them():
    h_t, H_s, params = random_problem(B=2, S=5, d=3)
    with pytest.raises(ValueError, match=r"\(2, 4\)"):
        dot_score(rng.normal(size=(2, 4)), H_s)
    with pytest.raises(ValueError, match=r"\(3, 2\)"):
        general_score(h_t, H_s, rng.normal(size=(3, 2)))
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        concat_score(h_t, H_s, rng.normal(size=(3, 4)), rng.normal(size=4))
    with pytest.raises(ValueError, match="D must be positive"):
        local_attention(h_t, H_s, 2, 0, params)
