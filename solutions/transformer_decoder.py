"""The Transformer decoder and the whole model (Vaswani et al. 2017, sections 3.1, 3.4).

Each decoder layer: masked self-attention, attention over the encoder's
output (the memory), then the position-wise FFN, each followed by add &
layer norm. One embedding matrix ``E`` serves the source, the target and,
transposed, the output projection.
"""

import math

import numpy as np

from .multi_head import merge_heads, multi_head_attention, split_heads
from .positional_encoding import relative_position_matrix, sinusoidal_encoding, sinusoidal_encoding_at
from .scaled_dot_product import causal_mask, scaled_dot_product_attention
from .transformer_encoder import embed, encoder, layer_norm, padding_to_attention_mask, position_wise_ffn


def decoder_layer(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    """One decoder layer on ``Y (B, T, d_model)`` with ``memory (B, S, d_model)``.

    Params ``self_attn``, ``norm1``, ``cross_attn``, ``norm2``, ``ffn``,
    ``norm3``. ``self_mask`` broadcasts to ``(B, h, T, T)`` (the causal mask),
    ``memory_mask`` to ``(B, h, T, S)`` (the source padding). In the
    cross-attention the queries come from the decoder, the keys and values
    from the memory.
    """
    attended, _ = multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)
    Y = layer_norm(Y + attended, **params["norm1"])
    attended, _ = multi_head_attention(Y, memory, memory, params["cross_attn"], num_heads, memory_mask)
    Y = layer_norm(Y + attended, **params["norm2"])
    return layer_norm(Y + position_wise_ffn(Y, params["ffn"]), **params["norm3"])


def decoder(tgt_tokens, memory, params, num_heads, src_mask=None):
    """The decoder: embed the target, then every layer of ``params["decoder_layers"]``.

    Applies the causal mask itself (position ``t`` sees targets ``0 … t``);
    ``src_mask (B, S)`` marks the real source tokens. Returns ``(B, T, d_model)``.
    """
    Y = embed(tgt_tokens, params["embedding"])
    self_mask = causal_mask(Y.shape[1])
    memory_mask = padding_to_attention_mask(src_mask)
    for layer in params["decoder_layers"]:
        Y = decoder_layer(Y, memory, layer, num_heads, self_mask, memory_mask)
    return Y


def transformer_logits(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    """Next-token logits ``(B, T_tgt, V)``: encoder, decoder, then ``@ E.T``.

    Params ``embedding (V, d_model)`` (shared by source, target and output),
    ``encoder_layers`` and ``decoder_layers``. Logits, not probabilities: a
    softmax over the last axis turns them into a distribution.
    """
    memory = encoder(src_tokens, params, num_heads, src_mask)
    return decoder(tgt_tokens, memory, params, num_heads, src_mask) @ params["embedding"].T


def init_decoder_cache(memory, params, num_heads, src_mask=None):
    """The key/value cache before the first decoding step: a list with one dict per decoder layer.

    ``"memory_k"`` and ``"memory_v"`` ``(B, h, S, d_head)``: the memory
    projected by that layer's cross-attention and split into heads, computed
    once for the whole decoding; ``"k"`` and ``"v"`` ``(B, h, 0, d_head)``:
    the self-attention keys and values of the positions decoded so far (none
    yet); ``"src_mask"``: the ``(B, S)`` padding mask of the source, or None.
    Plain data: anyone may build a cache for any prefix with ``decoder_step``.
    """
    memory = np.asarray(memory)
    if memory.ndim != 3:
        raise ValueError(f"memory must have shape (B, S, d_model), got {memory.shape}")
    B, S, d_model = memory.shape
    if src_mask is not None:
        src_mask = np.asarray(src_mask, dtype=bool)
        if src_mask.shape != (B, S):
            raise ValueError(f"src_mask must have shape (B, S) = {(B, S)} for memory of shape "
                             f"{memory.shape}, got {src_mask.shape}")
    cache = []
    for layer in params["decoder_layers"]:
        cross = layer["cross_attn"]
        memory_k = split_heads(memory @ cross["W_k"] + cross["b_k"], num_heads)  # (B, h, S, d_head)
        memory_v = split_heads(memory @ cross["W_v"] + cross["b_v"], num_heads)
        none_yet = memory_k[:, :, :0]                                            # (B, h, 0, d_head)
        cache.append({"memory_k": memory_k, "memory_v": memory_v,
                      "k": none_yet, "v": none_yet.copy(), "src_mask": src_mask})
    return cache


def decoder_step(token, cache, params, num_heads):
    """One decoding step: ``(output (B, d_model), new cache)`` for the newest token ``(B,)``.

    The token is at position ``t = cache[0]["k"].shape[2]``; it alone is
    embedded, ``E[token]·√d_model + PE[t]`` (one row of the positional table),
    and pushed through every layer: its self-attention key and value are
    appended to the layer's ``"k"``/``"v"``, and it attends to all of them
    (no mask: the cache holds exactly positions ``0 … t``), then to the
    memory's cached keys and values under ``"src_mask"``. ``output`` is
    ``decoder(prefix_and_token, memory, ...)[:, t]``, up to rounding. The
    input cache is not modified: the returned one is a new list of new dicts,
    one position longer. A decoder without layers has no cache, hence no
    position to read: ``ValueError``, as for tokens that do not fit the cache.
    """
    E = params["embedding"]
    if not cache:
        raise ValueError("the cache is empty: a decoder without layers has no cache to step with")
    if len(cache) != len(params["decoder_layers"]):
        raise ValueError(f"the cache has {len(cache)} layers, the decoder "
                         f"{len(params['decoder_layers'])}")
    x = _embed_next(token, E, cache)  # (B, 1, d_model)
    new_cache = []
    for layer, kept in zip(params["decoder_layers"], cache):
        own = layer["self_attn"]
        k = np.concatenate([kept["k"], _heads(x, own, "k", num_heads)], axis=2)  # (B, h, t+1, d_head)
        v = np.concatenate([kept["v"], _heads(x, own, "v", num_heads)], axis=2)
        x = layer_norm(x + _attend(x, own, k, v, num_heads), **layer["norm1"])
        memory_mask = padding_to_attention_mask(kept["src_mask"])                # (B, 1, 1, S)
        x = layer_norm(x + _attend(x, layer["cross_attn"], kept["memory_k"], kept["memory_v"],
                                   num_heads, memory_mask), **layer["norm2"])
        x = layer_norm(x + position_wise_ffn(x, layer["ffn"]), **layer["norm3"])
        new_cache.append({**kept, "k": k, "v": v})
    return x[:, 0], new_cache


def _embed_next(token, E, cache):
    """``E[token]·√d_model + PE[t]`` as ``(B, 1, d_model)``: the newest token ``(B,)`` at the
    position ``t = cache[0]["k"].shape[2]`` of a (non-empty) cache, after checking that it fits."""
    token = np.asarray(token)
    V, d_model = E.shape
    B, _, t, _ = cache[0]["k"].shape
    if token.shape != (B,) or not np.issubdtype(token.dtype, np.integer):
        raise ValueError(f"token must be an integer array (B,) = ({B},) for a cache of batch {B}, "
                         f"got {token.dtype} {token.shape}")
    if token.size and (token.min() < 0 or token.max() >= V):
        raise ValueError(f"token ids must lie in [0, {V}) for E of shape {E.shape}")
    return (E[token] * math.sqrt(d_model) + sinusoidal_encoding_at(t, d_model))[:, None]


def _heads(X, attn, name, num_heads):
    """``X``'s keys, values or queries (``name``) of the attention ``attn``, split into heads."""
    return split_heads(X @ attn[f"W_{name}"] + attn[f"b_{name}"], num_heads)


def _attend(x, attn, keys, values, num_heads, mask=None):
    """Multi-head attention from ``x (B, 1, d_model)`` over keys and values already split into heads."""
    context, _ = scaled_dot_product_attention(_heads(x, attn, "q", num_heads), keys, values, mask)
    return merge_heads(context) @ attn["W_o"] + attn["b_o"]


def greedy_decode(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                  use_cache=False):
    """Decode by always taking the most likely next token; int array ``(B, L)``, ``L ≤ max_len``.

    Same contract as the RNN's ``greedy_decode``: BOS is not in the output,
    decoding stops once every row has produced ``eos_id``, and a finished row
    keeps producing ``eos_id``. Without the cache every step runs the decoder
    on the whole prefix; with ``use_cache=True`` every step runs
    ``decoder_step`` on the newest token only, from the cache of
    ``init_decoder_cache``. Both give the same tokens.
    """
    if max_len < 0:
        raise ValueError(f"max_len must be non-negative, got {max_len}")
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = memory.shape[0]
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    cache = init_decoder_cache(memory, params, num_heads, src_mask) if use_cache else None
    for _ in range(max_len):
        if cache is None:
            last = decoder(prefix, memory, params, num_heads, src_mask)[:, -1]  # (B, d_model)
        else:
            last, cache = decoder_step(prefix[:, -1], cache, params, num_heads)
        logits = last @ params["embedding"].T                                  # (B, V)
        next_tokens = np.where(finished, eos_id, np.argmax(logits, axis=-1))
        prefix = np.concatenate([prefix, next_tokens[:, None]], axis=1)
        finished |= next_tokens == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def copy_model(reverse_length=None, num_positions=16):
    """The chapter's hand-built Transformer that copies its source (or reverses it).

    ``d_model = 64``, 2 heads, 16 tokens, one encoder and one decoder layer,
    for positions ``0 … num_positions − 1``. Only the decoder's attention over
    the memory does anything: its queries and keys are made of the positional
    encodings, so that target position ``t`` attends to source position ``t``
    (or ``S − 1 − t`` with ``reverse_length=S``); its values carry the token,
    which the tied output projection reads out. Any token can play BOS or EOS.
    """
    d, h, V = 64, 2, 16
    d_head, pos = d // h, np.arange(d // 2)  # features 0-31: positions
    token_dims = np.arange(d // 2, d, 2)     # token v: feature 32 + 2v
    E = np.zeros((V, d))
    E[np.arange(V), token_dims] = 1.0
    PE = sinusoidal_encoding(num_positions, d)[:, pos]
    C = np.eye(len(pos)) - 1.0 / len(pos)    # subtracts the mean, as layer norm does
    H = np.linalg.lstsq(PE @ C, PE, rcond=None)[0]   # (PE C) H = PE
    target = np.eye(len(pos))                # query of t: PE_t (copy)
    if reverse_length is not None:           # PE_{S-1-t}: flip, shift
        flip = np.diag(np.tile([-1.0, 1.0], len(pos) // 2))
        shift = relative_position_matrix(reverse_length - 1, d)
        target = flip @ shift[np.ix_(pos, pos)]
    zero = {f"b_{n}": np.zeros(d) for n in "qkvo"}
    cross = {f"W_{n}": np.zeros((d, d)) for n in "qkvo"} | zero
    half = V // h                            # each head moves 8 tokens
    for head in range(h):
        cols = head * d_head + np.arange(len(pos))
        cross["W_q"][np.ix_(pos, cols)] = 200.0 * C @ H @ target
        cross["W_k"][np.ix_(pos, cols)] = C @ H
        mine = token_dims[head * half:(head + 1) * half]
        cross["W_v"][mine, head * d_head + np.arange(half)] = 1.0
        cross["W_o"][head * d_head + np.arange(half), mine] = 30.0
    off = {f"W_{n}": np.zeros((d, d)) for n in "qkvo"} | zero
    norm = {"gamma": np.ones(d), "beta": np.zeros(d)}
    ffn = {"W_1": np.zeros((d, 4)), "b_1": np.zeros(4),
           "W_2": np.zeros((4, d)), "b_2": np.zeros(d)}
    return {"embedding": E,
            "encoder_layers": [{"self_attn": off, "norm1": norm,
                                "ffn": ffn, "norm2": norm}],
            "decoder_layers": [{"self_attn": off, "norm1": norm,
                                "cross_attn": cross, "norm2": norm,
                                "ffn": ffn, "norm3": norm}]}
