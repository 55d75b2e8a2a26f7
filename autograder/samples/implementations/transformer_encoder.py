"""What students write for the Transformer encoder exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (sums instead of mean and var, einsum, a loop over the sub-layers,
functools.reduce over the layers, a padding mask on both the queries and the
keys): the hidden checks must accept them. `MISTAKES` holds plausible wrong
implementations, each of one task: the hidden checks must reject every one,
and say why. Each function is self-contained, so that its source can be put
into a notebook's solution cell as a student would write it there; it may
call the other tasks' functions and the given `multi_head_attention` and
`sinusoidal_encoding`, which the notebook defines (here: the correct versions
below and the reference).
"""

import numpy as np

from solutions.multi_head import multi_head_attention  # noqa: F401 (the notebook's given cell)
from solutions.positional_encoding import sinusoidal_encoding  # noqa: F401 (given as well)

# -- correct, by other means -------------------------------------------------


def layer_norm(X, gamma, beta, eps=1e-5):
    # explicit sums over the features instead of mean and var
    d = X.shape[-1]
    centred = X - np.sum(X, axis=-1, keepdims=True) / d
    spread = np.sqrt(np.sum(centred * centred, axis=-1, keepdims=True) / d + eps)
    return gamma * (centred / spread) + beta


def position_wise_ffn(X, params):
    # einsum, and the ReLU as a product with the indicator of positive values
    hidden = np.einsum("...i,ij->...j", X, params["W_1"]) + params["b_1"]
    hidden = hidden * (hidden > 0)
    return np.einsum("...j,jk->...k", hidden, params["W_2"]) + params["b_2"]


def encoder_layer(X, params, num_heads, mask=None):
    # a loop over the two sub-layers, each followed by add & norm
    def self_attention(Y):
        return multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, mask)[0]

    def feed_forward(Y):
        return position_wise_ffn(Y, params["ffn"])

    for sublayer, norm in ((self_attention, "norm1"), (feed_forward, "norm2")):
        X = layer_norm(X + sublayer(X), params[norm]["gamma"], params[norm]["beta"])
    return X


def embed(tokens, E):
    # np.take, and the encoding added to each sequence in a loop
    d_model = E.shape[1]
    vectors = np.take(E, tokens, axis=0) * d_model ** 0.5
    PE = sinusoidal_encoding(tokens.shape[1], d_model)
    return np.stack([sequence + PE for sequence in vectors])


def encoder(src_tokens, params, num_heads, src_mask=None):
    # functools.reduce over the layers; the padding hidden as keys AND as
    # queries (the padded rows then attend to nothing): the outputs at the
    # real tokens are the same
    import functools
    mask = None
    if src_mask is not None:
        real = np.asarray(src_mask, dtype=bool)
        mask = real[:, np.newaxis, :, np.newaxis] & real[:, np.newaxis, np.newaxis, :]
    return functools.reduce(lambda X, layer: encoder_layer(X, layer, num_heads, mask),
                            params["encoder_layers"], embed(src_tokens, params["embedding"]))


CORRECT = {f.__name__: f for f in (layer_norm, position_wise_ffn, encoder_layer, embed, encoder)}


# -- mistakes ------------------------------------------------------------------


def layer_norm_unbiased(X, gamma, beta, eps=1e-5):
    mean = X.mean(axis=-1, keepdims=True)
    var = X.var(axis=-1, keepdims=True, ddof=1)
    return (X - mean) / np.sqrt(var + eps) * gamma + beta


def layer_norm_axis_0(X, gamma, beta, eps=1e-5):
    mean = X.mean(axis=0, keepdims=True)
    var = X.var(axis=0, keepdims=True)
    return (X - mean) / np.sqrt(var + eps) * gamma + beta


def layer_norm_over_tokens(X, gamma, beta, eps=1e-5):
    # normalises each feature over the tokens of a sequence
    mean = X.mean(axis=-2, keepdims=True)
    var = X.var(axis=-2, keepdims=True)
    return (X - mean) / np.sqrt(var + eps) * gamma + beta


def layer_norm_eps_outside(X, gamma, beta, eps=1e-5):
    mean = X.mean(axis=-1, keepdims=True)
    std = X.std(axis=-1, keepdims=True)
    return (X - mean) / (std + eps) * gamma + beta


def layer_norm_no_eps(X, gamma, beta, eps=1e-5):
    mean = X.mean(axis=-1, keepdims=True)
    return (X - mean) / X.std(axis=-1, keepdims=True) * gamma + beta


def layer_norm_gamma_beta_swapped(X, gamma, beta, eps=1e-5):
    mean = X.mean(axis=-1, keepdims=True)
    var = X.var(axis=-1, keepdims=True)
    return (X - mean) / np.sqrt(var + eps) * beta + gamma


def layer_norm_divides_by_variance(X, gamma, beta, eps=1e-5):
    mean = X.mean(axis=-1, keepdims=True)
    var = X.var(axis=-1, keepdims=True)
    return (X - mean) / (var + eps) * gamma + beta


def ffn_no_relu(X, params):
    return (X @ params["W_1"] + params["b_1"]) @ params["W_2"] + params["b_2"]


def ffn_relu_twice(X, params):
    hidden = np.maximum(0, X @ params["W_1"] + params["b_1"])
    return np.maximum(0, hidden @ params["W_2"] + params["b_2"])


def ffn_no_biases(X, params):
    return np.maximum(0, X @ params["W_1"]) @ params["W_2"]


def ffn_relu_before_bias(X, params):
    return (np.maximum(0, X @ params["W_1"]) + params["b_1"]) @ params["W_2"] + params["b_2"]


def encoder_layer_pre_ln(X, params, num_heads, mask=None):
    Y = layer_norm(X, **params["norm1"])
    X = X + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, mask)[0]
    return X + position_wise_ffn(layer_norm(X, **params["norm2"]), params["ffn"])


def encoder_layer_no_attention_residual(X, params, num_heads, mask=None):
    attended, _ = multi_head_attention(X, X, X, params["self_attn"], num_heads, mask)
    X = layer_norm(attended, **params["norm1"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm2"])


def encoder_layer_no_ffn_residual(X, params, num_heads, mask=None):
    attended, _ = multi_head_attention(X, X, X, params["self_attn"], num_heads, mask)
    X = layer_norm(X + attended, **params["norm1"])
    return layer_norm(position_wise_ffn(X, params["ffn"]), **params["norm2"])


def encoder_layer_ffn_first(X, params, num_heads, mask=None):
    X = layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm1"])
    attended, _ = multi_head_attention(X, X, X, params["self_attn"], num_heads, mask)
    return layer_norm(X + attended, **params["norm2"])


def encoder_layer_norms_swapped(X, params, num_heads, mask=None):
    attended, _ = multi_head_attention(X, X, X, params["self_attn"], num_heads, mask)
    X = layer_norm(X + attended, **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm1"])


def encoder_layer_mask_ignored(X, params, num_heads, mask=None):
    attended, _ = multi_head_attention(X, X, X, params["self_attn"], num_heads)
    X = layer_norm(X + attended, **params["norm1"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm2"])


def encoder_layer_norm_before_add(X, params, num_heads, mask=None):
    attended, _ = multi_head_attention(X, X, X, params["self_attn"], num_heads, mask)
    X = X + layer_norm(attended, **params["norm1"])
    return X + layer_norm(position_wise_ffn(X, params["ffn"]), **params["norm2"])


def embed_unscaled(tokens, E):
    return E[tokens] + sinusoidal_encoding(tokens.shape[1], E.shape[1])


def embed_scaled_by_d_model(tokens, E):
    return E[tokens] * E.shape[1] + sinusoidal_encoding(tokens.shape[1], E.shape[1])


def embed_no_positions(tokens, E):
    return E[tokens] * np.sqrt(E.shape[1])


def embed_positions_from_1(tokens, E):
    T, d_model = tokens.shape[1], E.shape[1]
    return E[tokens] * np.sqrt(d_model) + sinusoidal_encoding(T + 1, d_model)[1:]


def embed_scales_positions(tokens, E):
    return (E[tokens] + sinusoidal_encoding(tokens.shape[1], E.shape[1])) * np.sqrt(E.shape[1])


def encoder_first_layer_only(src_tokens, params, num_heads, src_mask=None):
    mask = None if src_mask is None else src_mask[:, None, None, :]
    X = embed(src_tokens, params["embedding"])
    return encoder_layer(X, params["encoder_layers"][0], num_heads, mask)


def encoder_layers_reversed(src_tokens, params, num_heads, src_mask=None):
    mask = None if src_mask is None else src_mask[:, None, None, :]
    X = embed(src_tokens, params["embedding"])
    for layer in reversed(params["encoder_layers"]):
        X = encoder_layer(X, layer, num_heads, mask)
    return X


def encoder_returns_inside_loop(src_tokens, params, num_heads, src_mask=None):
    mask = None if src_mask is None else src_mask[:, None, None, :]
    X = embed(src_tokens, params["embedding"])
    for layer in params["encoder_layers"]:
        X = encoder_layer(X, layer, num_heads, mask)
        return X


def encoder_mask_ignored(src_tokens, params, num_heads, src_mask=None):
    X = embed(src_tokens, params["embedding"])
    for layer in params["encoder_layers"]:
        X = encoder_layer(X, layer, num_heads)
    return X


def encoder_mask_on_queries(src_tokens, params, num_heads, src_mask=None):
    mask = None if src_mask is None else src_mask[:, None, :, None]
    X = embed(src_tokens, params["embedding"])
    for layer in params["encoder_layers"]:
        X = encoder_layer(X, layer, num_heads, mask)
    return X


def encoder_mask_not_reshaped(src_tokens, params, num_heads, src_mask=None):
    X = embed(src_tokens, params["embedding"])
    for layer in params["encoder_layers"]:
        X = encoder_layer(X, layer, num_heads, src_mask)
    return X


def encoder_mask_first_layer_only(src_tokens, params, num_heads, src_mask=None):
    mask = None if src_mask is None else src_mask[:, None, None, :]
    X = embed(src_tokens, params["embedding"])
    for layer in params["encoder_layers"]:
        X = encoder_layer(X, layer, num_heads, mask)
        mask = None
    return X


# task -> the hidden checks (in autograder/checks/transformer_encoder.py) that grade it
CHECKS_OF_TASK = {
    "layer_norm": ["check_layer_norm"],
    "position_wise_ffn": ["check_position_wise_ffn"],
    "encoder_layer": ["check_encoder_layer"],
    "embed": ["check_embed"],
    "encoder": ["check_encoder", "check_encoder_mask"],
}

# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "layernorm-unbiased-variance": ("layer_norm", layer_norm_unbiased, "check_layer_norm",
                                    "biased variance"),
    "layernorm-axis-0": ("layer_norm", layer_norm_axis_0, "check_layer_norm", "over axis 0"),
    "layernorm-over-tokens": ("layer_norm", layer_norm_over_tokens, "check_layer_norm",
                              "second-to-last axis"),
    "layernorm-eps-outside-sqrt": ("layer_norm", layer_norm_eps_outside, "check_layer_norm",
                                   "outside the square root"),
    "layernorm-no-eps": ("layer_norm", layer_norm_no_eps, "check_layer_norm", "eps"),
    "layernorm-gamma-beta-swapped": ("layer_norm", layer_norm_gamma_beta_swapped,
                                     "check_layer_norm", "swapped"),
    "layernorm-divides-by-variance": ("layer_norm", layer_norm_divides_by_variance,
                                      "check_layer_norm", "standard deviation"),
    "ffn-no-relu": ("position_wise_ffn", ffn_no_relu, "check_position_wise_ffn",
                    "ReLU is missing"),
    "ffn-relu-twice": ("position_wise_ffn", ffn_relu_twice, "check_position_wise_ffn",
                       "after W_2"),
    "ffn-no-biases": ("position_wise_ffn", ffn_no_biases, "check_position_wise_ffn",
                      "b_1 and b_2 are missing"),
    "ffn-relu-before-bias": ("position_wise_ffn", ffn_relu_before_bias,
                             "check_position_wise_ffn", "after the ReLU"),
    "encoder-layer-pre-ln": ("encoder_layer", encoder_layer_pre_ln, "check_encoder_layer",
                             "post-LN"),
    "encoder-layer-no-attention-residual": ("encoder_layer", encoder_layer_no_attention_residual,
                                            "check_encoder_layer",
                                            "around the self-attention is missing"),
    "encoder-layer-no-ffn-residual": ("encoder_layer", encoder_layer_no_ffn_residual,
                                      "check_encoder_layer",
                                      "around the feed-forward network is missing"),
    "encoder-layer-ffn-first": ("encoder_layer", encoder_layer_ffn_first, "check_encoder_layer",
                                "wrong order"),
    "encoder-layer-norms-swapped": ("encoder_layer", encoder_layer_norms_swapped,
                                    "check_encoder_layer", "norm1 and norm2 are swapped"),
    "encoder-layer-mask-ignored": ("encoder_layer", encoder_layer_mask_ignored,
                                   "check_encoder_layer", "mask is ignored"),
    "encoder-layer-norm-before-add": ("encoder_layer", encoder_layer_norm_before_add,
                                      "check_encoder_layer", "normalise the sum"),
    "embed-unscaled": ("embed", embed_unscaled, "check_embed", "not multiplied by √d_model"),
    "embed-scaled-by-d-model": ("embed", embed_scaled_by_d_model, "check_embed",
                                "its square root"),
    "embed-no-positions": ("embed", embed_no_positions, "check_embed",
                           "positional encoding is missing"),
    "embed-positions-from-1": ("embed", embed_positions_from_1, "check_embed",
                               "positions start at 1"),
    "embed-scales-positions": ("embed", embed_scales_positions, "check_embed",
                               "scale only the embeddings"),
    "encoder-first-layer-only": ("encoder", encoder_first_layer_only, "check_encoder",
                                 "only the first layer"),
    "encoder-layers-reversed": ("encoder", encoder_layers_reversed, "check_encoder",
                                "reverse order"),
    "encoder-returns-inside-loop": ("encoder", encoder_returns_inside_loop, "check_encoder",
                                    "only the first layer"),
    "encoder-mask-ignored": ("encoder", encoder_mask_ignored, "check_encoder_mask",
                             "mask is ignored"),
    "encoder-mask-on-queries": ("encoder", encoder_mask_on_queries, "check_encoder_mask",
                                "instead of the keys"),
    "encoder-mask-not-reshaped": ("encoder", encoder_mask_not_reshaped, "check_encoder_mask",
                                  "(B, 1, 1, T)"),
    "encoder-mask-first-layer-only": ("encoder", encoder_mask_first_layer_only,
                                      "check_encoder_mask", "first layer only"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["layernorm-unbiased-variance", "encoder-layer-pre-ln", "embed-unscaled",
                   "encoder-mask-on-queries"]


# -- two mistakes at once ------------------------------------------------------------

def layer_norm_unbiased_eps_outside(X, gamma, beta, eps=1e-5):
    X = np.asarray(X)
    centred = X - X.mean(axis=-1, keepdims=True)
    return centred / (np.sqrt(X.var(axis=-1, ddof=1, keepdims=True)) + eps) * gamma + beta


def ffn_no_relu_no_biases(X, params):
    return X @ params["W_1"] @ params["W_2"]


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "layernorm-unbiased-eps-outside": ({"layer_norm": layer_norm_unbiased_eps_outside}, "test_layer_norm",
                                       ("biased variance", "unbiased", "outside the square root", "eps")),
    "ffn-no-relu-no-biases": ({"position_wise_ffn": ffn_no_relu_no_biases}, "test_position_wise_ffn",
                              ("ReLU", "biases", "b_1", "b_2")),
}
