"""Where the tokens are: sinusoidal encodings (Vaswani et al. 2017, section 3.5)
and rotary position embeddings (RoPE, Su et al. 2021).

Both use the frequencies ``ω_i = 1 / 10000^(2i/d)`` for ``i = 0 … d/2 − 1``
and treat the features in neighbouring pairs ``(2i, 2i+1)``.
"""

import numpy as np

BASE = 10000.0


def frequencies(d_model):
    """``ω_i = 10000^(−2i/d_model)`` for ``i = 0 … d_model/2 − 1``: shape ``(d_model/2,)``."""
    _check_even(d_model)
    return BASE ** (-np.arange(0, d_model, 2) / d_model)


def sinusoidal_encoding(num_positions, d_model):
    """The paper's encoding ``PE (num_positions, d_model)``.

    ``PE[p, 2i] = sin(p ω_i)`` and ``PE[p, 2i+1] = cos(p ω_i)`` with
    ``ω_i = 1 / 10000^(2i/d_model)``: the sine and the cosine of a pair share
    the exponent ``2i/d_model``. Positions start at 0. Odd ``d_model`` raises
    ``ValueError``: the features come in (sin, cos) pairs.
    """
    if num_positions < 0:
        raise ValueError(f"num_positions must be non-negative, got {num_positions}")
    angles = np.arange(num_positions)[:, None] * frequencies(d_model)  # (P, d/2)
    PE = np.empty((num_positions, d_model))
    PE[:, 0::2] = np.sin(angles)
    PE[:, 1::2] = np.cos(angles)
    return PE


def relative_position_matrix(k, d_model):
    """The matrix ``M (d_model, d_model)`` with ``PE[p + k] = PE[p] @ M`` for every ``p``.

    Shifting by ``k`` turns each pair ``(sin a, cos a)``, ``a = p ω_i``, by the
    angle ``k ω_i``: ``sin(a + kω) = sin a cos kω + cos a sin kω`` and
    ``cos(a + kω) = cos a cos kω − sin a sin kω``. ``M`` is block diagonal
    with the 2 × 2 rotations ``[[cos kω_i, −sin kω_i], [sin kω_i, cos kω_i]]``
    (row-vector convention): it depends on ``k`` but not on ``p``.
    """
    angles = k * frequencies(d_model)
    M = np.zeros((d_model, d_model))
    even, odd = np.arange(0, d_model, 2), np.arange(1, d_model, 2)
    M[even, even] = np.cos(angles)
    M[even, odd] = -np.sin(angles)
    M[odd, even] = np.sin(angles)
    M[odd, odd] = np.cos(angles)
    return M


def add_positional_encoding(X):
    """``X + PE[:T]`` for ``X (..., T, d_model)``: the same encoding for every sequence."""
    X = np.asarray(X)
    if X.ndim < 2:
        raise ValueError(f"X must have shape (..., T, d_model), got {X.shape}")
    T, d_model = X.shape[-2:]
    return X + sinusoidal_encoding(T, d_model)


def rotary_embedding(X, positions=None):
    """RoPE: rotate each feature pair of ``X (..., T, d)`` by the angle ``p θ_i``.

    With ``θ_i = 10000^(−2i/d)`` and ``a = p θ_i`` for the token at position
    ``p``: ``out[2i] = x[2i] cos a − x[2i+1] sin a`` and
    ``out[2i+1] = x[2i] sin a + x[2i+1] cos a`` (neighbouring pairs, as in Su
    et al.; some libraries pair feature ``i`` with ``i + d/2`` instead).
    ``positions`` (broadcasting to ``(..., T)``) defaults to ``0 … T−1``.
    Applied to queries and keys, ``rotary(q)[m] · rotary(k)[n]`` depends on the
    positions only through ``m − n``.
    """
    X = np.asarray(X)
    if X.ndim < 2:
        raise ValueError(f"X must have shape (..., T, d), got {X.shape}")
    T, d = X.shape[-2:]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    try:
        positions = np.broadcast_to(positions, X.shape[:-1])
    except ValueError:
        raise ValueError(f"positions of shape {positions.shape} do not broadcast to "
                         f"X.shape[:-1] = {X.shape[:-1]}") from None
    angles = positions[..., None] * frequencies(d)  # (..., T, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    x_even, x_odd = X[..., 0::2], X[..., 1::2]
    out = np.empty(X.shape, dtype=np.result_type(X, float))
    out[..., 0::2] = x_even * cos - x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out


def _check_even(d_model):
    if d_model % 2:
        raise ValueError(f"d_model must be even (features come in sin/cos pairs), got {d_model}")
