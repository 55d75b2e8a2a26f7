"""Hidden checks for the Transformer decoder exercise.

Each ``check_*`` runs the student's function on seeded random inputs and on
inputs that expose the usual mistakes, compares with the reference in
``solutions/`` and, at the first difference, raises ``CheckFailed`` with one
sentence that names the mistake when it can be recognised from the output
(a mask ignored, swapped or transposed, the attention over the memory taking
its keys or values from the decoder, sub-layers in the wrong order, a missing
residual connection, pre-LN instead of post-LN, probabilities instead of
logits, ``E`` instead of ``E.T``, BOS in the output, finished rows not padded
with EOS, decoding that stops at the wrong time, a cache step that forgets the
past or embeds the token at the wrong position). Any correct implementation
passes: only results are compared, never how they were computed.

The cache is plain data, so ``check_decoder_step`` builds, with the
reference, caches of prefixes the notebook never saw and calls the
student's ``decoder_step`` on them: its output must be the decoder's at the
newest position, its returned cache the reference's, and the cache it was
given must come back unchanged. A step that recomputes the prefix from tokens
kept elsewhere, or that keeps anything but the keys and values in the cache,
cannot pass.

Later tasks call earlier ones (``decoder`` calls ``decoder_layer``,
``transformer_logits`` calls ``decoder``, ``greedy_decode`` calls ``decoder``
or ``init_decoder_cache`` and ``decoder_step``). A later task is judged on
its own: each check calls the student's function with the reference's
versions of the graded functions it uses standing in for the student's
(``GRADED``), so that one mistake in ``decoder_layer`` costs the points of
``decoder_layer`` only, and a later function that does no work earns nothing
beside an earlier one that does none either.
"""

import math

import numpy as np

from solutions import transformer_decoder as reference
from solutions.multi_head import multi_head_attention
from solutions.positional_encoding import sinusoidal_encoding
from solutions.scaled_dot_product import causal_mask, padding_mask
from solutions.transformer_encoder import embed, encoder, layer_norm, position_wise_ffn

from autograder.engine.checking import check, check_shape, close
from autograder.engine.harness import call, compare, diagnose, quietly, seeded
from .rnn_encoder_decoder import check_greedy_contract, check_greedy_length

SEED = 170603762  # arXiv 1706.03762, "Attention is all you need"
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.decoder_layer, reference.decoder, reference.transformer_logits, reference.init_decoder_cache,
          reference.decoder_step, reference.greedy_decode)
# greedy_decode may call transformer_logits, which its reference does not: its checks name the
# earlier tasks that stand in (the cache's tasks only in the check after theirs)
GREEDY_STAND_INS = (reference.decoder_layer, reference.decoder, reference.transformer_logits)
CACHED_STAND_INS = (*GREEDY_STAND_INS, reference.init_decoder_cache, reference.decoder_step)


# -- inputs ------------------------------------------------------------------

def attention_params(rng, d):
    params = {f"W_{n}": rng.normal(size=(d, d)) / np.sqrt(d) for n in "qkvo"}
    params.update({f"b_{n}": 0.3 * rng.normal(size=d) for n in "qkvo"})
    return params


def norm_params(rng, d):
    """gamma and beta far enough from 1 and 0 that swapping two norms shows."""
    return {"gamma": 1.0 + 0.3 * rng.normal(size=d), "beta": 0.3 * rng.normal(size=d)}


def ffn_params(rng, d, d_ff):
    return {"W_1": rng.normal(size=(d, d_ff)) / np.sqrt(d), "b_1": 0.3 * rng.normal(size=d_ff),
            "W_2": rng.normal(size=(d_ff, d)) / np.sqrt(d_ff), "b_2": 0.3 * rng.normal(size=d)}


def decoder_layer_params(rng, d, d_ff):
    return {"self_attn": attention_params(rng, d), "norm1": norm_params(rng, d),
            "cross_attn": attention_params(rng, d), "norm2": norm_params(rng, d),
            "ffn": ffn_params(rng, d, d_ff), "norm3": norm_params(rng, d)}


def encoder_layer_params(rng, d, d_ff):
    return {"self_attn": attention_params(rng, d), "norm1": norm_params(rng, d),
            "ffn": ffn_params(rng, d, d_ff), "norm2": norm_params(rng, d)}


def model_params(rng, V, d, d_ff, n_enc, n_dec, embedding_scale=1.0):
    return {"embedding": embedding_scale * rng.normal(size=(V, d)),
            "encoder_layers": [encoder_layer_params(rng, d, d_ff) for _ in range(n_enc)],
            "decoder_layers": [decoder_layer_params(rng, d, d_ff) for _ in range(n_dec)]}


# -- decoder_layer -------------------------------------------------------------------

def check_decoder_layer(decoder_layer):
    rng = seeded(SEED)
    cases = [  # description, B, T, S, d_model, heads, source lengths, mask shapes
        ("B=2 targets of T=4 over a memory of S=4 (one source padded to 2), 2 heads",
         2, 4, 4, 8, 2, [4, 2], "plain"),
        ("B=3 targets of T=3 over a memory of S=5 (sources of 5, 3 and 1), 4 heads",
         3, 3, 5, 8, 4, [5, 3, 1], "plain"),
        ("B=1 target of T=5 over S=2 with no masks, 1 head", 1, 5, 2, 6, 1, None, "none"),
        ("B=2, T=3, S=4 with masks of shape (1, 1, T, T) and (B, 1, T, S), 2 heads",
         2, 3, 4, 8, 2, [3, 4], "full"),
    ]
    for description, B, T, S, d, h, lengths, shapes in cases:
        params = decoder_layer_params(rng, d, 2 * d)
        Y, memory = rng.normal(size=(B, T, d)), rng.normal(size=(B, S, d))
        if lengths is None:
            self_mask = memory_mask = None
        else:
            self_mask = causal_mask(T)
            memory_mask = padding_mask(np.array(lengths), S)[:, None, None, :]
            if shapes == "full":
                self_mask = self_mask[None, None]
                memory_mask = np.broadcast_to(memory_mask, (B, 1, T, S)).copy()
        kwargs = {} if lengths is None else {"self_mask": self_mask, "memory_mask": memory_mask}
        actual = call(decoder_layer, Y, memory, params, h, **kwargs, on=description, stand_ins=GRADED)
        expected = reference.decoder_layer(Y, memory, params, h, self_mask, memory_mask)
        if isinstance(actual, tuple):
            check(False, "decoder_layer should return the layer's output alone, an array "
                         f"(B, T, d_model), not a tuple of {len(actual)}.")
        name = f"the output of decoder_layer on {description}"
        check_shape(actual, expected.shape, name)
        check(np.all(np.isfinite(actual)), f"{name} contains inf or NaN.")
        if close(actual, expected):
            continue
        args = (Y, memory, params, h, self_mask, memory_mask)
        _diagnose_layer(actual, args, f"on {description}, ")
        check(False, f"{name} is wrong: after the masked self-attention, the attention over "
                     "the memory and the FFN comes each time X = layer_norm(X + sublayer(X)), "
                     "with norm1, norm2 and norm3 in that order.")


def decoder_layer_variant(Y, memory, params, num_heads, self_mask=None, memory_mask=None, *,
                          order=("self", "cross", "ffn"), residual=("self", "cross", "ffn"),
                          pre_ln=False, cross_inputs="ymm", masks=("self", "memory"),
                          cross_params="cross_attn", norms=("norm1", "norm2", "norm3")):
    """The reference decoder layer, or one with a known mistake.

    order: the sub-layers in the order they run; residual: those with a
    residual connection; pre_ln: X + sublayer(layer_norm(X)) instead of
    layer_norm(X + sublayer(X)); cross_inputs: where the cross-attention's
    queries, keys and values come from ("y" decoder, "m" memory); masks: the
    masks given to the self- and cross-attention ("self", "memory" or None);
    cross_params: the attention parameters of the cross-attention; norms: the
    norms after the self-attention, the cross-attention and the FFN.
    """
    given = {"self": self_mask, "memory": memory_mask, None: None}
    norm_of = dict(zip(("self", "cross", "ffn"), norms))

    def sublayer(name, X):
        if name == "self":
            return multi_head_attention(X, X, X, params["self_attn"], num_heads, given[masks[0]])[0]
        if name == "cross":
            q, k, v = ({"y": X, "m": memory}[c] for c in cross_inputs)
            return multi_head_attention(q, k, v, params[cross_params], num_heads, given[masks[1]])[0]
        return position_wise_ffn(X, params["ffn"])

    X = Y
    for name in order:
        norm = params[norm_of[name]]
        if pre_ln:
            X = X + sublayer(name, layer_norm(X, **norm))
        else:
            out = sublayer(name, X)
            X = layer_norm(X + out if name in residual else out, **norm)
    return X


LAYER_MISTAKES = [
    (dict(masks=(None, "memory")),
     "the masked self-attention ignores self_mask: pass it on, so that position t sees only "
     "the targets 0…t"),
    (dict(masks=("self", None)),
     "the attention over the memory ignores memory_mask: pass it on, so that no query attends "
     "to the source's padding"),
    (dict(masks=(None, None)), "both attentions ignore their masks: pass self_mask to the "
                               "self-attention and memory_mask to the attention over the memory"),
    (dict(masks=("memory", "self")),
     "the masks are swapped: self_mask goes to the self-attention, memory_mask to the attention "
     "over the memory"),
    (dict(cross_inputs="yyy"),
     "the second attention attends over the decoder's own states: its keys and values come from "
     "memory (the encoder's output), its queries from the decoder"),
    (dict(cross_inputs="yym"),
     "the keys of the attention over the memory come from the decoder: keys and values both come "
     "from memory, only the queries from the decoder"),
    (dict(cross_inputs="ymy"),
     "the values of the attention over the memory come from the decoder: keys and values both "
     "come from memory, only the queries from the decoder"),
    (dict(cross_inputs="myy"),
     "the attention over the memory takes its queries from memory and its keys and values from "
     "the decoder: it is the other way round, multi_head_attention(X, memory, memory, ...)"),
    (dict(order=("cross", "self", "ffn"), norms=("norm2", "norm1", "norm3")),
     "the sub-layers are in the wrong order: first the masked self-attention, then the attention "
     "over the memory, then the FFN"),
    (dict(order=("cross", "self", "ffn")),
     "the sub-layers are in the wrong order: first the masked self-attention, then the attention "
     "over the memory, then the FFN"),
    (dict(order=("ffn", "self", "cross"), norms=("norm2", "norm3", "norm1")),
     "the sub-layers are in the wrong order: first the masked self-attention, then the attention "
     "over the memory, then the FFN"),
    (dict(residual=("cross", "ffn")),
     "the residual connection around the self-attention is missing: add the sub-layer's input to "
     "its output before layer_norm"),
    (dict(residual=("self", "ffn")),
     "the residual connection around the attention over the memory is missing: add the "
     "sub-layer's input to its output before layer_norm"),
    (dict(residual=("self", "cross")),
     "the residual connection around the FFN is missing: add the sub-layer's input to its output "
     "before layer_norm"),
    (dict(residual=()), "the residual connections are missing: each sub-layer's input is added "
                        "to its output before layer_norm"),
    (dict(pre_ln=True),
     "this is pre-LN, X + sublayer(layer_norm(X)); the paper's decoder is post-LN: "
     "X = layer_norm(X + sublayer(X))"),
    (dict(cross_params="self_attn"),
     "the attention over the memory uses the self-attention's parameters: it has its own, "
     "params[\"cross_attn\"]"),
    (dict(norms=("norm1", "norm1", "norm1")),
     "each sub-layer has its own layer norm: norm1 after the self-attention, norm2 after the "
     "attention over the memory, norm3 after the FFN"),
    (dict(norms=("norm1", "norm3", "norm2")),
     "the layer norms are swapped: norm1 after the self-attention, norm2 after the attention over "
     "the memory, norm3 after the FFN"),
]


def _diagnose_layer(actual, args, where):
    diagnose(actual, [(quietly(lambda o=options: decoder_layer_variant(*args, **o)), mistake)
                      for options, mistake in LAYER_MISTAKES], where)


# -- decoder -------------------------------------------------------------------------

def check_decoder(decoder):
    rng = seeded(SEED + 1)
    cases = [  # description, B, T, S, V, d_model, heads, layers, source lengths
        ("B=2 targets of T=5 with 2 layers, 2 heads, sources of 4 and 2 (S=4)",
         2, 5, 4, 7, 8, 2, 2, [4, 2]),
        ("B=3 targets of T=3 with 1 layer, 4 heads, sources of 5, 1 and 3 (S=5)",
         3, 3, 5, 6, 8, 4, 1, [5, 1, 3]),
        ("B=1 target of T=4 with 3 layers and no source mask", 1, 4, 3, 5, 6, 2, 3, None),
        ("B=2 targets of T=1 (only BOS) with 2 layers", 2, 1, 3, 5, 8, 2, 2, [3, 2]),
        # without layers the decoder calls no decoder_layer: judged whatever that task's state
        ("B=2 targets of T=3 with no layers (the embedding alone)", 2, 3, 4, 6, 8, 2, 0, [4, 1]),
    ]
    for description, B, T, S, V, d, h, n, lengths in cases:
        params = model_params(rng, V, d, 2 * d, 0, n)
        tgt = rng.integers(0, V, size=(B, T))
        memory = rng.normal(size=(B, S, d))
        src_mask = None if lengths is None else padding_mask(np.array(lengths), S)
        kwargs = {} if src_mask is None else {"src_mask": src_mask}
        args = (tgt, memory, params, h, src_mask)
        actual = call(decoder, tgt, memory, params, h, **kwargs, on=description, stand_ins=GRADED)
        expected = reference.decoder(tgt, memory, params, h, src_mask)
        name = f"the output of decoder on {description}"
        check_shape(actual, expected.shape, name)
        check(np.all(np.isfinite(actual)), f"{name} contains inf or NaN.")
        mistakes = [
            (dict(causal="none"), "the decoder does not apply the causal mask: pass "
                                  "causal_mask(T) as self_mask, so that position t cannot see "
                                  "the later targets"),
            (dict(causal="upper"), "the causal mask is transposed: it is True on and below the "
                                   "diagonal (causal_mask(T)), so that position t sees the "
                                   "targets 0…t, not t…T−1"),
            (dict(causal="strict"), "the causal mask must be True on the diagonal: position t "
                                    "may attend to itself (use causal_mask(T))"),
            (dict(src_mask_on=False), "src_mask does not reach the attention over the memory: pass "
                                   "it to every layer as memory_mask, reshaped to (B, 1, 1, S)"),
            (dict(embedding="unscaled"), "the targets are embedded without the factor √d_model: "
                                         "use embed(tgt_tokens, E), E[tokens] · √d_model + PE"),
            (dict(embedding="no_position"), "the targets are embedded without the positional "
                                            "encoding: use embed(tgt_tokens, E), E[tokens] · "
                                            "√d_model + PE"),
            (dict(embedding="bare"), "the targets are embedded as E[tokens] alone: use "
                                     "embed(tgt_tokens, E), E[tokens] · √d_model + PE"),
            (dict(layers="reversed"), "the layers run in reverse order: apply "
                                      "params[\"decoder_layers\"] from first to last"),
            (dict(layers="first"), "only the first layer is applied: apply every layer of "
                                   "params[\"decoder_layers\"], each to the previous one's "
                                   "output"),
            (dict(layers="last"), "only the last layer is applied: apply every layer of "
                                  "params[\"decoder_layers\"], each to the previous one's output"),
        ]
        compare(actual, expected, name,
                lambda: [(quietly(lambda o=options: decoder_variant(*args, **o)), mistake)
                         for options, mistake in mistakes
                         if not (options.get("src_mask_on") is False and src_mask is None)],
                hint=lambda: "embed the targets with embed, then apply each layer of "
                "params[\"decoder_layers\"] with self_mask=causal_mask(T) and the source mask "
                "as memory_mask")


def decoder_variant(tgt_tokens, memory, params, num_heads, src_mask=None, *,
                    causal="lower", src_mask_on=True,
                    embedding="embed", layers="all"):
    """The reference decoder, or one with a known mistake.

    causal: "lower" (the reference), "none", "upper" (transposed) or "strict"
    (without the diagonal); src_mask: False drops the source mask;
    embedding: "embed", "unscaled", "no_position" or "bare"; layers: "all",
    "reversed", "first" or "last".
    """
    E = params["embedding"]
    T, d = np.shape(tgt_tokens)[1], E.shape[1]
    Y = {"embed": lambda: embed(tgt_tokens, E),
         "unscaled": lambda: E[tgt_tokens] + sinusoidal_encoding(T, d),
         "no_position": lambda: E[tgt_tokens] * math.sqrt(d),
         "bare": lambda: E[tgt_tokens]}[embedding]()
    self_mask = {"lower": causal_mask(T), "none": None, "upper": causal_mask(T).T,
                 "strict": np.tril(np.ones((T, T), dtype=bool), -1)}[causal]
    memory_mask = None if src_mask is None or not src_mask_on else np.asarray(src_mask)[:, None, None, :]
    stack = list(params["decoder_layers"])
    stack = {"all": stack, "reversed": stack[::-1], "first": stack[:1], "last": stack[-1:]}[layers]
    X = Y
    for layer_params in stack:
        X = reference.decoder_layer(X, memory, layer_params, num_heads, self_mask, memory_mask)
    return X


# -- transformer_logits --------------------------------------------------------------

def check_transformer_logits(transformer_logits):
    rng = seeded(SEED + 2)
    cases = [  # description, B, S, T, V, d_model, heads, encoder and decoder layers, lengths
        ("B=2, S=4, T=3, V=d_model=8, 2 heads, 1 encoder and 2 decoder layers, sources of 4 and 2",
         2, 4, 3, 8, 8, 2, 1, 2, [4, 2]),
        ("B=3, S=5, T=4, V=11, d_model=8, 4 heads, 2 + 1 layers, sources of 5, 2 and 3",
         3, 5, 4, 11, 8, 4, 2, 1, [5, 2, 3]),
        ("B=1, S=3, T=5, V=5, d_model=6, 1 head, 1 + 1 layers, no source mask",
         1, 3, 5, 5, 6, 1, 1, 1, None),
    ]
    for description, B, S, T, V, d, h, n_enc, n_dec, lengths in cases:
        params = model_params(rng, V, d, 2 * d, n_enc, n_dec)
        src, tgt = rng.integers(0, V, size=(B, S)), rng.integers(0, V, size=(B, T))
        src_mask = None if lengths is None else padding_mask(np.array(lengths), S)
        kwargs = {} if src_mask is None else {"src_mask": src_mask}
        args = (src, tgt, params, h, src_mask)
        actual = call(transformer_logits, src, tgt, params, h, **kwargs, on=description, stand_ins=GRADED)
        expected = reference.transformer_logits(src, tgt, params, h, src_mask)
        name = f"the logits on {description}"
        check_shape(actual, expected.shape, name)
        check(np.all(np.isfinite(actual)), f"{name} contain inf or NaN.")
        shift = expected - expected.max(axis=-1, keepdims=True)
        log_probabilities = shift - np.log(np.exp(shift).sum(axis=-1, keepdims=True))
        mistakes = [
            (dict(values=np.exp(log_probabilities)), "these are probabilities: return the logits, "
                                                     "decoder output @ E.T, without a softmax"),
            (dict(values=log_probabilities), "these are log-probabilities: return the logits, "
                                             "decoder output @ E.T, without a (log-)softmax"),
            (dict(output="E"), "the output projection multiplies by E, not by its transpose: "
                               "logits = decoder output @ E.T, one score per token"),
            (dict(output="scaled"), "the output projection is E.T alone, without the factor "
                                    "√d_model of the embedding"),
            (dict(decoder_mask=False), "the source mask does not reach the decoder: pass "
                                       "src_mask to decoder as well as to encoder"),
            (dict(encoder_mask=False), "the source mask does not reach the encoder: pass "
                                       "src_mask to encoder as well as to decoder"),
            (dict(encoder_mask=False, decoder_mask=False), "src_mask is ignored: pass it to "
                                                           "encoder and to decoder"),
            (dict(memory="embedded"), "the decoder attends over the embedded source: run the "
                                      "encoder and give its output to the decoder as memory"),
        ]
        compare(actual, expected, name,
                lambda: [(options["values"] if "values" in options else
                          quietly(lambda o=options: logits_variant(*args, **o)), mistake)
                         for options, mistake in mistakes
                         if not (src_mask is None and ("decoder_mask" in options or "encoder_mask" in options))],
                hint=lambda: "they are decoder(tgt, encoder(src)) @ E.T, with the source mask given "
                "to both")


def logits_variant(src_tokens, tgt_tokens, params, num_heads, src_mask=None, *,
                   output="E.T", encoder_mask=True,
                   decoder_mask=True, memory="encoder"):
    """The reference logits, or logits with a known mistake."""
    E = params["embedding"]
    if memory == "encoder":
        memory = encoder(src_tokens, params, num_heads, src_mask if encoder_mask else None)
    else:
        memory = embed(src_tokens, E)
    out = reference.decoder(tgt_tokens, memory, params, num_heads, src_mask if decoder_mask else None)
    return {"E.T": lambda: out @ E.T, "E": lambda: out @ E,
            "scaled": lambda: out @ E.T * math.sqrt(E.shape[1])}[output]()


# -- greedy_decode -------------------------------------------------------------------

def copy_problem(lengths, bos_id, eos_id, seed, reverse=False):
    """Sources for the copy model (or the reverse model): letters, then EOS, then padding.

    Letters are the tokens other than BOS and EOS; `lengths` counts them.
    """
    rng = np.random.default_rng(seed)
    letters = np.array([v for v in range(16) if v not in (bos_id, eos_id)])
    S = max(lengths) + 1
    src = np.zeros((len(lengths), S), dtype=int)
    for b, n in enumerate(lengths):
        row = list(rng.choice(letters, size=n)) + [eos_id]
        src[b, :n + 1] = row[::-1] if reverse else row
        src[b, n + 1:] = rng.choice(letters)  # padding: any token, hidden by the mask
    model = reference.copy_model(reverse_length=S if reverse else None)
    return src, model, padding_mask(np.array(lengths) + 1, S)


def random_problem(seed, B, S, lengths, V=12, d=8, n_enc=1, n_dec=2):
    """A random model (small embeddings, so that the tokens depend on the positions)."""
    rng = np.random.default_rng(seed)
    params = model_params(rng, V, d, 2 * d, n_enc, n_dec, embedding_scale=0.1)
    src = rng.integers(0, V, size=(B, S))
    return src, params, None if lengths is None else padding_mask(np.array(lengths), S)


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


def check_greedy_decode(greedy_decode):
    for description, problem, h, bos_id, eos_id, max_len, pass_mask in GREEDY_CASES:
        src, params, src_mask = problem()
        if not pass_mask:
            src_mask = None
        _check_greedy_case(greedy_decode, description, src, params, h, bos_id, eos_id, max_len,
                           src_mask, use_cache=False)


def check_greedy_decode_cache(greedy_decode):
    """The tokens with use_cache=True are those of greedy decoding.

    Whether the cache is a cache (the newest position only, not the prefix
    again) is graded by check_decoder_step, which calls decoder_step on caches
    of prefixes the notebook never saw: tokens alone cannot tell.
    """
    # The random models first: on them a wrong step gives different tokens.
    cases = [("a random model with 2 decoder layers whose third row finishes after 4 steps",
              lambda: random_problem(SEED + 25, 3, 5, [5, 2, 3]), 2, 0, 7, 8, True)]
    cases += GREEDY_CASES[::-1]
    for description, problem, h, bos_id, eos_id, max_len, pass_mask in cases:
        src, params, src_mask = problem()
        if not pass_mask:
            src_mask = None
        _check_greedy_case(greedy_decode, description, src, params, h, bos_id, eos_id, max_len,
                           src_mask, use_cache=True)


def _check_greedy_case(greedy_decode, description, src, params, h, bos_id, eos_id, max_len,
                       src_mask, use_cache):
    args = (src, params, h, bos_id, eos_id, max_len)
    kwargs = {} if src_mask is None else {"src_mask": src_mask}
    if use_cache:
        kwargs["use_cache"] = True
    actual = call(greedy_decode, *args, **kwargs, on=description,
                  stand_ins=CACHED_STAND_INS if use_cache else GREEDY_STAND_INS)
    expected = reference.greedy_decode(*args, src_mask=src_mask)
    B, L = expected.shape
    what = "with use_cache=True, " if use_cache else ""
    name = f"the tokens on {description}" + (" with use_cache=True" if use_cache else "")
    if isinstance(actual, np.ndarray) and actual.ndim == 3:
        check(False, f"on {description}, {what}greedy_decode returned an array of shape "
                     f"{actual.shape}: return the token ids (the argmax over the vocabulary at "
                     "each step), shape (B, L), not logits or probabilities.")
    check(isinstance(actual, np.ndarray),
          f"{name} should be a NumPy array of token ids, but they are a {type(actual).__name__}.")
    if actual.ndim == 2 and not np.issubdtype(actual.dtype, np.integer):
        integral = np.all(np.isfinite(actual)) and np.array_equal(actual, np.round(actual))
        check(not integral, f"{name} should be an integer array (token ids), not {actual.dtype}.")
        check(False, f"on {description}, {what}greedy_decode returned {actual.dtype} numbers "
                     "that are not token ids: return the argmax of the logits at each step.")
    check(actual.ndim == 2 and actual.shape[0] == B,
          f"{name} have shape {actual.shape}, but they should have shape (B, L) with B={B}.")
    if not _same(actual, expected):
        if use_cache:
            _diagnose_cache(greedy_decode, actual, args, src_mask, description)
        else:
            _diagnose_greedy(greedy_decode, actual, expected, args, src_mask, description)


def _diagnose_greedy(greedy_decode, actual, expected, args, src_mask, description):
    src, params, h, bos_id, eos_id, max_len = args
    check_greedy_length(actual, expected, bos_id, max_len, description)
    last_only = quietly(lambda: greedy_variant(*args, src_mask, feed="last"))
    first_read = quietly(lambda: greedy_variant(*args, src_mask, read="first"))
    if last_only is not None and _same(actual, last_only) and _same(actual, first_read):
        check(False, f"on {description}, the next token comes from the decoder's output at the "
                     "last position of the whole prefix (BOS and every token so far).")
    variants = [
        (dict(pad=False), "a row that has produced eos_id keeps producing eos_id: fill the rest "
                          "of a finished row with eos_id"),
        (dict(feed="last"), "at each step the decoder reads the whole prefix (BOS and every "
                            "token so far), not only the last token"),
        (dict(read="first"), "the next token comes from the decoder's output at the last "
                             "position of the prefix, not at the first"),
        (dict(mask=False), "src_mask is not passed on: give it to the encoder and the decoder"),
    ]
    for options, mistake in variants:
        if options.get("mask") is False and src_mask is None:
            continue
        wrong = quietly(lambda: greedy_variant(*args, src_mask, **options))
        if wrong is not None and _same(actual, wrong):
            check(False, f"on {description}, {mistake}.")
    check_greedy_contract(actual, expected, eos_id, max_len, description)
    check_shape(actual, expected.shape, f"the tokens on {description}")
    check(False, f"the tokens on {description} differ from greedy decoding: at each step run "
                 "the decoder on BOS and the tokens so far, take the argmax of its last "
                 "position's logits (@ E.T) and append it.")


def _diagnose_cache(greedy_decode, actual, args, src_mask, description):
    kwargs = {} if src_mask is None else {"src_mask": src_mask}
    plain = quietly(lambda: call(greedy_decode, *args, **kwargs, on=description, stand_ins=CACHED_STAND_INS))
    if plain is not None and _same(actual, plain):
        for options in LOOP_MISTAKES:
            wrong = quietly(lambda: greedy_variant(*args, src_mask, **options))
            if wrong is not None and _same(plain, wrong):
                return  # the cache is right; the decoding loop's mistake is graded in task 4
    check(False, f"on {description}, the tokens with use_cache=True differ from greedy decoding: "
                 "start from init_decoder_cache(memory, params, num_heads, src_mask) and at each "
                 "step call decoder_step on the newest token only, with the cache it returned "
                 "last.")


# Mistakes of the decoding loop, which a correct cache reproduces: graded by check_greedy_decode.
LOOP_MISTAKES = [dict(pad=False), dict(stop="first"), dict(stop="any"), dict(stop="never"),
                 dict(bos=True)]


def greedy_variant(src_tokens, params, num_heads, bos_id, eos_id, max_len, src_mask=None, *,
                   pad=True, stop="all", feed="prefix", read="last", mask=True, bos=False):
    """Greedy decoding as the reference does it, or with one known mistake.

    pad: finished rows produce EOS; stop: "all" (the reference), "first",
    "any" or "never"; feed: "prefix" or "last" (the decoder sees only the
    last token); read: the logits of the "last" or "first" position;
    mask: False drops src_mask; bos: keep BOS in the output.
    """
    src_mask = src_mask if mask else None
    E = params["embedding"]
    memory = encoder(src_tokens, params, num_heads, src_mask)
    B = memory.shape[0]
    prefix = np.full((B, 1), bos_id)
    finished = np.zeros(B, dtype=bool)
    for _ in range(max_len):
        seen = prefix if feed == "prefix" else prefix[:, -1:]
        out = reference.decoder(seen, memory, params, num_heads, src_mask)
        last = out[:, -1 if read == "last" else 0] @ E.T
        token = np.argmax(last, axis=-1)
        if pad:
            token = np.where(finished, eos_id, token)
        prefix = np.concatenate([prefix, token[:, None]], axis=1)
        finished |= token == eos_id
        if {"all": finished.all(), "first": finished[0], "any": finished.any(),
                "never": False}[stop]:
            break
    return prefix if bos else prefix[:, 1:]


# -- init_decoder_cache -------------------------------------------------------------

CACHE_KEYS = {"memory_k", "memory_v", "k", "v", "src_mask"}

CACHE_CASES = [  # description, B, S, d_model, heads, decoder layers, source lengths
    ("B=2, S=4 (one source padded to 2), d_model=8, 2 heads, 2 decoder layers", 2, 4, 8, 2, 2, [4, 2]),
    ("B=3, S=5 (sources of 5, 3 and 1), d_model=8, 4 heads, 1 decoder layer", 3, 5, 8, 4, 1, [5, 3, 1]),
    ("B=1, S=3, no source mask, d_model=6, 1 head, 3 decoder layers", 1, 3, 6, 1, 3, None),
]


def check_init_decoder_cache(init_decoder_cache):
    rng = seeded(SEED + 4)
    for description, B, S, d, h, n_dec, lengths in CACHE_CASES:
        params = model_params(rng, 9, d, 2 * d, 0, n_dec)
        memory = rng.normal(size=(B, S, d))
        src_mask = None if lengths is None else padding_mask(np.array(lengths), S)
        kwargs = {} if src_mask is None else {"src_mask": src_mask}
        actual = call(init_decoder_cache, memory, params, h, **kwargs, on=description, stand_ins=GRADED)
        expected = reference.init_decoder_cache(memory, params, h, src_mask)
        _check_cache(actual, expected, f"the cache on {description}", params, memory)


def _check_cache(actual, expected, name, params, memory=None):
    """`actual` holds exactly the keys, shapes and values of the cache `expected`."""
    check(isinstance(actual, list) and all(isinstance(kept, dict) for kept in actual),
          f"{name} should be a list with one dict per decoder layer, but it is a "
          f"{type(actual).__name__}" + (f" of {type(actual[0]).__name__}" if isinstance(actual, list)
                                        and actual and not isinstance(actual[0], dict) else "") + ".")
    check(len(actual) == len(expected),
          f"{name} has {len(actual)} layers, but the decoder has {len(expected)}: one dict per "
          "layer of params[\"decoder_layers\"].")
    for i, (kept, right, layer) in enumerate(zip(actual, expected, params["decoder_layers"])):
        where = f"{name}, layer {i},"
        extra, missing = sorted(set(kept) - CACHE_KEYS), sorted(CACHE_KEYS - set(kept))
        check(not extra, f"{where} holds {extra}: a cache holds exactly memory_k, memory_v, k, v "
                         "and src_mask, and nothing else (a step that keeps the tokens to "
                         "recompute the prefix is not a cache).")
        check(not missing, f"{where} has no {missing}: a cache holds exactly memory_k, memory_v, "
                           "k, v and src_mask.")
        for key in ("memory_k", "memory_v", "k", "v"):
            value = kept[key]
            check(isinstance(value, np.ndarray),
                  f"{where} {key} should be a NumPy array, but it is a {type(value).__name__}.")
            if value.shape != right[key].shape and memory is not None and key.startswith("memory") \
                    and value.shape == memory.shape:
                check(False, f"{where} {key} has shape {value.shape}, the memory's: split it into "
                             "heads, (B, h, S, d_head).")
            check(value.shape == right[key].shape,
                  f"{where} {key} has shape {value.shape}, but it should have shape "
                  f"{right[key].shape} (B, h, positions, d_head).")
            if close(value, right[key]):
                continue
            if key.startswith("memory") and memory is not None:
                other = right["memory_v" if key == "memory_k" else "memory_k"]
                check(not close(value, other), f"{where} memory_k and memory_v are swapped.")
                own = layer["self_attn"]
                wrong = quietly(lambda: reference._heads(memory, own, key[-1], value.shape[1]))
                check(not close(value, wrong),
                      f"{where} {key} comes from the self-attention's parameters: the memory's "
                      "keys and values are projected by the attention over the memory, "
                      "params[\"cross_attn\"].")
            check(False, f"{where} {key} is wrong: it should be "
                  + ({"memory_k": "split_heads(memory @ W_k + b_k, h) with the weights of "
                                  "params[\"cross_attn\"]",
                      "memory_v": "split_heads(memory @ W_v + b_v, h) with the weights of "
                                  "params[\"cross_attn\"]"}.get(key)
                     or "the keys and values of the positions so far, the newest appended last")
                  + ".")
        mask, right_mask = kept["src_mask"], right["src_mask"]
        if right_mask is None:
            check(mask is None, f"{where} src_mask should be None when no source mask is given.")
        else:
            check(mask is not None, f"{where} src_mask is None: keep the source's padding mask "
                                    "(B, S) in the cache, the attention over the memory needs it.")
            check(isinstance(mask, np.ndarray) and np.shape(mask) == right_mask.shape
                  and np.array_equal(np.asarray(mask, dtype=bool), right_mask),
                  f"{where} src_mask should be the source's padding mask, shape "
                  f"{right_mask.shape}, as it was given.")


# -- decoder_step --------------------------------------------------------------------

STEP_CASES = [  # description, B, S, d_model, heads, decoder layers, position t, source lengths
    ("the first step (t=0) of B=2 rows over S=4 (one source padded to 2), d_model=8, 2 heads, "
     "1 decoder layer", 2, 4, 8, 2, 1, 0, [4, 2]),
    ("step t=3 of B=2 rows over S=4 (sources of 4 and 2), d_model=8, 2 heads, 2 decoder layers",
     2, 4, 8, 2, 2, 3, [4, 2]),
    ("step t=5 of B=3 rows over S=5 (sources of 5, 3 and 1), d_model=8, 4 heads, "
     "3 decoder layers", 3, 5, 8, 4, 3, 5, [5, 3, 1]),
    ("step t=2 of B=1 row over S=3, no source mask, d_model=6, 1 head, 2 decoder layers",
     1, 3, 6, 1, 2, 2, None),
]


def cache_for(tgt_tokens, memory, params, num_heads, src_mask=None):
    """The reference cache after decoding `tgt_tokens (B, t)`: a prefix the notebook never saw."""
    cache = reference.init_decoder_cache(memory, params, num_heads, src_mask)
    for t in range(tgt_tokens.shape[1]):
        _, cache = reference.decoder_step(tgt_tokens[:, t], cache, params, num_heads)
    return cache


def check_decoder_step(decoder_step):
    rng = seeded(SEED + 5)
    for description, B, S, d, h, n_dec, t, lengths in STEP_CASES:
        params = model_params(rng, 9, d, 2 * d, 0, n_dec)
        memory, tgt = rng.normal(size=(B, S, d)), rng.integers(0, 9, size=(B, t + 1))
        src_mask = None if lengths is None else padding_mask(np.array(lengths), S)
        cache = cache_for(tgt[:, :t], memory, params, h, src_mask)
        args = (tgt[:, t], cache, params, h)
        actual = call(decoder_step, *args, on=description, stand_ins=GRADED)
        expected, expected_cache = reference.decoder_step(*args)
        check(isinstance(actual, tuple) and len(actual) == 2,
              f"decoder_step should return a pair (output, cache), but on {description} it "
              f"returned a {type(actual).__name__}" + (f" of {len(actual)}" if isinstance(
                  actual, (tuple, list)) else "") + ".")
        output, new_cache = actual
        name = f"the output on {description}"
        check_shape(output, expected.shape, name)
        if not close(output, expected):
            _diagnose_step(output, args, description)
        _check_cache(new_cache, expected_cache, f"the cache returned on {description}", params)


def _diagnose_step(output, args, description):
    if args[1][0]["k"].shape[2] > 0:
        restarted = quietly(lambda: step_variant(*args, past=False, position="zero"))
        check(not close(output, restarted),
              f"on {description}, the step treats the newest token as the first of a new sequence "
              "(position 0, nothing before it): it must continue the prefix that the cache it is "
              "given holds, t = cache[0][\"k\"].shape[2] positions, whose keys and values are "
              "in the cache; a prefix kept anywhere else is not the one it is asked about.")
        recomputed = quietly(lambda: step_variant(*args, past=False))
        check(not close(output, recomputed),
              f"on {description}, the newest position attends only to itself: append its key and "
              "value to the cache's k and v (the positions so far) and attend over all of them. "
              "(A step that recomputes the prefix from tokens it kept elsewhere cannot know this "
              "prefix: the cache is all it gets.)")
    mistakes = [
        (dict(position="zero"), "the newest token gets the positional encoding of position 0: "
                                "embed it at its own position t = cache[0][\"k\"].shape[2], "
                                "E[token] · √d_model + PE[t]"),
        (dict(position="next"), "the newest token gets the positional encoding of position t + 1: "
                                "positions start at 0, so it is at t = cache[0][\"k\"].shape[2]"),
        (dict(scale=False), "the token is embedded without the factor √d_model: "
                            "E[token] · √d_model + PE[t]"),
        (dict(kv_from="embedding"), "every layer's keys and values are computed from the embedded "
                                    "token: each layer computes them from its own input"),
        (dict(src_mask_on=False), "the attention over the memory ignores the cache's src_mask: "
                                  "reshape it to (B, 1, 1, S) and hide the source's padding"),
    ]
    for options, mistake in mistakes:
        if options.get("src_mask_on") is False and args[1][0]["src_mask"] is None:
            continue
        wrong = quietly(lambda: step_variant(*args, **options))
        if wrong is not None and close(output, wrong):
            check(False, f"on {description}, {mistake}.")
    check(False, f"the output on {description} is wrong: it should be the decoder's output at the "
                 "newest position, each layer as in decoder_layer, with the self-attention over "
                 "the cached keys and values and the newest one.")


def step_variant(token, cache, params, num_heads, *, position="t", scale=True, past=True,
                 kv_from="layer", src_mask_on=True):
    """The reference step's output, or one with a known mistake.

    position: "t" (the reference), "zero" or "next"; scale: False drops √d_model;
    past: False attends to the newest position only; kv_from: "layer" or
    "embedding" (every layer's keys and values from the embedded token);
    src_mask_on: False ignores the cache's source mask.
    """
    E = params["embedding"]
    d = E.shape[1]
    t = cache[0]["k"].shape[2]
    at = {"t": t, "zero": 0, "next": t + 1}[position]
    x = (E[token] * (math.sqrt(d) if scale else 1.0) + sinusoidal_encoding(at + 1, d)[at])[:, None]
    embedded = x
    for layer, kept in zip(params["decoder_layers"], cache):
        own = layer["self_attn"]
        source = embedded if kv_from == "embedding" else x
        k, v = (reference._heads(source, own, n, num_heads) for n in "kv")
        if past:
            k, v = np.concatenate([kept["k"], k], axis=2), np.concatenate([kept["v"], v], axis=2)
        x = layer_norm(x + reference._attend(x, own, k, v, num_heads), **layer["norm1"])
        mask = kept["src_mask"] if src_mask_on else None
        mask = None if mask is None else mask[:, None, None, :]
        x = layer_norm(x + reference._attend(x, layer["cross_attn"], kept["memory_k"],
                                             kept["memory_v"], num_heads, mask), **layer["norm2"])
        x = layer_norm(x + position_wise_ffn(x, layer["ffn"]), **layer["norm3"])
    return x[:, 0]


# -- helpers -------------------------------------------------------------------------



def _same(actual, expected):
    return np.shape(actual) == np.shape(expected) and np.array_equal(actual, expected)
