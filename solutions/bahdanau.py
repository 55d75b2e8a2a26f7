"""Additive attention (Bahdanau, Cho and Bengio 2015).

The encoder is bidirectional, so that each annotation ``h_j`` summarises the
words around position ``j`` on both sides; at every step the decoder scores
all annotations with a small network of its previous state, and reads a
context vector of its own from them.
"""

import numpy as np

from .rnn_encoder_decoder import cell_function, encode
from .scaled_dot_product import masked_softmax  # noqa: F401 (part of this chapter's API)


def bidirectional_encode(X, params_fwd, params_bwd, cell="gru"):
    """Annotations of a bidirectional RNN: ``H (B, T, 2 d_h)``.

    Position ``j`` holds ``[h_fwd_j ; h_bwd_j]``: the forward RNN's state after
    reading ``x_0 … x_j`` and the backward RNN's state after reading
    ``x_{T-1} … x_j`` (it reads the sequence from the end; its states are put
    back in source order). ``X (B, T, d_in)``.

    All ``T`` positions are read: in a batch padded at the end, the backward
    RNN reads the padding before the real tokens. The attention mask keeps
    the decoder from attending to padding, not the encoder from reading it.
    """
    H_fwd, _ = encode(X, params_fwd, cell)
    H_bwd_reversed, _ = encode(np.asarray(X)[:, ::-1], params_bwd, cell)
    return np.concatenate([H_fwd, H_bwd_reversed[:, ::-1]], axis=-1)  # (B, T, 2 d_h)


def additive_score(s_prev, H, params):
    """Alignment scores ``e_j = v_a · tanh(s_prev W_a + h_j U_a)``, shape ``(B, T)``.

    ``s_prev (B, d_s)`` is the decoder's previous state, ``H (B, T, d_h)`` the
    annotations; params ``W_a (d_s, d_a)``, ``U_a (d_h, d_a)``, ``v_a (d_a,)``.
    ``H @ U_a`` does not depend on the decoder step and can be computed once.
    """
    s_prev, H = np.asarray(s_prev), np.asarray(H)
    W_a, U_a, v_a = params["W_a"], params["U_a"], params["v_a"]
    if s_prev.ndim != 2 or H.ndim != 3 or s_prev.shape[0] != H.shape[0]:
        raise ValueError(f"s_prev must be (B, d_s) and H (B, T, d_h), got {s_prev.shape} and {H.shape}")
    if W_a.shape[0] != s_prev.shape[1] or U_a.shape[0] != H.shape[2] or W_a.shape[1] != U_a.shape[1]:
        raise ValueError(
            f"s_prev {s_prev.shape} and H {H.shape} need W_a (d_s, d_a) and U_a (d_h, d_a), "
            f"got W_a {W_a.shape} and U_a {U_a.shape}")
    hidden = np.tanh((s_prev @ W_a)[:, None, :] + H @ U_a)  # (B, T, d_a)
    return hidden @ v_a                                     # (B, T)


def bahdanau_attention(s_prev, H, params, mask=None):
    """Context vector and weights of one decoder step.

    ``weights = masked_softmax(additive_score(s_prev, H, params), mask)``,
    shape ``(B, T)``; ``context = Σ_j weights_j h_j``, shape ``(B, d_h)``.
    ``mask (B, T)`` is ``True`` at real source tokens.
    """
    weights = masked_softmax(additive_score(s_prev, H, params), mask, axis=-1)  # (B, T)
    context = np.einsum("bt,btd->bd", weights, H)                               # (B, d_h)
    return context, weights


def bahdanau_decode_step(y_prev, s_prev, H, params, mask=None, cell="gru"):
    """One step of the attentive decoder: ``(s_t, context, weights)``.

    The context is computed from the *previous* state ``s_prev``, then the
    cell reads ``[y_prev ; context]``: ``s_t = cell([y_prev ; c_t], s_prev)``.
    Params ``attention`` (as in ``bahdanau_attention``) and ``cell``.
    """
    context, weights = bahdanau_attention(s_prev, H, params["attention"], mask)
    s_t = cell_function(cell)(np.concatenate([y_prev, context], axis=-1), s_prev, params["cell"])
    return s_t, context, weights
