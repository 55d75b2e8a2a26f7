"""The reference multi-head attention: hand-computed cases, equivalences and properties."""

import nbformat
import numpy as np
import pytest

from tests.support import COURSE
from solutions.multi_head import merge_heads, multi_head_attention, split_heads
from solutions.scaled_dot_product import causal_mask, padding_mask, scaled_dot_product_attention

rng = np.random.default_rng(0)


def random_problem(B=2, T_q=4, T_k=5, d_model=8):
    Q, K, V = (rng.normal(size=(B, T, d_model)) for T in (T_q, T_k, T_k))
    params = {f"W_{n}": rng.normal(size=(d_model, d_model)) / np.sqrt(d_model) for n in "qkvo"}
    params |= {f"b_{n}": rng.normal(size=d_model) for n in "qkvo"}
    return Q, K, V, params


# -- split and merge -------------------------------------------------------------

def test_split_heads_by_hand():
    X = np.arange(12.0).reshape(1, 2, 6)  # two tokens, features 0-5 and 6-11
    heads = split_heads(X, 3)
    assert heads.shape == (1, 3, 2, 2)
    np.testing.assert_array_equal(heads[0], [[[0, 1], [6, 7]],
                                             [[2, 3], [8, 9]],
                                             [[4, 5], [10, 11]]])


def test_merge_heads_by_hand():
    heads = np.array([[[[0.0, 1.0]], [[2.0, 3.0]]]])  # (B=1, h=2, T=1, d_head=2)
    np.testing.assert_array_equal(merge_heads(heads), [[[0.0, 1.0, 2.0, 3.0]]])


@pytest.mark.parametrize("B, T, d, h", [(2, 3, 8, 2), (1, 5, 12, 3), (3, 1, 4, 4), (2, 4, 6, 1)])
def test_merge_undoes_split_and_split_undoes_merge(B, T, d, h):
    X = rng.normal(size=(B, T, d))
    np.testing.assert_array_equal(merge_heads(split_heads(X, h)), X)
    heads = rng.normal(size=(B, h, T, d // h))
    np.testing.assert_array_equal(split_heads(merge_heads(heads), h), heads)


def test_head_i_holds_its_block_of_consecutive_features():
    X = rng.normal(size=(2, 3, 12))
    heads = split_heads(X, 4)
    for i in range(4):
        np.testing.assert_array_equal(heads[:, i], X[:, :, 3 * i:3 * (i + 1)])


# -- multi-head attention --------------------------------------------------------

def identity_params(d_model):
    return {f"W_{n}": np.eye(d_model) for n in "qkvo"} | {f"b_{n}": np.zeros(d_model) for n in "qkvo"}


def test_multi_head_attention_by_hand():
    # d_model = 8, two heads of d_head = 4, so √d_head = 2 (√d_model would be 2.83).
    # Head 0 (features 0-3) scores the keys [0, ln 3], head 1 (features 4-7) [ln 3, 0].
    ln3 = np.log(3.0)
    Q = np.array([[[ln3, ln3, 0, 0, ln3, ln3, 0, 0]]])
    K = np.array([[[0, 0, 0, 0, 1, 1, 0, 0],
                   [1, 1, 0, 0, 0, 0, 0, 0]]], dtype=float)
    V = np.array([[[4, 0, 0, 0, 8, 0, 0, 0],
                   [0, 4, 0, 0, 0, 0, 0, 0]]], dtype=float)
    output, weights = multi_head_attention(Q, K, V, identity_params(8), 2)
    np.testing.assert_allclose(weights, [[[[0.25, 0.75]], [[0.75, 0.25]]]])
    np.testing.assert_allclose(output, [[[1, 3, 0, 0, 6, 0, 0, 0]]])
    # W_o reverses the features and b_o adds 0 … 7.
    params = identity_params(8) | {"W_o": np.eye(8)[::-1], "b_o": np.arange(8.0)}
    output, _ = multi_head_attention(Q, K, V, params, 2)
    np.testing.assert_allclose(output, [[[0, 1, 2, 9, 4, 5, 9, 8]]])


def test_equals_h_separate_single_head_attentions_with_sliced_weights():
    Q, K, V, params = random_problem(T_q=3, T_k=6, d_model=12)
    h, d_head = 3, 4
    output, weights = multi_head_attention(Q, K, V, params, h)
    heads = []
    for i in range(h):
        cols = slice(i * d_head, (i + 1) * d_head)
        head, w = scaled_dot_product_attention(Q @ params["W_q"][:, cols] + params["b_q"][cols],
                                               K @ params["W_k"][:, cols] + params["b_k"][cols],
                                               V @ params["W_v"][:, cols] + params["b_v"][cols])
        heads.append(head)
        np.testing.assert_allclose(weights[:, i], w)
    np.testing.assert_allclose(output, np.concatenate(heads, -1) @ params["W_o"] + params["b_o"])
    # ... which is also a sum over heads, each through its own rows of W_o
    by_sum = sum(head @ params["W_o"][i * d_head:(i + 1) * d_head] for i, head in enumerate(heads))
    np.testing.assert_allclose(output, by_sum + params["b_o"])


def test_equals_an_einsum_formulation():
    Q, K, V, params = random_problem(d_model=8)
    h, d_head = 4, 2
    q, k, v = (np.einsum("btd,dhe->bhte", X, params[f"W_{n}"].reshape(8, h, d_head))
               + params[f"b_{n}"].reshape(h, 1, d_head) for X, n in ((Q, "q"), (K, "k"), (V, "v")))
    scores = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(d_head)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    expected = np.einsum("bhqk,bhke,hed->bqd", w, v, params["W_o"].reshape(h, d_head, 8)) + params["b_o"]
    output, weights = multi_head_attention(Q, K, V, params, h)
    np.testing.assert_allclose(weights, w)
    np.testing.assert_allclose(output, expected)


def test_one_head_is_single_head_attention_on_the_projections():
    Q, K, V, params = random_problem()
    output, weights = multi_head_attention(Q, K, V, params, 1)
    context, w = scaled_dot_product_attention(*(X @ params[f"W_{n}"] + params[f"b_{n}"]
                                                for X, n in ((Q, "q"), (K, "k"), (V, "v"))))
    np.testing.assert_allclose(weights[:, 0], w)
    np.testing.assert_allclose(output, context @ params["W_o"] + params["b_o"])


def test_scores_are_scaled_by_root_d_head_not_root_d_model():
    Q, K, V, params = random_problem(d_model=16)
    _, weights = multi_head_attention(Q, K, V, params, 4)  # d_head = 4
    q = split_heads(Q @ params["W_q"] + params["b_q"], 4)
    k = split_heads(K @ params["W_k"] + params["b_k"], 4)
    scores = q @ np.swapaxes(k, -1, -2) / 2.0
    expected = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    np.testing.assert_allclose(weights, expected)


def test_shapes_and_weights_are_distributions_over_the_keys():
    Q, K, V, params = random_problem(B=3, T_q=2, T_k=7, d_model=12)
    output, weights = multi_head_attention(Q, K, V, params, 6)
    assert output.shape == (3, 2, 12) and weights.shape == (3, 6, 2, 7)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(-1), 1.0)


def test_the_key_bias_changes_nothing_and_the_value_bias_passes_through_W_o():
    # q · (k + b_k) adds q · b_k to every score of a row, which the softmax ignores;
    # the weights sum to 1, so b_v comes out as b_v @ W_o.
    Q, K, V, params = random_problem()
    output, weights = multi_head_attention(Q, K, V, params, 2)
    no_b_k = multi_head_attention(Q, K, V, params | {"b_k": np.zeros(8)}, 2)
    np.testing.assert_allclose(no_b_k[0], output)
    np.testing.assert_allclose(no_b_k[1], weights)
    no_b_v = multi_head_attention(Q, K, V, params | {"b_v": np.zeros(8)}, 2)[0]
    np.testing.assert_allclose(no_b_v + params["b_v"] @ params["W_o"], output)


def test_parameter_count_is_4_d_squared_plus_4_d():
    _, _, _, params = random_problem(d_model=8)
    assert sum(p.size for p in params.values()) == 4 * 8 ** 2 + 4 * 8


# -- masks -----------------------------------------------------------------------

def test_masks_of_every_broadcasting_shape():
    Q, _, _, params = random_problem(B=3, T_q=5, T_k=5)
    padding = padding_mask(np.array([5, 3, 2]), 5)[:, None, None, :]   # (B, 1, 1, T_k)
    causal = causal_mask(5)                                            # (T, T)
    per_head = np.stack([causal, causal.T])[None]                      # (1, h, T, T)
    for mask in (padding, causal, causal & padding, per_head):
        output, weights = multi_head_attention(Q, Q, Q, params, 2, mask=mask)
        allowed = np.broadcast_to(mask, weights.shape)
        assert np.all(weights[~allowed] == 0)
        np.testing.assert_allclose(weights.sum(-1), 1.0)
        for i in range(2):  # each head is masked attention with its slice of the mask
            cols = slice(4 * i, 4 * (i + 1))
            _, w = scaled_dot_product_attention(*(Q @ params[f"W_{n}"][:, cols] + params[f"b_{n}"][cols]
                                                  for n in "qkv"), mask=allowed[:, i])
            np.testing.assert_allclose(weights[:, i], w)


def test_a_query_with_no_allowed_key_outputs_b_o():
    Q, K, V, params = random_problem(B=1, T_q=2, T_k=3)
    mask = np.array([[True, True, False], [False, False, False]])
    with np.errstate(all="raise"):
        output, weights = multi_head_attention(Q, K, V, params, 2, mask=mask)
    np.testing.assert_array_equal(weights[:, :, 1], 0.0)
    np.testing.assert_allclose(output[0, 1], params["b_o"])


def test_inputs_and_params_are_not_modified():
    Q, K, V, params = random_problem()
    copies = [a.copy() for a in (Q, K, V)], {k: v.copy() for k, v in params.items()}
    multi_head_attention(Q, K, V, params, 4, mask=padding_mask(np.array([5, 2]), 5)[:, None, None, :])
    for a, copy in zip((Q, K, V), copies[0]):
        np.testing.assert_array_equal(a, copy)
    for key, value in copies[1].items():
        np.testing.assert_array_equal(params[key], value)


@pytest.mark.parametrize("call, words", [
    (lambda: split_heads(np.zeros((1, 2, 6)), 4), "d_model=6"),
    (lambda: split_heads(np.zeros((2, 6)), 2), r"\(2, 6\)"),
    (lambda: merge_heads(np.zeros((2, 3, 4))), r"\(2, 3, 4\)"),
    (lambda: multi_head_attention(*random_problem()[:4], 3), "num_heads=3"),
    (lambda: multi_head_attention(np.zeros((2, 3, 8)), np.zeros((2, 4, 8)), np.zeros((2, 5, 8)),
                                  random_problem()[3], 2), r"\(2, 5, 8\)"),
    (lambda: multi_head_attention(np.zeros((2, 3, 8)), np.zeros((1, 4, 8)), np.zeros((1, 4, 8)),
                                  random_problem()[3], 2), r"\(1, 4, 8\)"),
])
def test_impossible_shapes_raise_value_errors_that_name_them(call, words):
    with pytest.raises(ValueError, match=words):
        call()


# -- the exercise's given attention ----------------------------------------------

def test_the_attention_given_in_the_exercise_matches_the_reference():
    notebook = nbformat.read(COURSE.source / "multi_head" / "multi_head.ipynb", as_version=4)
    [cell] = [c for c in notebook.cells
              if c.metadata.get("nbgrader", {}).get("grade_id") == "given_attention"]
    assert cell.metadata["nbgrader"]["locked"] and "BEGIN SOLUTION" not in cell.source
    namespace = {"np": np}
    exec(cell.source, namespace)
    given = namespace["scaled_dot_product_attention"]
    Q, K, V = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 6, 5)), rng.normal(size=(2, 3, 6, 2))
    mask = padding_mask(np.array([6, 0]), 6)[:, None, None, :] & (rng.random((3, 4, 6)) < 0.7)
    for m in (None, mask):
        with np.errstate(all="raise"):
            for actual, expected in zip(given(Q, K, V, m), scaled_dot_product_attention(Q, K, V, m)):
                np.testing.assert_allclose(actual, expected)
    for actual, expected in zip(given(70 * Q, 70 * K, V), scaled_dot_product_attention(70 * Q, 70 * K, V)):
        np.testing.assert_allclose(actual, expected)
