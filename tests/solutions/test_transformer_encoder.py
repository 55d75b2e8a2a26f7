"""The reference Transformer encoder: hand-computed cases, properties, padding, errors."""

import nbformat
import numpy as np
import pytest

from tests.support import COURSE
from solutions.multi_head import multi_head_attention
from solutions.positional_encoding import sinusoidal_encoding
from solutions.scaled_dot_product import padding_mask
from solutions.transformer_encoder import (
    embed, encoder, encoder_layer, layer_norm, padding_to_attention_mask, position_wise_ffn)

rng = np.random.default_rng(0)
EPS = 1e-5


def random_layer(d_model, d_ff):
    def matrix(n_in, n_out):
        return rng.normal(size=(n_in, n_out)) / np.sqrt(n_in)
    attention = {f"W_{n}": matrix(d_model, d_model) for n in "qkvo"}
    attention |= {f"b_{n}": 0.1 * rng.normal(size=d_model) for n in "qkvo"}
    return {"self_attn": attention,
            "norm1": {"gamma": 1 + 0.1 * rng.normal(size=d_model),
                      "beta": 0.1 * rng.normal(size=d_model)},
            "ffn": {"W_1": matrix(d_model, d_ff), "b_1": 0.1 * rng.normal(size=d_ff),
                    "W_2": matrix(d_ff, d_model), "b_2": 0.1 * rng.normal(size=d_model)},
            "norm2": {"gamma": 1 + 0.1 * rng.normal(size=d_model),
                      "beta": 0.1 * rng.normal(size=d_model)}}


def random_encoder(V, d_model, d_ff, N):
    return {"embedding": rng.normal(size=(V, d_model)) / np.sqrt(d_model),
            "encoder_layers": [random_layer(d_model, d_ff) for _ in range(N)]}


# -- layer_norm ------------------------------------------------------------------

def test_layer_norm_by_hand():
    x = np.array([0.0, 0.0, 4.0, 4.0])  # mean 2, biased variance 4
    np.testing.assert_allclose(layer_norm(x, np.ones(4), np.zeros(4)),
                               np.array([-2, -2, 2, 2]) / np.sqrt(4 + EPS))
    gamma, beta = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.0, 0.0, 0.0, 10.0])
    np.testing.assert_allclose(layer_norm(x, gamma, beta, eps=0.0), [-1, -2, 3, 14])
    # eps inside the square root: / √(4 + 5) = / 3
    np.testing.assert_allclose(layer_norm(x, np.ones(4), np.zeros(4), eps=5.0),
                               [-2 / 3, -2 / 3, 2 / 3, 2 / 3])


def test_layer_norm_normalises_each_vector_over_the_last_axis():
    X = 3.0 + 5.0 * rng.normal(size=(2, 3, 4, 16))
    out = layer_norm(X, np.ones(16), np.zeros(16), eps=0.0)
    np.testing.assert_allclose(out.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=-1), 1.0)  # biased variance
    # each vector on its own: the same as one vector at a time
    gamma, beta = rng.normal(size=16), rng.normal(size=16)
    by_vector = np.array([layer_norm(x, gamma, beta) for x in X.reshape(-1, 16)])
    np.testing.assert_allclose(layer_norm(X, gamma, beta), by_vector.reshape(X.shape))


def test_layer_norm_ignores_shift_and_scale_of_the_input():
    X = rng.normal(size=(5, 8))
    gamma, beta = rng.normal(size=8), rng.normal(size=8)
    np.testing.assert_allclose(layer_norm(7.0 + 3.0 * X, gamma, beta, eps=0.0),
                               layer_norm(X, gamma, beta, eps=0.0))


def test_layer_norm_of_a_constant_vector_is_beta():
    beta = rng.normal(size=6)
    with np.errstate(all="raise"):
        out = layer_norm(np.full((2, 6), 3.0), rng.normal(size=6), beta)
    np.testing.assert_allclose(out, np.broadcast_to(beta, (2, 6)))


# -- position_wise_ffn -------------------------------------------------------------

def test_ffn_by_hand():
    params = {"W_1": np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]), "b_1": np.array([0.0, 0.0, -1.0]),
              "W_2": np.array([[1.0, -2.0], [5.0, 5.0], [7.0, 7.0]]), "b_2": np.array([0.0, -1.0])}
    # hidden [1, -1, -1] -> ReLU [1, 0, 0] -> [1, -2] + [0, -1]
    np.testing.assert_allclose(position_wise_ffn(np.array([[1.0, -1.0]]), params), [[1.0, -3.0]])


def test_ffn_is_the_same_network_at_every_position():
    params = random_layer(8, 32)["ffn"]
    X = rng.normal(size=(2, 5, 8))
    out = position_wise_ffn(X, params)
    assert out.shape == X.shape
    for b, t in np.ndindex(2, 5):
        hidden = np.maximum(0.0, X[b, t] @ params["W_1"] + params["b_1"])
        np.testing.assert_allclose(out[b, t], hidden @ params["W_2"] + params["b_2"])
    order = rng.permutation(5)
    np.testing.assert_allclose(position_wise_ffn(X[:, order], params), out[:, order])


# -- encoder_layer -----------------------------------------------------------------

def constant_layer(d=4, d_ff=8):
    """Attention output b_v = [1, 1, -1, -1] everywhere, FFN output b_2, plain norms."""
    zeros = np.zeros((d, d))
    return {"self_attn": {"W_q": zeros, "W_k": zeros, "W_v": zeros, "W_o": np.eye(d),
                          "b_q": np.zeros(d), "b_k": np.zeros(d),
                          "b_v": np.array([1.0, 1.0, -1.0, -1.0]), "b_o": np.zeros(d)},
            "norm1": {"gamma": np.ones(d), "beta": np.zeros(d)},
            "ffn": {"W_1": np.zeros((d, d_ff)), "b_1": np.zeros(d_ff), "W_2": np.zeros((d_ff, d)),
                    "b_2": np.array([0.0, np.sqrt(2), -np.sqrt(2), 0.0])},
            "norm2": {"gamma": np.ones(d), "beta": np.zeros(d)}}


def test_encoder_layer_by_hand_is_post_ln():
    X = np.array([[[1.0, -1.0, 1.0, -1.0]]])
    Z = np.array([2.0, 0.0, 0.0, -2.0]) / np.sqrt(2 + EPS)   # LayerNorm(X + b_v)
    Y = Z + np.array([0.0, np.sqrt(2), -np.sqrt(2), 0.0])    # Z + FFN(Z)
    expected = Y / np.sqrt(np.mean(Y ** 2) + EPS)
    np.testing.assert_allclose(encoder_layer(X, constant_layer(), 2), [[expected]])
    np.testing.assert_allclose(expected, [1, 1, -1, -1], atol=1e-5)


def test_encoder_layer_is_the_composition_of_its_sublayers():
    p = random_layer(12, 48)
    X = rng.normal(size=(3, 5, 12))
    attended, _ = multi_head_attention(X, X, X, p["self_attn"], 3)
    Z = layer_norm(X + attended, p["norm1"]["gamma"], p["norm1"]["beta"])
    expected = layer_norm(Z + position_wise_ffn(Z, p["ffn"]), p["norm2"]["gamma"], p["norm2"]["beta"])
    np.testing.assert_allclose(encoder_layer(X, p, 3), expected)


def test_encoder_layer_ends_with_a_layer_norm():
    p = random_layer(8, 32)
    p["norm2"] = {"gamma": np.ones(8), "beta": np.zeros(8)}
    out = encoder_layer(10.0 * rng.normal(size=(2, 4, 8)), p, 2)
    np.testing.assert_allclose(out.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=-1), 1.0, rtol=1e-4)


def test_encoder_layer_is_permutation_equivariant_without_a_mask():
    p = random_layer(8, 32)
    X = rng.normal(size=(2, 6, 8))
    order = rng.permutation(6)
    np.testing.assert_allclose(encoder_layer(X[:, order], p, 2), encoder_layer(X, p, 2)[:, order])


def test_encoder_layer_passes_the_mask_on():
    p = random_layer(8, 32)
    X = rng.normal(size=(1, 3, 8))
    mask = np.array([True, True, False]).reshape(1, 1, 1, 3)
    np.testing.assert_allclose(encoder_layer(X, p, 2, mask)[:, :2], encoder_layer(X[:, :2], p, 2))


# -- embed -------------------------------------------------------------------------

def test_embed_by_hand():
    E = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, -1.0, 0.5], [0.0, 2.0, 0.0, -1.0]])
    PE = np.array([[0.0, 1.0, 0.0, 1.0], [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)]])
    np.testing.assert_allclose(embed(np.array([[2, 1]]), E), [[2 * E[2] + PE[0], 2 * E[1] + PE[1]]])


def test_embed_scales_by_the_square_root_of_d_model_then_adds_positions():
    E = rng.normal(size=(7, 16))
    tokens = rng.integers(0, 7, size=(3, 5))
    out = embed(tokens, E)
    assert out.shape == (3, 5, 16)
    np.testing.assert_allclose(out - sinusoidal_encoding(5, 16), 4.0 * E[tokens])


@pytest.mark.parametrize("tokens, words", [
    (np.array([[0.0, 1.0]]), "integer"),
    (np.array([0, 1]), "(B, T)"),
    (np.array([[0, 7]]), "[0, 5)"),
    (np.array([[-1, 0]]), "[0, 5)"),
])
def test_embed_rejects_bad_tokens(tokens, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        embed(tokens, rng.normal(size=(5, 4)))


def test_embed_rejects_an_odd_d_model():
    with pytest.raises(ValueError, match="even"):
        embed(np.array([[0, 1]]), rng.normal(size=(5, 3)))


# -- encoder -----------------------------------------------------------------------

def test_encoder_applies_embed_then_every_layer_in_order():
    params = random_encoder(11, 8, 32, 3)
    tokens = rng.integers(0, 11, size=(2, 5))
    X = embed(tokens, params["embedding"])
    for layer in params["encoder_layers"]:
        X = encoder_layer(X, layer, 2)
    np.testing.assert_allclose(encoder(tokens, params, 2), X)
    assert not np.allclose(encoder(tokens, {**params, "encoder_layers": params["encoder_layers"][::-1]}, 2), X)


def test_encoder_without_layers_is_the_embedding():
    params = random_encoder(5, 8, 32, 0)
    tokens = rng.integers(0, 5, size=(2, 3))
    np.testing.assert_allclose(encoder(tokens, params, 2), embed(tokens, params["embedding"]))


def test_padding_to_attention_mask_puts_the_mask_on_the_keys():
    mask = padding_mask(np.array([3, 1]), 4)
    assert padding_to_attention_mask(None) is None
    attention_mask = padding_to_attention_mask(mask)
    assert attention_mask.shape == (2, 1, 1, 4)
    assert np.array_equal(np.broadcast_to(attention_mask, (2, 3, 4, 4))[1, 2, 0], mask[1])


def test_real_tokens_do_not_see_the_padding():
    params = random_encoder(10, 8, 32, 2)
    lengths = np.array([5, 3, 1])
    src_mask = padding_mask(lengths, 5)
    tokens = np.where(src_mask, rng.integers(1, 10, size=(3, 5)), 0)
    out = encoder(tokens, params, 2, src_mask)
    # other padding ids: the real positions do not change
    other = np.where(src_mask, tokens, 7)
    np.testing.assert_allclose(encoder(other, params, 2, src_mask)[src_mask], out[src_mask])
    # a padded sequence's real tokens give what the sequence gives alone
    for b, length in enumerate(lengths):
        alone = encoder(tokens[b:b + 1, :length], params, 2)
        np.testing.assert_allclose(out[b, :length], alone[0])
    # without the mask, they do change
    assert not np.allclose(encoder(other, params, 2)[src_mask], encoder(tokens, params, 2)[src_mask])


def test_encoder_rejects_a_mask_that_does_not_broadcast():
    params = random_encoder(10, 8, 32, 1)
    tokens = rng.integers(0, 10, size=(3, 5))
    with pytest.raises(ValueError, match="broadcast"):
        encoder_layer(embed(tokens, params["embedding"]), params["encoder_layers"][0], 2,
                      padding_mask(np.array([5, 3, 1]), 5))


# -- the exercise's given code is the reference's --------------------------------

def test_the_exercise_gives_the_reference_functions():
    notebook = nbformat.read(COURSE.source / "transformer_encoder" / "transformer_encoder.ipynb",
                             as_version=4)
    given = {c.metadata["nbgrader"]["grade_id"]: c.source for c in notebook.cells
             if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("given")}
    namespace = {"np": np}
    for source in given.values():
        exec(source, namespace)
    Q, K, V = rng.normal(size=(2, 3, 12)), rng.normal(size=(2, 5, 12)), rng.normal(size=(2, 5, 12))
    params = random_layer(12, 16)["self_attn"]
    mask = padding_mask(np.array([5, 2]), 5)[:, None, None, :]
    for got, expected in zip(namespace["multi_head_attention"](Q, K, V, params, 3, mask),
                             multi_head_attention(Q, K, V, params, 3, mask)):
        np.testing.assert_allclose(got, expected)
    np.testing.assert_allclose(namespace["sinusoidal_encoding"](9, 10), sinusoidal_encoding(9, 10))
    made = namespace["random_encoder_params"](0, vocab_size=7, d_model=8, d_ff=32, num_layers=2)
    assert made["embedding"].shape == (7, 8) and len(made["encoder_layers"]) == 2
    assert encoder(np.array([[1, 2, 3]]), made, 2).shape == (1, 3, 8)
