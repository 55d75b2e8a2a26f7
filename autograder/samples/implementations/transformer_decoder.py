"""What students write for the Transformer decoder exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (a table of sub-layers, a hand-made layer norm and masks, einsum,
per-row bookkeeping in Python lists, a cache built with einsum and a
positional row written out): the hidden checks must accept them. `MISTAKES` holds
plausible wrong implementations, each of one task: the hidden checks must
reject every one, and say why. Each function is self-contained, so that its
source can be put into a notebook's solution cell as a student would write it
there; it may call the other tasks' functions and the given ones that the
notebook defines (here: the correct versions below and the reference).
"""

import numpy as np

from solutions.multi_head import merge_heads, multi_head_attention, split_heads  # noqa: F401
from solutions.positional_encoding import sinusoidal_encoding, sinusoidal_encoding_at  # noqa: F401
from solutions.scaled_dot_product import causal_mask, scaled_dot_product_attention  # noqa: F401
from solutions.transformer_encoder import embed, encoder, layer_norm, position_wise_ffn  # noqa: F401

# -- correct, by other means -------------------------------------------------


def decoder_layer(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    # a table of sub-layers, and layer norm written out by hand
    def norm(X, p):
        centred = X - X.mean(axis=-1, keepdims=True)
        return centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + 1e-5) \
            * p["gamma"] + p["beta"]

    sublayers = [
        (lambda X: multi_head_attention(X, X, X, params["self_attn"], num_heads, self_mask)[0],
         params["norm1"]),
        (lambda X: multi_head_attention(X, memory, memory, params["cross_attn"], num_heads,
                                        memory_mask)[0], params["norm2"]),
        (lambda X: np.maximum(X @ params["ffn"]["W_1"] + params["ffn"]["b_1"], 0)
         @ params["ffn"]["W_2"] + params["ffn"]["b_2"], params["norm3"]),
    ]
    X = Y
    for sublayer, p in sublayers:
        X = norm(X + sublayer(X), p)
    return X


def decoder(tgt_tokens, memory, params, num_heads, src_mask=None):
    # the embedding, the causal mask and the padding mask made by hand
    E = params["embedding"]
    B, T = tgt_tokens.shape
    d_model = E.shape[1]
    X = E[tgt_tokens] * d_model ** 0.5 + sinusoidal_encoding(T, d_model)
    below = np.arange(T)[:, None] >= np.arange(T)[None, :]
    real = None if src_mask is None else src_mask.reshape(B, 1, 1, -1)
    for layer in params["decoder_layers"]:
        X = decoder_layer(X, memory, layer, num_heads, self_mask=below, memory_mask=real)
    return X


def transformer_logits(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    # einsum against the rows of E
    memory = encoder(src_tokens, params, num_heads, src_mask)
    out = decoder(tgt_tokens, memory, params, num_heads, src_mask)
    return np.einsum("btd,vd->btv", out, params["embedding"])


def init_decoder_cache(memory, params, num_heads, src_mask=None):
    # einsum against the weights split per head; the empty keys made with np.empty
    B, S, d_model = memory.shape
    d_head = d_model // num_heads
    cache = []
    for layer in params["decoder_layers"]:
        a = layer["cross_attn"]
        per_head = {n: (a[f"W_{n}"].reshape(d_model, num_heads, d_head), a[f"b_{n}"].reshape(num_heads, d_head))
                    for n in "kv"}
        keys, values = (np.einsum("bsd,dhe->bhse", memory, W) + b[None, :, None, :]
                        for W, b in per_head.values())
        cache.append({"memory_k": keys, "memory_v": values,
                      "k": np.empty((B, num_heads, 0, d_head)), "v": np.empty((B, num_heads, 0, d_head)),
                      "src_mask": None if src_mask is None else np.array(src_mask, dtype=bool)})
    return cache


def decoder_step(token, cache, params, num_heads):
    # the positional row from the formula, multi_head_attention over the merged cached keys
    E = params["embedding"]
    d_model = E.shape[1]
    t = cache[0]["k"].shape[2]
    i = np.arange(0, d_model, 2)
    row = np.zeros(d_model)
    row[0::2], row[1::2] = np.sin(t / 10000 ** (i / d_model)), np.cos(t / 10000 ** (i / d_model))
    x = (E[token] * np.sqrt(d_model) + row)[:, None, :]
    new = []
    for L, c in zip(params["decoder_layers"], cache):
        a = L["self_attn"]
        k = np.concatenate([c["k"], split_heads(x @ a["W_k"] + a["b_k"], num_heads)], axis=2)
        v = np.concatenate([c["v"], split_heads(x @ a["W_v"] + a["b_v"], num_heads)], axis=2)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        m = L["cross_attn"]
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        new.append({"memory_k": c["memory_k"], "memory_v": c["memory_v"], "k": k, "v": v,
                    "src_mask": c["src_mask"]})
    return x[:, 0], new


def greedy_decode(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                  use_cache=False):
    # per-row lists
    E = params["embedding"]
    B = len(src_tokens)
    memory = encoder(src_tokens, params, num_heads, src_mask)
    cache = init_decoder_cache(memory, params, num_heads, src_mask) if use_cache else None
    rows = [[bos_id] for _ in range(B)]
    done = [False] * B
    for t in range(max_len):
        prefix = np.array(rows)
        if use_cache:
            out, cache = decoder_step(prefix[:, -1], cache, params, num_heads)
            scores = out @ E.T
        else:
            scores = transformer_logits(src_tokens, prefix, params, num_heads, src_mask)[:, -1]
        for b in range(B):
            token = eos_id if done[b] else int(np.argmax(scores[b]))
            rows[b].append(token)
            done[b] = done[b] or token == eos_id
        if all(done):
            break
    return np.array([row[1:] for row in rows], dtype=int).reshape(B, -1)


CORRECT = {f.__name__: f for f in (decoder_layer, decoder, transformer_logits, greedy_decode,
                                   init_decoder_cache, decoder_step)}


# -- mistakes: decoder_layer ---------------------------------------------------------


def decoder_self_mask_ignored(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, memory, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_memory_mask_ignored(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, memory, params["cross_attn"], num_heads)[0],
                   **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_masks_swapped(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads,
                                            memory_mask)[0], **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, memory, params["cross_attn"], num_heads,
                                            self_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_cross_attends_own_states(Y, memory, params, num_heads, self_mask=None,
                                     memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, X, X, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_cross_keys_from_decoder(Y, memory, params, num_heads, self_mask=None,
                                    memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, X, memory, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_cross_values_from_decoder(Y, memory, params, num_heads, self_mask=None,
                                      memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, X, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_cross_queries_from_memory(Y, memory, params, num_heads, self_mask=None,
                                      memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(memory, X, X, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_cross_before_self(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, memory, memory, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, X, X, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_ffn_first(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(Y + position_wise_ffn(Y, params["ffn"]), **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, X, X, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm2"])
    return layer_norm(X + multi_head_attention(X, memory, memory, params["cross_attn"], num_heads,
                                               memory_mask)[0], **params["norm3"])


def decoder_no_residual_self(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, memory, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_no_residual_cross(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(multi_head_attention(X, memory, memory, params["cross_attn"], num_heads,
                                        memory_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_no_residual_ffn(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, memory, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm2"])
    return layer_norm(position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_pre_ln(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    Z = layer_norm(Y, **params["norm1"])
    X = Y + multi_head_attention(Z, Z, Z, params["self_attn"], num_heads, self_mask)[0]
    Z = layer_norm(X, **params["norm2"])
    X = X + multi_head_attention(Z, memory, memory, params["cross_attn"], num_heads, memory_mask)[0]
    return X + position_wise_ffn(layer_norm(X, **params["norm3"]), params["ffn"])


def decoder_cross_uses_self_params(Y, memory, params, num_heads, self_mask=None,
                                   memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, memory, params["self_attn"], num_heads,
                                            memory_mask)[0], **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_one_norm(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)[0],
                   **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, memory, params["cross_attn"], num_heads,
                                            memory_mask)[0], **params["norm1"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm1"])


def decoder_returns_tuple(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    attended, self_weights = multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, self_mask)
    X = layer_norm(Y + attended, **params["norm1"])
    attended, cross_weights = multi_head_attention(X, memory, memory, params["cross_attn"],
                                                   num_heads, memory_mask)
    X = layer_norm(X + attended, **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"]), cross_weights


# -- mistakes: decoder ---------------------------------------------------------------


def decoder_no_causal_mask(tgt_tokens, memory, params, num_heads, src_mask=None):
    Y = embed(tgt_tokens, params["embedding"])
    memory_mask = None if src_mask is None else src_mask[:, None, None, :]
    for layer in params["decoder_layers"]:
        Y = decoder_layer(Y, memory, layer, num_heads, None, memory_mask)
    return Y


def decoder_causal_mask_upper(tgt_tokens, memory, params, num_heads, src_mask=None):
    Y = embed(tgt_tokens, params["embedding"])
    T = Y.shape[1]
    memory_mask = None if src_mask is None else src_mask[:, None, None, :]
    for layer in params["decoder_layers"]:
        Y = decoder_layer(Y, memory, layer, num_heads, np.triu(np.ones((T, T), dtype=bool)),
                          memory_mask)
    return Y


def decoder_src_mask_not_passed(tgt_tokens, memory, params, num_heads, src_mask=None):
    Y = embed(tgt_tokens, params["embedding"])
    for layer in params["decoder_layers"]:
        Y = decoder_layer(Y, memory, layer, num_heads, causal_mask(Y.shape[1]))
    return Y


def decoder_src_mask_not_reshaped(tgt_tokens, memory, params, num_heads, src_mask=None):
    # (B, S) lines up with (T, S) of the scores (B, h, T, S), not with (B, S)
    Y = embed(tgt_tokens, params["embedding"])
    for layer in params["decoder_layers"]:
        Y = decoder_layer(Y, memory, layer, num_heads, causal_mask(Y.shape[1]), src_mask)
    return Y


def decoder_no_embedding_scale(tgt_tokens, memory, params, num_heads, src_mask=None):
    E = params["embedding"]
    T = tgt_tokens.shape[1]
    Y = E[tgt_tokens] + sinusoidal_encoding(T, E.shape[1])
    memory_mask = None if src_mask is None else src_mask[:, None, None, :]
    for layer in params["decoder_layers"]:
        Y = decoder_layer(Y, memory, layer, num_heads, causal_mask(T), memory_mask)
    return Y


def decoder_no_positional_encoding(tgt_tokens, memory, params, num_heads, src_mask=None):
    E = params["embedding"]
    T = tgt_tokens.shape[1]
    Y = E[tgt_tokens] * np.sqrt(E.shape[1])
    memory_mask = None if src_mask is None else src_mask[:, None, None, :]
    for layer in params["decoder_layers"]:
        Y = decoder_layer(Y, memory, layer, num_heads, causal_mask(T), memory_mask)
    return Y


def decoder_only_last_layer(tgt_tokens, memory, params, num_heads, src_mask=None):
    Y = embed(tgt_tokens, params["embedding"])
    memory_mask = None if src_mask is None else src_mask[:, None, None, :]
    return decoder_layer(Y, memory, params["decoder_layers"][-1], num_heads,
                         causal_mask(Y.shape[1]), memory_mask)


# -- mistakes: transformer_logits ----------------------------------------------------


def logits_probabilities(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    scores = decoder(tgt_tokens, memory, params, num_heads, src_mask) @ params["embedding"].T
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def logits_log_probabilities(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    scores = decoder(tgt_tokens, memory, params, num_heads, src_mask) @ params["embedding"].T
    top = scores.max(axis=-1, keepdims=True)
    return scores - top - np.log(np.exp(scores - top).sum(axis=-1, keepdims=True))


def logits_E_not_transposed(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    return decoder(tgt_tokens, memory, params, num_heads, src_mask) @ params["embedding"]


def logits_scaled(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    # the embedding's √d_model carried over to the output projection
    E = params["embedding"]
    memory = encoder(src_tokens, params, num_heads, src_mask)
    return decoder(tgt_tokens, memory, params, num_heads, src_mask) @ (E.T * np.sqrt(E.shape[1]))


def logits_no_src_mask_in_decoder(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    return decoder(tgt_tokens, memory, params, num_heads) @ params["embedding"].T


def logits_no_src_mask_in_encoder(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    memory = encoder(src_tokens, params, num_heads)
    return decoder(tgt_tokens, memory, params, num_heads, src_mask) @ params["embedding"].T


def logits_decoder_over_embeddings(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    memory = embed(src_tokens, params["embedding"])
    return decoder(tgt_tokens, memory, params, num_heads, src_mask) @ params["embedding"].T


# -- mistakes: greedy_decode ---------------------------------------------------------


def greedy_includes_bos(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                        use_cache=False):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix


def greedy_no_eos_padding(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                          use_cache=False):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        token = logits.argmax(axis=-1)
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def greedy_stops_at_first_row_eos(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                                  src_mask=None, use_cache=False):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if token[0] == eos_id:
            break
    return prefix[:, 1:]


def greedy_stops_at_any_eos(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                            src_mask=None, use_cache=False):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        token = logits.argmax(axis=-1)
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        if np.any(token == eos_id):
            break
    return prefix[:, 1:]


def greedy_always_runs_max_len(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                               src_mask=None, use_cache=False):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
    return prefix[:, 1:]


def greedy_last_token_only(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                           src_mask=None, use_cache=False):
    # like the RNN decoder: feed only the previous token
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    previous = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    tokens = []
    for _ in range(max_len):
        logits = decoder(previous, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        tokens.append(token)
        previous = token[:, None]
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(tokens, axis=1)


def greedy_first_position(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                          src_mask=None, use_cache=False):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, 0] @ params["embedding"].T
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def greedy_ignores_src_mask(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                            src_mask=None, use_cache=False):
    memory = encoder(src_tokens, params, num_heads)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads)[:, -1] @ params["embedding"].T
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def greedy_returns_logits(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                          src_mask=None, use_cache=False):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    steps = []
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        steps.append(logits)
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(steps, axis=1)


def greedy_float_tokens(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                        src_mask=None, use_cache=False):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    tokens = np.zeros((B, 0))
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        prefix = np.concatenate([np.full((B, 1), bos_id), tokens.astype(int)], axis=1)
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        tokens = np.concatenate([tokens, token[:, None].astype(float)], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return tokens


# -- mistakes: init_decoder_cache ---------------------------------------------------


def init_swaps_keys_and_values(memory, params, num_heads, src_mask=None):
    cache = init_decoder_cache(memory, params, num_heads, src_mask)
    return [{**c, "memory_k": c["memory_v"], "memory_v": c["memory_k"]} for c in cache]


def init_from_self_attention(memory, params, num_heads, src_mask=None):
    cache = init_decoder_cache(memory, params, num_heads, src_mask)
    return [{**c, "memory_k": split_heads(memory @ L["self_attn"]["W_k"] + L["self_attn"]["b_k"], num_heads),
             "memory_v": split_heads(memory @ L["self_attn"]["W_v"] + L["self_attn"]["b_v"], num_heads)}
            for c, L in zip(cache, params["decoder_layers"])]


def init_not_split_into_heads(memory, params, num_heads, src_mask=None):
    cache = init_decoder_cache(memory, params, num_heads, src_mask)
    return [{**c, "memory_k": memory @ L["cross_attn"]["W_k"] + L["cross_attn"]["b_k"],
             "memory_v": memory @ L["cross_attn"]["W_v"] + L["cross_attn"]["b_v"]}
            for c, L in zip(cache, params["decoder_layers"])]


def init_drops_src_mask(memory, params, num_heads, src_mask=None):
    return [{**c, "src_mask": None} for c in init_decoder_cache(memory, params, num_heads)]


def init_one_layer(memory, params, num_heads, src_mask=None):
    return init_decoder_cache(memory, params, num_heads, src_mask)[:1]


# -- mistakes: decoder_step ---------------------------------------------------------
# Each is the step written out, with one thing wrong.


def step_forgets_past(token, cache, params, num_heads):
    E = params["embedding"]
    d_model, t = E.shape[1], cache[0]["k"].shape[2]
    x = (E[token] * np.sqrt(d_model) + sinusoidal_encoding_at(t, d_model))[:, None]
    new = []
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        k = split_heads(x @ a["W_k"] + a["b_k"], num_heads)  # the newest position's only
        v = split_heads(x @ a["W_v"] + a["b_v"], num_heads)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        new.append({**c, "k": k, "v": v})
    return x[:, 0], new


def step_position_zero(token, cache, params, num_heads):
    E = params["embedding"]
    d_model, t = E.shape[1], cache[0]["k"].shape[2]
    # the newest token, but at position 0
    x = (E[token] * np.sqrt(d_model) + sinusoidal_encoding_at(0, d_model))[:, None]
    new = []
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        k = np.concatenate([c["k"], split_heads(x @ a["W_k"] + a["b_k"], num_heads)], axis=2)
        v = np.concatenate([c["v"], split_heads(x @ a["W_v"] + a["b_v"], num_heads)], axis=2)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        new.append({**c, "k": k, "v": v})
    return x[:, 0], new


def step_position_after(token, cache, params, num_heads):
    E = params["embedding"]
    d_model, t = E.shape[1], cache[0]["k"].shape[2]
    # positions counted from 1
    x = (E[token] * np.sqrt(d_model) + sinusoidal_encoding_at(t + 1, d_model))[:, None]
    new = []
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        k = np.concatenate([c["k"], split_heads(x @ a["W_k"] + a["b_k"], num_heads)], axis=2)
        v = np.concatenate([c["v"], split_heads(x @ a["W_v"] + a["b_v"], num_heads)], axis=2)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        new.append({**c, "k": k, "v": v})
    return x[:, 0], new


def step_unscaled_embedding(token, cache, params, num_heads):
    E = params["embedding"]
    d_model, t = E.shape[1], cache[0]["k"].shape[2]
    # without √d_model
    x = (E[token] + sinusoidal_encoding_at(t, d_model))[:, None]
    new = []
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        k = np.concatenate([c["k"], split_heads(x @ a["W_k"] + a["b_k"], num_heads)], axis=2)
        v = np.concatenate([c["v"], split_heads(x @ a["W_v"] + a["b_v"], num_heads)], axis=2)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        new.append({**c, "k": k, "v": v})
    return x[:, 0], new


def step_kv_from_embedding(token, cache, params, num_heads):
    E = params["embedding"]
    d_model, t = E.shape[1], cache[0]["k"].shape[2]
    x = (E[token] * np.sqrt(d_model) + sinusoidal_encoding_at(t, d_model))[:, None]
    embedded, new = x, []
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        # every layer's keys and values from the embedded token
        k = np.concatenate([c["k"], split_heads(embedded @ a["W_k"] + a["b_k"], num_heads)], axis=2)
        v = np.concatenate([c["v"], split_heads(embedded @ a["W_v"] + a["b_v"], num_heads)], axis=2)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        new.append({**c, "k": k, "v": v})
    return x[:, 0], new


def step_ignores_src_mask(token, cache, params, num_heads):
    E = params["embedding"]
    d_model, t = E.shape[1], cache[0]["k"].shape[2]
    x = (E[token] * np.sqrt(d_model) + sinusoidal_encoding_at(t, d_model))[:, None]
    new = []
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        k = np.concatenate([c["k"], split_heads(x @ a["W_k"] + a["b_k"], num_heads)], axis=2)
        v = np.concatenate([c["v"], split_heads(x @ a["W_v"] + a["b_v"], num_heads)], axis=2)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None  # the source's padding is attended to
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        new.append({**c, "k": k, "v": v})
    return x[:, 0], new


def step_mutates_cache(token, cache, params, num_heads):
    E = params["embedding"]
    d_model, t = E.shape[1], cache[0]["k"].shape[2]
    x = (E[token] * np.sqrt(d_model) + sinusoidal_encoding_at(t, d_model))[:, None]
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        k = np.concatenate([c["k"], split_heads(x @ a["W_k"] + a["b_k"], num_heads)], axis=2)
        v = np.concatenate([c["v"], split_heads(x @ a["W_v"] + a["b_v"], num_heads)], axis=2)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        c["k"], c["v"] = k, v  # the cache it was given, extended in place
    return x[:, 0], cache


def step_returns_output_only(token, cache, params, num_heads):
    E = params["embedding"]
    d_model, t = E.shape[1], cache[0]["k"].shape[2]
    x = (E[token] * np.sqrt(d_model) + sinusoidal_encoding_at(t, d_model))[:, None]
    new = []
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        k = np.concatenate([c["k"], split_heads(x @ a["W_k"] + a["b_k"], num_heads)], axis=2)
        v = np.concatenate([c["v"], split_heads(x @ a["W_v"] + a["b_v"], num_heads)], axis=2)
        q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
        x = layer_norm(x + merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ a["W_o"] + a["b_o"],
                       **L["norm1"])
        q = split_heads(x @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        x = layer_norm(x + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
        new.append({**c, "k": k, "v": v})
    return x[:, 0]  # the new cache is lost


def step_recomputes_prefix(token, cache, params, num_heads):
    # keeps the tokens in the cache and runs every layer on the whole prefix again
    previous = cache[0].get("tokens", np.zeros((len(token), 0), dtype=int))
    tokens = np.concatenate([previous, np.asarray(token)[:, None]], axis=1)
    X, T, new = embed(tokens, params["embedding"]), tokens.shape[1], []
    for L, c in zip(params["decoder_layers"], cache):
        a, m = L["self_attn"], L["cross_attn"]
        q, k, v = (split_heads(X @ a[f"W_{n}"] + a[f"b_{n}"], num_heads) for n in "qkv")
        attended = merge_heads(scaled_dot_product_attention(q, k, v, causal_mask(T))[0])
        X = layer_norm(X + attended @ a["W_o"] + a["b_o"], **L["norm1"])
        q = split_heads(X @ m["W_q"] + m["b_q"], num_heads)
        mask = None if c["src_mask"] is None else c["src_mask"][:, None, None, :]
        context = scaled_dot_product_attention(q, c["memory_k"], c["memory_v"], mask)[0]
        X = layer_norm(X + merge_heads(context) @ m["W_o"] + m["b_o"], **L["norm2"])
        X = layer_norm(X + position_wise_ffn(X, L["ffn"]), **L["norm3"])
        new.append({**c, "k": k, "v": v, "tokens": tokens})
    return X[:, -1], new


# -- mistakes: greedy_decode with the cache -------------------------------------------
# Each decodes correctly without the cache; with it, one thing goes wrong.


def cache_not_supported(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None):
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        logits = decoder(prefix, memory, params, num_heads, src_mask)[:, -1] @ params["embedding"].T
        token = np.where(finished, eos_id, logits.argmax(axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def cache_never_grows(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                      use_cache=False):
    # with the cache, every step starts again from the first cache: the past is lost
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    first = init_decoder_cache(memory, params, num_heads, src_mask)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        if use_cache:
            last, _ = decoder_step(prefix[:, -1], first, params, num_heads)
        else:
            last = decoder(prefix, memory, params, num_heads, src_mask)[:, -1]
        token = np.where(finished, eos_id, np.argmax(last @ params["embedding"].T, axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def cache_without_src_mask(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                           use_cache=False):
    # the cache is made without the source mask
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    cache = init_decoder_cache(memory, params, num_heads)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        if use_cache:
            last, cache = decoder_step(prefix[:, -1], cache, params, num_heads)
        else:
            last = decoder(prefix, memory, params, num_heads, src_mask)[:, -1]
        token = np.where(finished, eos_id, np.argmax(last @ params["embedding"].T, axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


# task -> the hidden checks (in autograder/checks/transformer_decoder.py) that grade it
CHECKS_OF_TASK = {
    "decoder_layer": ["check_decoder_layer"],
    "decoder": ["check_decoder"],
    "transformer_logits": ["check_transformer_logits"],
    "greedy_decode": ["check_greedy_decode", "check_greedy_decode_cache"],
    "init_decoder_cache": ["check_init_decoder_cache"],
    "decoder_step": ["check_decoder_step"],
}

_LAYER, _DEC, _LOG, _GREEDY, _CACHE, _INIT, _STEP = (
    "check_decoder_layer", "check_decoder", "check_transformer_logits", "check_greedy_decode",
    "check_greedy_decode_cache", "check_init_decoder_cache", "check_decoder_step")

# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "decoder-self-mask-ignored": ("decoder_layer", decoder_self_mask_ignored, _LAYER,
                                  "ignores self_mask"),
    "decoder-memory-mask-ignored": ("decoder_layer", decoder_memory_mask_ignored, _LAYER,
                                    "ignores memory_mask"),
    "decoder-masks-swapped": ("decoder_layer", decoder_masks_swapped, _LAYER, "masks are swapped"),
    "decoder-cross-attends-own-states": ("decoder_layer", decoder_cross_attends_own_states, _LAYER,
                                         "the decoder's own states"),
    "decoder-cross-keys-from-decoder": ("decoder_layer", decoder_cross_keys_from_decoder, _LAYER,
                                        "keys of the attention over the memory come from the decoder"),
    "decoder-cross-values-from-decoder": ("decoder_layer", decoder_cross_values_from_decoder, _LAYER,
                                          "values of the attention over the memory come from"),
    "decoder-cross-queries-from-memory": ("decoder_layer", decoder_cross_queries_from_memory, _LAYER,
                                          "queries from memory"),
    "decoder-cross-before-self": ("decoder_layer", decoder_cross_before_self, _LAYER, "wrong order"),
    "decoder-ffn-first": ("decoder_layer", decoder_ffn_first, _LAYER, "wrong order"),
    "decoder-no-residual-self": ("decoder_layer", decoder_no_residual_self, _LAYER,
                                 "residual connection around the self-attention"),
    "decoder-no-residual-cross": ("decoder_layer", decoder_no_residual_cross, _LAYER,
                                  "residual connection around the attention over the memory"),
    "decoder-no-residual-ffn": ("decoder_layer", decoder_no_residual_ffn, _LAYER,
                                "residual connection around the FFN"),
    "decoder-pre-ln": ("decoder_layer", decoder_pre_ln, _LAYER, "pre-LN"),
    "decoder-cross-uses-self-params": ("decoder_layer", decoder_cross_uses_self_params, _LAYER,
                                       "self-attention's parameters"),
    "decoder-one-norm": ("decoder_layer", decoder_one_norm, _LAYER, "its own layer norm"),
    "decoder-returns-tuple": ("decoder_layer", decoder_returns_tuple, _LAYER, "not a tuple"),
    "decoder-no-causal-mask": ("decoder", decoder_no_causal_mask, _DEC,
                               "does not apply the causal mask"),
    "decoder-causal-mask-upper": ("decoder", decoder_causal_mask_upper, _DEC, "transposed"),
    "decoder-src-mask-not-passed": ("decoder", decoder_src_mask_not_passed, _DEC,
                                    "src_mask does not reach"),
    "decoder-src-mask-not-reshaped": ("decoder", decoder_src_mask_not_reshaped, _DEC,
                                      "raised ValueError"),
    "decoder-no-embedding-scale": ("decoder", decoder_no_embedding_scale, _DEC,
                                   "without the factor √d_model"),
    "decoder-no-positional-encoding": ("decoder", decoder_no_positional_encoding, _DEC,
                                       "without the positional encoding"),
    "decoder-only-last-layer": ("decoder", decoder_only_last_layer, _DEC, "only the last layer"),
    "logits-probabilities": ("transformer_logits", logits_probabilities, _LOG,
                             "these are probabilities"),
    "logits-log-probabilities": ("transformer_logits", logits_log_probabilities, _LOG,
                                 "log-probabilities"),
    "logits-E-not-transposed": ("transformer_logits", logits_E_not_transposed, _LOG,
                                "not by its transpose"),
    "logits-scaled": ("transformer_logits", logits_scaled, _LOG, "without the factor √d_model"),
    "logits-no-src-mask-in-decoder": ("transformer_logits", logits_no_src_mask_in_decoder, _LOG,
                                      "does not reach the decoder"),
    "logits-no-src-mask-in-encoder": ("transformer_logits", logits_no_src_mask_in_encoder, _LOG,
                                      "does not reach the encoder"),
    "logits-decoder-over-embeddings": ("transformer_logits", logits_decoder_over_embeddings, _LOG,
                                       "embedded source"),
    "greedy-includes-bos": ("greedy_decode", greedy_includes_bos, _GREEDY, "starts with BOS"),
    "greedy-no-eos-padding": ("greedy_decode", greedy_no_eos_padding, _GREEDY,
                              "keeps producing eos_id"),
    "greedy-stops-at-first-row-eos": ("greedy_decode", greedy_stops_at_first_row_eos, _GREEDY,
                                      "until every row has produced it"),
    "greedy-stops-at-any-eos": ("greedy_decode", greedy_stops_at_any_eos, _GREEDY,
                                "until every row has produced it"),
    "greedy-always-runs-max-len": ("greedy_decode", greedy_always_runs_max_len, _GREEDY,
                                   "stop there"),
    "greedy-last-token-only": ("greedy_decode", greedy_last_token_only, _GREEDY,
                               "the whole prefix"),
    "greedy-first-position": ("greedy_decode", greedy_first_position, _GREEDY,
                              "at the last position"),
    "greedy-ignores-src-mask": ("greedy_decode", greedy_ignores_src_mask, _GREEDY,
                                "src_mask is not passed on"),
    "greedy-returns-logits": ("greedy_decode", greedy_returns_logits, _GREEDY, "not logits"),
    "greedy-float-tokens": ("greedy_decode", greedy_float_tokens, _GREEDY, "integer array"),
    "init-swaps-keys-and-values": ("init_decoder_cache", init_swaps_keys_and_values, _INIT,
                                   "are swapped"),
    "init-from-self-attention": ("init_decoder_cache", init_from_self_attention, _INIT,
                                 "self-attention's parameters"),
    "init-not-split-into-heads": ("init_decoder_cache", init_not_split_into_heads, _INIT,
                                  "split it into heads"),
    "init-drops-src-mask": ("init_decoder_cache", init_drops_src_mask, _INIT,
                            "src_mask is None"),
    "init-one-layer": ("init_decoder_cache", init_one_layer, _INIT, "one dict per layer"),
    "step-forgets-past": ("decoder_step", step_forgets_past, _STEP, "attends only to itself"),
    "step-position-zero": ("decoder_step", step_position_zero, _STEP, "position 0"),
    "step-position-after": ("decoder_step", step_position_after, _STEP, "position t + 1"),
    "step-unscaled-embedding": ("decoder_step", step_unscaled_embedding, _STEP,
                                "without the factor √d_model"),
    "step-kv-from-embedding": ("decoder_step", step_kv_from_embedding, _STEP,
                               "computed from the embedded token"),
    "step-ignores-src-mask": ("decoder_step", step_ignores_src_mask, _STEP,
                              "ignores the cache's src_mask"),
    "step-mutates-cache": ("decoder_step", step_mutates_cache, _STEP, "modified its input"),
    "step-returns-output-only": ("decoder_step", step_returns_output_only, _STEP,
                                 "should return a tuple (output, cache)"),
    "step-recomputes-prefix": ("decoder_step", step_recomputes_prefix, _STEP, "is not a cache"),
    "cache-not-supported": ("greedy_decode", cache_not_supported, _CACHE,
                            "unexpected keyword argument 'use_cache'"),
    "cache-never-grows": ("greedy_decode", cache_never_grows, _CACHE,
                          "differ from greedy decoding"),
    "cache-without-src-mask": ("greedy_decode", cache_without_src_mask, _CACHE,
                               "differ from greedy decoding"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
# (A decoder_layer that raises, like decoder-cross-attends-own-states, fails every later task's
# visible checks too, which call it: it is graded here by the hidden checks only.)
GRADED_MISTAKES = ["decoder-no-residual-cross", "decoder-pre-ln", "decoder-causal-mask-upper",
                   "logits-probabilities", "greedy-no-eos-padding", "step-forgets-past",
                   "step-recomputes-prefix"]


# -- two mistakes at once ------------------------------------------------------------

def decoder_layer_no_masks(Y, memory, params, num_heads, self_mask=None, memory_mask=None):
    # both masks ignored
    X = layer_norm(Y + multi_head_attention(Y, Y, Y, params["self_attn"], num_heads)[0], **params["norm1"])
    X = layer_norm(X + multi_head_attention(X, memory, memory, params["cross_attn"], num_heads)[0],
                   **params["norm2"])
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm3"])


def decoder_unscaled_no_positions(tgt_tokens, memory, params, num_heads, src_mask=None):
    # neither the factor √d_model nor the positional encoding
    T = tgt_tokens.shape[1]
    X = params["embedding"][tgt_tokens]
    memory_mask = None if src_mask is None else src_mask[:, None, None, :]
    for layer in params["decoder_layers"]:
        X = decoder_layer(X, memory, layer, num_heads, causal_mask(T), memory_mask)
    return X


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "decoder-layer-no-masks": ({"decoder_layer": decoder_layer_no_masks}, "test_decoder_layer",
                               ("self_mask", "memory_mask", "masks")),
    "decoder-unscaled-no-positions": ({"decoder": decoder_unscaled_no_positions}, "test_decoder",
                                      ("√d_model", "positional encoding")),
}
