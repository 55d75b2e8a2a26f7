"""The reference of attention at scale against the plain attention of the earlier chapters."""

import tracemalloc

import numpy as np
import pytest

from solutions.backpropagation import scaled_dot_product_attention_backward
from solutions.efficient_attention import (
    flash_attention, flash_attention_backward, grouped_query_attention, kv_cache_bytes,
    mean_pool_kv_heads, repeat_kv_heads, sliding_window_mask)
from solutions.multi_head import multi_head_attention
from solutions.scaled_dot_product import causal_mask, scaled_dot_product_attention

rng = np.random.default_rng(0)


def params_for(d_model, num_heads, num_kv_heads):
    d_kv = d_model // num_heads * num_kv_heads
    params = {"W_q": rng.normal(size=(d_model, d_model)), "W_o": rng.normal(size=(d_model, d_model)),
              "W_k": rng.normal(size=(d_model, d_kv)), "W_v": rng.normal(size=(d_model, d_kv))}
    return params | {f"b_{n}": rng.normal(size=params[f"W_{n}"].shape[1]) for n in "qkvo"}


# -- grouped-query attention -------------------------------------------------------

def test_gqa_with_as_many_kv_heads_as_heads_is_multi_head_attention():
    X, params = rng.normal(size=(2, 5, 8)), params_for(8, 4, 4)
    mask = causal_mask(5)
    for a, b in zip(grouped_query_attention(X, X, X, params, 4, 4, mask), multi_head_attention(X, X, X, params, 4, mask)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_gqa_query_head_i_uses_kv_head_i_over_group():
    B, T_q, T_k, d_model, h, g = 2, 3, 4, 12, 6, 2
    Q, K = rng.normal(size=(B, T_q, d_model)), rng.normal(size=(B, T_k, d_model))
    params = params_for(d_model, h, g)
    output, weights = grouped_query_attention(Q, K, K, params, h, g)
    assert output.shape == (B, T_q, d_model) and weights.shape == (B, h, T_q, T_k)
    d_head = d_model // h
    q = Q @ params["W_q"] + params["b_q"]
    k = K @ params["W_k"] + params["b_k"]
    for i in range(h):
        j = i // (h // g)
        scores = q[..., i * d_head:(i + 1) * d_head] @ k[..., j * d_head:(j + 1) * d_head].swapaxes(1, 2)
        expected = np.exp(scores / np.sqrt(d_head))
        np.testing.assert_allclose(weights[:, i], expected / expected.sum(-1, keepdims=True), rtol=1e-10)


def test_gqa_rejects_heads_that_do_not_group():
    X = rng.normal(size=(1, 2, 8))
    with pytest.raises(ValueError, match="num_heads=4.*num_kv_heads=3"):
        grouped_query_attention(X, X, X, params_for(8, 4, 4), 4, 3)


def test_mean_pooling_one_group_per_head_changes_nothing_and_pools_means():
    params = params_for(8, 4, 4)
    assert all(np.array_equal(params[key], value) for key, value in mean_pool_kv_heads(params, 4, 4).items())
    pooled = mean_pool_kv_heads(params, 4, 1)
    np.testing.assert_allclose(pooled["W_k"], params["W_k"].reshape(8, 4, 2).mean(axis=1))
    np.testing.assert_allclose(pooled["b_v"], params["b_v"].reshape(4, 2).mean(axis=0))


def test_repeated_kv_heads_run_grouped_query_attention_as_multi_head_attention():
    X, params = rng.normal(size=(2, 5, 12)), params_for(12, 6, 2)
    mask = causal_mask(5)
    for a, b in zip(multi_head_attention(X, X, X, repeat_kv_heads(params, 6, 2), 6, mask),
                    grouped_query_attention(X, X, X, params, 6, 2, mask)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    for key, value in mean_pool_kv_heads(repeat_kv_heads(params, 6, 2), 6, 2).items():
        np.testing.assert_allclose(value, params[key])


# -- the cache and the window ------------------------------------------------------

def test_kv_cache_bytes():
    assert kv_cache_bytes(1, 1, 1, 1, 1, 1) == 2
    # Llama 2 70B: 80 layers, 8 key/value heads of 128, 4096 positions, fp16: 1.25 GiB per sequence
    assert kv_cache_bytes(1, 4096, 80, 8, 128) == 1280 * 2 ** 20
    with pytest.raises(ValueError, match="seq_len"):
        kv_cache_bytes(1, -1, 1, 1, 1)


def test_sliding_window_mask():
    np.testing.assert_array_equal(sliding_window_mask(4, 4, 2), [[1, 0, 0, 0], [1, 1, 0, 0],
                                                                [0, 1, 1, 0], [0, 0, 1, 1]])
    np.testing.assert_array_equal(sliding_window_mask(5, 5, 5), causal_mask(5))
    np.testing.assert_array_equal(sliding_window_mask(5, 5, 99), causal_mask(5))
    # the last two queries of six positions
    np.testing.assert_array_equal(sliding_window_mask(2, 6, 3), [[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]])
    assert not sliding_window_mask(4, 2, 3)[:2].any()  # queries before every key see none
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(3, 3, 0)


# -- FlashAttention ----------------------------------------------------------------

CASES = [((2,), 7, 13, 4, 3, 5, True), ((2, 3), 13, 7, 4, 3, 4, True), ((), 10, 10, 8, 8, 3, False),
         ((2, 1), 5, 9, 4, 2, 64, True), ((3,), 16, 16, 4, 4, 4, True), ((), 1, 6, 2, 2, 1, False)]


@pytest.mark.parametrize("lead, T_q, T_k, d, d_v, block_size, causal", CASES)
def test_flash_attention_equals_plain_attention_forward_and_backward(lead, T_q, T_k, d, d_v, block_size, causal):
    Q, K, V = rng.normal(size=(*lead, T_q, d)), rng.normal(size=(T_k, d)), rng.normal(size=(*lead, T_k, d_v))
    mask = sliding_window_mask(T_q, T_k, T_k) if causal else None
    expected, weights = scaled_dot_product_attention(Q, K, V, mask)
    output, logsumexp = flash_attention(Q, K, V, block_size, causal)
    np.testing.assert_allclose(output, expected, atol=1e-12)
    scores = np.where(True if mask is None else mask, Q @ K.T / np.sqrt(d), -np.inf)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(logsumexp, np.log(np.exp(scores).sum(-1)), atol=1e-12)
    G = rng.normal(size=output.shape)
    for a, b in zip(flash_attention_backward(Q, K, V, output, logsumexp, G, block_size, causal),
                    scaled_dot_product_attention_backward(Q, K, V, G, mask)):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_queries_that_see_no_key_get_minus_inf_and_zeros_never_nan():
    Q, K, V = rng.normal(size=(6, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    output, logsumexp = flash_attention(Q, K, V, 2, causal=True)
    assert np.all(np.isneginf(logsumexp[:3])) and np.all(np.isfinite(logsumexp[3:]))
    assert np.all(output[:3] == 0)
    grads = flash_attention_backward(Q, K, V, output, logsumexp, np.ones_like(output), 2, True)
    assert all(np.all(np.isfinite(g)) for g in grads) and np.all(grads[0][:3] == 0)


def test_flash_attention_is_stable_for_large_scores():
    Q, K, V = 1e3 * rng.normal(size=(5, 4)), 1e3 * rng.normal(size=(9, 4)), rng.normal(size=(9, 3))
    output, logsumexp = flash_attention(Q, K, V, 2)
    np.testing.assert_allclose(output, scaled_dot_product_attention(Q, K, V)[0], atol=1e-9)
    assert np.all(np.isfinite(logsumexp))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 8])
def test_the_causal_backward_masks_before_exp(dtype, block_size):
    # query 0 must not see key 3, whose score 30·30·4/2 = 1800 exceeds its logsumexp by far more
    # than exp can take: exp before the mask gives inf · 0 = NaN (issue 28)
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=(6, 4)) for _ in range(3))
    Q[0] = K[3] = 30.0
    Q, K, V = (X.astype(dtype) for X in (Q, K, V))
    output, logsumexp = flash_attention(Q, K, V, block_size, causal=True)
    G = rng.normal(size=output.shape).astype(dtype)
    grads = flash_attention_backward(Q, K, V, output, logsumexp, G, block_size, causal=True)
    expected = scaled_dot_product_attention_backward(*(X.astype(float) for X in (Q, K, V, G)), causal_mask(6))
    for actual, right in zip(grads, expected):
        assert actual.dtype == dtype and np.all(np.isfinite(actual))
        np.testing.assert_allclose(actual, right, rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-4)


def test_inputs_are_not_modified_and_bad_shapes_raise():
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    copies = [a.copy() for a in (Q, K, V)]
    output, logsumexp = flash_attention(Q, K, V, 2)
    flash_attention_backward(Q, K, V, output, logsumexp, np.ones_like(output), 2)
    assert all(np.array_equal(a, b) for a, b in zip((Q, K, V), copies))
    with pytest.raises(ValueError, match="d_k"):
        flash_attention(Q, rng.normal(size=(5, 3)), V)
    with pytest.raises(ValueError, match="block_size"):
        flash_attention(Q, K, V, 0)
    with pytest.raises(ValueError, match="logsumexp"):
        flash_attention_backward(Q, K, V, output, logsumexp[:2], output, 2)


def peak_bytes(compute):
    tracemalloc.start()
    try:
        compute()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_flash_attention_memory_grows_linearly_not_quadratically():
    T, d = 2048, 16
    Q, K, V = (rng.normal(size=(T, d)) for _ in range(3))
    scores_bytes = T * T * 8
    assert peak_bytes(lambda: scaled_dot_product_attention(Q, K, V)) > scores_bytes
    assert peak_bytes(lambda: flash_attention(Q, K, V, 64)) < scores_bytes / 20
    output, logsumexp = flash_attention(Q, K, V, 64, causal=True)
    assert peak_bytes(lambda: flash_attention_backward(Q, K, V, output, logsumexp, output, 64, True)) \
        < scores_bytes / 20
