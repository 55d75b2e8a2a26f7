"""Hidden checks for the Transformer encoder exercise.

Each ``check_*`` runs the student's function on seeded random inputs and
parameters, compares with the reference in ``solutions/`` and, at the first
difference, raises ``CheckFailed`` with one sentence that names the mistake
when it can be recognised from the output. A mistake is recognised by
computing what it would give with the reference's pieces: layer norm with
the unbiased variance, over another axis, with ε outside the square root or
gamma and beta swapped; an FFN without its ReLU or with one after ``W_2``; a
pre-LN layer, a missing residual, the sub-layers in the wrong order; an
embedding scaled wrongly or with positions missing or counted from 1; an
encoder that applies only one layer or the layers in reverse, or that ignores
the padding mask or puts it on the queries. Any correct implementation
passes: only results are compared, never how they were computed.

With a padding mask, only the outputs at real tokens are compared: what the
encoder computes at padding positions is never used (the decoder's attention
hides them as keys too), so an encoder that also masks padded queries is
correct as well.
"""


import numpy as np

from solutions import transformer_encoder as reference
from solutions.multi_head import multi_head_attention
from solutions.positional_encoding import sinusoidal_encoding
from solutions.scaled_dot_product import causal_mask, padding_mask

from autograder.engine.checking import CheckFailed, check, check_shape, close
from autograder.engine.harness import call, diagnose, seeded

SEED = 20170612  # the day "Attention is all you need" appeared on arXiv
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.layer_norm, reference.position_wise_ffn, reference.encoder_layer, reference.embed,
          reference.encoder)

_LAYER_RULE = ("Z = LayerNorm(X + MultiHead(X, X, X)) with norm1, then "
               "LayerNorm(Z + FFN(Z)) with norm2")


# -- layer_norm ----------------------------------------------------------------


def check_layer_norm(layer_norm):
    rng = seeded(SEED)

    def affine(d):
        return 1.0 + 0.5 * rng.normal(size=d), rng.normal(size=d)

    constant = rng.normal(size=(2, 6))
    constant[0] = 2.0  # a vector whose entries are all equal
    cases = [
        ("a (2, 3, 8) array", 1.0 + 2.0 * rng.normal(size=(2, 3, 8)), None),
        ("a (4, 6) array", rng.normal(size=(4, 6)), None),
        ("one vector of size 5", 3.0 * rng.normal(size=5), None),
        ("a (2, 2, 3, 4) array", rng.normal(size=(2, 2, 3, 4)), None),
        ("vectors with a small spread (variance about 1e-4) and the default eps",
         3.0 + 0.01 * rng.normal(size=(3, 6)), None),
        ("a (2, 4, 6) array with eps=0.5", rng.normal(size=(2, 4, 6)), 0.5),
        ("a vector whose entries are all equal", constant, None),
    ]
    for description, X, eps in cases:
        gamma, beta = affine(X.shape[-1])
        default = eps is None
        if default:
            actual = call(layer_norm, X, gamma, beta, on=description)
            eps = 1e-5
        else:
            actual = call(layer_norm, X, gamma, beta, eps=eps, on=description)
        expected = reference.layer_norm(X, gamma, beta, eps)
        name = f"layer_norm of {description}"
        check_shape(actual, expected.shape, name)
        if not np.all(np.isfinite(actual)):
            check(False, f"{name} contains NaN or inf: divide by √(var + eps), with eps "
                         "inside the square root, so that a vector whose entries are all "
                         "equal gives beta.")
        if close(actual, expected):
            continue
        diagnose(actual, _layer_norm_mistakes(X, gamma, beta, eps, default),
                  f"On {description}, ")
        check(False, f"On {description}, layer_norm differs from (X − mean) / √(var + eps) · "
                     "gamma + beta, with the mean and the biased variance of each vector "
                     "over its last axis.")


def _layer_norm_mistakes(X, gamma, beta, eps, default):
    d = X.shape[-1]
    ln = _layer_norm_variant
    mistakes = [
        (ln(X, gamma, beta, eps, ddof=1),
         "the variance is the unbiased one, divided by d − 1: layer norm uses the biased "
         "variance, the mean of the squared deviations (np.var's default, ddof=0)"),
        (ln(X, gamma, beta, eps, eps_inside=False),
         "eps is added outside the square root: divide by √(var + eps), not by √var + eps"),
        (ln(X, gamma, beta, eps, sqrt=False),
         "the vectors are divided by the variance: divide by the standard deviation "
         "√(var + eps)"),
        (ln(X, gamma, beta, 0.0),
         "eps is not used: divide by √(var + eps) with the eps argument (default 1e-5)"),
        (ln(X, beta, gamma, eps),
         "gamma and beta are swapped: gamma multiplies the normalised vector, beta is "
         "added to it"),
        (ln(X, np.ones(d), np.zeros(d), eps),
         "gamma and beta are not applied: multiply the normalised vector by gamma, then "
         "add beta"),
    ]
    if default:
        for other in (1e-6, 1e-12, 1e-8, 1e-3, 1e-9, 1e-7, 1e-4):
            mistakes.append((ln(X, gamma, beta, other),
                             f"eps defaults to {other:g}: its default is 1e-5"))
    else:
        mistakes.append((ln(X, gamma, beta, 1e-5),
                         "the eps argument is ignored: divide by √(var + eps) with the eps "
                         "you are given"))
    if X.ndim > 1:
        for axis, where in ((0, "axis 0"), (X.ndim - 2, "the second-to-last axis"),
                            (tuple(range(X.ndim - 1)), "every axis but the last, as batch "
                                                       "norm would"),
                            (None, "the whole array")):
            mistakes.append((ln(X, gamma, beta, eps, axis=axis),
                             f"the mean and variance are taken over {where}: layer norm "
                             "normalises each vector on its own, over the last axis (the "
                             "features), keepdims=True"))
    return mistakes


def _layer_norm_variant(X, gamma, beta, eps, *, axis=-1, ddof=0, eps_inside=True, sqrt=True):
    with np.errstate(all="ignore"):
        mean = X.mean(axis=axis, keepdims=True)
        variance = X.var(axis=axis, keepdims=True, ddof=ddof)
        if not sqrt:
            scale = variance + eps
        elif eps_inside:
            scale = np.sqrt(variance + eps)
        else:
            scale = np.sqrt(variance) + eps
        return (X - mean) / scale * gamma + beta


# -- position_wise_ffn ---------------------------------------------------------


def check_position_wise_ffn(position_wise_ffn):
    rng = seeded(SEED + 1)
    cases = [
        ("X of shape (2, 5, 8) with d_ff=32", (2, 5, 8), 32),
        ("X of shape (3, 4) with d_ff=16", (3, 4), 16),
        ("X of shape (1, 1, 6) with d_ff=24", (1, 1, 6), 24),
        ("X of shape (2, 3, 8) with d_ff=8", (2, 3, 8), 8),
    ]
    for description, shape, d_ff in cases:
        X = rng.normal(size=shape)
        params = _ffn_params(rng, shape[-1], d_ff)
        actual = _call(position_wise_ffn, X, params, params=params, on=description)
        expected = reference.position_wise_ffn(X, params)
        name = f"position_wise_ffn of {description}"
        check_shape(actual, expected.shape, name)
        if close(actual, expected):
            continue
        diagnose(actual, _ffn_mistakes(X, params), f"On {description}, ")
        check(False, f"On {description}, position_wise_ffn differs from "
                     "relu(X @ W_1 + b_1) @ W_2 + b_2.")


def _ffn_mistakes(X, p):
    relu = _relu
    W_1, b_1, W_2, b_2 = p["W_1"], p["b_1"], p["W_2"], p["b_2"]
    mistakes = [
        ((X @ W_1 + b_1) @ W_2 + b_2,
         "the ReLU is missing: the hidden layer is relu(X @ W_1 + b_1) = max(0, X @ W_1 + b_1)"),
        (relu(relu(X @ W_1 + b_1) @ W_2 + b_2),
         "a ReLU is applied after W_2 as well: only the hidden layer goes through the ReLU, "
         "the output relu(X @ W_1 + b_1) @ W_2 + b_2 has no activation"),
        (relu((X @ W_1 + b_1) @ W_2 + b_2),
         "the ReLU is applied to the output instead of the hidden layer: "
         "relu(X @ W_1 + b_1) @ W_2 + b_2"),
        ((relu(X @ W_1) + b_1) @ W_2 + b_2,
         "b_1 is added after the ReLU: add it before, relu(X @ W_1 + b_1)"),
        (relu(X @ W_1) @ W_2 + b_2, "the bias b_1 is missing: relu(X @ W_1 + b_1)"),
        (relu(X @ W_1 + b_1) @ W_2, "the bias b_2 is missing: ... @ W_2 + b_2"),
        (relu(X @ W_1) @ W_2, "the biases b_1 and b_2 are missing"),
    ]
    if W_1.shape == W_2.shape:
        mistakes.append((relu(X @ W_2 + b_1) @ W_1 + b_2,
                         "W_1 and W_2 are swapped: W_1 (d_model, d_ff) comes first"))
    return mistakes


# -- encoder_layer -------------------------------------------------------------


def check_encoder_layer(encoder_layer):
    rng = seeded(SEED + 2)
    cases = [
        ("a batch with B=2, T=5, d_model=8, num_heads=2, d_ff=32 and no mask",
         (2, 5, 8, 2, 32), None),
        ("B=3, T=4, d_model=12, num_heads=3, d_ff=16 and a padding mask (B, 1, 1, T)",
         (3, 4, 12, 3, 16), "padding"),
        ("B=1, T=6, d_model=16, num_heads=4, d_ff=64 and a causal mask (T, T)",
         (1, 6, 16, 4, 64), "causal"),
        ("B=2, T=3, d_model=8, num_heads=1, d_ff=16 and no mask", (2, 3, 8, 1, 16), None),
    ]
    problems = []
    for description, (B, T, d_model, h, d_ff), kind in cases:
        X, params = rng.normal(size=(B, T, d_model)), _layer_params(rng, d_model, d_ff)
        mask = None if kind is None else causal_mask(T) if kind == "causal" else \
            padding_mask(rng.integers(1, T + 1, size=B), T)[:, None, None, :]
        problems.append((description, X, params, h, mask))
    X, params = _layer_example()
    problems.append(("the task's example", X, params, 2, None))
    params = {**params, "norm2": {"gamma": np.array([1.0, 2.0, 3.0, 4.0]), "beta": np.array([0.0, 0.0, 0.0, 1.0])}}
    problems.append(("the task's example with a new norm2", X, params, 2, None))
    for description, X, params, h, mask in problems:
        if mask is None:
            actual = _call(encoder_layer, X, params, h, params=params, on=description)
        else:
            actual = _call(encoder_layer, X, params, h, mask=mask, params=params, on=description)
        expected = reference.encoder_layer(X, params, h, mask)
        name = f"the output of encoder_layer on {description}"
        check_shape(actual, expected.shape, name)
        check(np.all(np.isfinite(actual)), f"{name} contains NaN or inf.")
        if close(actual, expected):
            continue
        diagnose(actual, _layer_mistakes(X, params, h, mask), f"On {description}, ")
        check(False, f"On {description}, encoder_layer differs from {_LAYER_RULE}.")


def _layer_example():
    """The task's visible example: d_model = 4, two heads, attention values b_v, FFN output b_2."""
    d = 4
    params = {
        "self_attn": {"W_q": np.zeros((d, d)), "W_k": np.zeros((d, d)), "W_v": np.zeros((d, d)),
                      "W_o": np.eye(d), "b_q": np.zeros(d), "b_k": np.zeros(d),
                      "b_v": np.array([1.0, 1.0, -1.0, -1.0]), "b_o": np.zeros(d)},
        "norm1": {"gamma": np.ones(d), "beta": np.zeros(d)},
        "ffn": {"W_1": np.zeros((d, 8)), "b_1": np.zeros(8), "W_2": np.zeros((8, d)),
                "b_2": np.array([0.0, np.sqrt(2), -np.sqrt(2), 0.0])},
        "norm2": {"gamma": np.ones(d), "beta": np.zeros(d)},
    }
    return np.array([[[1.0, -1.0, 1.0, -1.0]]]), params


def _layer_mistakes(X, p, h, mask):
    def attend(Y, m=mask):
        return multi_head_attention(Y, Y, Y, p["self_attn"], h, m)[0]

    def ffn(Y):
        return reference.position_wise_ffn(Y, p["ffn"])

    def norm(Y, which):
        return reference.layer_norm(Y, **p[which])

    Z = norm(X + attend(X), "norm1")            # the right first sub-layer
    Z_bare = norm(attend(X), "norm1")           # ... without its residual
    mistakes = [
        (_pre_ln(X, p, h, mask),
         "the layer is pre-LN, X + MultiHead(LayerNorm(X)): the paper's layer is post-LN, "
         "it normalises after the residual addition, " + _LAYER_RULE),
        (norm(Z_bare + ffn(Z_bare), "norm2"),
         "the residual connection around the self-attention is missing: normalise "
         "X + MultiHead(X, X, X), not MultiHead(X, X, X) alone"),
        (norm(ffn(Z), "norm2"),
         "the residual connection around the feed-forward network is missing: normalise "
         "Z + FFN(Z), not FFN(Z) alone"),
        (norm(ffn(Z_bare), "norm2"),
         "both residual connections are missing: " + _LAYER_RULE),
        (norm(norm(X + ffn(X), "norm1") + attend(norm(X + ffn(X), "norm1")), "norm2"),
         "the sub-layers are in the wrong order: self-attention comes first, then the "
         "feed-forward network"),
        (norm(norm(X + ffn(X), "norm2") + attend(norm(X + ffn(X), "norm2")), "norm1"),
         "the sub-layers are in the wrong order: self-attention comes first (followed by "
         "norm1), then the feed-forward network (followed by norm2)"),
        (norm(norm(X + attend(X), "norm2") + ffn(norm(X + attend(X), "norm2")), "norm1"),
         "norm1 and norm2 are swapped: norm1 follows the self-attention, norm2 the "
         "feed-forward network"),
        ((X + norm(attend(X), "norm1")) + norm(ffn(X + norm(attend(X), "norm1")), "norm2"),
         "each sub-layer's output is normalised before the residual addition: normalise "
         "the sum, LayerNorm(X + Sublayer(X))"),
        (Z, "the feed-forward sub-layer is missing: after Z = LayerNorm(X + MultiHead(X, X, X)) "
            "comes LayerNorm(Z + FFN(Z)) with norm2"),
    ]
    if mask is not None:
        unmasked = reference.encoder_layer(X, p, h)
        mistakes.insert(0, (unmasked, "the mask is ignored: pass it to multi_head_attention"))
    return mistakes


def _pre_ln(X, p, h, mask):
    Y = reference.layer_norm(X, **p["norm1"])
    X = X + multi_head_attention(Y, Y, Y, p["self_attn"], h, mask)[0]
    return X + reference.position_wise_ffn(reference.layer_norm(X, **p["norm2"]), p["ffn"])


# -- embed ---------------------------------------------------------------------


def check_embed(embed):
    rng = seeded(SEED + 3)
    cases = [
        ("tokens of shape (2, 5) with V=11 and d_model=8", (2, 5), 11, 8, 8 ** -0.5),
        ("tokens of shape (1, 1) with V=3 and d_model=4", (1, 1), 3, 4, 0.5),
        ("tokens of shape (3, 7) with V=5 and d_model=16", (3, 7), 5, 16, 1.0),
        ("tokens of shape (2, 12) with V=20 and d_model=6", (2, 12), 20, 6, 6 ** -0.5),
    ]
    for description, shape, V, d_model, scale in cases:
        tokens = rng.integers(0, V, size=shape)
        E = scale * rng.normal(size=(V, d_model))
        actual = call(embed, tokens, E, on=description, stand_ins=GRADED)
        expected = reference.embed(tokens, E)
        name = f"embed of {description}"
        check_shape(actual, expected.shape, name)
        if close(actual, expected):
            continue
        diagnose(actual, _embed_mistakes(tokens, E), f"On {description}, ")
        check(False, f"On {description}, embed differs from E[tokens] · √d_model + PE[:T] "
                     "with PE = sinusoidal_encoding(T, d_model).")


def _embed_mistakes(tokens, E):
    V, d_model = E.shape
    T = tokens.shape[1]
    root = np.sqrt(d_model)
    PE = sinusoidal_encoding(max(T + 1, V), d_model)
    return [
        (reference.embed(tokens, E / root),
         "the embeddings are not multiplied by √d_model: section 3.4 of the paper scales "
         "them, E[tokens] · √d_model + PE[:T]"),
        (reference.embed(tokens, E * root),
         "the embeddings are multiplied by d_model: multiply them by its square root, "
         "√d_model"),
        (reference.embed(tokens, E / d_model),
         "the embeddings are divided by √d_model: multiply them by √d_model"),
        (E[tokens] * root,
         "the positional encoding is missing: add PE[:T] = sinusoidal_encoding(T, d_model)"),
        (E[tokens] * root + PE[1:T + 1],
         "the positions start at 1: positions are 0-based, add PE[:T] = "
         "sinusoidal_encoding(T, d_model)"),
        ((E[tokens] + PE[:T]) * root,
         "the positional encoding is multiplied by √d_model too: scale only the embeddings, "
         "then add PE[:T]"),
        (E[tokens] * root + PE[tokens],
         "the positional encoding is indexed by the token ids: PE[p] belongs to position p, "
         "add PE[:T]"),
        (E[tokens] + PE[:T] * root,
         "the positional encoding is scaled instead of the embeddings: "
         "E[tokens] · √d_model + PE[:T]"),
    ]


# -- encoder -------------------------------------------------------------------


def check_encoder(encoder):
    rng = seeded(SEED + 4)
    cases = [
        ("B=2, T=5, V=13, d_model=8, num_heads=2 and 3 layers", (2, 5, 13, 8, 2, 16, 3)),
        ("B=3, T=4, V=7, d_model=12, num_heads=3 and 2 layers", (3, 4, 7, 12, 3, 24, 2)),
        ("B=1, T=3, V=5, d_model=8, num_heads=4 and 1 layer", (1, 3, 5, 8, 4, 32, 1)),
    ]
    for description, (B, T, V, d_model, h, d_ff, N) in cases:
        tokens = rng.integers(0, V, size=(B, T))
        params = _encoder_params(rng, V, d_model, d_ff, N)
        actual = _call(encoder, tokens, params, h, params=params, on=description)
        expected = reference.encoder(tokens, params, h)
        name = f"the output of encoder on {description}"
        check_shape(actual, expected.shape, name)
        check(np.all(np.isfinite(actual)), f"{name} contains NaN or inf.")
        if close(actual, expected):
            continue
        diagnose(actual, _encoder_mistakes(tokens, params, h), f"On {description}, ")
        check(False, f"On {description}, encoder differs from embed(src_tokens, E) followed "
                     "by every layer of params['encoder_layers'] in turn.")


def _encoder_mistakes(tokens, params, h):
    E, layers = params["embedding"], params["encoder_layers"]
    d_model = E.shape[1]
    PE = sinusoidal_encoding(tokens.shape[1], d_model)

    def run(X, stack):
        for layer in stack:
            X = reference.encoder_layer(X, layer, h)
        return X

    X = reference.embed(tokens, E)
    return [
        (run(X, layers[:1]), "only the first layer is applied: apply every layer of "
                             "params['encoder_layers'] in turn"),
        (run(X, layers[-1:]), "only the last layer is applied: apply every layer of "
                              "params['encoder_layers'] in turn, the first one first"),
        (run(X, layers[::-1]), "the layers are applied in reverse order: "
                               "params['encoder_layers'][0] comes first"),
        (run(X, layers[:1] * len(layers)), "the first layer is applied again and again: each "
                                           "layer has its own parameters"),
        (run(X, layers[-1:] * len(layers)), "the last layer is applied again and again: each "
                                            "layer has its own parameters"),
        (run(E[tokens], layers), "the tokens are not embedded with embed: start from "
                                 "E[tokens] · √d_model + PE[:T]"),
        (run(E[tokens] + PE, layers), "the embeddings are not multiplied by √d_model: start "
                                      "from embed(src_tokens, params['embedding'])"),
        (run(E[tokens] * np.sqrt(d_model), layers), "the positional encoding is missing: "
                                                    "start from embed(src_tokens, "
                                                    "params['embedding'])"),
    ]


def check_encoder_mask(encoder):
    rng = seeded(SEED + 5)
    cases = [
        ("B=3, T=6, d_model=8, num_heads=2, 2 layers and lengths [6, 4, 1]",
         (6, 11, 8, 2, 16, 2), [6, 4, 1]),
        ("B=2, T=5, d_model=12, num_heads=3, 3 layers and lengths [2, 5]",
         (5, 9, 12, 3, 24, 3), [2, 5]),
        ("B=2, T=4, d_model=8, num_heads=2, 2 layers and no padding (lengths [4, 4])",
         (4, 7, 8, 2, 32, 2), [4, 4]),
    ]
    for description, (T, V, d_model, h, d_ff, N), lengths in cases:
        src_mask = padding_mask(np.array(lengths), T)
        tokens = np.where(src_mask, rng.integers(1, V, size=src_mask.shape), 0)
        params = _encoder_params(rng, V, d_model, d_ff, N)
        actual = _call_masked(encoder, tokens, params, h, src_mask, description)
        expected = reference.encoder(tokens, params, h, src_mask)
        name = f"the output of encoder on {description}"
        check_shape(actual, expected.shape, name)
        check(np.all(np.isfinite(actual)), f"{name} contains NaN or inf.")
        if close(actual[src_mask], expected[src_mask]):
            continue
        where = f"On {description}, "
        mistakes = [(reference.encoder(tokens, params, h),
                     "the padding mask is ignored: real tokens attend to the padding; pass "
                     "src_mask[:, None, None, :], shape (B, 1, 1, T), to every layer")]
        mistakes += _masked_variants(tokens, params, h, src_mask)
        for wrong, mistake in mistakes:
            if close(actual[src_mask], wrong[src_mask]):
                check(False, f"{where}{mistake}.")
        unmasked = _call(encoder, tokens, params, h, params=params, on=description)
        check(close(unmasked, reference.encoder(tokens, params, h)),
              f"{where}the encoder is wrong even without src_mask: make the checks of "
              "the encoder without a mask pass first.")
        other = np.where(src_mask, tokens, (tokens + 3) % V)
        changed = _call_masked(encoder, other, params, h, src_mask, description)
        check(close(changed[src_mask], actual[src_mask]),
              f"{where}the outputs at real tokens change when the padding tokens change: "
              "hide the padded keys from the attention in every layer, with "
              "src_mask[:, None, None, :] of shape (B, 1, 1, T).")
        check(False, f"{where}at the real tokens, encoder differs from the encoder with "
                     "src_mask[:, None, None, :] passed to every layer.")


def _masked_variants(tokens, params, h, src_mask):
    E, layers = params["embedding"], params["encoder_layers"]

    def run(masks):
        X = reference.embed(tokens, E)
        for layer, mask in zip(layers, masks):
            X = reference.encoder_layer(X, layer, h, mask)
        return X

    keys = src_mask[:, None, None, :]
    queries = src_mask[:, None, :, None]
    N = len(layers)
    return [
        (run([queries] * N),
         "the padding mask is applied over the queries instead of the keys: it must hide "
         "the padded keys, src_mask[:, None, None, :] of shape (B, 1, 1, T)"),
        (run([~keys] * N),
         "the padding mask is inverted: True marks the real tokens, which may be attended to"),
        (run([keys] + [None] * (N - 1)),
         "the padding mask is passed to the first layer only: pass it to every layer"),
    ]


def _call_masked(encoder, tokens, params, h, src_mask, description):
    try:
        return _call(encoder, tokens, params, h, src_mask=src_mask, params=params,
                     on=description)
    except CheckFailed as failure:
        if "not implemented" in str(failure) or "modified" in str(failure):
            raise
        try:
            _call(encoder, tokens, params, h, params=params, on=description)
        except CheckFailed:
            raise failure from None
        raise CheckFailed(
            f"{str(failure).rstrip('.')}, but not without src_mask: the padding mask "
            "(B, T) must become src_mask[:, None, None, :], of shape (B, 1, 1, T), to "
            "broadcast against the scores (B, h, T, T).") from None


# -- parameters ----------------------------------------------------------------


def _ffn_params(rng, d_model, d_ff):
    return {"W_1": rng.normal(size=(d_model, d_ff)) / np.sqrt(d_model),
            "b_1": 0.5 * rng.normal(size=d_ff),
            "W_2": rng.normal(size=(d_ff, d_model)) / np.sqrt(d_ff),
            "b_2": 0.5 * rng.normal(size=d_model)}


def _layer_params(rng, d_model, d_ff):
    attention = {}
    for n in "qkvo":
        attention[f"W_{n}"] = rng.normal(size=(d_model, d_model)) / np.sqrt(d_model)
        attention[f"b_{n}"] = 0.5 * rng.normal(size=d_model)
    return {"self_attn": attention,
            "norm1": {"gamma": 1.0 + 0.3 * rng.normal(size=d_model),
                      "beta": 0.3 * rng.normal(size=d_model)},
            "ffn": _ffn_params(rng, d_model, d_ff),
            "norm2": {"gamma": 1.0 + 0.3 * rng.normal(size=d_model),
                      "beta": 0.3 * rng.normal(size=d_model)}}


def _encoder_params(rng, V, d_model, d_ff, N):
    return {"embedding": rng.normal(size=(V, d_model)) / np.sqrt(d_model),
            "encoder_layers": [_layer_params(rng, d_model, d_ff) for _ in range(N)]}


# -- helpers -------------------------------------------------------------------


def _call(function, *args, params, on, **kwargs):
    """call() with the reference's other graded functions standing in, then check that the nested
    `params` were left as they were."""
    snapshot = _copy(params)
    result = call(function, *args, on=on, stand_ins=GRADED, **kwargs)
    name = getattr(function, "__name__", "your function")
    check(_unchanged(params, snapshot),
          f"{name} modified params on {on}: compute new arrays instead of changing the "
          "weights in place.")
    return result


def _copy(tree):
    if isinstance(tree, dict):
        return {key: _copy(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_copy(value) for value in tree]
    return np.array(tree, copy=True)


def _unchanged(tree, snapshot):
    if isinstance(snapshot, dict):
        return isinstance(tree, dict) and tree.keys() == snapshot.keys() and all(
            _unchanged(tree[key], snapshot[key]) for key in snapshot)
    if isinstance(snapshot, list):
        return isinstance(tree, list) and len(tree) == len(snapshot) and all(
            _unchanged(a, b) for a, b in zip(tree, snapshot))
    return isinstance(tree, np.ndarray) and np.array_equal(tree, snapshot)


def _relu(x):
    return np.maximum(0.0, x)
