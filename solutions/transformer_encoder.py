"""The Transformer encoder (Vaswani et al. 2017, section 3.1), post-LN as in the paper.

Each layer: ``X = LayerNorm(X + MultiHead(X, X, X))``, then
``LayerNorm(X + FFN(X))``. No dropout: this is the model at inference.
"""

import math

import numpy as np

from .multi_head import multi_head_attention
from .positional_encoding import sinusoidal_encoding


def layer_norm(X, gamma, beta, eps=1e-5):
    """Normalise each vector of ``X (..., d)`` over its last axis, then scale and shift.

    ``(X − mean) / √(var + eps) · gamma + beta`` with the biased variance (the
    mean of squared deviations, dividing by ``d``), ``eps`` inside the square
    root; ``gamma, beta (d,)``.
    """
    X = np.asarray(X)
    mean = X.mean(axis=-1, keepdims=True)
    variance = X.var(axis=-1, keepdims=True)  # biased: divides by d
    return (X - mean) / np.sqrt(variance + eps) * gamma + beta


def position_wise_ffn(X, params):
    """``relu(X W_1 + b_1) W_2 + b_2``, the same two-layer network at every position.

    ``W_1 (d_model, d_ff)``, ``b_1 (d_ff,)``, ``W_2 (d_ff, d_model)``, ``b_2 (d_model,)``.
    """
    hidden = np.maximum(0.0, X @ params["W_1"] + params["b_1"])  # (..., T, d_ff)
    return hidden @ params["W_2"] + params["b_2"]


def encoder_layer(X, params, num_heads, mask=None):
    """One encoder layer on ``X (B, T, d_model)``, post-LN: add, then normalise.

    Params ``self_attn`` (multi-head params), ``norm1``, ``norm2`` (``gamma``,
    ``beta``) and ``ffn``. ``mask`` broadcasts to ``(B, h, T, T)``.
    """
    attended, _ = multi_head_attention(X, X, X, params["self_attn"], num_heads, mask)
    X = layer_norm(X + attended, **params["norm1"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm2"])


def embed(tokens, E):
    """``E[tokens] · √d_model + PE[:T]`` for ``tokens (B, T)`` and ``E (V, d_model)``.

    The scaling (section 3.4 of the paper) gives the embeddings a size
    comparable to the positional encoding, whose entries lie in ``[−1, 1]``.
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be an integer array (B, T), got {tokens.dtype} {tokens.shape}")
    V, d_model = E.shape
    if tokens.size and (tokens.min() < 0 or tokens.max() >= V):
        raise ValueError(f"token ids must lie in [0, {V}) for E of shape {E.shape}")
    return E[tokens] * math.sqrt(d_model) + sinusoidal_encoding(tokens.shape[1], d_model)


def padding_to_attention_mask(mask):
    """A ``(B, T_k)`` padding mask as one for attention scores ``(B, h, T_q, T_k)``."""
    return None if mask is None else np.asarray(mask)[:, None, None, :]


def encoder(src_tokens, params, num_heads, src_mask=None):
    """The encoder: embed, then every layer of ``params["encoder_layers"]`` in turn.

    ``src_tokens (B, T)``; params ``embedding (V, d_model)`` and
    ``encoder_layers`` (a list of layer params); ``src_mask (B, T)`` is
    ``True`` at real tokens. Returns the memory ``(B, T, d_model)``.
    """
    X = embed(src_tokens, params["embedding"])
    mask = padding_to_attention_mask(src_mask)
    for layer in params["encoder_layers"]:
        X = encoder_layer(X, layer, num_heads, mask)
    return X
