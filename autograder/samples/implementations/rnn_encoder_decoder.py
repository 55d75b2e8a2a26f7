"""What students write for the RNN encoder-decoder exercise.

`CORRECT` holds correct implementations of every task written unlike the
reference (einsum, the sigmoid through tanh, preallocated arrays, a token
array filled with EOS in advance): the hidden checks must accept them.
`MISTAKES` holds plausible wrong implementations, each of one task: the
hidden checks must reject every one, and say why. Each function is
self-contained, so that its source can be put into a notebook's solution
cell as a student would write it there (it may call the other tasks'
functions by their names, `rnn_cell`, `gru_cell`, `encode`, `decode_step`,
which the notebook defines, and `np`).
"""

import numpy as np

# -- correct, by other means -------------------------------------------------


def rnn_cell(x_t, h_prev, params):
    # einsum instead of @
    pre = (np.einsum("bi,ih->bh", x_t, params["W_xh"])
           + np.einsum("bj,jh->bh", h_prev, params["W_hh"]) + params["b_h"])
    return np.tanh(pre)


def gru_cell(x_t, h_prev, params):
    # sigmoid(a) = (1 + tanh(a / 2)) / 2 never overflows; h̃ + z (h - h̃) is z h + (1 - z) h̃
    def gate(name):
        a = x_t @ params["W_x" + name] + h_prev @ params["W_h" + name] + params["b_" + name]
        return 0.5 * (1.0 + np.tanh(0.5 * a))

    z, r = gate("z"), gate("r")
    candidate = np.tanh(x_t @ params["W_xh"] + (r * h_prev) @ params["W_hh"] + params["b_h"])
    return candidate + z * (h_prev - candidate)


def encode(X, params, cell="rnn"):
    # a preallocated H, filled one time step at a time
    step = {"rnn": rnn_cell, "gru": gru_cell}[cell]
    B, T, _ = X.shape
    d_h = params["W_hh"].shape[1]
    H = np.empty((B, T, d_h))
    h = np.zeros((B, d_h))
    for t in range(T):
        h = step(X[:, t, :], h, params)
        H[:, t, :] = h
    return H, h


def decode_step(y_prev, s_prev, context, params, cell="rnn"):
    x = np.hstack((y_prev, context))
    if cell == "gru":
        return gru_cell(x, s_prev, params)
    return rnn_cell(x, s_prev, params)


def greedy_decode(X, params, bos_id, eos_id, max_len, cell="rnn"):
    # the output is filled with EOS in advance; only unfinished rows are written
    _, c = encode(X, params["encoder"], cell)
    B = X.shape[0]
    tokens = np.full((B, max_len), eos_id, dtype=np.int64)
    done = np.zeros(B, dtype=bool)
    s, previous = c, np.array([bos_id] * B)
    length = 0
    while length < max_len and not done.all():
        s = decode_step(params["embedding"][previous], s, c, params["decoder"], cell)
        best = (s @ params["W_out"] + params["b_out"]).argmax(axis=1)
        for b in range(B):
            if not done[b]:
                tokens[b, length] = best[b]
                done[b] = best[b] == eos_id
        previous = tokens[:, length]
        length += 1
    return tokens[:, :length]


CORRECT = {f.__name__: f for f in (rnn_cell, gru_cell, encode, decode_step, greedy_decode)}


# -- mistakes: rnn_cell ---------------------------------------------------------


def rnn_cell_no_bias(x_t, h_prev, params):
    return np.tanh(x_t @ params["W_xh"] + h_prev @ params["W_hh"])


def rnn_cell_no_tanh(x_t, h_prev, params):
    return x_t @ params["W_xh"] + h_prev @ params["W_hh"] + params["b_h"]


def rnn_cell_sigmoid(x_t, h_prev, params):
    return 1 / (1 + np.exp(-(x_t @ params["W_xh"] + h_prev @ params["W_hh"] + params["b_h"])))


def rnn_cell_transposed_recurrent_weights(x_t, h_prev, params):
    # column-vector habits: W_hh h, written as h @ W_hh.T
    return np.tanh(x_t @ params["W_xh"] + h_prev @ params["W_hh"].T + params["b_h"])


# -- mistakes: gru_cell ---------------------------------------------------------


def gru_gates_swapped(x_t, h_prev, params):
    # the convention of Chung et al. (2014) and of many tutorials, not Cho et al.'s
    p = params
    z = 1 / (1 + np.exp(-(x_t @ p["W_xz"] + h_prev @ p["W_hz"] + p["b_z"])))
    r = 1 / (1 + np.exp(-(x_t @ p["W_xr"] + h_prev @ p["W_hr"] + p["b_r"])))
    candidate = np.tanh(x_t @ p["W_xh"] + (r * h_prev) @ p["W_hh"] + p["b_h"])
    return (1 - z) * h_prev + z * candidate


def gru_reset_after_product(x_t, h_prev, params):
    # the cuDNN / PyTorch variant: r ⊙ (h W_hh)
    p = params
    z = 1 / (1 + np.exp(-(x_t @ p["W_xz"] + h_prev @ p["W_hz"] + p["b_z"])))
    r = 1 / (1 + np.exp(-(x_t @ p["W_xr"] + h_prev @ p["W_hr"] + p["b_r"])))
    candidate = np.tanh(x_t @ p["W_xh"] + r * (h_prev @ p["W_hh"]) + p["b_h"])
    return z * h_prev + (1 - z) * candidate


def gru_reset_ignored(x_t, h_prev, params):
    p = params
    z = 1 / (1 + np.exp(-(x_t @ p["W_xz"] + h_prev @ p["W_hz"] + p["b_z"])))
    candidate = np.tanh(x_t @ p["W_xh"] + h_prev @ p["W_hh"] + p["b_h"])
    return z * h_prev + (1 - z) * candidate


def gru_update_and_reset_swapped(x_t, h_prev, params):
    p = params
    r = 1 / (1 + np.exp(-(x_t @ p["W_xz"] + h_prev @ p["W_hz"] + p["b_z"])))
    z = 1 / (1 + np.exp(-(x_t @ p["W_xr"] + h_prev @ p["W_hr"] + p["b_r"])))
    candidate = np.tanh(x_t @ p["W_xh"] + (r * h_prev) @ p["W_hh"] + p["b_h"])
    return z * h_prev + (1 - z) * candidate


def gru_returns_candidate(x_t, h_prev, params):
    p = params
    r = 1 / (1 + np.exp(-(x_t @ p["W_xr"] + h_prev @ p["W_hr"] + p["b_r"])))
    return np.tanh(x_t @ p["W_xh"] + (r * h_prev) @ p["W_hh"] + p["b_h"])


def gru_no_candidate_bias(x_t, h_prev, params):
    p = params
    z = 1 / (1 + np.exp(-(x_t @ p["W_xz"] + h_prev @ p["W_hz"] + p["b_z"])))
    r = 1 / (1 + np.exp(-(x_t @ p["W_xr"] + h_prev @ p["W_hr"] + p["b_r"])))
    candidate = np.tanh(x_t @ p["W_xh"] + (r * h_prev) @ p["W_hh"])
    return z * h_prev + (1 - z) * candidate


def gru_no_biases(x_t, h_prev, params):
    p = params
    z = 1 / (1 + np.exp(-(x_t @ p["W_xz"] + h_prev @ p["W_hz"])))
    r = 1 / (1 + np.exp(-(x_t @ p["W_xr"] + h_prev @ p["W_hr"])))
    candidate = np.tanh(x_t @ p["W_xh"] + (r * h_prev) @ p["W_hh"])
    return z * h_prev + (1 - z) * candidate


def gru_no_tanh(x_t, h_prev, params):
    p = params
    z = 1 / (1 + np.exp(-(x_t @ p["W_xz"] + h_prev @ p["W_hz"] + p["b_z"])))
    r = 1 / (1 + np.exp(-(x_t @ p["W_xr"] + h_prev @ p["W_hr"] + p["b_r"])))
    candidate = x_t @ p["W_xh"] + (r * h_prev) @ p["W_hh"] + p["b_h"]
    return z * h_prev + (1 - z) * candidate


# -- mistakes: encode -------------------------------------------------------------


def encode_nonzero_initial_state(X, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    h = np.ones((X.shape[0], params["W_hh"].shape[0]))
    states = []
    for t in range(X.shape[1]):
        h = step(X[:, t], h, params)
        states.append(h)
    return np.stack(states, axis=1), h


def encode_returns_first_state(X, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    h = np.zeros((X.shape[0], params["W_hh"].shape[0]))
    states = []
    for t in range(X.shape[1]):
        h = step(X[:, t], h, params)
        states.append(h)
    H = np.stack(states, axis=1)
    return H, H[:, 0]


def encode_states_reversed(X, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    h = np.zeros((X.shape[0], params["W_hh"].shape[0]))
    states = []
    for t in range(X.shape[1]):
        h = step(X[:, t], h, params)
        states.insert(0, h)  # newest first
    return np.stack(states, axis=1), h


def encode_time_major(X, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    h = np.zeros((X.shape[0], params["W_hh"].shape[0]))
    states = []
    for t in range(X.shape[1]):
        h = step(X[:, t], h, params)
        states.append(h)
    return np.array(states), h  # (T, B, d_h)


def encode_includes_initial_state(X, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    h = np.zeros((X.shape[0], params["W_hh"].shape[0]))
    states = [h]
    for t in range(X.shape[1]):
        h = step(X[:, t], h, params)
        states.append(h)
    return np.stack(states, axis=1), h


def encode_ignores_cell(X, params, cell="rnn"):
    h = np.zeros((X.shape[0], params["W_hh"].shape[0]))
    states = []
    for t in range(X.shape[1]):
        h = rnn_cell(X[:, t], h, params)
        states.append(h)
    return np.stack(states, axis=1), h


def encode_reads_backwards(X, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    h = np.zeros((X.shape[0], params["W_hh"].shape[0]))
    states = []
    for t in reversed(range(X.shape[1])):
        h = step(X[:, t], h, params)
        states.append(h)
    return np.stack(states, axis=1), h


def encode_returns_h_T_first(X, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    h = np.zeros((X.shape[0], params["W_hh"].shape[0]))
    states = []
    for t in range(X.shape[1]):
        h = step(X[:, t], h, params)
        states.append(h)
    return h, np.stack(states, axis=1)


# -- mistakes: decode_step -----------------------------------------------------------


def decode_context_first(y_prev, s_prev, context, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    return step(np.concatenate([context, y_prev], axis=-1), s_prev, params)


def decode_ignores_cell(y_prev, s_prev, context, params, cell="rnn"):
    return rnn_cell(np.concatenate([y_prev, context], axis=-1), s_prev, params)


def decode_state_and_context_swapped(y_prev, s_prev, context, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    return step(np.concatenate([y_prev, s_prev], axis=-1), context, params)


# -- mistakes: greedy_decode ------------------------------------------------------------


def greedy_includes_bos(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = c, np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    tokens = [token]  # BOS first, as in the training targets
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        token = np.where(finished, eos_id, np.argmax(s @ params["W_out"] + params["b_out"], axis=-1))
        tokens.append(token)
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(tokens, axis=1)


def greedy_stops_at_first_row_eos(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = c, np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    tokens = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        token = np.where(finished, eos_id, np.argmax(s @ params["W_out"] + params["b_out"], axis=-1))
        tokens.append(token)
        finished |= token == eos_id
        if token[0] == eos_id:  # only looks at the first sentence
            break
    return np.stack(tokens, axis=1)


def greedy_stops_at_any_eos(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = c, np.full(X.shape[0], bos_id)
    tokens = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        token = np.argmax(s @ params["W_out"] + params["b_out"], axis=-1)
        tokens.append(token)
        if np.any(token == eos_id):
            break
    return np.stack(tokens, axis=1)


def greedy_no_eos_padding(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = c, np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    tokens = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        token = np.argmax(s @ params["W_out"] + params["b_out"], axis=-1)  # finished rows go on
        tokens.append(token)
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(tokens, axis=1)


def greedy_pads_with_zeros(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = c, np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    tokens = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        token = np.argmax(s @ params["W_out"] + params["b_out"], axis=-1)
        token = np.where(finished, 0, token)  # padding id 0 instead of EOS
        tokens.append(token)
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(tokens, axis=1)


def greedy_starts_from_zeros(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = np.zeros_like(c), np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    tokens = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        token = np.where(finished, eos_id, np.argmax(s @ params["W_out"] + params["b_out"], axis=-1))
        tokens.append(token)
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(tokens, axis=1)


def greedy_feeds_bos(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, bos = c, np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    tokens = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][bos], s, c, params["decoder"], cell)
        token = np.where(finished, eos_id, np.argmax(s @ params["W_out"] + params["b_out"], axis=-1))
        tokens.append(token)
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(tokens, axis=1)


def greedy_always_runs_max_len(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = c, np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    tokens = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        token = np.where(finished, eos_id, np.argmax(s @ params["W_out"] + params["b_out"], axis=-1))
        tokens.append(token)
        finished |= token == eos_id
    return np.stack(tokens, axis=1)


def greedy_returns_logits(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = c, np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    outputs = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        logits = s @ params["W_out"] + params["b_out"]
        outputs.append(logits)
        token = np.where(finished, eos_id, np.argmax(logits, axis=-1))
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(outputs, axis=1)  # (B, L, V)


def greedy_returns_probabilities(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    s, token = c, np.full(X.shape[0], bos_id)
    finished = np.zeros(X.shape[0], dtype=bool)
    outputs = []
    for _ in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        logits = s @ params["W_out"] + params["b_out"]
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        outputs.append(p.max(axis=-1))  # the probability of the chosen token
        token = np.where(finished, eos_id, np.argmax(logits, axis=-1))
        finished |= token == eos_id
        if finished.all():
            break
    return np.stack(outputs, axis=1)


def greedy_float_tokens(X, params, bos_id, eos_id, max_len, cell="rnn"):
    _, c = encode(X, params["encoder"], cell)
    B = X.shape[0]
    tokens = np.full((B, max_len), float(eos_id))  # a float array
    s, token = c, np.full(B, bos_id)
    finished = np.zeros(B, dtype=bool)
    for t in range(max_len):
        s = decode_step(params["embedding"][token], s, c, params["decoder"], cell)
        token = np.where(finished, eos_id, np.argmax(s @ params["W_out"] + params["b_out"], axis=-1))
        tokens[:, t] = token
        finished |= token == eos_id
        if finished.all():
            return tokens[:, :t + 1]
    return tokens


# task -> the hidden checks (in autograder/checks/rnn_encoder_decoder.py) that grade it
CHECKS_OF_TASK = {
    "rnn_cell": ["check_rnn_cell"],
    "gru_cell": ["check_gru_cell"],
    "encode": ["check_encode"],
    "decode_step": ["check_decode_step"],
    "greedy_decode": ["check_greedy_decode"],
}

# name -> (task it replaces, wrong implementation, check that must reject it,
#          words the check's message must contain)
MISTAKES = {
    "rnn-cell-no-bias": ("rnn_cell", rnn_cell_no_bias, "check_rnn_cell", "bias b_h is missing"),
    "rnn-cell-no-tanh": ("rnn_cell", rnn_cell_no_tanh, "check_rnn_cell", "apply tanh"),
    "rnn-cell-sigmoid": ("rnn_cell", rnn_cell_sigmoid, "check_rnn_cell", "not the sigmoid"),
    "rnn-cell-transposed-recurrent-weights": ("rnn_cell", rnn_cell_transposed_recurrent_weights,
                                              "check_rnn_cell", "not its transpose"),
    "gru-gates-swapped": ("gru_cell", gru_gates_swapped, "check_gru_cell",
                          "z and 1 − z are swapped"),
    "gru-reset-after-product": ("gru_cell", gru_reset_after_product, "check_gru_cell",
                                "before the matrix product"),
    "gru-reset-ignored": ("gru_cell", gru_reset_ignored, "check_gru_cell", "reset gate is not used"),
    "gru-update-and-reset-swapped": ("gru_cell", gru_update_and_reset_swapped, "check_gru_cell",
                                     "update and reset gates are swapped"),
    "gru-returns-candidate": ("gru_cell", gru_returns_candidate, "check_gru_cell",
                              "not the candidate h̃ alone"),
    "gru-no-candidate-bias": ("gru_cell", gru_no_candidate_bias, "check_gru_cell", "bias b_h"),
    "gru-no-biases": ("gru_cell", gru_no_biases, "check_gru_cell", "b_z, b_r and b_h are missing"),
    "gru-no-tanh": ("gru_cell", gru_no_tanh, "check_gru_cell", "apply tanh to the candidate"),
    "encode-nonzero-initial-state": ("encode", encode_nonzero_initial_state, "check_encode",
                                     "start from h = 0"),
    "encode-returns-first-state": ("encode", encode_returns_first_state, "check_encode",
                                   "not the first"),
    "encode-states-reversed": ("encode", encode_states_reversed, "check_encode", "reverse order"),
    "encode-time-major": ("encode", encode_time_major, "check_encode", "along axis 1"),
    "encode-includes-initial-state": ("encode", encode_includes_initial_state, "check_encode",
                                      "T + 1 states"),
    "encode-ignores-cell": ("encode", encode_ignores_cell, "check_encode", "ignores cell='gru'"),
    "encode-reads-backwards": ("encode", encode_reads_backwards, "check_encode",
                               "reads X from the end"),
    "encode-returns-h_T-first": ("encode", encode_returns_h_T_first, "check_encode",
                                 "in this order"),
    "decode-context-first": ("decode_step", decode_context_first, "check_decode_step",
                             "not [context, y_prev]"),
    "decode-ignores-cell": ("decode_step", decode_ignores_cell, "check_decode_step",
                            "ignores cell='gru'"),
    "decode-state-and-context-swapped": ("decode_step", decode_state_and_context_swapped,
                                         "check_decode_step", "not the other way round"),
    "greedy-includes-bos": ("greedy_decode", greedy_includes_bos, "check_greedy_decode",
                            "starts with BOS"),
    "greedy-stops-at-first-row-eos": ("greedy_decode", greedy_stops_at_first_row_eos,
                                      "check_greedy_decode", "go on until every row has"),
    "greedy-stops-at-any-eos": ("greedy_decode", greedy_stops_at_any_eos, "check_greedy_decode",
                                "go on until every row has"),
    "greedy-no-eos-padding": ("greedy_decode", greedy_no_eos_padding, "check_greedy_decode",
                              "keeps producing eos_id"),
    "greedy-pads-with-zeros": ("greedy_decode", greedy_pads_with_zeros, "check_greedy_decode",
                               "keeps producing eos_id"),
    "greedy-starts-from-zeros": ("greedy_decode", greedy_starts_from_zeros, "check_greedy_decode",
                                 "not from zeros"),
    "greedy-feeds-bos": ("greedy_decode", greedy_feeds_bos, "check_greedy_decode", "not of BOS"),
    "greedy-always-runs-max-len": ("greedy_decode", greedy_always_runs_max_len,
                                   "check_greedy_decode", "stop there"),
    "greedy-returns-logits": ("greedy_decode", greedy_returns_logits, "check_greedy_decode",
                              "not scores or probabilities"),
    "greedy-returns-probabilities": ("greedy_decode", greedy_returns_probabilities,
                                     "check_greedy_decode", "not token ids"),
    "greedy-float-tokens": ("greedy_decode", greedy_float_tokens, "check_greedy_decode",
                            "integer array"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["gru-gates-swapped", "encode-states-reversed", "decode-context-first",
                   "greedy-includes-bos"]


# -- two mistakes at once ------------------------------------------------------------

def rnn_cell_no_bias_no_tanh(x_t, h_prev, params):
    return x_t @ params["W_xh"] + h_prev @ params["W_hh"]


def decode_step_context_first_zero_state(y_prev, s_prev, context, params, cell="rnn"):
    # [context ; y_prev] AND the state ignored
    x = np.concatenate([context, y_prev], axis=-1)
    h = np.zeros_like(s_prev)
    return rnn_cell(x, h, params) if cell == "rnn" else gru_cell(x, h, params)


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "rnn-cell-no-bias-no-tanh": ({"rnn_cell": rnn_cell_no_bias_no_tanh}, "test_rnn_cell", ("bias", "tanh")),
    "decode-context-first-zero-state": ({"decode_step": decode_step_context_first_zero_state},
                                        "test_decode_step", ("context", "s_prev", "previous state")),
}
