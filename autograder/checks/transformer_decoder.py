"""Hidden checks for the Transformer decoder exercise, as case tables (`engine.cases`): each task's known
mistakes are the reference with one step changed (`_layer`, `_decoder`, `_logits`, `_greedy`, `_step`).

The cache is plain data: ``check_decoder_step`` calls the student's step on the reference's caches of prefixes
the notebook never saw, so a step that recomputes the prefix from tokens kept elsewhere cannot pass. Each task is
judged with the reference's earlier tasks standing in; ``greedy_decode``'s checks name theirs (the cache's tasks
only in the check after theirs).
"""

import math

import numpy as np

from solutions import transformer_decoder as reference
from solutions.multi_head import multi_head_attention
from solutions.positional_encoding import sinusoidal_encoding
from solutions.scaled_dot_product import causal_mask, padding_mask
from solutions.transformer_encoder import embed, encoder, layer_norm, position_wise_ffn

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case
from autograder.engine.checking import CheckFailed, check, close, named_cause
from autograder.engine.harness import seeded

SEED = 170603762  # arXiv 1706.03762, "Attention is all you need"
GREEDY_STAND_INS = (reference.decoder_layer, reference.decoder, reference.transformer_logits)
CACHED_STAND_INS = (*GREEDY_STAND_INS, reference.init_decoder_cache, reference.decoder_step)


# -- inputs ------------------------------------------------------------------
DECODER_LAYER = ("self_attn", "norm1", "cross_attn", "norm2", "ffn", "norm3")
ENCODER_LAYER = ("self_attn", "norm1", "ffn", "norm2")


def layer_params(rng, d, d_ff, parts):
    """A layer's parameters, drawn in the order of `parts` (gamma, beta far enough from 1, 0 that swaps show)."""
    def draw(part):
        if part.endswith("attn"):
            return {**{f"W_{n}": rng.normal(size=(d, d)) / np.sqrt(d) for n in "qkvo"},
                    **{f"b_{n}": 0.3 * rng.normal(size=d) for n in "qkvo"}}
        if part == "ffn":
            return {"W_1": rng.normal(size=(d, d_ff)) / np.sqrt(d), "b_1": 0.3 * rng.normal(size=d_ff),
                    "W_2": rng.normal(size=(d_ff, d)) / np.sqrt(d_ff), "b_2": 0.3 * rng.normal(size=d)}
        return {"gamma": 1.0 + 0.3 * rng.normal(size=d), "beta": 0.3 * rng.normal(size=d)}
    return {part: draw(part) for part in parts}


def model_params(rng, V, d, d_ff, n_enc, n_dec, embedding_scale=1.0):
    return {"embedding": embedding_scale * rng.normal(size=(V, d)),
            "encoder_layers": [layer_params(rng, d, d_ff, ENCODER_LAYER) for _ in range(n_enc)],
            "decoder_layers": [layer_params(rng, d, d_ff, DECODER_LAYER) for _ in range(n_dec)]}


def _source_mask(lengths, S):
    return {} if lengths is None else {"src_mask": padding_mask(np.array(lengths), S)}


# -- the reference with one step changed ---------------------------------------------
def _layer(*, order=("self", "cross", "ffn"), residual=("self", "cross", "ffn"), pre_ln=False, qkv="ymm",
           masks=("self", "memory"), cross_params="cross_attn", norms=("norm1", "norm2", "norm3")):
    """The decoder layer with one step changed (a mistake's value): the sub-layers' order, which have a residual,
    pre-LN, where the cross-attention's queries, keys and values come from (qkv: "y" decoder, "m" memory), the
    masks of the two attentions, the cross-attention's parameters, the norms after each sub-layer."""
    def gives(Y, memory, params, num_heads, self_mask, memory_mask):
        given = {"self": self_mask, "memory": memory_mask, None: None}

        def sublayer(name, X):
            if name == "self":
                return multi_head_attention(X, X, X, params["self_attn"], num_heads, given[masks[0]])[0]
            if name == "cross":
                q, k, v = ({"y": X, "m": memory}[c] for c in qkv)
                return multi_head_attention(q, k, v, params[cross_params], num_heads, given[masks[1]])[0]
            return position_wise_ffn(X, params["ffn"])

        X = Y
        for name in order:
            norm = params[norms[("self", "cross", "ffn").index(name)]]
            if pre_ln:
                X = X + sublayer(name, layer_norm(X, **norm))
            else:
                X = layer_norm(X + sublayer(name, X) if name in residual else sublayer(name, X), **norm)
        return X
    return gives


def _decoder(*, causal="lower", src_mask_on=True, embedding="embed", layers="all"):
    """The decoder with one step changed: the causal mask ("lower" is right), the source mask dropped, the
    embedding ("embed" is right), the layers that run ("all" is right)."""
    def gives(tgt_tokens, memory, params, num_heads, src_mask):
        E = params["embedding"]
        T, d = np.shape(tgt_tokens)[1], E.shape[1]
        X = {"embed": lambda: embed(tgt_tokens, E), "unscaled": lambda: E[tgt_tokens] + sinusoidal_encoding(T, d),
             "no_position": lambda: E[tgt_tokens] * math.sqrt(d), "bare": lambda: E[tgt_tokens]}[embedding]()
        self_mask = {"lower": causal_mask(T), "none": None, "upper": causal_mask(T).T,
                     "strict": np.tril(np.ones((T, T), dtype=bool), -1)}[causal]
        memory_mask = None if src_mask is None or not src_mask_on else np.asarray(src_mask)[:, None, None, :]
        stack = list(params["decoder_layers"])
        for layer_params in {"all": stack, "reversed": stack[::-1], "first": stack[:1], "last": stack[-1:]}[layers]:
            X = reference.decoder_layer(X, memory, layer_params, num_heads, self_mask, memory_mask)
        return X
    return gives


def _logits(*, output="E.T", encoder_mask=True, decoder_mask=True, memory="encoder", softmax=None):
    """The logits with one step changed; softmax: "log" or "exp" of the log-softmax of the right ones."""
    def gives(src_tokens, tgt_tokens, params, num_heads, src_mask):
        E = params["embedding"]
        states = encoder(src_tokens, params, num_heads, src_mask if encoder_mask else None) \
            if memory == "encoder" else embed(src_tokens, E)
        out = reference.decoder(tgt_tokens, states, params, num_heads, src_mask if decoder_mask else None)
        logits = out @ (E if output == "E" else E.T) * (math.sqrt(E.shape[1]) if output == "scaled" else 1.0)
        if softmax:  # the log-softmax of the logits, or its exp
            shift = logits - logits.max(axis=-1, keepdims=True)
            logits = shift - np.log(np.exp(shift).sum(axis=-1, keepdims=True))
        return np.exp(logits) if softmax == "exp" else logits
    return gives


def _greedy(*, pad=True, stop="all", feed="prefix", read="last", mask=True, bos=False):
    """Greedy decoding with one step changed: finished rows padded with EOS or not, when it stops ("all" rows
    finished is right), what the decoder reads, which position's logits, src_mask dropped, BOS kept."""
    def gives(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask, use_cache):
        src_mask = src_mask if mask else None
        memory = encoder(src_tokens, params, num_heads, src_mask)
        prefix = np.full((memory.shape[0], 1), bos_id)
        finished = np.zeros(memory.shape[0], dtype=bool)
        for _ in range(max_len):
            out = reference.decoder(prefix if feed == "prefix" else prefix[:, -1:], memory, params, num_heads,
                                    src_mask)
            token = np.argmax(out[:, -1 if read == "last" else 0] @ params["embedding"].T, axis=-1)
            token = np.where(finished, eos_id, token) if pad else token
            prefix = np.concatenate([prefix, token[:, None]], axis=1)
            finished |= token == eos_id
            if {"all": finished.all(), "first": finished[0], "any": finished.any(), "never": False}[stop]:
                break
        return prefix if bos else prefix[:, 1:]
    return gives


def _step(*, position="t", scale=True, past=True, kv_from="layer", src_mask_on=True):
    """The step's output with one step changed: the token's position ("t" is right), √d_model dropped, the past
    forgotten, every layer's keys and values from the embedded token, the cache's src_mask ignored."""
    def gives(token, cache, params, num_heads):
        E = params["embedding"]
        d, t = E.shape[1], cache[0]["k"].shape[2]
        at = {"t": t, "zero": 0, "next": t + 1}[position]
        x = embedded = (E[token] * (math.sqrt(d) if scale else 1.0) + sinusoidal_encoding(at + 1, d)[at])[:, None]
        for layer, kept in zip(params["decoder_layers"], cache):
            own = layer["self_attn"]
            k, v = (reference._heads(embedded if kv_from == "embedding" else x, own, n, num_heads) for n in "kv")
            if past:
                k, v = np.concatenate([kept["k"], k], axis=2), np.concatenate([kept["v"], v], axis=2)
            x = layer_norm(x + reference._attend(x, own, k, v, num_heads), **layer["norm1"])
            mask = kept["src_mask"][:, None, None, :] if src_mask_on and kept["src_mask"] is not None else None
            x = layer_norm(x + reference._attend(x, layer["cross_attn"], kept["memory_k"], kept["memory_v"],
                                                 num_heads, mask), **layer["norm2"])
            x = layer_norm(x + position_wise_ffn(x, layer["ffn"]), **layer["norm3"])
        return x[:, 0]
    return gives


# -- the cache ---------------------------------------------------------------------
CACHE_KEYS = {"memory_k", "memory_v", "k", "v", "src_mask"}


def _check_cache(actual, expected, name, params, memory=None, **_):
    """`actual` holds exactly the keys, shapes and values of the cache `expected` (an output's `judge`)."""
    check(isinstance(actual, list) and all(isinstance(kept, dict) for kept in actual),
          f"{name} should be a list with one dict per decoder layer, not this {type(actual).__name__}.")
    check(len(actual) == len(expected), f"{name} has {len(actual)} layers, but the decoder has {len(expected)}: "
                                        "one dict per layer of params[\"decoder_layers\"].")
    for i, (kept, right, layer) in enumerate(zip(actual, expected, params["decoder_layers"])):
        where = f"{name}, layer {i},"
        check(set(kept) <= CACHE_KEYS, f"{where} holds {sorted(set(kept) - CACHE_KEYS)}: a cache holds exactly "
                                       "memory_k, memory_v, k, v and src_mask, and nothing else (a step that keeps "
                                       "the tokens to recompute the prefix is not a cache).")
        check(CACHE_KEYS <= set(kept), f"{where} has no {sorted(CACHE_KEYS - set(kept))}: a cache holds exactly "
                                       "memory_k, memory_v, k, v and src_mask.")
        for key in ("memory_k", "memory_v", "k", "v"):
            value, wanted = kept[key], right[key]
            check(isinstance(value, np.ndarray), f"{where} {key} should be a NumPy array, but it is a "
                                                 f"{type(value).__name__}.")
            from_memory = memory is not None and key.startswith("memory")
            check(not (from_memory and value.shape != wanted.shape and value.shape == memory.shape),
                  f"{where} {key} has shape {value.shape}, the memory's: split it into heads, (B, h, S, d_head).")
            check(value.shape == wanted.shape, f"{where} {key} has shape {value.shape}, but it should have shape "
                                               f"{wanted.shape} (B, h, positions, d_head).")
            mistakes = [] if not from_memory else [
                (right["memory_v" if key == "memory_k" else "memory_k"], "memory_k and memory_v are swapped"),
                (reference._heads(memory, layer["self_attn"], key[-1], value.shape[1]),
                 f"{key} comes from the self-attention's parameters: the memory's keys and values are projected "
                 "by the attention over the memory, params[\"cross_attn\"]")]
            cause = named_cause(value, wanted, mistakes)
            check(cause is None, f"{where} {cause}.")
            check(close(value, wanted), f"{where} {key} is wrong: it should be " + (
                f"split_heads(memory @ W_{key[-1]} + b_{key[-1]}, h) with the weights of params[\"cross_attn\"]."
                if key.startswith("memory") else "the keys and values of the positions so far, the newest last."))
        mask, right_mask = kept["src_mask"], right["src_mask"]
        check(right_mask is not None or mask is None, f"{where} src_mask should be None without a source mask.")
        check(right_mask is None or mask is not None, f"{where} src_mask is None: keep the source's padding mask "
                                                      "(B, S) in the cache, the attention over the memory needs it.")
        check(right_mask is None or isinstance(mask, np.ndarray) and mask.shape == right_mask.shape
              and np.array_equal(mask.astype(bool), right_mask),
              f"{where} src_mask should be the source's padding mask, shape {np.shape(right_mask)}, as it was given.")


# -- the tasks -----------------------------------------------------------------------
_ORDER = "the sub-layers are in the wrong order: first the masked self-attention, then the attention over the " \
         "memory, then the FFN"
_KV = "keys and values both come from memory, only the queries from the decoder"
_RESIDUAL = "add the sub-layer's input to its output before layer_norm"
_EMBED = "use embed(tgt_tokens, E), E[tokens] · √d_model + PE"
_EVERY_LAYER = "apply every layer of params[\"decoder_layers\"], each to the previous one's output"
_STOP = "it stopped once a row had produced eos_id: go on until every row has produced it or max_len tokens are out"
_CACHE_RULE = "the tokens with use_cache=True differ from greedy decoding: start from init_decoder_cache(memory, " \
              "params, num_heads, src_mask) and at each step call decoder_step on the newest token only, with the " \
              "cache it returned last"
_TOKENS = dict(any_shape=True, requires=[  # token ids, at most max_len per row; a loop may stop early
    Fact("{name} is an array of shape (B, L, V): return the token ids, shape (B, L), not logits or probabilities.",
         lambda actual, **_: not (isinstance(actual, np.ndarray) and actual.ndim == 3)),
    Fact("{name} should be an integer array (token ids): the argmax of the logits at each step.",
         lambda actual, **_: not isinstance(actual, np.ndarray) or np.issubdtype(actual.dtype, np.integer)),
    Fact("{name} should have shape (B, L): one row of token ids per source.",
         lambda actual, src_tokens, **_: not isinstance(actual, np.ndarray)
         or (actual.ndim == 2 and len(actual) == len(src_tokens)))], facts=[
    Fact("{name} holds more than max_len={max_len} tokens: greedy_decode produces at most max_len.",
         lambda actual, max_len, **_: actual.shape[1] <= max_len)])
# Mistakes of the decoding loop, which a correct cache reproduces: graded by check_greedy_decode.
LOOP_MISTAKES = [
    Mistake("a row that has produced eos_id keeps producing eos_id: fill the rest of a finished row with eos_id",
            _greedy(pad=False)),
    Mistake(_STOP, _greedy(stop="first")),
    Mistake(_STOP, _greedy(stop="any")),
    Mistake("every row had produced eos_id: stop there instead of running to max_len", _greedy(stop="never")),
    Mistake("the output starts with BOS: it should hold only the generated tokens, from the first one after BOS",
            _greedy(bos=True))]

exercise = Exercise(reference)
layer = exercise.task(
    "decoder_layer", hint="after the masked self-attention, the attention over the memory and the FFN comes each "
                          "time X = layer_norm(X + sublayer(X)), with norm1, norm2 and norm3 in that order",
    requires=[Fact("{name} should be the layer's output alone, an array (B, T, d_model), not a tuple.",
                   lambda actual, **_: not isinstance(actual, tuple))],
    mistakes=[
        Mistake("the masked self-attention ignores self_mask: pass it on, so that position t sees only the targets "
                "0…t", _layer(masks=(None, "memory"))),
        Mistake("the attention over the memory ignores memory_mask: pass it on, so that no query attends to the "
                "source's padding", _layer(masks=("self", None))),
        Mistake("both attentions ignore their masks: pass self_mask to the self-attention and memory_mask to the "
                "attention over the memory", _layer(masks=(None, None))),
        Mistake("the masks are swapped: self_mask goes to the self-attention, memory_mask to the attention over the "
                "memory", _layer(masks=("memory", "self"))),
        Mistake("the second attention attends over the decoder's own states: its keys and values come from memory "
                "(the encoder's output), its queries from the decoder", _layer(qkv="yyy")),
        Mistake(f"the keys of the attention over the memory come from the decoder: {_KV}", _layer(qkv="yym")),
        Mistake(f"the values of the attention over the memory come from the decoder: {_KV}", _layer(qkv="ymy")),
        Mistake("the attention over the memory takes its queries from memory and its keys and values from the "
                "decoder: it is the other way round, multi_head_attention(X, memory, memory, ...)",
                _layer(qkv="myy")),
        Mistake(_ORDER, _layer(order=("cross", "self", "ffn"), norms=("norm2", "norm1", "norm3"))),
        Mistake(_ORDER, _layer(order=("cross", "self", "ffn"))),
        Mistake(_ORDER, _layer(order=("ffn", "self", "cross"), norms=("norm2", "norm3", "norm1"))),
        Mistake(f"the residual connection around the self-attention is missing: {_RESIDUAL}",
                _layer(residual=("cross", "ffn"))),
        Mistake(f"the residual connection around the attention over the memory is missing: {_RESIDUAL}",
                _layer(residual=("self", "ffn"))),
        Mistake(f"the residual connection around the FFN is missing: {_RESIDUAL}", _layer(residual=("self", "cross"))),
        Mistake("the residual connections are missing: each sub-layer's input is added to its output before "
                "layer_norm", _layer(residual=())),
        Mistake("this is pre-LN, X + sublayer(layer_norm(X)); the paper's decoder is post-LN: "
                "X = layer_norm(X + sublayer(X))", _layer(pre_ln=True)),
        Mistake("the attention over the memory uses the self-attention's parameters: it has its own, "
                "params[\"cross_attn\"]", _layer(cross_params="self_attn")),
        Mistake("each sub-layer has its own layer norm: norm1 after the self-attention, norm2 after the attention "
                "over the memory, norm3 after the FFN", _layer(norms=("norm1", "norm1", "norm1"))),
        Mistake("the layer norms are swapped: norm1 after the self-attention, norm2 after the attention over the "
                "memory, norm3 after the FFN", _layer(norms=("norm1", "norm3", "norm2")))])
decoder = exercise.task(
    "decoder", hint="embed the targets with embed, then apply each layer of params[\"decoder_layers\"] with "
                    "self_mask=causal_mask(T) and the source mask as memory_mask", mistakes=[
        Mistake("the decoder does not apply the causal mask: pass causal_mask(T) as self_mask, so that position t "
                "cannot see the later targets", _decoder(causal="none")),
        Mistake("the causal mask is transposed: it is True on and below the diagonal (causal_mask(T)), so that "
                "position t sees the targets 0…t, not t…T−1", _decoder(causal="upper")),
        Mistake("the causal mask must be True on the diagonal: position t may attend to itself (use causal_mask(T))",
                _decoder(causal="strict")),
        Mistake("src_mask does not reach the attention over the memory: pass it to every layer as memory_mask, "
                "reshaped to (B, 1, 1, S)", _decoder(src_mask_on=False)),
        Mistake(f"the targets are embedded without the factor √d_model: {_EMBED}", _decoder(embedding="unscaled")),
        Mistake(f"the targets are embedded without the positional encoding: {_EMBED}",
                _decoder(embedding="no_position")),
        Mistake(f"the targets are embedded as E[tokens] alone: {_EMBED}", _decoder(embedding="bare")),
        Mistake("the layers run in reverse order: apply params[\"decoder_layers\"] from first to last",
                _decoder(layers="reversed")),
        Mistake(f"only the first layer is applied: {_EVERY_LAYER}", _decoder(layers="first")),
        Mistake(f"only the last layer is applied: {_EVERY_LAYER}", _decoder(layers="last"))])
logits = exercise.task(
    "transformer_logits", hint="they are decoder(tgt, encoder(src)) @ E.T, the source mask given to both", mistakes=[
        Mistake("these are probabilities: return the logits, decoder output @ E.T, without a softmax",
                _logits(softmax="exp")),
        Mistake("these are log-probabilities: return the logits, decoder output @ E.T, without a (log-)softmax",
                _logits(softmax="log")),
        Mistake("the output projection multiplies by E, not by its transpose: logits = decoder output @ E.T, one "
                "score per token", _logits(output="E")),
        Mistake("the output projection is E.T alone, without the factor √d_model of the embedding",
                _logits(output="scaled")),
        Mistake("the source mask does not reach the decoder: pass src_mask to decoder as well as to encoder",
                _logits(decoder_mask=False)),
        Mistake("the source mask does not reach the encoder: pass src_mask to encoder as well as to decoder",
                _logits(encoder_mask=False)),
        Mistake("src_mask is ignored: pass it to encoder and to decoder", _logits(encoder_mask=False,
                                                                                  decoder_mask=False)),
        Mistake("the decoder attends over the embedded source: run the encoder and give its output to the decoder "
                "as memory", _logits(memory="embedded"))])
greedy = exercise.task(
    "greedy_decode", stand_ins=GREEDY_STAND_INS, **_TOKENS,
    hint="at each step, the next token comes from the decoder's output at the last position of the whole prefix "
         "(BOS and every token so far), as the argmax of its logits (@ E.T)",
    mistakes=[*LOOP_MISTAKES,
              Mistake("at each step the decoder reads the whole prefix (BOS and every token so far), not only the "
                      "last token", _greedy(feed="last")),
              Mistake("the next token comes from the decoder's output at the last position of the prefix, not at "
                      "the first", _greedy(read="first")),
              Mistake("src_mask is not passed on: give it to the encoder and the decoder", _greedy(mask=False))])
init_cache = exercise.task("init_decoder_cache", judge=_check_cache)
step = exercise.task("decoder_step", outputs=[
    Output("output", hint="it should be the decoder's output at the newest position, each layer as in decoder_layer, "
                          "with the self-attention over the cached keys and values and the newest one", mistakes=[
        Mistake("the step treats the newest token as the first of a new sequence (position 0, nothing before it): it "
                "must continue the prefix that the cache it is given holds, t = cache[0][\"k\"].shape[2] positions, "
                "whose keys and values are in the cache; a prefix kept anywhere else is not the one it is asked "
                "about", _step(past=False, position="zero")),
        Mistake("the newest position attends only to itself: append its key and value to the cache's k and v (the "
                "positions so far) and attend over all of them. (A step that recomputes the prefix from tokens it "
                "kept elsewhere cannot know this prefix: the cache is all it gets.)", _step(past=False)),
        Mistake("the newest token gets the positional encoding of position 0: embed it at its own position "
                "t = cache[0][\"k\"].shape[2], E[token] · √d_model + PE[t]", _step(position="zero")),
        Mistake("the newest token gets the positional encoding of position t + 1: positions start at 0, so it is at "
                "t = cache[0][\"k\"].shape[2]", _step(position="next")),
        Mistake("the token is embedded without the factor √d_model: E[token] · √d_model + PE[t]", _step(scale=False)),
        Mistake("every layer's keys and values are computed from the embedded token: each layer computes them from "
                "its own input", _step(kv_from="embedding")),
        Mistake("the attention over the memory ignores the cache's src_mask: reshape it to (B, 1, 1, S) and hide the "
                "source's padding", _step(src_mask_on=False))]),
    Output("cache", judge=_check_cache)])
cached_greedy = exercise.task(
    "greedy_decode", graded=False, stand_ins=CACHED_STAND_INS, **_TOKENS, mistakes=LOOP_MISTAKES, hint=_CACHE_RULE)


# -- the checks ----------------------------------------------------------------------
def check_decoder_layer(function):
    rng = seeded(SEED)
    cases = []
    for description, B, T, S, d, h, lengths, full in [  # B, T, S, d_model, heads, source lengths, 4-D masks
            ("B=2 targets of T=4 over a memory of S=4 (one source padded to 2), 2 heads", 2, 4, 4, 8, 2, [4, 2], 0),
            ("B=3 targets of T=3 over a memory of S=5 (sources of 5, 3 and 1), 4 heads", 3, 3, 5, 8, 4, [5, 3, 1], 0),
            ("B=1 target of T=5 over S=2 with no masks, 1 head", 1, 5, 2, 6, 1, None, 0),
            ("B=2, T=3, S=4 with masks of shape (1, 1, T, T) and (B, 1, T, S), 2 heads", 2, 3, 4, 8, 2, [3, 4], 1)]:
        params = layer_params(rng, d, 2 * d, DECODER_LAYER)
        Y, memory = rng.normal(size=(B, T, d)), rng.normal(size=(B, S, d))
        masks = {} if lengths is None else {"self_mask": causal_mask(T),
                                            "memory_mask": padding_mask(np.array(lengths), S)[:, None, None, :]}
        if full:
            masks = {"self_mask": causal_mask(T)[None, None],
                     "memory_mask": np.broadcast_to(masks["memory_mask"], (B, 1, T, S)).copy()}
        cases.append(case(description, Y, memory, params, h, **masks))
    layer.check(function, cases)


def check_decoder(function):
    rng = seeded(SEED + 1)
    cases = []
    for description, B, T, S, V, d, h, n, lengths in [  # B, T, S, V, d_model, heads, layers, source lengths
            ("B=2 targets of T=5 with 2 layers, 2 heads, sources of 4 and 2 (S=4)", 2, 5, 4, 7, 8, 2, 2, [4, 2]),
            ("B=3 targets of T=3 with 1 layer, 4 heads, sources of 5, 1 and 3 (S=5)", 3, 3, 5, 6, 8, 4, 1, [5, 1, 3]),
            ("B=1 target of T=4 with 3 layers and no source mask", 1, 4, 3, 5, 6, 2, 3, None),
            ("B=2 targets of T=1 (only BOS) with 2 layers", 2, 1, 3, 5, 8, 2, 2, [3, 2]),
            # without layers the decoder calls no decoder_layer: judged whatever that task's state
            ("B=2 targets of T=3 with no layers (the embedding alone)", 2, 3, 4, 6, 8, 2, 0, [4, 1])]:
        params = model_params(rng, V, d, 2 * d, 0, n)
        tgt, memory = rng.integers(0, V, size=(B, T)), rng.normal(size=(B, S, d))
        cases.append(case(description, tgt, memory, params, h, **_source_mask(lengths, S)))
    decoder.check(function, cases)


def check_transformer_logits(function):
    rng = seeded(SEED + 2)
    cases = []
    for description, B, S, T, V, d, h, n_enc, n_dec, lengths in [  # heads, encoder and decoder layers, lengths
            ("B=2, S=4, T=3, V=d_model=8, 2 heads, 1 encoder and 2 decoder layers, sources of 4 and 2",
             2, 4, 3, 8, 8, 2, 1, 2, [4, 2]),
            ("B=3, S=5, T=4, V=11, d_model=8, 4 heads, 2 + 1 layers, sources of 5, 2 and 3",
             3, 5, 4, 11, 8, 4, 2, 1, [5, 2, 3]),
            ("B=1, S=3, T=5, V=5, d_model=6, 1 head, 1 + 1 layers, no source mask", 1, 3, 5, 5, 6, 1, 1, 1, None)]:
        params = model_params(rng, V, d, 2 * d, n_enc, n_dec)
        src, tgt = rng.integers(0, V, size=(B, S)), rng.integers(0, V, size=(B, T))
        cases.append(case(description, src, tgt, params, h, **_source_mask(lengths, S)))
    logits.check(function, cases)


def copy_problem(lengths, bos_id, eos_id, seed, reverse=False):
    """Sources for the copy (or reverse) model: `lengths` letters (not BOS nor EOS), EOS, padding."""
    rng = np.random.default_rng(seed)
    letters = np.array([v for v in range(16) if v not in (bos_id, eos_id)])
    S = max(lengths) + 1
    src = np.zeros((len(lengths), S), dtype=int)
    for b, n in enumerate(lengths):
        row = list(rng.choice(letters, size=n)) + [eos_id]
        src[b, :n + 1] = row[::-1] if reverse else row
        src[b, n + 1:] = rng.choice(letters)  # padding: any token, hidden by the mask
    return src, reference.copy_model(reverse_length=S if reverse else None), padding_mask(np.array(lengths) + 1, S)


def random_problem(seed, B, S, lengths, V=12, d=8, n_enc=1, n_dec=2):
    """A random model (small embeddings, so that the tokens depend on the positions)."""
    rng = np.random.default_rng(seed)
    params = model_params(rng, V, d, 2 * d, n_enc, n_dec, embedding_scale=0.1)
    return rng.integers(0, V, size=(B, S)), params, None if lengths is None else padding_mask(np.array(lengths), S)


# The random models' seeds were picked so that each known mistake changes their tokens.
GREEDY_CASES = [  # description, problem, heads, bos_id, eos_id, max_len, pass src_mask
    ("the copy model of the chapter, on 4 sources of 3, 1, 6 and 12 letters (max_len=9)",
     lambda: copy_problem([3, 1, 6, 12], 1, 2, SEED), 2, 1, 2, 9, True),
    ("the copy model with bos_id=7, eos_id=0 and sources of 2, 4 and 3 letters (max_len=10)",
     lambda: copy_problem([2, 4, 3], 7, 0, SEED + 1), 2, 7, 0, 10, True),
    ("the reverse model of the chapter, on 3 sources of 5 letters (max_len=8)",
     lambda: copy_problem([5, 5, 5], 1, 2, SEED + 2, reverse=True), 2, 1, 2, 8, False),
    ("the copy model with max_len=2, before any row has finished",
     lambda: copy_problem([3, 4], 1, 2, SEED + 3), 2, 1, 2, 2, True),
    ("a random model with 2 decoder layers and sources padded to 5, 2 and 3 (max_len=7)",
     lambda: random_problem(SEED + 61, 3, 5, [5, 2, 3]), 2, 0, 3, 7, True),
    ("a random model with 3 decoder layers, 4 heads and no source mask (max_len=10)",
     lambda: random_problem(SEED + 118, 2, 6, None, n_dec=3), 4, 1, 4, 10, False),
]


def _greedy_case(description, problem, h, bos_id, eos_id, max_len, pass_mask, **options):
    src, params, src_mask = problem()
    return case(description, src, params, h, bos_id, eos_id, max_len,
                **({"src_mask": src_mask} if pass_mask else {}), **options)


def check_greedy_decode(function):
    greedy.check(function, [_greedy_case(*each) for each in GREEDY_CASES])


def check_greedy_decode_cache(function):
    """The tokens with use_cache=True are greedy decoding's, or the same loop mistake's as without the cache (graded
    by check_greedy_decode). Whether the cache is a cache is graded by check_decoder_step: tokens cannot tell."""
    # The random models first: on them a wrong step gives different tokens.
    cases = [("a random model with 2 decoder layers whose third row finishes after 4 steps",
              lambda: random_problem(SEED + 25, 3, 5, [5, 2, 3]), 2, 0, 7, 8, True), *GREEDY_CASES[::-1]]
    for description, *problem in cases:
        each = _greedy_case(f"{description} with use_cache=True", *problem, use_cache=True)
        try:
            cached_greedy.judge(function, each)
        except CheckFailed as failure:
            if failure.cause not in {mistake.message for mistake in LOOP_MISTAKES}:
                raise
            try:  # the loop's mistake, with a right cache, gives the same tokens without it
                cached_greedy.judge(function, _greedy_case(each.description, *problem))
            except CheckFailed as without:
                if without.cause == failure.cause:
                    continue
            raise CheckFailed(f"greedy_decode on {each.description}: {_CACHE_RULE}.") from None


def check_init_decoder_cache(function):
    rng = seeded(SEED + 4)
    cases = []
    for description, B, S, d, h, n_dec, lengths in [  # B, S, d_model, heads, decoder layers, source lengths
            ("B=2, S=4 (one source padded to 2), d_model=8, 2 heads, 2 decoder layers", 2, 4, 8, 2, 2, [4, 2]),
            ("B=3, S=5 (sources of 5, 3 and 1), d_model=8, 4 heads, 1 decoder layer", 3, 5, 8, 4, 1, [5, 3, 1]),
            ("B=1, S=3, no source mask, d_model=6, 1 head, 3 decoder layers", 1, 3, 6, 1, 3, None)]:
        params = model_params(rng, 9, d, 2 * d, 0, n_dec)
        cases.append(case(description, rng.normal(size=(B, S, d)), params, h, **_source_mask(lengths, S)))
    init_cache.check(function, cases)


def check_decoder_step(function):
    rng = seeded(SEED + 5)
    cases = []
    for description, B, S, d, h, n_dec, t, lengths in [  # d_model, heads, decoder layers, position t, lengths
            ("the first step (t=0) of B=2 rows over S=4 (one source padded to 2), d_model=8, 2 heads, 1 decoder "
             "layer", 2, 4, 8, 2, 1, 0, [4, 2]),
            ("step t=3 of B=2 rows over S=4 (sources of 4 and 2), d_model=8, 2 heads, 2 decoder layers",
             2, 4, 8, 2, 2, 3, [4, 2]),
            ("step t=5 of B=3 rows over S=5 (sources of 5, 3 and 1), d_model=8, 4 heads, 3 decoder layers",
             3, 5, 8, 4, 3, 5, [5, 3, 1]),
            ("step t=2 of B=1 row over S=3, no source mask, d_model=6, 1 head, 2 decoder layers",
             1, 3, 6, 1, 2, 2, None)]:
        params = model_params(rng, 9, d, 2 * d, 0, n_dec)
        memory, tgt = rng.normal(size=(B, S, d)), rng.integers(0, 9, size=(B, t + 1))
        cache = reference.init_decoder_cache(memory, params, h, _source_mask(lengths, S).get("src_mask"))
        for position in range(t):  # the reference's cache of a prefix the notebook never saw
            _, cache = reference.decoder_step(tgt[:, position], cache, params, h)
        cases.append(case(description, tgt[:, t], cache, params, h))
    step.check(function, cases)
