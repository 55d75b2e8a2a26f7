"""Training the Transformer (Vaswani et al. 2017, section 5): initialisation,
the loss and its gradient with respect to every parameter, Adam and the
warm-up schedule.

The backward pass is built from the forward functions of the earlier chapters
and the backward functions of ``solutions.backpropagation``: the forward pass
below records the input of every sub-layer, and the backward pass walks the
layers in reverse, handing each backward function the input its forward got.
"""

import math

import numpy as np

from .backpropagation import (
    cross_entropy, layer_norm_backward, multi_head_attention_backward,
    position_wise_ffn_backward)
from .multi_head import multi_head_attention
from .scaled_dot_product import causal_mask
from .transformer_encoder import embed, layer_norm, padding_to_attention_mask, position_wise_ffn


# -- initialisation ------------------------------------------------------------

def init_transformer(vocab_size, d_model, d_ff, num_layers, seed=0):
    """Random parameters for ``transformer_logits``: ``num_layers`` encoder and decoder layers.

    Every weight matrix ``W`` is Glorot-uniform, ``U(−a, a)`` with
    ``a = √(6 / (fan_in + fan_out))`` and ``(fan_in, fan_out) = W.shape``;
    biases 0, ``gamma`` 1, ``beta`` 0. The shared embedding is normal with
    standard deviation ``d_model^(−1/2)``: multiplied by ``√d_model`` in
    ``embed``, its rows then have entries of size 1, like the positional
    encoding they are added to. The same ``seed`` gives the same parameters.
    """
    for name, value in (("vocab_size", vocab_size), ("d_model", d_model), ("d_ff", d_ff)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(num_layers, bool) or not isinstance(num_layers, (int, np.integer)) or num_layers < 0:
        raise ValueError(f"num_layers must be a non-negative integer, got {num_layers!r}")
    rng = np.random.default_rng(seed)

    def glorot(fan_in, fan_out):
        a = math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-a, a, size=(fan_in, fan_out))

    def attention():
        weights = {f"W_{n}": glorot(d_model, d_model) for n in "qkvo"}
        return weights | {f"b_{n}": np.zeros(d_model) for n in "qkvo"}

    def norm():
        return {"gamma": np.ones(d_model), "beta": np.zeros(d_model)}

    def ffn():
        return {"W_1": glorot(d_model, d_ff), "b_1": np.zeros(d_ff),
                "W_2": glorot(d_ff, d_model), "b_2": np.zeros(d_model)}

    embedding = rng.normal(0.0, d_model ** -0.5, size=(vocab_size, d_model))
    encoder_layers = [{"self_attn": attention(), "norm1": norm(), "ffn": ffn(), "norm2": norm()}
                      for _ in range(num_layers)]
    decoder_layers = [{"self_attn": attention(), "norm1": norm(), "cross_attn": attention(),
                       "norm2": norm(), "ffn": ffn(), "norm3": norm()}
                      for _ in range(num_layers)]
    return {"embedding": embedding, "encoder_layers": encoder_layers,
            "decoder_layers": decoder_layers}


# -- the loss and its gradients ----------------------------------------------------

def transformer_loss_and_grads(src_tokens, tgt_tokens, params, num_heads, src_mask=None,
                               tgt_mask=None, label_smoothing=0.1):
    """Teacher forcing: the loss of predicting ``tgt_tokens[:, 1:]`` from ``tgt_tokens[:, :-1]``.

    ``src_tokens (B, S)``; ``tgt_tokens (B, T + 1)`` starts with BOS;
    ``src_mask (B, S)`` and ``tgt_mask (B, T + 1)`` are ``True`` at real
    tokens (``None``: all real). The decoder reads the target shifted right
    and is scored, with label smoothing, at the positions whose *next* token
    is real (``tgt_mask[:, 1:]``). Returns ``(loss, grads)``, ``grads`` with
    exactly the structure of ``params``; the embedding's gradient is the sum
    of its three uses (source, target and output projection).
    """
    src_tokens, tgt_tokens = np.asarray(src_tokens), np.asarray(tgt_tokens)
    if tgt_tokens.ndim != 2 or tgt_tokens.shape[1] < 2:
        raise ValueError(f"tgt_tokens must be (B, T + 1) with T >= 1 (BOS, then the target), "
                         f"got shape {tgt_tokens.shape}")
    if src_tokens.ndim != 2 or src_tokens.shape[0] != tgt_tokens.shape[0]:
        raise ValueError(f"src_tokens must be (B, S) with the B of tgt_tokens {tgt_tokens.shape}, "
                         f"got shape {src_tokens.shape}")
    for name, mask, tokens in (("src_mask", src_mask, src_tokens), ("tgt_mask", tgt_mask, tgt_tokens)):
        if mask is not None and np.shape(mask) != tokens.shape:
            raise ValueError(f"{name} must have the shape of its tokens {tokens.shape}, "
                             f"got {np.shape(mask)}")
    decoder_input, targets = tgt_tokens[:, :-1], tgt_tokens[:, 1:]
    scored = None if tgt_mask is None else np.asarray(tgt_mask, dtype=bool)[:, 1:]

    E = params["embedding"]
    memory_mask = padding_to_attention_mask(src_mask)          # (B, 1, 1, S)
    memory, encoder_records = _encoder_forward(src_tokens, params, num_heads, memory_mask)
    output, decoder_records = _decoder_forward(decoder_input, memory, params, num_heads, memory_mask)
    logits = output @ E.T                                       # (B, T, V)
    loss, grad_logits = cross_entropy(logits, targets, scored, label_smoothing)

    # The output projection: logits = output @ E.T.
    grad_E = np.einsum("btv,btd->vd", grad_logits, output)
    grad_output = grad_logits @ E                               # (B, T, d_model)
    grad_memory, grad_decoder_layers, grad_target_embedded = _decoder_backward(
        grad_output, decoder_records, memory, params, num_heads, memory_mask)
    grad_encoder_layers, grad_source_embedded = _encoder_backward(
        grad_memory, encoder_records, params, num_heads, memory_mask)
    # The embeddings: E[tokens] · √d_model + PE (the encoding has no parameter).
    scale = math.sqrt(E.shape[1])
    np.add.at(grad_E, decoder_input, scale * grad_target_embedded)
    np.add.at(grad_E, src_tokens, scale * grad_source_embedded)
    return loss, {"embedding": grad_E, "encoder_layers": grad_encoder_layers,
                  "decoder_layers": grad_decoder_layers}


def _encoder_forward(src_tokens, params, num_heads, mask):
    """The encoder of ``solutions.transformer_encoder``, keeping each sub-layer's input."""
    X = embed(src_tokens, params["embedding"])                  # (B, S, d_model)
    records = []
    for layer in params["encoder_layers"]:
        attended, _ = multi_head_attention(X, X, X, layer["self_attn"], num_heads, mask)
        sum1 = X + attended
        X1 = layer_norm(sum1, **layer["norm1"])
        sum2 = X1 + position_wise_ffn(X1, layer["ffn"])
        records.append((X, sum1, X1, sum2))
        X = layer_norm(sum2, **layer["norm2"])
    return X, records


def _encoder_backward(grad_memory, records, params, num_heads, mask):
    """Gradients of the encoder's layers and of its embedded input, last layer first."""
    grads = [None] * len(records)
    grad = grad_memory
    for i in reversed(range(len(records))):
        layer, (X, sum1, X1, sum2) = params["encoder_layers"][i], records[i]
        grad_sum2, grad_g2, grad_b2 = layer_norm_backward(sum2, **layer["norm2"], grad_output=grad)
        grad_X1, grad_ffn = position_wise_ffn_backward(X1, layer["ffn"], grad_sum2)
        grad_X1 = grad_X1 + grad_sum2                           # the residual connection
        grad_sum1, grad_g1, grad_b1 = layer_norm_backward(sum1, **layer["norm1"], grad_output=grad_X1)
        grad_Q, grad_K, grad_V, grad_attn = multi_head_attention_backward(
            X, X, X, layer["self_attn"], num_heads, grad_sum1, mask)
        grad = grad_sum1 + grad_Q + grad_K + grad_V             # X feeds the residual, Q, K and V
        grads[i] = {"self_attn": grad_attn, "norm1": {"gamma": grad_g1, "beta": grad_b1},
                    "ffn": grad_ffn, "norm2": {"gamma": grad_g2, "beta": grad_b2}}
    return grads, grad


def _decoder_forward(tgt_tokens, memory, params, num_heads, memory_mask):
    """The decoder of ``solutions.transformer_decoder``, keeping each sub-layer's input."""
    Y = embed(tgt_tokens, params["embedding"])                  # (B, T, d_model)
    self_mask = causal_mask(Y.shape[1])
    records = []
    for layer in params["decoder_layers"]:
        attended, _ = multi_head_attention(Y, Y, Y, layer["self_attn"], num_heads, self_mask)
        sum1 = Y + attended
        Y1 = layer_norm(sum1, **layer["norm1"])
        attended, _ = multi_head_attention(Y1, memory, memory, layer["cross_attn"], num_heads,
                                           memory_mask)
        sum2 = Y1 + attended
        Y2 = layer_norm(sum2, **layer["norm2"])
        sum3 = Y2 + position_wise_ffn(Y2, layer["ffn"])
        records.append((Y, sum1, Y1, sum2, Y2, sum3))
        Y = layer_norm(sum3, **layer["norm3"])
    return Y, records


def _decoder_backward(grad_output, records, memory, params, num_heads, memory_mask):
    """Gradients of the memory (summed over the layers), of the decoder's layers and of its embedded input."""
    self_mask = causal_mask(grad_output.shape[1])
    grads = [None] * len(records)
    grad_memory = np.zeros_like(memory)
    grad = grad_output
    for i in reversed(range(len(records))):
        layer, (Y, sum1, Y1, sum2, Y2, sum3) = params["decoder_layers"][i], records[i]
        grad_sum3, grad_g3, grad_b3 = layer_norm_backward(sum3, **layer["norm3"], grad_output=grad)
        grad_Y2, grad_ffn = position_wise_ffn_backward(Y2, layer["ffn"], grad_sum3)
        grad_Y2 = grad_Y2 + grad_sum3
        grad_sum2, grad_g2, grad_b2 = layer_norm_backward(sum2, **layer["norm2"], grad_output=grad_Y2)
        grad_Y1, grad_K, grad_V, grad_cross = multi_head_attention_backward(
            Y1, memory, memory, layer["cross_attn"], num_heads, grad_sum2, memory_mask)
        grad_memory += grad_K + grad_V                          # every layer reads the memory
        grad_Y1 = grad_Y1 + grad_sum2
        grad_sum1, grad_g1, grad_b1 = layer_norm_backward(sum1, **layer["norm1"], grad_output=grad_Y1)
        grad_Q, grad_K, grad_V, grad_self = multi_head_attention_backward(
            Y, Y, Y, layer["self_attn"], num_heads, grad_sum1, self_mask)
        grad = grad_sum1 + grad_Q + grad_K + grad_V
        grads[i] = {"self_attn": grad_self, "norm1": {"gamma": grad_g1, "beta": grad_b1},
                    "cross_attn": grad_cross, "norm2": {"gamma": grad_g2, "beta": grad_b2},
                    "ffn": grad_ffn, "norm3": {"gamma": grad_g3, "beta": grad_b3}}
    return grad_memory, grads, grad


# -- the optimiser and its schedule --------------------------------------------------

def adam_step(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    """One step of Adam (Kingma & Ba 2015) with bias correction: ``(new_params, new_state)``.

    ``params`` and ``grads`` are nested dicts and lists of arrays with the same
    structure; ``state`` is ``{"step": n, "m": ..., "v": ...}`` or ``None``
    (a fresh one). The defaults β₂ = 0.98 and ε = 10⁻⁹ are those of Vaswani
    et al. (PyTorch's are 0.999 and 10⁻⁸). ``step`` counts from 1, so the
    first step divides ``m`` by ``1 − β₁`` exactly; ε is added *after* the
    square root. Nothing passed in is modified.
    """
    if state is None:
        state = {"step": 0, "m": _map(np.zeros_like, params), "v": _map(np.zeros_like, params)}
    step = state["step"] + 1
    m = _map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
    v = _map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
    m_correction, v_correction = 1 - beta1 ** step, 1 - beta2 ** step

    def update(p, m, v):
        return p - lr * (m / m_correction) / (np.sqrt(v / v_correction) + eps)

    return _map(update, params, m, v), {"step": step, "m": m, "v": v}


def noam_learning_rate(step, d_model, warmup_steps=4000, scale=1.0):
    """``scale · d_model^(−0.5) · min(step^(−0.5), step · warmup_steps^(−1.5))`` (Vaswani et al., Eq. 3).

    The rate grows linearly for ``warmup_steps`` steps, then decays as
    ``1/√step``; the two meet at ``step = warmup_steps``. ``step`` counts from 1.
    """
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


# -- a toy task ------------------------------------------------------------------------

# The special tokens of the decoder chapter; the letters are 3, 4, ...
PAD = 0
BOS = 1
EOS = 2


def reversal_batch(rng, batch_size, num_letters, vocab_size=16):
    """A batch of the reversal task: ``(src (B, num_letters + 1), tgt (B, num_letters + 2))``.

    Each source is EOS followed by ``num_letters`` random letters (tokens
    ``3 … vocab_size − 1``); its target is BOS followed by the source read
    backwards, so it ends with EOS, as in the hand-built reversing model of
    the decoder chapter. Target position ``t`` must look at source position
    ``num_letters − t``: the task needs attention, and a reordering.
    """
    if vocab_size < 4 or num_letters < 1:
        raise ValueError(f"need vocab_size >= 4 and num_letters >= 1, got {vocab_size}, {num_letters}")
    letters = rng.integers(EOS + 1, vocab_size, size=(batch_size, num_letters))
    src = np.concatenate([np.full((batch_size, 1), EOS), letters], axis=1)
    tgt = np.concatenate([np.full((batch_size, 1), BOS), src[:, ::-1]], axis=1)
    return src, tgt


def train(num_steps, batch_size=32, seed=0, vocab_size=10, num_letters=4, d_model=16,
          d_ff=32, num_layers=1, num_heads=2, warmup_steps=50, scale=1.0, label_smoothing=0.1,
          on_step=None):
    """Train a Transformer on the reversal task; returns its parameters.

    Every step draws a fresh batch (``reversal_batch``), computes the loss and
    its gradients by teacher forcing, and takes one Adam step at the rate of
    the warm-up schedule. ``on_step(step, loss, params)``, when given, is
    called after each step (to record curves). The same ``seed`` gives the
    same model: it seeds both the initialisation and the batches.
    """
    params = init_transformer(vocab_size, d_model, d_ff, num_layers, seed=seed)
    rng, state = np.random.default_rng(seed), None
    for step in range(1, num_steps + 1):
        src, tgt = reversal_batch(rng, batch_size, num_letters, vocab_size)
        loss, grads = transformer_loss_and_grads(src, tgt, params, num_heads,
                                                 label_smoothing=label_smoothing)
        lr = noam_learning_rate(step, d_model, warmup_steps, scale)
        params, state = adam_step(params, grads, state, lr=lr)
        if on_step is not None:
            on_step(step, loss, params)
    return params


def _map(function, first, *rest):
    """``function`` applied leaf by leaf to nested dicts and lists of the same structure."""
    if isinstance(first, dict):
        if any(not isinstance(r, dict) or r.keys() != first.keys() for r in rest):
            raise ValueError(f"parameters, gradients and state must have the same keys, "
                             f"got {[sorted(first)] + [sorted(r) if isinstance(r, dict) else type(r).__name__ for r in rest]}")
        return {key: _map(function, first[key], *(r[key] for r in rest)) for key in first}
    if isinstance(first, (list, tuple)):
        if any(not isinstance(r, (list, tuple)) or len(r) != len(first) for r in rest):
            raise ValueError("parameters, gradients and state must have lists of the same lengths")
        return [_map(function, *items) for items in zip(first, *rest)]
    shapes = [np.shape(first)] + [np.shape(r) for r in rest]
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"a parameter and its gradient must have the same shape, got {shapes}")
    return function(first, *rest)
