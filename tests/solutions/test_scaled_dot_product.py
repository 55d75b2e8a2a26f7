"""The reference scaled dot-product attention: hand-computed cases and properties."""

import numpy as np
import pytest

from solutions.scaled_dot_product import (
    causal_mask, masked_softmax, padding_mask, scaled_dot_product_attention, softmax)

rng = np.random.default_rng(0)


def random_qkv(lead=(), T_q=3, T_k=4, d_k=5, d_v=2):
    return (rng.normal(size=(*lead, T_q, d_k)), rng.normal(size=(*lead, T_k, d_k)),
            rng.normal(size=(*lead, T_k, d_v)))


# -- softmax ---------------------------------------------------------------------

def test_softmax_by_hand():
    np.testing.assert_allclose(softmax(np.array([0.0, np.log(3.0)])), [0.25, 0.75])
    x = np.array([[0.0, 0.0], [np.log(3.0), 0.0]])
    np.testing.assert_allclose(softmax(x, axis=0), [[0.25, 0.5], [0.75, 0.5]])


@pytest.mark.parametrize("offset", [1e4, -1e4, 1e8])
def test_softmax_is_stable_and_shift_invariant(offset):
    x = rng.normal(size=(3, 4))
    np.testing.assert_allclose(softmax(x + offset), softmax(x), atol=1e-6)


def test_masked_softmax_zeroes_masked_entries_and_empty_rows():
    scores = np.array([[0.0, np.log(3.0), 5.0], [1.0, 2.0, 3.0]])
    mask = np.array([[True, True, False], [False, False, False]])
    with np.errstate(all="raise"):  # no "invalid value" on the empty row
        weights = masked_softmax(scores, mask)
    np.testing.assert_allclose(weights, [[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]])


# -- attention -------------------------------------------------------------------

def test_attention_by_hand():
    # d_k = 4, so √d_k = 2 and the scores are [0, ln 3]
    Q = np.array([[np.log(3.0), np.log(3.0), 0.0, 0.0]])
    K = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    V = np.array([[4.0, 0.0, 1.0], [0.0, 4.0, 1.0]])
    output, weights = scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(weights, [[0.25, 0.75]])
    np.testing.assert_allclose(output, [[1.0, 3.0, 1.0]])


def test_attention_matches_a_loop_over_queries_and_keys():
    Q, K, V = random_qkv(lead=(2, 3))
    output, weights = scaled_dot_product_attention(Q, K, V)
    for index in np.ndindex(2, 3):
        for i, q in enumerate(Q[index]):
            scores = np.array([q @ k / np.sqrt(len(q)) for k in K[index]])
            w = np.exp(scores) / np.exp(scores).sum()
            np.testing.assert_allclose(weights[index][i], w)
            np.testing.assert_allclose(output[index][i], w @ V[index])


def test_weights_are_distributions_over_the_keys():
    Q, K, V = random_qkv(lead=(4,), T_q=6, T_k=9)
    output, weights = scaled_dot_product_attention(Q, K, V)
    assert weights.shape == (4, 6, 9) and output.shape == (4, 6, 2)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)


def test_permuting_queries_permutes_outputs_and_permuting_keys_changes_nothing():
    Q, K, V = random_qkv(T_q=5, T_k=6)
    output, _ = scaled_dot_product_attention(Q, K, V)
    rows, keys = rng.permutation(5), rng.permutation(6)
    permuted, _ = scaled_dot_product_attention(Q[rows], K[keys], V[keys])
    np.testing.assert_allclose(permuted, output[rows])


def test_large_scores_stay_finite():
    Q, K, V = random_qkv(lead=(2,))
    output, weights = scaled_dot_product_attention(100 * Q, 100 * K, V)  # scores ~ 1e4
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)


def test_scaling_is_by_root_d_k_not_d_v():
    Q, K, V = random_qkv(d_k=16, d_v=3)
    _, weights = scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(weights, softmax(Q @ K.T / 4.0))


def test_masked_keys_get_zero_weight_and_the_rest_renormalise():
    Q, K, V = random_qkv(lead=(2,), T_q=4, T_k=4)
    mask = padding_mask(np.array([4, 2]), 4)[:, None, :] & causal_mask(4)
    output, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    assert np.all(weights[~mask] == 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)
    # A masked key's value has no influence on the output.
    V_changed = V.copy()
    V_changed[1, 3] += 100.0
    np.testing.assert_allclose(scaled_dot_product_attention(Q, K, V_changed, mask=mask)[0][1], output[1])


def test_a_query_with_no_allowed_key_gets_zeros_not_nan():
    Q, K, V = random_qkv(T_q=2, T_k=3)
    mask = np.array([[True, False, True], [False, False, False]])
    with np.errstate(all="raise"):
        output, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    np.testing.assert_array_equal(weights[1], 0.0)
    np.testing.assert_array_equal(output[1], 0.0)
    np.testing.assert_allclose(weights[0].sum(), 1.0)


def test_inputs_are_not_modified_and_float32_stays_float32():
    Q, K, V = (a.astype(np.float32) for a in random_qkv())
    copies = [a.copy() for a in (Q, K, V)]
    output, weights = scaled_dot_product_attention(Q, K, V, mask=np.ones((3, 4), dtype=bool))
    for a, copy in zip((Q, K, V), copies):
        np.testing.assert_array_equal(a, copy)
    assert output.dtype == weights.dtype == np.float32


@pytest.mark.parametrize("shapes, words", [
    (((3, 5), (4, 6), (4, 2)), "d_k=5"),
    (((3, 5), (4, 5), (7, 2)), "one value per key"),
    (((5,), (4, 5), (4, 2)), "at least 2 axes"),
    (((2, 3, 5), (3, 4, 5), (3, 4, 2)), "do not broadcast"),
])
def test_impossible_shapes_raise_value_errors_that_name_them(shapes, words):
    Q, K, V = (np.zeros(shape) for shape in shapes)
    with pytest.raises(ValueError, match=words) as error:
        scaled_dot_product_attention(Q, K, V)
    assert str(shapes[0]) in str(error.value) or str(shapes[1]) in str(error.value)


def test_bad_masks_raise_value_errors():
    Q, K, V = random_qkv()
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        scaled_dot_product_attention(Q, K, V, mask=np.ones((3, 3), dtype=bool))
    with pytest.raises(ValueError, match="boolean"):
        scaled_dot_product_attention(Q, K, V, mask=np.zeros((3, 4)))  # an additive float mask


# -- masks -----------------------------------------------------------------------

def test_causal_mask_by_hand():
    np.testing.assert_array_equal(causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert causal_mask(3).dtype == bool and causal_mask(0).shape == (0, 0)


def test_padding_mask_by_hand():
    np.testing.assert_array_equal(padding_mask(np.array([2, 3, 0]), 3),
                                  [[1, 1, 0], [1, 1, 1], [0, 0, 0]])
    assert padding_mask(np.array([1]), 2).dtype == bool


@pytest.mark.parametrize("call", [
    lambda: causal_mask(-1), lambda: causal_mask(2.5),
    lambda: padding_mask(np.array([4]), 3), lambda: padding_mask(np.array([[1]]), 3),
    lambda: padding_mask(np.array([1.0]), 3),
])
def test_bad_mask_arguments_raise_value_errors(call):
    with pytest.raises(ValueError):
        call()
