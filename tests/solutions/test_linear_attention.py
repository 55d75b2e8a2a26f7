"""The reference of linear attention and the delta rule against direct computations of the API's formulas."""

import warnings

import numpy as np
import pytest

from solutions.efficient_attention import peak_memory
from solutions.linear_attention import (
    chunked_linear_attention, delta_rule, elu_feature_map, init_linear_attention_state, linear_attention,
    linear_attention_step)

rng = np.random.default_rng(0)


def direct(Q, K, V, causal, eps=1e-6):
    """The API's formula through the (T_q, T_k) matrix of similarities, query i at T_k − T_q + i."""
    A = elu_feature_map(Q) @ np.swapaxes(elu_feature_map(K), -1, -2)
    if causal:
        T_q, T_k = Q.shape[-2], K.shape[-2]
        A = A * ((T_k - T_q + np.arange(T_q))[:, None] >= np.arange(T_k))
    return (A @ V) / (A.sum(axis=-1, keepdims=True) + eps)


def test_elu_feature_map_is_elu_plus_one_positive_and_quiet():
    x = np.array([-800.0, -1.0, 0.0, 0.5, 800.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in the branch that is not taken
        phi = elu_feature_map(x)
    np.testing.assert_allclose(phi, [0.0, np.exp(-1.0), 1.0, 1.5, 801.0])
    assert np.all(elu_feature_map(rng.normal(size=1000) * 30) >= 0)
    assert elu_feature_map(np.ones(3, np.float32)).dtype == np.float32


@pytest.mark.parametrize("lead, T_q, T_k, causal", [((2, 3), 9, 9, True), ((2,), 5, 11, True), ((), 7, 4, True),
                                                    ((2,), 6, 13, False), ((), 200, 200, True), ((), 3, 150, True)])
def test_linear_attention_equals_the_formula(lead, T_q, T_k, causal):
    Q, K, V = rng.normal(size=(*lead, T_q, 4)), rng.normal(size=(*lead, T_k, 4)), rng.normal(size=(*lead, T_k, 3))
    np.testing.assert_allclose(linear_attention(Q, K, V, causal), direct(Q, K, V, causal), rtol=1e-12, atol=1e-14)


def test_a_query_that_sees_no_key_gets_zeros_even_without_eps():
    Q, K, V = rng.normal(size=(6, 3)), rng.normal(size=(2, 3)), rng.normal(size=(2, 2))
    output = linear_attention(Q, K, V, causal=True, eps=0.0)
    assert np.all(output[:4] == 0) and np.all(np.isfinite(output))
    assert np.all(linear_attention(Q, K[:0], V[:0]) == 0)


def test_float32_stays_float32():
    Q, K, V = (rng.normal(size=(2, 10, 4)).astype(np.float32) for _ in range(3))
    for output in (linear_attention(Q, K, V), linear_attention(Q, K, V, True), chunked_linear_attention(Q, K, V, 3),
                   delta_rule(Q, K, V, np.full((2, 10), 0.5, np.float32))):
        assert output.dtype == np.float32


def test_stepping_gives_the_causal_form_and_leaves_the_state_alone():
    Q, K, V = rng.normal(size=(2, 12, 4)), rng.normal(size=(2, 12, 4)), rng.normal(size=(2, 12, 3))
    state, rows = init_linear_attention_state((2,), 4, 3), []
    for t in range(12):
        before = {key: value.copy() for key, value in state.items()}
        output, new_state = linear_attention_step(Q[:, t], K[:, t], V[:, t], state)
        assert all(np.array_equal(state[key], before[key]) for key in state)
        assert new_state["S"].shape == (2, 4, 3) and new_state["z"].shape == (2, 4)
        rows.append(output)
        state = new_state
    np.testing.assert_allclose(np.stack(rows, axis=1), direct(Q, K, V, True), rtol=1e-12)


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 16, 64, 500])
def test_chunked_equals_the_causal_form(chunk_size):
    Q, K, V = rng.normal(size=(2, 50, 4)), rng.normal(size=(2, 50, 4)), rng.normal(size=(2, 50, 3))
    np.testing.assert_allclose(chunked_linear_attention(Q, K, V, chunk_size), direct(Q, K, V, True), rtol=1e-12)


def test_chunked_rejects_what_cannot_work():
    X = rng.normal(size=(5, 2))
    with pytest.raises(ValueError, match="same length"):
        chunked_linear_attention(X, X[:3], X[:3])
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_linear_attention(X, X, X, chunk_size=0)


def test_no_t_by_t_array():
    T = 8192  # one (T, T) float64 array: 512 MiB
    Q, K, V = (rng.normal(size=(T, 8)) for _ in range(3))
    for function, kwargs in ((linear_attention, {}), (linear_attention, {"causal": True}),
                             (chunked_linear_attention, {"chunk_size": 64})):
        _, peak = peak_memory(function, Q, K, V, **kwargs)
        assert peak < 8 * 2 ** 20, (function.__name__, kwargs, peak)


def test_delta_rule_is_the_api_recurrence():
    T, d_k, d_v = 7, 4, 3
    Q, V = rng.normal(size=(2, T, d_k)), rng.normal(size=(2, T, d_v))
    K = rng.normal(size=(2, T, d_k))
    K /= np.linalg.norm(K, axis=-1, keepdims=True)
    beta, gate = rng.uniform(0, 1, (2, T)), rng.uniform(0.2, 1, (2, T))
    S, expected = np.zeros((2, d_k, d_v)), []
    for t in range(T):
        for b in range(2):
            k = K[b, t][:, None]                              # a column, so k.T @ S is k_t @ S
            S[b] = gate[b, t] * (np.eye(d_k) - beta[b, t] * k @ k.T) @ S[b] + beta[b, t] * k @ V[b, t][None]
        expected.append(np.einsum("bk,bkv->bv", Q[:, t], S))
    np.testing.assert_allclose(delta_rule(Q, K, V, beta, gate), np.stack(expected, axis=1), rtol=1e-12)
    np.testing.assert_array_equal(delta_rule(Q, K, V, beta), delta_rule(Q, K, V, beta, np.ones((2, T))))


def test_delta_rule_with_beta_one_stores_orthonormal_pairs_exactly():
    K, V = np.linalg.qr(rng.normal(size=(6, 6)))[0], rng.normal(size=(6, 2))
    np.testing.assert_allclose(delta_rule(K, K, V, np.ones(6)), V, atol=1e-12)


@pytest.mark.parametrize("beta, gate", [(1.5, None), (-0.1, None), (np.nan, None), (0.5, 0.0), (0.5, 1.01),
                                        (0.5, np.nan)])
def test_delta_rule_rejects_rates_outside_their_intervals(beta, gate):
    X = rng.normal(size=(4, 3))
    with pytest.raises(ValueError, match="beta" if gate is None else "gate"):
        delta_rule(X, X, X, np.full(4, beta), None if gate is None else np.full(4, gate))
