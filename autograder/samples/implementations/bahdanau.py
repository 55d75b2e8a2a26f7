"""What students write for the Bahdanau attention exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (explicit loops over time, the concatenation form of the score, the
paper's separate matrices for the context, a finite fill value): the hidden
checks must accept them. `MISTAKES` holds plausible wrong implementations,
each of one task: the hidden checks must reject every one, and say why.

Each function is self-contained, so that its source can be put into a
notebook's solution cell as a student would write it there. It may call the
other tasks' functions and the notebook's given cell (`rnn_cell`,
`gru_cell`, `cell_function`, `encode`), imported here under the same names.
"""

import numpy as np

from solutions.rnn_encoder_decoder import cell_function, encode, gru_cell, rnn_cell  # noqa: F401

# -- correct, by other means -------------------------------------------------


def bidirectional_encode(X, params_fwd, params_bwd, cell="gru"):
    # both RNNs stepped by hand; the backward one fills the array from the end
    step = cell_function(cell)
    B, T, _ = X.shape
    d_h = params_fwd["W_hh"].shape[0]
    H = np.empty((B, T, 2 * d_h))
    h = np.zeros((B, d_h))
    for t in range(T):
        h = step(X[:, t, :], h, params_fwd)
        H[:, t, :d_h] = h
    h = np.zeros((B, d_h))
    for t in range(T - 1, -1, -1):
        h = step(X[:, t, :], h, params_bwd)
        H[:, t, d_h:] = h
    return H


def additive_score(s_prev, H, params):
    # the concatenation form: tanh([s_prev ; h_j] @ [[W_a], [U_a]]) · v_a
    B, T, _ = H.shape
    W = np.vstack([params["W_a"], params["U_a"]])
    states = np.repeat(s_prev[:, None, :], T, axis=1)       # (B, T, d_s)
    pairs = np.concatenate([states, H], axis=-1)            # (B, T, d_s + d_h)
    return np.einsum("bta,a->bt", np.tanh(pairs @ W), params["v_a"])


def masked_softmax(scores, mask=None, axis=-1):
    # a finite fill value, and an explicit zero for empty rows
    scores = np.asarray(scores, dtype=float)
    if mask is None:
        mask = np.ones(scores.shape, dtype=bool)
    mask = np.broadcast_to(mask, scores.shape)
    filled = np.where(mask, scores, np.finfo(float).min)
    e = np.exp(filled - filled.max(axis=axis, keepdims=True)) * mask
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def bahdanau_attention(s_prev, H, params, mask=None):
    # a loop over the batch for the weighted sum
    weights = masked_softmax(additive_score(s_prev, H, params), mask)
    context = np.stack([w @ h for w, h in zip(weights, H)])
    return context, weights


def bahdanau_decode_step(y_prev, s_prev, H, params, mask=None, cell="gru"):
    # the paper's form: separate matrices for y_prev and for the context
    context, weights = bahdanau_attention(s_prev, H, params["attention"], mask)
    p, d_y = params["cell"], y_prev.shape[-1]

    def inputs(gate):
        W = p[f"W_x{gate}"]
        return y_prev @ W[:d_y] + context @ W[d_y:]

    if cell == "rnn":
        s_t = np.tanh(inputs("h") + s_prev @ p["W_hh"] + p["b_h"])
    else:
        z = 1 / (1 + np.exp(-(inputs("z") + s_prev @ p["W_hz"] + p["b_z"])))
        r = 1 / (1 + np.exp(-(inputs("r") + s_prev @ p["W_hr"] + p["b_r"])))
        candidate = np.tanh(inputs("h") + (r * s_prev) @ p["W_hh"] + p["b_h"])
        s_t = z * s_prev + (1 - z) * candidate
    return s_t, context, weights


CORRECT = {f.__name__: f for f in (bidirectional_encode, additive_score, masked_softmax,
                                   bahdanau_attention, bahdanau_decode_step)}


# -- mistakes: bidirectional_encode -------------------------------------------------


def bidirectional_backward_not_flipped_back(X, params_fwd, params_bwd, cell="gru"):
    H_fwd, _ = encode(X, params_fwd, cell)
    H_bwd, _ = encode(X[:, ::-1], params_bwd, cell)  # still in reading order
    return np.concatenate([H_fwd, H_bwd], axis=-1)


def bidirectional_halves_swapped(X, params_fwd, params_bwd, cell="gru"):
    H_fwd, _ = encode(X, params_fwd, cell)
    H_bwd, _ = encode(X[:, ::-1], params_bwd, cell)
    return np.concatenate([H_bwd[:, ::-1], H_fwd], axis=-1)


def bidirectional_backward_reads_forward(X, params_fwd, params_bwd, cell="gru"):
    H_fwd, _ = encode(X, params_fwd, cell)
    H_bwd, _ = encode(X, params_bwd, cell)  # reads x_0 first, like the forward RNN
    return np.concatenate([H_fwd, H_bwd], axis=-1)


def bidirectional_reverses_batch_axis(X, params_fwd, params_bwd, cell="gru"):
    H_fwd, _ = encode(X, params_fwd, cell)
    H_bwd, _ = encode(X[::-1], params_bwd, cell)  # flips the batch, not the time axis
    return np.concatenate([H_fwd, H_bwd[::-1]], axis=-1)


def bidirectional_forward_params_twice(X, params_fwd, params_bwd, cell="gru"):
    H_fwd, _ = encode(X, params_fwd, cell)
    H_bwd, _ = encode(X[:, ::-1], params_fwd, cell)
    return np.concatenate([H_fwd, H_bwd[:, ::-1]], axis=-1)


def bidirectional_cell_not_passed(X, params_fwd, params_bwd, cell="gru"):
    H_fwd, _ = encode(X, params_fwd)  # encode's default cell is "rnn"
    H_bwd, _ = encode(X[:, ::-1], params_bwd)
    return np.concatenate([H_fwd, H_bwd[:, ::-1]], axis=-1)


def bidirectional_concatenated_over_time(X, params_fwd, params_bwd, cell="gru"):
    H_fwd, _ = encode(X, params_fwd, cell)
    H_bwd, _ = encode(X[:, ::-1], params_bwd, cell)
    return np.concatenate([H_fwd, H_bwd[:, ::-1]], axis=1)


# -- mistakes: additive_score ---------------------------------------------------------


def score_W_and_U_swapped(s_prev, H, params):
    hidden = np.tanh((s_prev @ params["U_a"])[:, None, :] + H @ params["W_a"])
    return hidden @ params["v_a"]


def score_without_tanh(s_prev, H, params):
    hidden = (s_prev @ params["W_a"])[:, None, :] + H @ params["U_a"]
    return hidden @ params["v_a"]


def score_without_v_a(s_prev, H, params):
    hidden = np.tanh((s_prev @ params["W_a"])[:, None, :] + H @ params["U_a"])
    return hidden.sum(axis=-1)


def score_tanh_of_each_term(s_prev, H, params):
    hidden = np.tanh(s_prev @ params["W_a"])[:, None, :] + np.tanh(H @ params["U_a"])
    return hidden @ params["v_a"]


def score_state_not_broadcast(s_prev, H, params):
    hidden = np.tanh(s_prev @ params["W_a"] + H @ params["U_a"])  # no time axis for s_prev
    return hidden @ params["v_a"]


# -- mistakes: masked_softmax ---------------------------------------------------------


def softmax_mask_ignored(scores, mask=None, axis=-1):
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_mask_inverted(scores, mask=None, axis=-1):
    if mask is not None:
        scores = np.where(mask, -1e9, scores)  # True taken as "masked"
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_uniform_when_all_masked(scores, mask=None, axis=-1):
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_nan_when_all_masked(scores, mask=None, axis=-1):
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_mask_after(scores, mask=None, axis=-1):
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    weights = e / e.sum(axis=axis, keepdims=True)
    return weights if mask is None else weights * mask


def softmax_max_over_masked(scores, mask=None, axis=-1):
    # the maximum of every score, masked ones included, then the masked weights zeroed
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    if mask is not None:
        e = e * mask
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1, total)


def softmax_ignores_axis(scores, mask=None, axis=-1):
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total == 0, 1, total)


def softmax_unstable(scores, mask=None, axis=-1):
    e = np.exp(scores)
    if mask is not None:
        e = np.where(mask, e, 0.0)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1, total)


# -- mistakes: bahdanau_attention -----------------------------------------------------


def attention_softmax_over_batch(s_prev, H, params, mask=None):
    weights = masked_softmax(additive_score(s_prev, H, params), mask, axis=0)
    return np.einsum("bt,btd->bd", weights, H), weights


def attention_mask_not_passed(s_prev, H, params, mask=None):
    weights = masked_softmax(additive_score(s_prev, H, params))
    return np.einsum("bt,btd->bd", weights, H), weights


def attention_unweighted_context(s_prev, H, params, mask=None):
    weights = masked_softmax(additive_score(s_prev, H, params), mask)
    return H.mean(axis=1), weights


def attention_returns_weights_first(s_prev, H, params, mask=None):
    weights = masked_softmax(additive_score(s_prev, H, params), mask)
    return weights, np.einsum("bt,btd->bd", weights, H)


# -- mistakes: bahdanau_decode_step ---------------------------------------------------


def step_context_from_new_state(y_prev, s_prev, H, params, mask=None, cell="gru"):
    # Luong's order: the state first (with no context yet), then attention from it
    no_context = np.zeros((y_prev.shape[0], H.shape[-1]))
    s_t = cell_function(cell)(np.concatenate([y_prev, no_context], axis=-1), s_prev, params["cell"])
    context, weights = bahdanau_attention(s_t, H, params["attention"], mask)
    return s_t, context, weights


def step_context_from_provisional_state(y_prev, s_prev, H, params, mask=None, cell="gru"):
    # a first pass guesses s_t with the mean annotation, then attends from the guess
    guess = cell_function(cell)(np.concatenate([y_prev, H.mean(axis=1)], axis=-1), s_prev, params["cell"])
    context, weights = bahdanau_attention(guess, H, params["attention"], mask)
    s_t = cell_function(cell)(np.concatenate([y_prev, context], axis=-1), s_prev, params["cell"])
    return s_t, context, weights


def step_context_first_in_input(y_prev, s_prev, H, params, mask=None, cell="gru"):
    context, weights = bahdanau_attention(s_prev, H, params["attention"], mask)
    s_t = cell_function(cell)(np.concatenate([context, y_prev], axis=-1), s_prev, params["cell"])
    return s_t, context, weights


def step_mask_not_passed(y_prev, s_prev, H, params, mask=None, cell="gru"):
    context, weights = bahdanau_attention(s_prev, H, params["attention"])
    s_t = cell_function(cell)(np.concatenate([y_prev, context], axis=-1), s_prev, params["cell"])
    return s_t, context, weights


def step_always_gru(y_prev, s_prev, H, params, mask=None, cell="gru"):
    context, weights = bahdanau_attention(s_prev, H, params["attention"], mask)
    s_t = gru_cell(np.concatenate([y_prev, context], axis=-1), s_prev, params["cell"])
    return s_t, context, weights


def step_default_cell_rnn(y_prev, s_prev, H, params, mask=None, cell="rnn"):
    context, weights = bahdanau_attention(s_prev, H, params["attention"], mask)
    s_t = cell_function(cell)(np.concatenate([y_prev, context], axis=-1), s_prev, params["cell"])
    return s_t, context, weights


def step_returns_context_first(y_prev, s_prev, H, params, mask=None, cell="gru"):
    context, weights = bahdanau_attention(s_prev, H, params["attention"], mask)
    s_t = cell_function(cell)(np.concatenate([y_prev, context], axis=-1), s_prev, params["cell"])
    return context, s_t, weights


# task -> the hidden checks (in autograder/checks/bahdanau.py) that grade it
CHECKS_OF_TASK = {
    "bidirectional_encode": ["check_bidirectional_encode"],
    "additive_score": ["check_additive_score"],
    "masked_softmax": ["check_masked_softmax"],
    "bahdanau_attention": ["check_bahdanau_attention"],
    "bahdanau_decode_step": ["check_bahdanau_decode_step"],
}

# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "bahdanau-backward-not-flipped-back": (
        "bidirectional_encode", bidirectional_backward_not_flipped_back,
        "check_bidirectional_encode", "still in reading order"),
    "bahdanau-halves-swapped": (
        "bidirectional_encode", bidirectional_halves_swapped,
        "check_bidirectional_encode", "the halves are in the wrong order"),
    "bahdanau-backward-reads-forward": (
        "bidirectional_encode", bidirectional_backward_reads_forward,
        "check_bidirectional_encode", "read each sequence from its end"),
    "bahdanau-backward-reverses-batch": (
        "bidirectional_encode", bidirectional_reverses_batch_axis,
        "check_bidirectional_encode", "the time axis"),
    "bahdanau-forward-params-twice": (
        "bidirectional_encode", bidirectional_forward_params_twice,
        "check_bidirectional_encode", "params_bwd for the backward RNN"),
    "bahdanau-encode-cell-not-passed": (
        "bidirectional_encode", bidirectional_cell_not_passed,
        "check_bidirectional_encode", "pass cell on to encode"),
    "bahdanau-halves-concatenated-over-time": (
        "bidirectional_encode", bidirectional_concatenated_over_time,
        "check_bidirectional_encode", "not along the time axis"),
    "bahdanau-score-W-U-swapped": (
        "additive_score", score_W_and_U_swapped, "check_additive_score",
        "not the other way round"),
    "bahdanau-score-without-tanh": (
        "additive_score", score_without_tanh, "check_additive_score", "apply tanh"),
    "bahdanau-score-without-v_a": (
        "additive_score", score_without_v_a, "check_additive_score", "with v_a, not its sum"),
    "bahdanau-score-tanh-of-each-term": (
        "additive_score", score_tanh_of_each_term, "check_additive_score", "not to each term"),
    "bahdanau-score-state-not-broadcast": (
        "additive_score", score_state_not_broadcast, "check_additive_score",
        "insert the time axis"),
    "bahdanau-softmax-mask-ignored": (
        "masked_softmax", softmax_mask_ignored, "check_masked_softmax",
        "the mask is ignored"),
    "bahdanau-softmax-mask-inverted": (
        "masked_softmax", softmax_mask_inverted, "check_masked_softmax", "inverted"),
    "bahdanau-softmax-uniform-when-all-masked": (
        "masked_softmax", softmax_uniform_when_all_masked, "check_masked_softmax",
        "gets a uniform distribution"),
    "bahdanau-softmax-nan-when-all-masked": (
        "masked_softmax", softmax_nan_when_all_masked, "check_masked_softmax", "NaN"),
    "bahdanau-softmax-mask-after": (
        "masked_softmax", softmax_mask_after, "check_masked_softmax", "before the softmax"),
    "bahdanau-softmax-max-over-masked": (
        "masked_softmax", softmax_max_over_masked, "check_masked_softmax",
        "the maximum subtracted before exp"),
    "bahdanau-softmax-ignores-axis": (
        "masked_softmax", softmax_ignores_axis, "check_masked_softmax",
        "not along axis"),
    "bahdanau-softmax-unstable": (
        "masked_softmax", softmax_unstable, "check_masked_softmax", "even of about 1e4, is finite"),
    "bahdanau-attention-softmax-over-batch": (
        "bahdanau_attention", attention_softmax_over_batch, "check_bahdanau_attention",
        "along axis 0, not along axis -1"),
    "bahdanau-attention-mask-not-passed": (
        "bahdanau_attention", attention_mask_not_passed, "check_bahdanau_attention",
        "the mask is ignored"),
    "bahdanau-attention-unweighted-context": (
        "bahdanau_attention", attention_unweighted_context, "check_bahdanau_attention",
        "Σ_j weights_j h_j"),
    "bahdanau-attention-returns-weights-first": (
        "bahdanau_attention", attention_returns_weights_first, "check_bahdanau_attention",
        "in this order"),
    "bahdanau-step-context-from-new-state": (
        "bahdanau_decode_step", step_context_from_new_state, "check_bahdanau_decode_step",
        "from the previous state s_prev"),
    "bahdanau-step-context-from-provisional-state": (
        "bahdanau_decode_step", step_context_from_provisional_state,
        "check_bahdanau_decode_step", "from the previous state s_prev"),
    "bahdanau-step-context-first-in-input": (
        "bahdanau_decode_step", step_context_first_in_input, "check_bahdanau_decode_step",
        "y_prev first"),
    "bahdanau-step-mask-not-passed": (
        "bahdanau_decode_step", step_mask_not_passed, "check_bahdanau_decode_step",
        "pass the mask on"),
    "bahdanau-step-always-gru": (
        "bahdanau_decode_step", step_always_gru, "check_bahdanau_decode_step", "cell='rnn'"),
    "bahdanau-step-default-cell-rnn": (
        "bahdanau_decode_step", step_default_cell_rnn, "check_bahdanau_decode_step",
        "the default cell is 'gru'"),
    "bahdanau-step-returns-context-first": (
        "bahdanau_decode_step", step_returns_context_first, "check_bahdanau_decode_step",
        "in this order"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["bahdanau-backward-not-flipped-back", "bahdanau-score-W-U-swapped",
                   "bahdanau-softmax-uniform-when-all-masked",
                   "bahdanau-step-context-from-new-state"]


# -- two mistakes at once ------------------------------------------------------------

def additive_score_no_tanh_no_v_a(s_prev, H, params):
    # neither tanh nor v_a: the hidden units are summed
    hidden = (s_prev @ params["W_a"])[:, None, :] + H @ params["U_a"]
    return hidden.sum(axis=-1)


def masked_softmax_last_axis_uniform_rows(scores, mask=None, axis=-1):
    # the axis argument ignored AND a fully masked row left uniform (a -1e9 fill)
    scores = np.asarray(scores, dtype=float)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "score-no-tanh-no-v_a": ({"additive_score": additive_score_no_tanh_no_v_a}, "test_additive_score",
                             ("tanh", "v_a")),
    "softmax-axis-and-uniform-rows": ({"masked_softmax": masked_softmax_last_axis_uniform_rows},
                                      "test_masked_softmax", ("axis", "uniform", "all-zero", "zeros")),
}
