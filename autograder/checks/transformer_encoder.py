"""Hidden checks for the Transformer encoder exercise, as case tables (`engine.cases`).

Each task declares what is right (the reference in ``solutions/``) and the mistakes it knows,
each the reference with one step changed: layer norm with the unbiased variance, over another
axis, with ε outside the square root or gamma and beta swapped; an FFN without its ReLU or with
one after ``W_2``; a pre-LN layer, a missing residual, the sub-layers in the wrong order; an
embedding scaled wrongly or with positions missing or counted from 1; an encoder that applies
only one layer or the layers in reverse, or that ignores the padding mask or puts it on the
queries. Each check lists its cases.

With a padding mask, only the outputs at real tokens are judged (`where`): what the encoder
computes at padding positions is never used (the decoder's attention hides them as keys too), so
an encoder that also masks padded queries is correct as well.
"""

import numpy as np

from solutions import transformer_encoder as reference
from solutions.multi_head import multi_head_attention
from solutions.positional_encoding import sinusoidal_encoding
from solutions.scaled_dot_product import causal_mask, padding_mask
from solutions.transformer_encoder import embed, encoder_layer, layer_norm, position_wise_ffn

from autograder.engine.cases import Exercise, Fact, Mistake, case
from autograder.engine.checking import CheckFailed
from autograder.engine.harness import Unfinished, seeded

SEED = 20170612  # the day "Attention is all you need" appeared on arXiv
_LAYER_RULE = "Z = LayerNorm(X + MultiHead(X, X, X)) with norm1, then LayerNorm(Z + FFN(Z)) with norm2"


def _layer_norm(X, gamma, beta, eps, *, axis=-1, ddof=0, eps_inside=True, sqrt=True):
    """Layer norm with one step changed: the axis, the variance's ddof, where eps goes, no root."""
    with np.errstate(all="ignore"):
        variance = X.var(axis=axis, keepdims=True, ddof=ddof)
        scale = np.sqrt(variance + eps) if eps_inside else np.sqrt(variance) + eps
        return (X - X.mean(axis=axis, keepdims=True)) / (scale if sqrt else variance + eps) * gamma + beta


def _norm_mistake(message, **changes):
    return Mistake(message, lambda X, gamma, beta, eps: _layer_norm(X, gamma, beta, eps, **changes))


def _ffn(*, relu_hidden=True, relu_output=False, b_1_after_relu=False, biases=(1, 1), swapped=False):
    """The FFN with one step changed (a mistake's value, from X and params)."""
    def gives(X, params):
        W_1, W_2 = (params["W_2"], params["W_1"]) if swapped else (params["W_1"], params["W_2"])
        b_1, b_2 = biases[0] * params["b_1"], biases[1] * params["b_2"]
        hidden = X @ W_1 + (0 if b_1_after_relu else b_1)
        hidden = (np.maximum(0.0, hidden) if relu_hidden else hidden) + (b_1 if b_1_after_relu else 0)
        output = hidden @ W_2 + b_2
        return np.maximum(0.0, output) if relu_output else output
    return gives


def _layer(*, order=("attn", "ffn"), norms=("norm1", "norm2"), residual=("attn", "ffn"), post_ln=True,
           norm_before_add=False, masked=True):
    """The encoder layer with one step changed (a mistake's value, from X, params, num_heads, mask)."""
    def gives(X, params, num_heads, mask):
        def sublayer(name, Y):
            if name == "ffn":
                return position_wise_ffn(Y, params["ffn"])
            return multi_head_attention(Y, Y, Y, params["self_attn"], num_heads, mask if masked else None)[0]

        for name, norm in zip(order, norms):
            if not post_ln:
                X = X + sublayer(name, layer_norm(X, **params[norm]))
            elif norm_before_add:
                X = X + layer_norm(sublayer(name, X), **params[norm])
            else:
                X = layer_norm(X + sublayer(name, X) if name in residual else sublayer(name, X), **params[norm])
        return X
    return gives


def _encoder(*, embedded=None, layers=lambda stack: stack, masks=None):
    """The encoder with one step changed: `embedded(E[tokens], d_model, T)` the first layer's input,
    `layers(stack)` the layers that run, `masks(src_mask, i)` the mask of layer i."""
    def gives(src_tokens, params, num_heads, src_mask):
        E = params["embedding"]
        X = embed(src_tokens, E) if embedded is None else embedded(E[src_tokens], E.shape[1], src_tokens.shape[1])
        keys = None if src_mask is None else src_mask[:, None, None, :]
        for i, layer in enumerate(layers(params["encoder_layers"])):
            X = encoder_layer(X, layer, num_heads, keys if masks is None else masks(src_mask, i))
        return X
    return gives


def _padded(src_tokens, params, num_heads, src_mask):
    return src_mask is not None


exercise = Exercise(reference)
layer_norm_task = exercise.task(
    "layer_norm", hint="it should be (X − mean) / √(var + eps) · gamma + beta, with the mean and the biased "
                       "variance of each vector over its last axis",
    mistakes=[
        _norm_mistake("the variance is the unbiased one, divided by d − 1: layer norm uses the biased variance, "
                      "the mean of the squared deviations (np.var's default, ddof=0)", ddof=1),
        _norm_mistake("eps is added outside the square root: divide by √(var + eps), not by √var + eps",
                      eps_inside=False),
        _norm_mistake("the vectors are divided by the variance: divide by the standard deviation √(var + eps)",
                      sqrt=False),
        Mistake("eps is not used: divide by √(var + eps) with the eps argument (default 1e-5)",
                lambda X, gamma, beta, eps: _layer_norm(X, gamma, beta, 0.0)),
        Mistake("gamma and beta are swapped: gamma multiplies the normalised vector, beta is added to it",
                lambda X, gamma, beta, eps: _layer_norm(X, beta, gamma, eps)),
        Mistake("gamma and beta are not applied: multiply the normalised vector by gamma, then add beta",
                lambda X, gamma, beta, eps: _layer_norm(X, 1.0, 0.0, eps)),
        *[Mistake(f"eps defaults to {other:g}: its default is 1e-5",
                  lambda X, gamma, beta, eps, other=other: _layer_norm(X, gamma, beta, other),
                  when=lambda X, gamma, beta, eps: eps == 1e-5)
          for other in (1e-6, 1e-12, 1e-8, 1e-3, 1e-9, 1e-7, 1e-4)],
        Mistake("the eps argument is ignored: divide by √(var + eps) with the eps you are given",
                lambda X, gamma, beta, eps: _layer_norm(X, gamma, beta, 1e-5)),
        *[Mistake(f"the mean and variance are taken over {where}: layer norm normalises each vector on its own, "
                  "over the last axis (the features), keepdims=True",
                  lambda X, gamma, beta, eps, axis=axis: _layer_norm(X, gamma, beta, eps, axis=axis(X.ndim)),
                  when=lambda X, gamma, beta, eps: X.ndim > 1)
          for axis, where in ((lambda n: 0, "axis 0"), (lambda n: n - 2, "the second-to-last axis"),
                              (lambda n: tuple(range(n - 1)), "every axis but the last, as batch norm would"),
                              (lambda n: None, "the whole array"))]],
    facts=[Fact("{name} contains NaN or inf: divide by √(var + eps), with eps inside the square root, so that "
                "a vector whose entries are all equal gives beta.",
                lambda actual, X, gamma, beta, eps: np.all(np.isfinite(actual)))])
ffn = exercise.task("position_wise_ffn", hint="it should be relu(X @ W_1 + b_1) @ W_2 + b_2", mistakes=[
    Mistake("the ReLU is missing: the hidden layer is relu(X @ W_1 + b_1) = max(0, X @ W_1 + b_1)",
            _ffn(relu_hidden=False)),
    Mistake("a ReLU is applied after W_2 as well: only the hidden layer goes through the ReLU, the output "
            "relu(X @ W_1 + b_1) @ W_2 + b_2 has no activation", _ffn(relu_output=True)),
    Mistake("the ReLU is applied to the output instead of the hidden layer: relu(X @ W_1 + b_1) @ W_2 + b_2",
            _ffn(relu_hidden=False, relu_output=True)),
    Mistake("b_1 is added after the ReLU: add it before, relu(X @ W_1 + b_1)", _ffn(b_1_after_relu=True)),
    Mistake("the bias b_1 is missing: relu(X @ W_1 + b_1)", _ffn(biases=(0, 1))),
    Mistake("the bias b_2 is missing: ... @ W_2 + b_2", _ffn(biases=(1, 0))),
    Mistake("the biases b_1 and b_2 are missing", _ffn(biases=(0, 0))),
    Mistake("W_1 and W_2 are swapped: W_1 (d_model, d_ff) comes first", _ffn(swapped=True))])
layer = exercise.task("encoder_layer", hint=f"it should be {_LAYER_RULE}", mistakes=[
    Mistake("the mask is ignored: pass it to multi_head_attention", _layer(masked=False)),
    Mistake("the layer is pre-LN, X + MultiHead(LayerNorm(X)): the paper's layer is post-LN, it normalises "
            f"after the residual addition, {_LAYER_RULE}", _layer(post_ln=False)),
    Mistake("the residual connection around the self-attention is missing: normalise X + MultiHead(X, X, X), "
            "not MultiHead(X, X, X) alone", _layer(residual=("ffn",))),
    Mistake("the residual connection around the feed-forward network is missing: normalise Z + FFN(Z), "
            "not FFN(Z) alone", _layer(residual=("attn",))),
    Mistake(f"both residual connections are missing: {_LAYER_RULE}", _layer(residual=())),
    Mistake("the sub-layers are in the wrong order: self-attention comes first, then the feed-forward network",
            _layer(order=("ffn", "attn"))),
    Mistake("the sub-layers are in the wrong order: self-attention comes first (followed by norm1), then the "
            "feed-forward network (followed by norm2)", _layer(order=("ffn", "attn"), norms=("norm2", "norm1"))),
    Mistake("norm1 and norm2 are swapped: norm1 follows the self-attention, norm2 the feed-forward network",
            _layer(norms=("norm2", "norm1"))),
    Mistake("each sub-layer's output is normalised before the residual addition: normalise the sum, "
            "LayerNorm(X + Sublayer(X))", _layer(norm_before_add=True)),
    Mistake("the feed-forward sub-layer is missing: after Z = LayerNorm(X + MultiHead(X, X, X)) comes "
            "LayerNorm(Z + FFN(Z)) with norm2", _layer(order=("attn",)))])


def _positions(tokens, E):
    """The positional table, long enough for the mistakes that read it past T or at the token ids."""
    return sinusoidal_encoding(max(tokens.shape[1] + 1, E.shape[0]), E.shape[1])


embed_task = exercise.task(
    "embed", hint="it should be E[tokens] · √d_model + PE[:T] with PE = sinusoidal_encoding(T, d_model)", mistakes=[
        Mistake("the embeddings are not multiplied by √d_model: section 3.4 of the paper scales them, "
                "E[tokens] · √d_model + PE[:T]", lambda tokens, E: embed(tokens, E / np.sqrt(E.shape[1]))),
        Mistake("the embeddings are multiplied by d_model: multiply them by its square root, √d_model",
                lambda tokens, E: embed(tokens, E * np.sqrt(E.shape[1]))),
        Mistake("the embeddings are divided by √d_model: multiply them by √d_model",
                lambda tokens, E: embed(tokens, E / E.shape[1])),
        Mistake("the positional encoding is missing: add PE[:T] = sinusoidal_encoding(T, d_model)",
                lambda tokens, E: E[tokens] * np.sqrt(E.shape[1])),
        Mistake("the positions start at 1: positions are 0-based, add PE[:T] = sinusoidal_encoding(T, d_model)",
                lambda tokens, E: E[tokens] * np.sqrt(E.shape[1]) + _positions(tokens, E)[1:tokens.shape[1] + 1]),
        Mistake("the positional encoding is multiplied by √d_model too: scale only the embeddings, then add PE[:T]",
                lambda tokens, E: (E[tokens] + _positions(tokens, E)[:tokens.shape[1]]) * np.sqrt(E.shape[1])),
        Mistake("the positional encoding is indexed by the token ids: PE[p] belongs to position p, add PE[:T]",
                lambda tokens, E: E[tokens] * np.sqrt(E.shape[1]) + _positions(tokens, E)[tokens]),
        Mistake("the positional encoding is scaled instead of the embeddings: E[tokens] · √d_model + PE[:T]",
                lambda tokens, E: E[tokens] + _positions(tokens, E)[:tokens.shape[1]] * np.sqrt(E.shape[1]))])
_EVERY_LAYER = "apply every layer of params['encoder_layers'] in turn"
encoder = exercise.task(
    "encoder", hint="it should be embed(src_tokens, E) followed by every layer of params['encoder_layers'] in turn, "
                    "with src_mask[:, None, None, :] passed to every layer",
    where=lambda src_tokens, params, num_heads, src_mask: True if src_mask is None else src_mask[..., None],
    mistakes=[
        Mistake(f"only the first layer is applied: {_EVERY_LAYER}", _encoder(layers=lambda stack: stack[:1])),
        Mistake(f"only the last layer is applied: {_EVERY_LAYER}, the first one first",
                _encoder(layers=lambda stack: stack[-1:])),
        Mistake("the layers are applied in reverse order: params['encoder_layers'][0] comes first",
                _encoder(layers=lambda stack: stack[::-1])),
        Mistake("the first layer is applied again and again: each layer has its own parameters",
                _encoder(layers=lambda stack: stack[:1] * len(stack))),
        Mistake("the last layer is applied again and again: each layer has its own parameters",
                _encoder(layers=lambda stack: stack[-1:] * len(stack))),
        Mistake("the tokens are not embedded with embed: start from E[tokens] · √d_model + PE[:T]",
                _encoder(embedded=lambda vectors, d, T: vectors)),
        Mistake("the embeddings are not multiplied by √d_model: start from embed(src_tokens, params['embedding'])",
                _encoder(embedded=lambda vectors, d, T: vectors + sinusoidal_encoding(T, d))),
        Mistake("the positional encoding is missing: start from embed(src_tokens, params['embedding'])",
                _encoder(embedded=lambda vectors, d, T: vectors * np.sqrt(d))),
        Mistake("the padding mask is ignored: real tokens attend to the padding; pass src_mask[:, None, None, :], "
                "shape (B, 1, 1, T), to every layer", _encoder(masks=lambda src_mask, i: None), when=_padded),
        Mistake("the padding mask is applied over the queries instead of the keys: it must hide the padded keys, "
                "src_mask[:, None, None, :] of shape (B, 1, 1, T)",
                _encoder(masks=lambda src_mask, i: src_mask[:, None, :, None]), when=_padded),
        Mistake("the padding mask is inverted: True marks the real tokens, which may be attended to",
                _encoder(masks=lambda src_mask, i: ~src_mask[:, None, None, :]), when=_padded),
        Mistake("the padding mask is passed to the first layer only: pass it to every layer",
                _encoder(masks=lambda src_mask, i: src_mask[:, None, None, :] if i == 0 else None), when=_padded)])


def check_layer_norm(function):
    rng = seeded(SEED)
    constant = rng.normal(size=(2, 6))
    constant[0] = 2.0  # a vector whose entries are all equal
    inputs = [
        ("a (2, 3, 8) array", 1.0 + 2.0 * rng.normal(size=(2, 3, 8)), {}),
        ("a (4, 6) array", rng.normal(size=(4, 6)), {}),
        ("one vector of size 5", 3.0 * rng.normal(size=5), {}),
        ("a (2, 2, 3, 4) array", rng.normal(size=(2, 2, 3, 4)), {}),
        ("vectors with a small spread (variance about 1e-4) and the default eps", 3.0 + 0.01 * rng.normal(size=(3, 6)),
         {}),
        ("a (2, 4, 6) array with eps=0.5", rng.normal(size=(2, 4, 6)), {"eps": 0.5}),
        ("a vector whose entries are all equal", constant, {}),
    ]
    layer_norm_task.check(function, [case(description, X, 1.0 + 0.5 * rng.normal(size=X.shape[-1]),
                                          rng.normal(size=X.shape[-1]), **options)
                                     for description, X, options in inputs])


def check_position_wise_ffn(function):
    rng = seeded(SEED + 1)
    ffn.check(function, [case(description, rng.normal(size=shape), _ffn_params(rng, shape[-1], d_ff))
                         for description, shape, d_ff in (("X of shape (2, 5, 8) with d_ff=32", (2, 5, 8), 32),
                                                          ("X of shape (3, 4) with d_ff=16", (3, 4), 16),
                                                          ("X of shape (1, 1, 6) with d_ff=24", (1, 1, 6), 24),
                                                          ("X of shape (2, 3, 8) with d_ff=8", (2, 3, 8), 8))])


def check_encoder_layer(function):
    rng = seeded(SEED + 2)
    cases = []
    for description, (B, T, d_model, h, d_ff), kind in [
            ("a batch with B=2, T=5, d_model=8, num_heads=2, d_ff=32 and no mask", (2, 5, 8, 2, 32), None),
            ("B=3, T=4, d_model=12, num_heads=3, d_ff=16 and a padding mask (B, 1, 1, T)", (3, 4, 12, 3, 16),
             "padding"),
            ("B=1, T=6, d_model=16, num_heads=4, d_ff=64 and a causal mask (T, T)", (1, 6, 16, 4, 64), "causal"),
            ("B=2, T=3, d_model=8, num_heads=1, d_ff=16 and no mask", (2, 3, 8, 1, 16), None)]:
        X, params = rng.normal(size=(B, T, d_model)), _layer_params(rng, d_model, d_ff)
        mask = {None: None, "causal": lambda: causal_mask(T),
                "padding": lambda: padding_mask(rng.integers(1, T + 1, size=B), T)[:, None, None, :]}[kind]
        cases.append(case(description, X, params, h) if mask is None else case(description, X, params, h, mask=mask()))
    X, params = _layer_example()
    norm2 = {"gamma": np.array([1.0, 2.0, 3.0, 4.0]), "beta": np.array([0.0, 0.0, 0.0, 1.0])}
    cases += [case("the task's example", X, params, 2),
              case("the task's example with a new norm2", X, {**params, "norm2": norm2}, 2)]
    layer.check(function, cases)


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


def check_embed(function):
    rng = seeded(SEED + 3)
    embed_task.check(function, [
        case(description, rng.integers(0, V, size=shape), scale * rng.normal(size=(V, d_model)))
        for description, shape, V, d_model, scale in (
            ("tokens of shape (2, 5) with V=11 and d_model=8", (2, 5), 11, 8, 8 ** -0.5),
            ("tokens of shape (1, 1) with V=3 and d_model=4", (1, 1), 3, 4, 0.5),
            ("tokens of shape (3, 7) with V=5 and d_model=16", (3, 7), 5, 16, 1.0),
            ("tokens of shape (2, 12) with V=20 and d_model=6", (2, 12), 20, 6, 6 ** -0.5))])


def check_encoder(function):
    rng = seeded(SEED + 4)
    encoder.check(function, [
        case(description, rng.integers(0, V, size=(B, T)), _encoder_params(rng, V, d_model, d_ff, N), h)
        for description, (B, T, V, d_model, h, d_ff, N) in (
            ("B=2, T=5, V=13, d_model=8, num_heads=2 and 3 layers", (2, 5, 13, 8, 2, 16, 3)),
            ("B=3, T=4, V=7, d_model=12, num_heads=3 and 2 layers", (3, 4, 7, 12, 3, 24, 2)),
            ("B=1, T=3, V=5, d_model=8, num_heads=4 and 1 layer", (1, 3, 5, 8, 4, 32, 1)))])


def check_encoder_mask(function):
    rng = seeded(SEED + 5)
    for description, (T, V, d_model, h, d_ff, N), lengths in (
            ("B=3, T=6, d_model=8, num_heads=2, 2 layers and lengths [6, 4, 1]", (6, 11, 8, 2, 16, 2), [6, 4, 1]),
            ("B=2, T=5, d_model=12, num_heads=3, 3 layers and lengths [2, 5]", (5, 9, 12, 3, 24, 3), [2, 5]),
            ("B=2, T=4, d_model=8, num_heads=2, 2 layers and no padding (lengths [4, 4])", (4, 7, 8, 2, 32, 2),
             [4, 4])):
        src_mask = padding_mask(np.array(lengths), T)
        tokens = np.where(src_mask, rng.integers(1, V, size=src_mask.shape), 0)
        params = _encoder_params(rng, V, d_model, d_ff, N)
        try:
            encoder.judge(function, case(description, tokens, params, h, src_mask=src_mask))
        except CheckFailed as failure:
            if isinstance(failure, Unfinished) or failure.cause is not None:
                raise
            try:  # right without the mask: the mask is what goes wrong
                encoder.judge(function, case(description, tokens, params, h))
            except CheckFailed:
                raise failure from None
            raise CheckFailed(f"{str(failure).rstrip('.')}, but it is right without src_mask: the padding mask "
                              "(B, T) must become src_mask[:, None, None, :], of shape (B, 1, 1, T), in every "
                              "layer, to broadcast against the scores (B, h, T, T).") from None


def _ffn_params(rng, d_model, d_ff):
    return {"W_1": rng.normal(size=(d_model, d_ff)) / np.sqrt(d_model), "b_1": 0.5 * rng.normal(size=d_ff),
            "W_2": rng.normal(size=(d_ff, d_model)) / np.sqrt(d_ff), "b_2": 0.5 * rng.normal(size=d_model)}


def _layer_params(rng, d_model, d_ff):
    attention = {}
    for n in "qkvo":
        attention[f"W_{n}"] = rng.normal(size=(d_model, d_model)) / np.sqrt(d_model)
        attention[f"b_{n}"] = 0.5 * rng.normal(size=d_model)
    norm1 = {"gamma": 1.0 + 0.3 * rng.normal(size=d_model), "beta": 0.3 * rng.normal(size=d_model)}
    ffn_params = _ffn_params(rng, d_model, d_ff)
    return {"self_attn": attention, "norm1": norm1, "ffn": ffn_params,
            "norm2": {"gamma": 1.0 + 0.3 * rng.normal(size=d_model), "beta": 0.3 * rng.normal(size=d_model)}}


def _encoder_params(rng, V, d_model, d_ff, N):
    return {"embedding": rng.normal(size=(V, d_model)) / np.sqrt(d_model),
            "encoder_layers": [_layer_params(rng, d_model, d_ff) for _ in range(N)]}
