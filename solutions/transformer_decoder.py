"""The Transformer decoder and the whole model (Vaswani et al. 2017, sections 3.1, 3.4).

Each decoder layer: masked self-attention, attention over the encoder's
output (the memory), then the position-wise FFN, each followed by add &
layer norm. One embedding matrix ``E`` serves the source, the target and,
transposed, the output projection.
"""

import numpy as np

from .multi_head import merge_heads, multi_head_attention, split_heads
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


def greedy_decode(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                  use_cache=False):
    """Decode by always taking the most likely next token; int array ``(B, L)``, ``L ≤ max_len``.

    Same contract as the RNN's ``greedy_decode``: BOS is not in the output,
    decoding stops once every row has produced ``eos_id``, and a finished row
    keeps producing ``eos_id``. Without the cache every step runs the decoder
    on the whole prefix; with ``use_cache=True`` each layer keeps the keys and
    values of the positions already decoded (and of the memory), so a step
    only computes the newest position. Both give the same tokens.
    """
    if max_len < 0:
        raise ValueError(f"max_len must be non-negative, got {max_len}")
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = memory.shape[0]
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    cached = IncrementalDecoder(memory, params, num_heads, src_mask) if use_cache else None
    for _ in range(max_len):
        if cached is None:
            last = decoder(prefix, memory, params, num_heads, src_mask)[:, -1]  # (B, d_model)
        else:
            last = cached.step(prefix)
        logits = last @ params["embedding"].T                                  # (B, V)
        next_tokens = np.where(finished, eos_id, np.argmax(logits, axis=-1))
        prefix = np.concatenate([prefix, next_tokens[:, None]], axis=1)
        finished |= next_tokens == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


class IncrementalDecoder:
    """The decoder one position at a time, with a key/value cache per layer.

    Self-attention at position ``t`` needs the keys and values of positions
    ``0 … t``; those of ``0 … t−1`` were computed at earlier steps and do not
    change (the causal mask keeps earlier positions from seeing later ones),
    so they are kept. The memory's keys and values are computed once.
    """

    def __init__(self, memory, params, num_heads, src_mask=None):
        self.params, self.num_heads = params, num_heads
        self.memory_mask = padding_to_attention_mask(src_mask)
        self.caches = []
        for layer in params["decoder_layers"]:
            cross = layer["cross_attn"]
            self.caches.append({
                "memory_k": self._heads(memory, cross, "k"),  # (B, h, S, d_head)
                "memory_v": self._heads(memory, cross, "v"),
                "k": None, "v": None,                         # (B, h, t, d_head)
            })

    def step(self, prefix):
        """The decoder's output ``(B, d_model)`` at the last position of ``prefix (B, t+1)``.

        Call it with prefixes that grow by one token per call.
        """
        x = embed(prefix, self.params["embedding"])[:, -1:]  # (B, 1, d_model)
        for layer, cache in zip(self.params["decoder_layers"], self.caches):
            own = layer["self_attn"]
            for name in ("k", "v"):
                new = self._heads(x, own, name)
                cache[name] = new if cache[name] is None else np.concatenate([cache[name], new], axis=2)
            # No mask: the cache holds exactly the positions this one may see.
            x = layer_norm(x + self._attend(x, own, cache["k"], cache["v"]), **layer["norm1"])
            x = layer_norm(x + self._attend(x, layer["cross_attn"], cache["memory_k"], cache["memory_v"],
                                            self.memory_mask), **layer["norm2"])
            x = layer_norm(x + position_wise_ffn(x, layer["ffn"]), **layer["norm3"])
        return x[:, 0]

    def _heads(self, X, attn, name):
        return split_heads(X @ attn[f"W_{name}"] + attn[f"b_{name}"], self.num_heads)

    def _attend(self, x, attn, keys, values, mask=None):
        context, _ = scaled_dot_product_attention(self._heads(x, attn, "q"), keys, values, mask)
        return merge_heads(context) @ attn["W_o"] + attn["b_o"]
