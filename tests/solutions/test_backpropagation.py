"""The reference backward functions against central differences, by hand and on edge cases."""

import numpy as np
import pytest

from solutions.backpropagation import (
    cross_entropy, layer_norm_backward, multi_head_attention_backward, numerical_gradient,
    position_wise_ffn_backward, relative_error, scaled_dot_product_attention_backward,
    softmax_backward)
from solutions.multi_head import multi_head_attention
from solutions.scaled_dot_product import causal_mask, scaled_dot_product_attention, softmax
from solutions.transformer_encoder import layer_norm, position_wise_ffn

rng = np.random.default_rng(0)
TOLERANCE = 1e-7  # relative error of a right gradient in float64 (central differences)


def assert_gradient(f, X, analytic):
    """``analytic`` is the gradient of the scalar ``f`` at ``X`` (central differences)."""
    numeric = numerical_gradient(f, X)
    assert analytic.shape == np.shape(X)
    assert np.all(np.isfinite(analytic))
    if np.linalg.norm(numeric) < 1e-6:  # a zero gradient (b_k's): no scale to be relative to
        np.testing.assert_allclose(analytic, numeric, atol=1e-8)
    else:
        assert relative_error(analytic, numeric) < TOLERANCE, relative_error(analytic, numeric)


def empty_row_mask(shape):
    """A random mask (..., T_q, T_k) with its first query row all masked."""
    mask = rng.random(shape) < 0.6
    mask[..., 0, :] = False
    mask[..., 1, 0] = True
    return mask


# -- the gradient checker ----------------------------------------------------------

def test_numerical_gradient_of_a_known_function_and_input_untouched():
    X = rng.normal(size=(2, 3))
    before = X.copy()
    np.testing.assert_allclose(numerical_gradient(lambda Y: np.sum(Y ** 3), X), 3 * X ** 2,
                               rtol=1e-8)
    np.testing.assert_array_equal(X, before)


def test_relative_error():
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0
    assert relative_error([1.0, 0.0], [1.0, 0.0]) == 0.0
    assert relative_error([1.0], [-1.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        relative_error(np.zeros(2), np.zeros(3))


# -- softmax -----------------------------------------------------------------------

def test_softmax_backward_by_hand():
    # w = (1/2, 1/2), g = (1, 0): Σ g w = 1/2, so w ⊙ (g − 1/2) = (1/4, −1/4)
    np.testing.assert_allclose(softmax_backward(np.array([0.5, 0.5]), np.array([1.0, 0.0])),
                               [0.25, -0.25])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_backward_matches_central_differences(axis):
    scores, G = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    analytic = softmax_backward(softmax(scores, axis), G, axis)
    assert_gradient(lambda S: np.sum(softmax(S, axis) * G), scores, analytic)


def test_softmax_backward_equals_the_jacobian_product():
    scores, g = rng.normal(size=5), rng.normal(size=5)
    w = softmax(scores)
    jacobian = np.diag(w) - np.outer(w, w)
    np.testing.assert_allclose(softmax_backward(w, g), jacobian @ g)


def test_softmax_backward_shape_mismatch_names_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        softmax_backward(np.ones((2, 4)) / 4, np.ones((2, 3)))


# -- scaled dot-product attention --------------------------------------------------

def sdpa_loss(G, mask=None):
    return lambda Q, K, V: np.sum(scaled_dot_product_attention(Q, K, V, mask)[0] * G)


@pytest.mark.parametrize("leading", [(), (3,), (2, 3)])
@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_backward_matches_central_differences(leading, masked):
    T_q, T_k, d_k, d_v = 4, 5, 3, 2
    Q, K = rng.normal(size=leading + (T_q, d_k)), rng.normal(size=leading + (T_k, d_k))
    V, G = rng.normal(size=leading + (T_k, d_v)), rng.normal(size=leading + (T_q, d_v))
    mask = empty_row_mask((T_q, T_k)) if masked else None  # broadcasts over the leading axes
    grads = scaled_dot_product_attention_backward(Q, K, V, G, mask)
    loss = sdpa_loss(G, mask)
    assert_gradient(lambda X: loss(X, K, V), Q, grads[0])
    assert_gradient(lambda X: loss(Q, X, V), K, grads[1])
    assert_gradient(lambda X: loss(Q, K, X), V, grads[2])
    if masked:  # the all-masked query row passes nothing back
        np.testing.assert_array_equal(grads[0][..., 0, :], 0.0)


def test_sdpa_backward_sums_over_broadcast_leading_axes():
    # the same keys and values (3, 5, d) for two batches of queries (2, 3, 4, d)
    Q, K, V = rng.normal(size=(2, 3, 4, 3)), rng.normal(size=(3, 5, 3)), rng.normal(size=(1, 5, 2))
    G = rng.normal(size=(2, 3, 4, 2))
    grads = scaled_dot_product_attention_backward(Q, K, V, G)
    loss = sdpa_loss(G)
    assert_gradient(lambda X: loss(Q, X, V), K, grads[1])
    assert_gradient(lambda X: loss(Q, K, X), V, grads[2])


def test_sdpa_backward_masked_keys_get_no_gradient():
    Q, K, V, G = (rng.normal(size=(2, 4, 3)) for _ in range(4))
    mask = np.array([True, True, False, False])  # keys 2 and 3 are padding
    grad_Q, grad_K, grad_V = scaled_dot_product_attention_backward(Q, K, V, G, mask)
    np.testing.assert_array_equal(grad_K[:, 2:], 0.0)
    np.testing.assert_array_equal(grad_V[:, 2:], 0.0)


def test_sdpa_backward_saturated_scores_are_finite():
    Q = np.array([[1e4, 0.0], [-1e4, 0.0]])
    K, V, G = np.eye(2), rng.normal(size=(2, 2)), rng.normal(size=(2, 2))
    for grad in scaled_dot_product_attention_backward(Q, K, V, G, causal_mask(2)):
        assert np.all(np.isfinite(grad))


def test_sdpa_backward_shape_mismatch_names_shapes():
    Q, K, V = rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 5))
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(3, 5\)"):
        scaled_dot_product_attention_backward(Q, K, V, np.ones((3, 4)))


# -- multi-head attention ----------------------------------------------------------

def mha_problem(B=2, T_q=3, T_k=4, d_model=6):
    Q, K, V = (rng.normal(size=(B, T, d_model)) for T in (T_q, T_k, T_k))
    params = {f"W_{n}": rng.normal(size=(d_model, d_model)) / np.sqrt(d_model) for n in "qkvo"}
    params |= {f"b_{n}": rng.normal(size=d_model) for n in "qkvo"}
    return Q, K, V, params, rng.normal(size=(B, T_q, d_model))


@pytest.mark.parametrize("masked", [False, True])
def test_mha_backward_matches_central_differences(masked):
    Q, K, V, params, G = mha_problem()
    mask = empty_row_mask((2, 1, 3, 4)) if masked else None  # per batch, all heads
    grad_Q, grad_K, grad_V, grad_params = multi_head_attention_backward(Q, K, V, params, 2, G, mask)

    def loss(Q=Q, K=K, V=V, **changed):
        return np.sum(multi_head_attention(Q, K, V, params | changed, 2, mask)[0] * G)

    assert_gradient(lambda X: loss(Q=X), Q, grad_Q)
    assert_gradient(lambda X: loss(K=X), K, grad_K)
    assert_gradient(lambda X: loss(V=X), V, grad_V)
    assert list(grad_params) == list(params)
    for key in params:
        assert_gradient(lambda P: loss(**{key: P}), params[key], grad_params[key])


def test_mha_self_attention_gradient_is_the_sum():
    X, _, _, params, G = mha_problem(T_q=4)
    grad_Q, grad_K, grad_V, _ = multi_head_attention_backward(X, X, X, params, 3, G, causal_mask(4))
    assert_gradient(lambda Y: np.sum(multi_head_attention(Y, Y, Y, params, 3, causal_mask(4))[0] * G),
                    X, grad_Q + grad_K + grad_V)


def test_mha_backward_errors_name_shapes():
    Q, K, V, params, G = mha_problem()
    with pytest.raises(ValueError, match=r"\(2, 4, 6\).*\(2, 3, 6\)"):
        multi_head_attention_backward(Q, K, V, params, 2, G[:, :1].repeat(4, axis=1))
    with pytest.raises(ValueError, match="num_heads"):
        multi_head_attention_backward(Q, K, V, params, 4, G)
    with pytest.raises(ValueError, match=r"\(2, 4, 6\)"):
        multi_head_attention_backward(Q, K, V[:, :, :5], params, 2, G)


# -- layer norm --------------------------------------------------------------------

@pytest.mark.parametrize("leading", [(), (3,), (2, 3)])
def test_layer_norm_backward_matches_central_differences(leading):
    d = 5
    X, G = rng.normal(size=leading + (d,)), rng.normal(size=leading + (d,))
    gamma, beta = rng.normal(size=d), rng.normal(size=d)
    grad_X, grad_gamma, grad_beta = layer_norm_backward(X, gamma, beta, G)
    assert_gradient(lambda Y: np.sum(layer_norm(Y, gamma, beta) * G), X, grad_X)
    assert_gradient(lambda g: np.sum(layer_norm(X, g, beta) * G), gamma, grad_gamma)
    assert_gradient(lambda b: np.sum(layer_norm(X, gamma, b) * G), beta, grad_beta)


def test_layer_norm_backward_of_a_constant_row_is_finite():
    X = np.full((2, 4), 3.0)
    grad_X, _, _ = layer_norm_backward(X, np.ones(4), np.zeros(4), rng.normal(size=(2, 4)))
    assert np.all(np.isfinite(grad_X))


def test_layer_norm_backward_errors_name_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        layer_norm_backward(np.ones((2, 4)), np.ones(4), np.zeros(4), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\(3,\)"):
        layer_norm_backward(np.ones((2, 4)), np.ones(3), np.zeros(4), np.ones((2, 4)))


# -- feed-forward ------------------------------------------------------------------

@pytest.mark.parametrize("leading", [(4,), (2, 3)])
def test_ffn_backward_matches_central_differences(leading):
    d_model, d_ff = 4, 6
    X, G = rng.normal(size=leading + (d_model,)), rng.normal(size=leading + (d_model,))
    params = {"W_1": rng.normal(size=(d_model, d_ff)), "b_1": rng.normal(size=d_ff),
              "W_2": rng.normal(size=(d_ff, d_model)), "b_2": rng.normal(size=d_model)}
    grad_X, grad_params = position_wise_ffn_backward(X, params, G)
    assert_gradient(lambda Y: np.sum(position_wise_ffn(Y, params) * G), X, grad_X)
    for key in params:
        assert_gradient(lambda P: np.sum(position_wise_ffn(X, params | {key: P}) * G),
                        params[key], grad_params[key])


def test_ffn_relu_derivative_at_zero_is_zero():
    params = {"W_1": np.eye(2), "b_1": np.zeros(2), "W_2": np.eye(2), "b_2": np.zeros(2)}
    grad_X, _ = position_wise_ffn_backward(np.array([[0.0, 1.0]]), params, np.ones((1, 2)))
    np.testing.assert_array_equal(grad_X, [[0.0, 1.0]])


def test_ffn_backward_shape_mismatch_names_shapes():
    params = {"W_1": np.ones((2, 3)), "b_1": np.zeros(3), "W_2": np.ones((3, 2)), "b_2": np.zeros(2)}
    with pytest.raises(ValueError, match=r"\(1, 3\).*\(1, 2\)"):
        position_wise_ffn_backward(np.ones((1, 2)), params, np.ones((1, 3)))


# -- cross-entropy -----------------------------------------------------------------

def test_cross_entropy_by_hand():
    # logits (0, ln 3): p = (1/4, 3/4); target 1 → loss −ln(3/4), gradient p − onehot
    loss, grad = cross_entropy(np.array([[0.0, np.log(3.0)]]), np.array([1]))
    assert loss == pytest.approx(-np.log(0.75))
    np.testing.assert_allclose(grad, [[0.25, -0.25]])
    # smoothing 0.5 over V = 2: q = (1/4, 3/4) = p, so the gradient vanishes
    loss, grad = cross_entropy(np.array([[0.0, np.log(3.0)]]), np.array([1]), label_smoothing=0.5)
    np.testing.assert_allclose(grad, 0.0, atol=1e-15)
    assert loss == pytest.approx(-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("leading", [(5,), (2, 3)])
def test_cross_entropy_matches_central_differences(smoothing, leading):
    V = 4
    logits = rng.normal(size=leading + (V,))
    targets = rng.integers(0, V, size=leading)
    mask = rng.random(leading) < 0.7
    mask.flat[0] = True
    targets = np.where(mask, targets, -100)  # ignored ids where not counted
    loss, grad = cross_entropy(logits, targets, mask, smoothing)
    assert isinstance(loss, float)
    assert_gradient(lambda L: cross_entropy(L, targets, mask, smoothing)[0], logits, grad)
    np.testing.assert_array_equal(grad[~mask], 0.0)


def test_cross_entropy_mean_over_counted_positions_only():
    logits, targets = rng.normal(size=(2, 3, 5)), rng.integers(0, 5, size=(2, 3))
    mask = np.array([[True, True, False], [True, False, False]])
    loss, _ = cross_entropy(logits, targets, mask)
    loss_real, _ = cross_entropy(logits[mask], targets[mask])
    assert loss == pytest.approx(loss_real)


def test_cross_entropy_smoothing_uses_eps_over_V_on_every_class():
    logits, targets = rng.normal(size=(3, 4)), np.array([0, 1, 2])
    _, grad = cross_entropy(logits, targets, label_smoothing=0.1)
    q = 0.9 * np.eye(4)[targets] + 0.1 / 4
    np.testing.assert_allclose(grad, (softmax(logits) - q) / 3)


def test_cross_entropy_extreme_logits_are_finite():
    logits = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, -1e4]])
    for smoothing in (0.0, 0.1):
        loss, grad = cross_entropy(logits, np.array([1, 1]), label_smoothing=smoothing)
        assert np.isfinite(loss) and np.all(np.isfinite(grad))
    loss, _ = cross_entropy(logits, np.array([1, 1]))
    assert loss == pytest.approx(1e4)  # first row: −log p_1 = 2e4, second row: 0


def test_cross_entropy_nothing_counted():
    loss, grad = cross_entropy(rng.normal(size=(2, 3)), np.array([-100, -100]),
                               np.array([False, False]), 0.1)
    assert loss == 0.0
    np.testing.assert_array_equal(grad, 0.0)


def test_cross_entropy_errors():
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 4\)"):
        cross_entropy(np.zeros((2, 4)), np.zeros(3, int))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        cross_entropy(np.zeros((2, 4)), np.array([0, 4]))
    with pytest.raises(ValueError, match="mask"):
        cross_entropy(np.zeros((2, 4)), np.array([0, 1]), np.array([1, 1]))


# -- every function: dtype kept, inputs untouched -----------------------------------

def all_calls(dtype):
    r = np.random.default_rng(1)

    def a(*shape):
        return r.normal(size=shape).astype(dtype)

    mha_params = {f"W_{n}": a(4, 4) for n in "qkvo"} | {f"b_{n}": a(4) for n in "qkvo"}
    ffn_params = {"W_1": a(4, 6), "b_1": a(6), "W_2": a(6, 4), "b_2": a(4)}
    mask = empty_row_mask((2, 3))
    return [
        (softmax_backward, (softmax(a(2, 3)), a(2, 3))),
        (scaled_dot_product_attention_backward, (a(2, 2, 4), a(2, 3, 4), a(2, 3, 4), a(2, 2, 4), mask)),
        (multi_head_attention_backward, (a(1, 2, 4), a(1, 3, 4), a(1, 3, 4), mha_params, 2, a(1, 2, 4), mask)),
        (layer_norm_backward, (a(2, 4), a(4), a(4), a(2, 4))),
        (position_wise_ffn_backward, (a(2, 4), ffn_params, a(2, 4))),
        (cross_entropy, (a(2, 5), np.array([1, -100]), np.array([True, False]), 0.1)),
    ]


def leaves(value):
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept_and_inputs_are_not_modified(dtype):
    for function, args in all_calls(dtype):
        copies = [np.copy(x) for x in leaves(args)]
        result = function(*args)
        for before, after in zip(copies, leaves(args)):
            np.testing.assert_array_equal(before, after)
        for grad in leaves(result):
            if isinstance(grad, np.ndarray):
                assert grad.dtype == dtype, function.__name__
