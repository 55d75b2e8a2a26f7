"""What students write for the positional encoding exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (loops over positions and pairs on Python floats, 2 × 2 blocks
placed one by one, complex numbers for the rotations): the hidden checks must accept
them. `MISTAKES` holds plausible wrong implementations, each of one task: the
hidden checks must reject every one, and say why. Each function is
self-contained, so that its source can be put into a notebook's solution cell
as a student would write it there (`add_positional_encoding` may call
`sinusoidal_encoding`, which the notebook defines).
"""

import numpy as np

# -- correct, by other means -------------------------------------------------


def sinusoidal_encoding(num_positions, d_model):
    # two loops, one number at a time
    if d_model % 2 != 0:
        raise ValueError("d_model must be even")
    PE = np.zeros((num_positions, d_model))
    for pos in range(num_positions):
        for i in range(d_model // 2):
            angle = pos / 10000.0 ** (2 * i / d_model)
            PE[pos, 2 * i] = float(np.sin(angle))
            PE[pos, 2 * i + 1] = float(np.cos(angle))
    return PE


def relative_position_matrix(k, d_model):
    # place one 2 × 2 block per pair; row vectors, so PE[p + k] = PE[p] @ M
    M = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        w = 1.0 / 10000 ** (2 * i / d_model)
        c, s = np.cos(k * w), np.sin(k * w)
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    return M


def add_positional_encoding(X):
    # add the encoding explicitly to each sequence of the flattened batch
    T, d_model = X.shape[-2], X.shape[-1]
    PE = sinusoidal_encoding(T, d_model)
    sequences = X.reshape(-1, T, d_model)
    out = np.stack([sequence + PE for sequence in sequences])
    return out.reshape(X.shape)


def rotary_embedding(X, positions=None):
    # each pair (x[2i], x[2i+1]) as a complex number, turned by e^(i p θ_i)
    T, d = X.shape[-2], X.shape[-1]
    if positions is None:
        positions = np.arange(T)
    theta = np.exp(-np.log(10000.0) * np.arange(0, d, 2) / d)
    z = X[..., 0::2] + 1j * X[..., 1::2]
    z = z * np.exp(1j * np.multiply.outer(np.asarray(positions), theta))
    out = np.stack([z.real, z.imag], axis=-1)  # (..., T, d/2, 2)
    return out.reshape(z.shape[:-1] + (d,))


CORRECT = {f.__name__: f for f in (sinusoidal_encoding, relative_position_matrix,
                                   add_positional_encoding, rotary_embedding)}


# -- mistakes ------------------------------------------------------------------


def pe_sin_cos_swapped(num_positions, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(num_positions)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    PE = np.zeros((num_positions, d_model))
    PE[:, 0::2] = np.cos(angles)
    PE[:, 1::2] = np.sin(angles)
    return PE


def pe_halves_concatenated(num_positions, d_model):
    # the layout of some libraries: all the sines, then all the cosines
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(num_positions)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def pe_cosine_exponent_2i_plus_1(num_positions, d_model):
    # the feature index j in the exponent: (2i+1)/d_model for the cosine
    if d_model % 2:
        raise ValueError("d_model must be even")
    PE = np.zeros((num_positions, d_model))
    for pos in range(num_positions):
        for j in range(d_model):
            angle = pos / 10000 ** (j / d_model)
            PE[pos, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return PE


def pe_exponent_i_over_d(num_positions, d_model):
    # the pair index i, but without the factor 2
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(num_positions)[:, None] / 10000 ** (np.arange(d_model // 2) / d_model)
    PE = np.zeros((num_positions, d_model))
    PE[:, 0::2] = np.sin(angles)
    PE[:, 1::2] = np.cos(angles)
    return PE


def pe_exponent_2i_plus_1_both(num_positions, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(num_positions)[:, None] / 10000 ** (
        (2 * np.arange(d_model // 2) + 1) / d_model)
    PE = np.zeros((num_positions, d_model))
    PE[:, 0::2] = np.sin(angles)
    PE[:, 1::2] = np.cos(angles)
    return PE


def pe_positions_from_1(num_positions, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(1, num_positions + 1)[:, None] / 10000 ** (
        np.arange(0, d_model, 2) / d_model)
    PE = np.zeros((num_positions, d_model))
    PE[:, 0::2] = np.sin(angles)
    PE[:, 1::2] = np.cos(angles)
    return PE


def pe_odd_d_model_accepted(num_positions, d_model):
    # right for an even d_model, but an odd one silently gets a lone sine
    PE = np.zeros((num_positions, d_model))
    for j in range(d_model):
        angle = np.arange(num_positions) / 10000 ** ((j - j % 2) / d_model)
        PE[:, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return PE


def pe_relative_transposed(k, d_model):
    # the column-vector rotation [[cos, -sin], [sin, cos]] acting on (sin, cos) as a column
    M = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        a = k / 10000 ** (2 * i / d_model)
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(a), np.sin(a)], [-np.sin(a), np.cos(a)]]
    return M


def pe_relative_minus_k(k, d_model):
    # the right layout, but the angle of −k
    M = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        a = -k / 10000 ** (2 * i / d_model)
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return M


def pe_relative_split_half(k, d_model):
    # blocks on the pairs (i, i + d/2), as for a concatenated encoding
    M = np.zeros((d_model, d_model))
    h = d_model // 2
    for i in range(h):
        a = k / 10000 ** (2 * i / d_model)
        M[i, i], M[i, i + h] = np.cos(a), -np.sin(a)
        M[i + h, i], M[i + h, i + h] = np.sin(a), np.cos(a)
    return M


def pe_add_first_axis_as_length(X):
    return X + sinusoidal_encoding(len(X), X.shape[-1])


def pe_add_fixed_length(X):
    # an encoding of the maximum length, never cut to T
    return X + sinusoidal_encoding(64, X.shape[-1])


def pe_add_from_position_1(X):
    T, d_model = X.shape[-2:]
    return X + sinusoidal_encoding(T + 1, d_model)[1:]


def pe_add_positions_run_on(X):
    # flattening the batch numbers the tokens of all sequences in a row
    T, d_model = X.shape[-2:]
    flat = X.reshape(-1, d_model)
    return (flat + sinusoidal_encoding(len(flat), d_model)).reshape(X.shape)


def pe_add_loop_assumes_batch(X):
    out = np.empty_like(X)
    for b in range(X.shape[0]):
        out[b] = X[b] + sinusoidal_encoding(X.shape[1], X.shape[2])
    return out


def pe_add_in_place(X):
    X += sinusoidal_encoding(*X.shape[-2:])
    return X


def pe_add_encoding_alone(X):
    return np.broadcast_to(sinusoidal_encoding(*X.shape[-2:]), X.shape).copy()


def rope_direction_swapped(X, positions=None):
    T, d = X.shape[-2:]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    a = positions[..., None] / 10000 ** (np.arange(0, d, 2) / d)
    out = np.empty(X.shape)
    out[..., 0::2] = X[..., 0::2] * np.cos(a) + X[..., 1::2] * np.sin(a)
    out[..., 1::2] = -X[..., 0::2] * np.sin(a) + X[..., 1::2] * np.cos(a)
    return out


def rope_split_half(X, positions=None):
    # the GPT-NeoX layout: rotate_half pairs feature i with feature i + d/2
    T, d = X.shape[-2:]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    a = positions[..., None] / 10000 ** (np.arange(0, d, 2) / d)
    cos = np.concatenate([np.cos(a), np.cos(a)], axis=-1)
    sin = np.concatenate([np.sin(a), np.sin(a)], axis=-1)
    x1, x2 = X[..., :d // 2], X[..., d // 2:]
    rotated_half = np.concatenate([-x2, x1], axis=-1)
    return X * cos + rotated_half * sin


def rope_positions_ignored(X, positions=None):
    T, d = X.shape[-2:]
    a = np.arange(T)[:, None] / 10000 ** (np.arange(0, d, 2) / d)
    out = np.empty(X.shape)
    out[..., 0::2] = X[..., 0::2] * np.cos(a) - X[..., 1::2] * np.sin(a)
    out[..., 1::2] = X[..., 0::2] * np.sin(a) + X[..., 1::2] * np.cos(a)
    return out


def rope_positions_from_1(X, positions=None):
    T, d = X.shape[-2:]
    positions = np.arange(1, T + 1) if positions is None else np.asarray(positions)
    a = positions[..., None] / 10000 ** (np.arange(0, d, 2) / d)
    out = np.empty(X.shape)
    out[..., 0::2] = X[..., 0::2] * np.cos(a) - X[..., 1::2] * np.sin(a)
    out[..., 1::2] = X[..., 0::2] * np.sin(a) + X[..., 1::2] * np.cos(a)
    return out


def rope_exponent_i_over_d(X, positions=None):
    T, d = X.shape[-2:]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    a = positions[..., None] / 10000 ** (np.arange(d // 2) / d)
    out = np.empty(X.shape)
    out[..., 0::2] = X[..., 0::2] * np.cos(a) - X[..., 1::2] * np.sin(a)
    out[..., 1::2] = X[..., 0::2] * np.sin(a) + X[..., 1::2] * np.cos(a)
    return out


def rope_adds_encoding(X, positions=None):
    T, d = X.shape[-2:]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    a = positions[..., None] / 10000 ** (np.arange(0, d, 2) / d)
    PE = np.empty(a.shape[:-1] + (d,))
    PE[..., 0::2], PE[..., 1::2] = np.sin(a), np.cos(a)
    return X + PE


def rope_sin_cos_mixed_up(X, positions=None):
    # out[2i] = x[2i] sin a − x[2i+1] cos a: a rotation, but by π/2 − a
    T, d = X.shape[-2:]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    a = positions[..., None] / 10000 ** (np.arange(0, d, 2) / d)
    out = np.empty(X.shape)
    out[..., 0::2] = X[..., 0::2] * np.sin(a) - X[..., 1::2] * np.cos(a)
    out[..., 1::2] = X[..., 0::2] * np.cos(a) + X[..., 1::2] * np.sin(a)
    return out


def rope_cosines_only(X, positions=None):
    # scales each feature by cos a instead of turning the pair
    T, d = X.shape[-2:]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    a = positions[..., None] / 10000 ** (np.arange(0, d, 2) / d)
    return X * np.repeat(np.cos(a), 2, axis=-1)


def rope_positions_flattened(X, positions=None):
    # np.outer flattens positions of shape (B, T): fine for (T,), wrong for (B, T)
    T, d = X.shape[-2:]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    a = np.outer(positions, 1 / 10000 ** (np.arange(0, d, 2) / d))
    out = np.empty(X.shape)
    out[..., 0::2] = X[..., 0::2] * np.cos(a) - X[..., 1::2] * np.sin(a)
    out[..., 1::2] = X[..., 0::2] * np.sin(a) + X[..., 1::2] * np.cos(a)
    return out


# task -> the hidden checks (in autograder/checks/positional_encoding.py) that grade it
CHECKS_OF_TASK = {
    "sinusoidal_encoding": ["check_sinusoidal_encoding"],
    "relative_position_matrix": ["check_relative_position_matrix"],
    "add_positional_encoding": ["check_add_positional_encoding"],
    "rotary_embedding": ["check_rotary_embedding", "check_rotary_positions"],
}

# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "pe-sin-cos-swapped": ("sinusoidal_encoding", pe_sin_cos_swapped,
                           "check_sinusoidal_encoding", "sine and the cosine are swapped"),
    "pe-halves-concatenated": ("sinusoidal_encoding", pe_halves_concatenated,
                               "check_sinusoidal_encoding", "concatenated in two halves"),
    "pe-cosine-exponent-2i-plus-1": ("sinusoidal_encoding", pe_cosine_exponent_2i_plus_1,
                                     "check_sinusoidal_encoding",
                                     "the cosine uses the exponent (2i+1)/d_model"),
    "pe-exponent-i-over-d": ("sinusoidal_encoding", pe_exponent_i_over_d,
                             "check_sinusoidal_encoding", "cosine use the exponent i/d_model"),
    "pe-exponent-2i-plus-1-both": ("sinusoidal_encoding", pe_exponent_2i_plus_1_both,
                                   "check_sinusoidal_encoding",
                                   "cosine use the exponent (2i+1)/d_model"),
    "pe-positions-from-1": ("sinusoidal_encoding", pe_positions_from_1,
                            "check_sinusoidal_encoding", "positions start at 0, not 1"),
    "pe-odd-d-model-accepted": ("sinusoidal_encoding", pe_odd_d_model_accepted,
                                "check_sinusoidal_encoding", "should raise ValueError"),
    "pe-relative-transposed": ("relative_position_matrix", pe_relative_transposed,
                               "check_relative_position_matrix", "column-vector convention"),
    "pe-relative-minus-k": ("relative_position_matrix", pe_relative_minus_k,
                            "check_relative_position_matrix", "matrix for −k"),
    "pe-relative-split-half": ("relative_position_matrix", pe_relative_split_half,
                               "check_relative_position_matrix", "(2i, 2i+1)"),
    "pe-add-first-axis-as-length": ("add_positional_encoding", pe_add_first_axis_as_length,
                                    "check_add_positional_encoding", "X.shape[-2:]"),
    "pe-add-fixed-length": ("add_positional_encoding", pe_add_fixed_length,
                            "check_add_positional_encoding", "X.shape[-2:]"),
    "pe-add-from-position-1": ("add_positional_encoding", pe_add_from_position_1,
                               "check_add_positional_encoding", "gets PE[0]"),
    "pe-add-positions-run-on": ("add_positional_encoding", pe_add_positions_run_on,
                                "check_add_positional_encoding", "run on"),
    "pe-add-loop-assumes-batch": ("add_positional_encoding", pe_add_loop_assumes_batch,
                                  "check_add_positional_encoding", "leading axes"),
    "pe-add-in-place": ("add_positional_encoding", pe_add_in_place,
                        "check_add_positional_encoding", "modified its input"),
    "pe-add-encoding-alone": ("add_positional_encoding", pe_add_encoding_alone,
                              "check_add_positional_encoding", "encoding alone"),
    "rope-direction-swapped": ("rotary_embedding", rope_direction_swapped,
                               "check_rotary_embedding", "wrong way"),
    "rope-split-half": ("rotary_embedding", rope_split_half,
                        "check_rotary_embedding", "split-half"),
    "rope-positions-from-1": ("rotary_embedding", rope_positions_from_1,
                              "check_rotary_embedding", "positions start at 0"),
    "rope-exponent-i-over-d": ("rotary_embedding", rope_exponent_i_over_d,
                               "check_rotary_embedding", "10000^(−2i/d)"),
    "rope-adds-encoding": ("rotary_embedding", rope_adds_encoding,
                           "check_rotary_embedding", "adds the sinusoidal encoding"),
    "rope-sin-cos-mixed-up": ("rotary_embedding", rope_sin_cos_mixed_up,
                              "check_rotary_embedding", "by the angle p_t·θ_i"),
    "rope-cosines-only": ("rotary_embedding", rope_cosines_only,
                          "check_rotary_embedding", "keeps the length"),
    "rope-positions-ignored": ("rotary_embedding", rope_positions_ignored,
                               "check_rotary_positions", "positions argument is ignored"),
    "rope-positions-flattened": ("rotary_embedding", rope_positions_flattened,
                                 "check_rotary_positions", "shape (2, 5)"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["pe-sin-cos-swapped", "pe-halves-concatenated", "pe-relative-transposed",
                   "pe-add-positions-run-on", "rope-split-half", "rope-positions-ignored"]


# -- two mistakes at once ------------------------------------------------------------

def pe_swapped_from_1(num_positions, d_model):
    # cos in the even features AND positions counted from 1
    if d_model % 2 != 0:
        raise ValueError("d_model must be even")
    angles = np.arange(1, num_positions + 1)[:, None] / 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    PE = np.empty((num_positions, d_model))
    PE[:, 0::2], PE[:, 1::2] = np.cos(angles), np.sin(angles)
    return PE


def rope_clockwise_split_half(X, positions=None):
    # turns the wrong way AND pairs feature i with i + d/2
    T, d = X.shape[-2], X.shape[-1]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    angles = np.multiply.outer(positions, 10000.0 ** (-np.arange(0, d, 2) / d))
    first, second = X[..., : d // 2], X[..., d // 2:]
    cos, sin = np.cos(angles), np.sin(angles)
    return np.concatenate([first * cos + second * sin, second * cos - first * sin], axis=-1)


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "pe-swapped-and-from-1": ({"sinusoidal_encoding": pe_swapped_from_1}, "test_sinusoidal_encoding",
                              ("swapped", "positions start at 0", "start at 0")),
    "rope-clockwise-split-half": ({"rotary_embedding": rope_clockwise_split_half}, "test_rotary_embedding",
                                  ("wrong way", "pair", "d/2", "(2i, 2i+1)", "clockwise", "split-half")),
}
