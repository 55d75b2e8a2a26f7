"""What students write for the Transformer decoder exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (a table of sub-layers, a hand-made layer norm and masks, einsum,
per-row bookkeeping in Python lists, a cache kept as lists of per-step
keys and values): the hidden checks must accept them. `MISTAKES` holds
plausible wrong implementations, each of one task: the hidden checks must
reject every one, and say why. Each function is self-contained, so that its
source can be put into a notebook's solution cell as a student would write it
there; it may call the other tasks' functions and the given ones that the
notebook defines (here: the correct versions below and the reference).
"""

import numpy as np

from solutions.multi_head import merge_heads, multi_head_attention, split_heads  # noqa: F401
from solutions.positional_encoding import sinusoidal_encoding  # noqa: F401
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


def greedy_decode(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                  use_cache=False):
    # per-row lists; the cache holds, per layer, the list of each step's keys and values
    E = params["embedding"]
    B = len(src_tokens)
    memory = encoder(src_tokens, params, num_heads, src_mask)
    real = None if src_mask is None else src_mask[:, None, None, :]
    layers = params["decoder_layers"]
    saved = [{"k": [], "v": []} for _ in layers]
    memory_kv = [(split_heads(memory @ L["cross_attn"]["W_k"] + L["cross_attn"]["b_k"], num_heads),
                  split_heads(memory @ L["cross_attn"]["W_v"] + L["cross_attn"]["b_v"], num_heads))
                 for L in layers]

    def attend(x, p, keys, values, mask=None):
        q = split_heads(x @ p["W_q"] + p["b_q"], num_heads)
        context, _ = scaled_dot_product_attention(q, keys, values, mask)
        return merge_heads(context) @ p["W_o"] + p["b_o"]

    rows = [[bos_id] for _ in range(B)]
    done = [False] * B
    for t in range(max_len):
        prefix = np.array(rows)
        if use_cache:
            x = embed(prefix, E)[:, t:t + 1]
            for L, c, (mk, mv) in zip(layers, saved, memory_kv):
                c["k"].append(split_heads(x @ L["self_attn"]["W_k"] + L["self_attn"]["b_k"], num_heads))
                c["v"].append(split_heads(x @ L["self_attn"]["W_v"] + L["self_attn"]["b_v"], num_heads))
                keys, values = np.concatenate(c["k"], axis=2), np.concatenate(c["v"], axis=2)
                x = layer_norm(x + attend(x, L["self_attn"], keys, values), **L["norm1"])
                x = layer_norm(x + attend(x, L["cross_attn"], mk, mv, real), **L["norm2"])
                x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
            scores = x[:, 0] @ E.T
        else:
            scores = transformer_logits(src_tokens, prefix, params, num_heads, src_mask)[:, -1]
        for b in range(B):
            token = eos_id if done[b] else int(np.argmax(scores[b]))
            rows[b].append(token)
            done[b] = done[b] or token == eos_id
        if all(done):
            break
    return np.array([row[1:] for row in rows], dtype=int).reshape(B, -1)


CORRECT = {f.__name__: f for f in (decoder_layer, decoder, transformer_logits, greedy_decode)}


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


# -- mistakes: the cache of greedy_decode --------------------------------------------
# Each decodes correctly without the cache; with it, one thing goes wrong.


def cache_forgets_past(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                       use_cache=False):
    E = params["embedding"]
    memory = encoder(src_tokens, params, num_heads, src_mask)
    real = None if src_mask is None else src_mask[:, None, None, :]
    B = len(src_tokens)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for t in range(max_len):
        if use_cache:
            x = embed(prefix, E)[:, -1:]
            for L in params["decoder_layers"]:
                # the newest position attends to itself only: nothing is kept
                x = layer_norm(x + multi_head_attention(x, x, x, L["self_attn"], num_heads)[0],
                               **L["norm1"])
                x = layer_norm(x + multi_head_attention(x, memory, memory, L["cross_attn"],
                                                        num_heads, real)[0], **L["norm2"])
                x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
            last = x[:, 0]
        else:
            last = decoder(prefix, memory, params, num_heads, src_mask)[:, -1]
        token = np.where(finished, eos_id, np.argmax(last @ E.T, axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def cache_position_zero(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None,
                        use_cache=False):
    E = params["embedding"]
    memory = encoder(src_tokens, params, num_heads, src_mask)
    real = None if src_mask is None else src_mask[:, None, None, :]
    B = len(src_tokens)
    layers = params["decoder_layers"]
    inputs = [None] * len(layers)  # each layer's inputs so far
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for t in range(max_len):
        if use_cache:
            x = embed(prefix[:, -1:], E)  # the newest token, but at position 0
            for i, L in enumerate(layers):
                inputs[i] = x if inputs[i] is None else np.concatenate([inputs[i], x], axis=1)
                x = layer_norm(x + multi_head_attention(x, inputs[i], inputs[i], L["self_attn"],
                                                        num_heads)[0], **L["norm1"])
                x = layer_norm(x + multi_head_attention(x, memory, memory, L["cross_attn"],
                                                        num_heads, real)[0], **L["norm2"])
                x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
            last = x[:, 0]
        else:
            last = decoder(prefix, memory, params, num_heads, src_mask)[:, -1]
        token = np.where(finished, eos_id, np.argmax(last @ E.T, axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def cache_kv_from_embedding(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                            src_mask=None, use_cache=False):
    E = params["embedding"]
    memory = encoder(src_tokens, params, num_heads, src_mask)
    real = None if src_mask is None else src_mask[:, None, None, :]
    B = len(src_tokens)
    layers = params["decoder_layers"]
    keys, values = [None] * len(layers), [None] * len(layers)
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for t in range(max_len):
        if use_cache:
            x = embed(prefix, E)[:, -1:]
            for i, L in enumerate(layers):  # every layer's keys and values from the embedding
                a = L["self_attn"]
                k = split_heads(embed(prefix, E)[:, -1:] @ a["W_k"] + a["b_k"], num_heads)
                v = split_heads(embed(prefix, E)[:, -1:] @ a["W_v"] + a["b_v"], num_heads)
                keys[i] = k if keys[i] is None else np.concatenate([keys[i], k], axis=2)
                values[i] = v if values[i] is None else np.concatenate([values[i], v], axis=2)
                q = split_heads(x @ a["W_q"] + a["b_q"], num_heads)
                context, _ = scaled_dot_product_attention(q, keys[i], values[i])
                x = layer_norm(x + merge_heads(context) @ a["W_o"] + a["b_o"], **L["norm1"])
                x = layer_norm(x + multi_head_attention(x, memory, memory, L["cross_attn"],
                                                        num_heads, real)[0], **L["norm2"])
                x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
            last = x[:, 0]
        else:
            last = decoder(prefix, memory, params, num_heads, src_mask)[:, -1]
        token = np.where(finished, eos_id, np.argmax(last @ E.T, axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def cache_ignores_src_mask(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                           src_mask=None, use_cache=False):
    E = params["embedding"]
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = len(src_tokens)
    layers = params["decoder_layers"]
    inputs = [None] * len(layers)  # each layer's inputs so far
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for t in range(max_len):
        if use_cache:
            x = embed(prefix, E)[:, -1:]
            for i, L in enumerate(layers):
                inputs[i] = x if inputs[i] is None else np.concatenate([inputs[i], x], axis=1)
                x = layer_norm(x + multi_head_attention(x, inputs[i], inputs[i], L["self_attn"],
                                                        num_heads)[0], **L["norm1"])
                x = layer_norm(x + multi_head_attention(x, memory, memory, L["cross_attn"],
                                                        num_heads)[0], **L["norm2"])
                x = layer_norm(x + position_wise_ffn(x, L["ffn"]), **L["norm3"])
            last = x[:, 0]
        else:
            last = decoder(prefix, memory, params, num_heads, src_mask)[:, -1]
        token = np.where(finished, eos_id, np.argmax(last @ E.T, axis=-1))
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if finished.all():
            break
    return prefix[:, 1:]


def cache_recomputes_prefix(src_tokens, params, num_heads, bos_id, eos_id, max_len,
                            src_mask=None, use_cache=False):
    # use_cache is accepted and ignored: every step recomputes the whole prefix
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


# task -> the hidden checks (in autograder/checks/transformer_decoder.py) that grade it
CHECKS_OF_TASK = {
    "decoder_layer": ["check_decoder_layer"],
    "decoder": ["check_decoder"],
    "transformer_logits": ["check_transformer_logits"],
    "greedy_decode": ["check_greedy_decode", "check_greedy_decode_cache"],
}

_LAYER, _DEC, _LOG, _GREEDY, _CACHE = ("check_decoder_layer", "check_decoder",
                                       "check_transformer_logits", "check_greedy_decode",
                                       "check_greedy_decode_cache")

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
    "cache-forgets-past": ("greedy_decode", cache_forgets_past, _CACHE, "forgets the past"),
    "cache-position-zero": ("greedy_decode", cache_position_zero, _CACHE, "position 0"),
    "cache-kv-from-embedding": ("greedy_decode", cache_kv_from_embedding, _CACHE,
                                "computed from the embedded tokens"),
    "cache-ignores-src-mask": ("greedy_decode", cache_ignores_src_mask, _CACHE,
                               "ignores src_mask"),
    "cache-recomputes-prefix": ("greedy_decode", cache_recomputes_prefix, _CACHE,
                                "recomputing the whole prefix"),
    "cache-not-supported": ("greedy_decode", cache_not_supported, _CACHE,
                            "unexpected keyword argument 'use_cache'"),
}

# Mistakes also graded end to end by nbgrader, in tests/autograder/test_grade.py.
# (A decoder_layer that raises, like decoder-cross-attends-own-states, fails every later task's
# visible checks too, which call it: it is graded here by the hidden checks only.)
GRADED_MISTAKES = ["decoder-no-residual-cross", "decoder-pre-ln", "decoder-causal-mask-upper",
                   "logits-probabilities", "greedy-no-eos-padding", "cache-forgets-past"]
