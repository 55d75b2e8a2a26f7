"""Global and local attention (Luong, Pham and Manning 2015).

``h_t (B, d)`` is the decoder's *current* state, ``H_s (B, S, d)`` the source
states. Three ways to score them, a softmax over the source, and the
attentional state ``h̃_t = tanh([c_t ; h_t] W_c)`` from which the next word is
predicted.
"""

import numpy as np

from .rnn_encoder_decoder import sigmoid
from .scaled_dot_product import masked_softmax

SCORES = ("dot", "general", "concat")


def dot_score(h_t, H_s):
    """``score(h_t, h_s) = h_t · h_s`` for every position: ``(B, S)``."""
    h_t, H_s = _check_states(h_t, H_s)
    return np.einsum("bd,bsd->bs", h_t, H_s)


def general_score(h_t, H_s, W_a):
    """``score(h_t, h_s) = (h_t W_a) · h_s``, ``W_a (d, d)``: ``(B, S)``."""
    h_t, H_s = _check_states(h_t, H_s)
    d = h_t.shape[1]
    if W_a.shape != (d, d):
        raise ValueError(f"W_a must be (d, d) = {(d, d)}, got {W_a.shape}")
    return np.einsum("bd,bsd->bs", h_t @ W_a, H_s)


def concat_score(h_t, H_s, W_a, v_a):
    """``score(h_t, h_s) = v_a · tanh([h_t ; h_s] W_a)``: ``(B, S)``.

    ``W_a (2d, d_a)``, ``v_a (d_a,)``. ``[h_t ; h_s] W_a`` splits into
    ``h_t W_top + h_s W_bottom``: the decoder half is computed once, not once
    per source position.
    """
    h_t, H_s = _check_states(h_t, H_s)
    d = h_t.shape[1]
    if W_a.shape[0] != 2 * d or v_a.shape != (W_a.shape[1],):
        raise ValueError(f"W_a must be (2d={2 * d}, d_a) and v_a (d_a,), "
                         f"got {W_a.shape} and {v_a.shape}")
    hidden = np.tanh((h_t @ W_a[:d])[:, None, :] + H_s @ W_a[d:])  # (B, S, d_a)
    return hidden @ v_a


def luong_attention(h_t, H_s, params, score="general", mask=None):
    """Global attention: ``(h_tilde, context, weights)``.

    ``weights = softmax(score(h_t, H_s))`` over the ``S`` source positions,
    ``(B, S)``, with masked positions (``mask (B, S)`` False) excluded;
    ``context = Σ_s weights_s h_s``, ``(B, d)``;
    ``h_tilde = tanh([context ; h_t] W_c)``, ``W_c (2d, d)``, ``(B, d)``.
    ``score`` is ``"dot"``, ``"general"`` (param ``W_a``) or ``"concat"``
    (params ``W_a``, ``v_a``).
    """
    scores = _score(h_t, H_s, params, score)                      # (B, S)
    weights = masked_softmax(scores, mask, axis=-1)               # (B, S)
    context = np.einsum("bs,bsd->bd", weights, H_s)               # (B, d)
    h_tilde = np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"])
    return h_tilde, context, weights


def predictive_position(h_t, W_p, v_p, S):
    """Local-p's aligned position ``p_t = S · σ(tanh(h_t W_p) v_p)``, (B,).

    ``W_p (d, d_p)``, ``v_p (d_p,)``; ``p_t`` is real-valued, in ``[0, S]``.
    """
    return S * sigmoid(np.tanh(np.asarray(h_t) @ W_p) @ v_p)


def local_attention(h_t, H_s, p_t, D, params, score="general", gaussian=True):
    """Local attention around ``p_t``: ``(context, weights)``.

    The window is the positions ``s`` (0-based) with ``|s − p_t| ≤ D``. The
    alignment ``align`` is the softmax of the scores over the window only
    (0 outside). With ``gaussian=True`` (local-p, Luong et al. Eq. 10) the
    weights are ``align`` times a Gaussian centred on ``p_t``,
    ``exp(−(s − p_t)² / (2σ²))`` with ``σ = D / 2``, not renormalised (as in
    the paper); with ``gaussian=False`` the weights are ``align`` alone
    (Eq. 7). ``context = Σ_s weights_s h_s``, ``(B, d)``; weights ``(B, S)``.
    A window holding no source position gives all-zero weights and context.

    ``p_t`` is ``(B,)`` or a number broadcast to every row. ``D > 0``.
    Local-m, as the paper defines it, is ``p_t = t`` with ``gaussian=False``;
    local-p is ``p_t = predictive_position(...)`` with the Gaussian.
    """
    h_t, H_s = _check_states(h_t, H_s)
    if not D > 0:
        raise ValueError(f"the window half-width D must be positive, got {D}")
    B, S, _ = H_s.shape
    p_t = np.broadcast_to(np.asarray(p_t, dtype=float), (B,))
    distance = np.arange(S)[None, :] - p_t[:, None]                  # (B, S)
    window = np.abs(distance) <= D
    weights = masked_softmax(_score(h_t, H_s, params, score), window, axis=-1)
    if gaussian:
        sigma = D / 2
        weights = weights * np.exp(-distance ** 2 / (2 * sigma ** 2))  # (B, S)
    context = np.einsum("bs,bsd->bd", weights, H_s)
    return context, weights


def _score(h_t, H_s, params, score):
    if score == "dot":
        return dot_score(h_t, H_s)
    if score == "general":
        return general_score(h_t, H_s, params["W_a"])
    if score == "concat":
        return concat_score(h_t, H_s, params["W_a"], params["v_a"])
    raise ValueError(f"score must be one of {SCORES}, got {score!r}")


def _check_states(h_t, H_s):
    h_t, H_s = np.asarray(h_t), np.asarray(H_s)
    if (h_t.ndim != 2 or H_s.ndim != 3 or h_t.shape[0] != H_s.shape[0]
            or h_t.shape[1] != H_s.shape[2]):
        raise ValueError(f"h_t must be (B, d) and H_s (B, S, d), "
                         f"got {h_t.shape} and {H_s.shape}")
    return h_t, H_s

