"""The RNN encoder-decoder (Cho et al. 2014; Sutskever et al. 2014).

An encoder RNN reads the source sequence into one vector, the context
``c = h_T``; a decoder RNN writes the output one token at a time from it.
Row-vector convention: ``x_t (B, d_in)``, ``h (B, d_h)``, a layer is ``x @ W + b``.
"""

import numpy as np

CELLS = ("rnn", "gru")


def sigmoid(x):
    """The logistic function 1 / (1 + e^(-x)), without overflow for large |x|."""
    x = np.asarray(x)
    # e^(-|x|) never overflows; pick the algebraically equal form for each sign.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def rnn_cell(x_t, h_prev, params):
    """One step of a plain (Elman) RNN: ``h_t = tanh(x_t W_xh + h_prev W_hh + b_h)``.

    ``x_t (B, d_in)``, ``h_prev (B, d_h)``; params ``W_xh (d_in, d_h)``,
    ``W_hh (d_h, d_h)``, ``b_h (d_h,)``. Returns ``h_t (B, d_h)``.
    """
    _check_step(x_t, h_prev, params, "rnn")
    return np.tanh(x_t @ params["W_xh"] + h_prev @ params["W_hh"] + params["b_h"])


def gru_cell(x_t, h_prev, params):
    """One step of the gated recurrent unit of Cho et al. (2014).

    update gate    z  = σ(x W_xz + h W_hz + b_z)
    reset gate     r  = σ(x W_xr + h W_hr + b_r)
    candidate      h̃ = tanh(x W_xh + (r ⊙ h) W_hh + b_h)
    new state      h_t = z ⊙ h + (1 − z) ⊙ h̃

    The reset gate scales the previous state *before* its matrix product, and
    ``z`` close to 1 keeps the old state (Cho et al.'s convention; some
    libraries swap the roles of ``z`` and ``1 − z``). ``x_t (B, d_in)``,
    ``h_prev (B, d_h)``; params ``W_x* (d_in, d_h)``, ``W_h* (d_h, d_h)``,
    ``b_* (d_h,)`` for ``* = z, r, h``. Returns ``h_t (B, d_h)``.
    """
    _check_step(x_t, h_prev, params, "gru")
    p = params
    z = sigmoid(x_t @ p["W_xz"] + h_prev @ p["W_hz"] + p["b_z"])
    r = sigmoid(x_t @ p["W_xr"] + h_prev @ p["W_hr"] + p["b_r"])
    candidate = np.tanh(x_t @ p["W_xh"] + (r * h_prev) @ p["W_hh"] + p["b_h"])
    return z * h_prev + (1.0 - z) * candidate


def encode(X, params, cell="rnn"):
    """Run an RNN over ``X (B, T, d_in)`` from a zero state.

    Returns ``(H, h_T)``: every hidden state ``H (B, T, d_h)`` and the last one
    ``h_T (B, d_h)``, which the plain encoder-decoder uses as its context.
    """
    step = cell_function(cell)
    X = np.asarray(X)
    if X.ndim != 3:
        raise ValueError(f"X must have shape (B, T, d_in), got {X.shape}")
    B, T, _ = X.shape
    d_h = params["W_hh"].shape[0]
    h = np.zeros((B, d_h), dtype=np.result_type(X, params["W_hh"]))
    states = []
    for t in range(T):
        h = step(X[:, t], h, params)
        states.append(h)
    H = np.stack(states, axis=1) if states else np.zeros((B, 0, d_h), dtype=h.dtype)
    return H, h


def decode_step(y_prev, s_prev, context, params, cell="rnn"):
    """One decoder step: the cell reads ``[y_prev ; context]`` and updates ``s_prev``.

    ``y_prev (B, d_emb)`` is the embedding of the previous output token,
    ``s_prev (B, d_h)`` the decoder state and ``context (B, d_c)`` the fixed
    context vector, fed at every step. The cell's input size is
    ``d_emb + d_c``. Returns ``s_t (B, d_h)``.
    """
    return cell_function(cell)(np.concatenate([y_prev, context], axis=-1), s_prev, params)


def greedy_decode(X, params, bos_id, eos_id, max_len, cell="rnn"):
    """Translate ``X (B, T, d_in)`` by always taking the most likely next token.

    Params: ``encoder`` and ``decoder`` (cell params), ``embedding (V, d_emb)``,
    ``W_out (d_h, V)``, ``b_out (V,)``. The context is ``c = h_T``, the first
    decoder state ``s_0 = c`` and the first input the embedding of ``bos_id``;
    then ``s_t = decode_step(emb(y_{t-1}), s_{t-1}, c)`` and
    ``y_t = argmax(s_t W_out + b_out)``.

    Returns an int array ``(B, L)`` with ``L ≤ max_len``, without BOS. Decoding
    stops once every row has produced ``eos_id``; a row that has produced it
    keeps producing it, so ``eos_id`` also pads the finished rows.
    """
    if max_len < 0:
        raise ValueError(f"max_len must be non-negative, got {max_len}")
    embedding = params["embedding"]
    _, context = encode(X, params["encoder"], cell)
    if context.shape[-1] != params["decoder"]["W_hh"].shape[0]:
        raise ValueError(
            f"the decoder state must have the size of the context: h_T {context.shape}, "
            f"decoder W_hh {params['decoder']['W_hh'].shape}")
    B = context.shape[0]
    state = context
    previous = np.full(B, bos_id)
    finished = np.zeros(B, dtype=bool)
    tokens = []
    for _ in range(max_len):
        state = decode_step(embedding[previous], state, context, params["decoder"], cell)
        logits = state @ params["W_out"] + params["b_out"]  # (B, V)
        previous = np.where(finished, eos_id, np.argmax(logits, axis=-1))
        tokens.append(previous)
        finished |= previous == eos_id
        if finished.all():
            break
    return np.stack(tokens, axis=1) if tokens else np.zeros((B, 0), dtype=int)


def cell_function(name):
    """The cell that a ``cell`` argument names: ``rnn_cell`` for "rnn", ``gru_cell`` for "gru"."""
    if name not in CELLS:
        raise ValueError(f"cell must be one of {CELLS}, got {name!r}")
    return rnn_cell if name == "rnn" else gru_cell


def _check_step(x_t, h_prev, params, kind):
    x_t, h_prev = np.asarray(x_t), np.asarray(h_prev)
    if x_t.ndim != 2 or h_prev.ndim != 2 or x_t.shape[0] != h_prev.shape[0]:
        raise ValueError(
            f"x_t must be (B, d_in) and h_prev (B, d_h) with the same B, "
            f"got x_t {x_t.shape} and h_prev {h_prev.shape}")
    gates = "h" if kind == "rnn" else "zrh"
    for gate in gates:
        W_x, W_h = params[f"W_x{gate}"], params[f"W_h{gate}"]
        if W_x.shape[0] != x_t.shape[1] or W_h.shape != (h_prev.shape[1],) * 2:
            raise ValueError(
                f"{kind} cell: x_t {x_t.shape} and h_prev {h_prev.shape} need "
                f"W_x{gate} (d_in={x_t.shape[1]}, d_h) and W_h{gate} (d_h, d_h) with "
                f"d_h={h_prev.shape[1]}, got W_x{gate} {W_x.shape} and W_h{gate} {W_h.shape}")
