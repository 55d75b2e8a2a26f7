"""Hidden checks for the RNN encoder-decoder exercise, as case tables (`engine.cases`): per task the mistakes it
knows (GRU gates swapped, a missing bias or tanh, states in the wrong order or shape, the decoder input the wrong
way round, BOS in the output, decoding that stops early or late, rows not padded with EOS); per check its cases."""

from functools import partial

import numpy as np

from solutions import rnn_encoder_decoder as reference
from solutions.rnn_encoder_decoder import cell_function, decode_step as _step, sigmoid

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case
from autograder.engine.checking import check
from autograder.engine.harness import seeded

SEED = 20140603  # Cho et al.'s "Learning phrase representations..." appeared on arXiv
SATURATED = 60.0  # a gate pre-activation this large makes sigmoid exactly 0 or 1 in float64


def cell_params(rng, cell, d_in, d_h, bias_scale=0.5):
    """Random parameters of an "rnn" or "gru" cell, with nonzero biases."""
    params = {}
    for gate in ("h",) if cell == "rnn" else ("z", "r", "h"):
        params[f"W_x{gate}"] = rng.normal(size=(d_in, d_h)) / np.sqrt(d_in)
        params[f"W_h{gate}"] = rng.normal(size=(d_h, d_h)) / np.sqrt(d_h)
        params[f"b_{gate}"] = bias_scale * rng.normal(size=d_h)
    return params


# Greedy-decoding problems, found by searching seeds (tests/course/checks/test_rnn_encoder_decoder.py asserts
# what each one exercises): rows that finish at different steps, a row that never finishes, an argmax never
# closer than 1e-3 to a tie.   name -> (seed, cell, B, T, d_in, d_h, d_emb, V, bos_id, eos_id, eos_bias)
GREEDY_PROBLEMS = {
    "rnn": (64, "rnn", 5, 6, 3, 6, 4, 7, 0, 1, 0.0),            # rows finish at 3, 1, -, 7, -
    "rnn-finishing": (21, "rnn", 4, 5, 3, 5, 3, 6, 5, 2, 0.0),  # rows finish at 4, 5, 4, 3
    "gru": (10, "gru", 5, 4, 3, 6, 4, 7, 3, 6, 0.5),            # rows finish at 3, 2, -, 5, -
}


def greedy_problem(name):
    """(X, params, bos_id, eos_id, cell) of one of GREEDY_PROBLEMS; `eos_bias` makes EOS more or less likely."""
    seed, cell, B, T, d_in, d_h, d_emb, V, bos_id, eos_id, eos_bias = GREEDY_PROBLEMS[name]
    rng = np.random.default_rng(seed)
    b_out = 0.5 * rng.normal(size=V)
    b_out[eos_id] += eos_bias
    b_out[bos_id] -= 10.0  # a trained model never predicts BOS
    params = {"encoder": cell_params(rng, cell, d_in, d_h), "decoder": cell_params(rng, cell, d_emb + d_h, d_h),
              "embedding": rng.normal(size=(V, d_emb)), "W_out": 2.0 * rng.normal(size=(d_h, V)), "b_out": b_out}
    return rng.normal(size=(B, T, d_in)), params, bos_id, eos_id, cell


def greedy_variant(X, params, bos_id, eos_id, max_len, cell="rnn", *, start="context", feed="previous", pad=True,
                   stop="all"):
    """Greedy decoding as the reference does it, or with one known mistake: start "context" (s_0 = c)
    or "zeros"; feed "previous" or "bos" (the input at every step); pad: finished rows produce EOS;
    stop "all" (the reference), "first" (when row 0 has produced EOS), "any" or "never"."""
    _, context = reference.encode(X, params["encoder"], cell)
    state = context if start == "context" else np.zeros_like(context)
    B = context.shape[0]
    previous, finished, tokens = np.full(B, bos_id), np.zeros(B, dtype=bool), []
    for _ in range(max_len):
        y = params["embedding"][previous if feed == "previous" else np.full(B, bos_id)]
        state = reference.decode_step(y, state, context, params["decoder"], cell)
        token = np.argmax(state @ params["W_out"] + params["b_out"], axis=-1)
        previous = np.where(finished, eos_id, token) if pad else token
        tokens.append(previous)
        finished |= previous == eos_id
        if {"all": finished.all(), "first": finished[0], "any": finished.any(), "never": False}[stop]:
            break
    return np.stack(tokens, axis=1) if tokens else np.zeros((B, 0), dtype=int)


def _changed(cell, change):
    """`cell` with some of its params changed: `change(params)`, a dict, holds their new values."""
    return lambda x_t, h_prev, params: cell(x_t, h_prev, {**params, **change(params)})


def _pre(x_t, h_prev, params):
    return x_t @ params["W_xh"] + h_prev @ params["W_hh"] + params["b_h"]


def _gru(x_t, h_prev, p, reset_after=False, activation=np.tanh):
    """h_t with the candidate h̃ computed as the reference does, or with one step changed."""
    z = sigmoid(x_t @ p["W_xz"] + h_prev @ p["W_hz"] + p["b_z"])
    r = sigmoid(x_t @ p["W_xr"] + h_prev @ p["W_hr"] + p["b_r"])
    recurrent = r * (h_prev @ p["W_hh"]) if reset_after else (r * h_prev) @ p["W_hh"]
    return z * h_prev + (1 - z) * activation(x_t @ p["W_xh"] + recurrent + p["b_h"])


def _states(X, params, cell):
    return reference.encode(X, params, cell)[0]


def _starts_from_zero(H, X, params, cell):
    """False when H follows the recurrence from a first state that is not the cell on x_0 and h = 0."""
    step, T = cell_function(cell), X.shape[1]
    recurrence = np.stack([step(X[:, t], H[:, t - 1], params) for t in range(1, T)], 1) if T > 1 else H[:, 1:]
    return T == 1 or not np.allclose(H[:, 1:], recurrence) or np.allclose(H[:, 0], step(X[:, 0], 0 * H[:, 0], params))


def _token_ids(tokens, on):
    """Token ids: an integer array (B, L), not scores, probabilities or floats."""
    check(not (isinstance(tokens, np.ndarray) and tokens.ndim == 3),
          f"on {on}, greedy_decode returned an array of shape {np.shape(tokens)}: return the token ids "
          "(the argmax over the vocabulary), shape (B, L), not scores or probabilities.")
    if isinstance(tokens, np.ndarray) and tokens.ndim == 2 and not np.issubdtype(tokens.dtype, np.integer):
        check(not (np.all(np.isfinite(tokens)) and np.array_equal(tokens, np.round(tokens))),
              f"the tokens on {on} should be an integer array (token ids), not {tokens.dtype}.")
        check(False, f"on {on}, greedy_decode returned {tokens.dtype} numbers that are not token ids: return "
                     "the argmax of the logits at each step, not probabilities or logits.")
    return tokens


def _wrong_before_eos(actual, eos_id, **arguments):
    """Whether `actual` differs from the reference's tokens up to a row's first eos_id."""
    expected = reference.greedy_decode(eos_id=eos_id, **arguments)
    before = np.cumsum(expected == eos_id, axis=1) - (expected == eos_id) == 0
    return not np.array_equal(actual[before], expected[before])


NOT_PADDED = "a row that has produced eos_id keeps producing eos_id: fill the rest of a finished row with eos_id"

exercise = Exercise(reference)
rnn_cell = exercise.task("rnn_cell", hint="it differs from tanh(x_t W_xh + h_prev W_hh + b_h)", mistakes=[
    Mistake("the bias b_h is missing: add it before the tanh", _changed(reference.rnn_cell, lambda p: {"b_h": 0.0})),
    Mistake("apply tanh to x_t W_xh + h_prev W_hh + b_h", _pre),
    Mistake("the nonlinearity is tanh, not the sigmoid", lambda **arguments: sigmoid(_pre(**arguments))),
    Mistake("h_prev @ W_hh is missing: the new state depends on the previous one",
            _changed(reference.rnn_cell, lambda p: {"W_hh": 0 * p["W_hh"]})),
    Mistake("x_t @ W_xh is missing: the new state depends on the input",
            _changed(reference.rnn_cell, lambda p: {"W_xh": 0 * p["W_xh"]})),
    Mistake("use h_prev @ W_hh with W_hh as given (row vectors), not its transpose",
            _changed(reference.rnn_cell, lambda p: {"W_hh": p["W_hh"].T})),
    Mistake("use x_t @ W_xh with W_xh as given (row vectors), not its transpose",
            _changed(reference.rnn_cell, lambda p: {"W_xh": p["W_xh"].T}))])
gru_cell = exercise.task(
    "gru_cell", hint="it differs from z ⊙ h_prev + (1 − z) ⊙ h̃ with the gates of Cho et al.", mistakes=[
        Mistake("z and 1 − z are swapped: in Cho et al.'s GRU, h_t = z ⊙ h_prev + (1 − z) ⊙ h̃, so z close to 1 "
                "keeps the old state", _changed(reference.gru_cell, lambda p: {
                    "W_xz": -p["W_xz"], "W_hz": -p["W_hz"], "b_z": -p["b_z"]})),
        Mistake("the reset gate multiplies h_prev before the matrix product: (r ⊙ h_prev) @ W_hh, not "
                "r ⊙ (h_prev @ W_hh)", lambda x_t, h_prev, params: _gru(x_t, h_prev, params, reset_after=True)),
        Mistake("the reset gate is not used: the candidate needs (r ⊙ h_prev) @ W_hh", _changed(
            reference.gru_cell, lambda p: {"W_xr": 0 * p["W_xr"], "W_hr": 0 * p["W_hr"], "b_r": SATURATED})),
        Mistake("the update and reset gates are swapped: z uses W_xz, W_hz, b_z and r uses W_xr, W_hr, b_r",
                _changed(reference.gru_cell, lambda p: {"W_xz": p["W_xr"], "W_hz": p["W_hr"], "b_z": p["b_r"],
                                                        "W_xr": p["W_xz"], "W_hr": p["W_hz"], "b_r": p["b_z"]})),
        Mistake("h_t is not the candidate h̃ alone: it is z ⊙ h_prev + (1 − z) ⊙ h̃", _changed(
            reference.gru_cell, lambda p: {"W_xz": 0 * p["W_xz"], "W_hz": 0 * p["W_hz"], "b_z": -SATURATED})),
        Mistake("the bias b_h of the candidate is missing", _changed(reference.gru_cell, lambda p: {"b_h": 0.0})),
        Mistake("the biases b_z, b_r and b_h are missing",
                _changed(reference.gru_cell, lambda p: {"b_z": 0.0, "b_r": 0.0, "b_h": 0.0})),
        Mistake("the bias b_z of the update gate is missing", _changed(reference.gru_cell, lambda p: {"b_z": 0.0})),
        Mistake("the bias b_r of the reset gate is missing", _changed(reference.gru_cell, lambda p: {"b_r": 0.0})),
        Mistake("apply tanh to the candidate: h̃ = tanh(x W_xh + (r ⊙ h_prev) W_hh + b_h)",
                lambda x_t, h_prev, params: _gru(x_t, h_prev, params, activation=lambda a: a))],
    facts=[Fact("{name} contains inf or NaN: compute the sigmoid without overflow.",
                lambda actual, **arguments: np.all(np.isfinite(actual)))])
encode = exercise.task("encode", outputs=[
    Output("H", hint="H[:, t] should be cell(x_t, H[:, t−1]), starting from a zero state", mistakes=[
        Mistake("encode ignores cell='gru' and runs rnn_cell", lambda X, params, cell: _states(X, params, "rnn")),
        Mistake("H is in reverse order: H[:, t] is the state after reading x_t, so H[:, 0] comes after x_0",
                lambda X, params, cell: _states(X, params, cell)[:, ::-1]),
        *[Mistake("encode reads X from the end: read x_0 first", backwards) for backwards in (
            lambda X, params, cell: _states(X[:, ::-1], params, cell),
            lambda X, params, cell: _states(X[:, ::-1], params, cell)[:, ::-1])],
        Mistake("it has shape (T, B, d_h); it should be (B, T, d_h): stack the states along axis 1",
                lambda X, params, cell: _states(X, params, cell).swapaxes(0, 1)),
        Mistake("it has T + 1 states: it holds the T states computed after reading x_0 … x_(T−1), not the zero "
                "initial state", lambda X, params, cell: np.pad(_states(X, params, cell), ((0, 0), (1, 0), (0, 0))))],
        facts=[Fact("{name}: H[:, 0] should be the cell applied to x_0 and a zero state: start from h = 0.",
                    _starts_from_zero)]),
    Output("h_T", hint="it should be the last state, H[:, -1]", mistakes=[
        Mistake("h_T should be the last state H[:, -1], not the first",
                lambda X, params, cell: _states(X, params, cell)[:, 0])])])
decode_step = exercise.task(
    "decode_step", hint="it should be cell(concatenate([y_prev, context], -1), s_prev)", mistakes=[
        Mistake("the cell's input is concatenate([y_prev, context]), in this order, not [context, y_prev]",
                lambda y_prev, s_prev, context, params, cell: _step(context, s_prev, y_prev, params, cell)),
        Mistake("pass s_prev to the cell as its previous state",
                lambda y_prev, s_prev, context, params, cell: _step(y_prev, 0 * s_prev, context, params, cell)),
        Mistake("decode_step ignores cell='gru' and runs rnn_cell",
                lambda y_prev, s_prev, context, params, cell: _step(y_prev, s_prev, context, params, "rnn")),
        Mistake("the previous state is s_prev and the context goes into the input, not the other way round",
                lambda y_prev, s_prev, context, params, cell: _step(y_prev, context, s_prev, params, cell))])
greedy_decode = exercise.task(
    "greedy_decode", read=_token_ids,
    hint="at each step take the argmax of s_t @ W_out + b_out and feed its embedding back", mistakes=[
        Mistake("the output starts with BOS: it should hold only the generated tokens, from the first one after BOS",
                lambda bos_id, **arguments: np.pad(reference.greedy_decode(bos_id=bos_id, **arguments),
                                                   ((0, 0), (1, 0)), constant_values=bos_id)),
        *[Mistake("it stops before every row has produced eos_id: go on until every row has produced it or max_len "
                  "tokens are out", partial(greedy_variant, stop=stop)) for stop in ("first", "any")],
        Mistake("every row had produced eos_id before max_len: stop there instead of running to max_len",
                partial(greedy_variant, stop="never")),
        Mistake("the decoder starts from s_0 = c = h_T (the last encoder state), not from zeros",
                partial(greedy_variant, start="zeros")),
        Mistake("at each step the decoder reads the embedding of the token it produced last, not of BOS",
                partial(greedy_variant, feed="bos")),
        Mistake(NOT_PADDED, partial(greedy_variant, pad=False))],
    facts=[Fact("{name}: " + NOT_PADDED + ".", _wrong_before_eos)])


def _cell_cases(rng, cell, specs):
    """The cases (description, B, d_in, d_h, scale) of a cell: its params, then x and h, drawn in that order."""
    cases = []
    for description, B, d_in, d_h, scale in specs:
        params = cell_params(rng, cell, d_in, d_h)
        cases.append(case(description, scale * rng.normal(size=(B, d_in)), rng.uniform(-1, 1, size=(B, d_h)), params))
    return cases


def check_rnn_cell(function):
    rnn_cell.check(function, _cell_cases(seeded(SEED), "rnn", [
        ("a batch of 3 with d_in=4 and d_h=5", 3, 4, 5, 1.0), ("one row with d_in = d_h = 3", 1, 3, 3, 1.0),
        ("a batch of 2 with d_in=2 and d_h=6", 2, 2, 6, 1.0),
        ("inputs of size about 30, where tanh saturates", 2, 3, 4, 30.0)]) + [
        case("the task's batch of two different rows", np.array([[1.0, 2.0], [0.0, 2.0]]),
             np.array([[0.5, -0.5], [0.0, 0.0]]), {"W_xh": np.array([[1.0, 0.0], [0.0, 0.5]]),
                                                   "W_hh": np.array([[0.0, 2.0], [1.0, 1.0]]),
                                                   "b_h": np.array([0.0, -2.0])})])


def check_gru_cell(function):
    gru_cell.check(function, _cell_cases(seeded(SEED + 1), "gru", [
        ("a batch of 3 with d_in=4 and d_h=5", 3, 4, 5, 1.0), ("a batch of 2 with d_in = d_h = 3", 2, 3, 3, 1.0),
        ("one row with d_in=2 and d_h=4", 1, 2, 4, 1.0),
        ("inputs of size about 20, where the gates saturate", 2, 3, 4, 20.0)]) + [
        case("the task's batch of two different rows", np.array([[1.0], [0.0]]), np.array([[0.8, -0.4], [0.0, 0.0]]),
             {"W_xz": np.zeros((1, 2)), "W_hz": np.zeros((2, 2)), "b_z": np.array([np.log(3.0), 0.0]),
              "W_xr": np.zeros((1, 2)), "W_hr": np.zeros((2, 2)), "b_r": np.array([np.log(3.0), -np.log(3.0)]),
              "W_xh": np.array([[0.5, -0.5]]), "W_hh": np.array([[0.0, 1.0], [1.0, 0.0]]),
              "b_h": np.array([0.1, -0.1])})])


def _saturated_gru(d_in, d_h):
    """The tasks' GRU whose update gate is 1 whatever its input: it keeps its state."""
    return {**{f"W_x{g}": np.ones((d_in, d_h)) for g in "zrh"}, **{f"W_h{g}": np.ones((d_h, d_h)) for g in "zrh"},
            "b_z": np.full(d_h, 60.0), "b_r": np.zeros(d_h), "b_h": np.zeros(d_h)}


def check_encode(function):
    rng = seeded(SEED + 2)
    cases = []
    for description, cell, B, T, d_in, d_h, pass_cell in [
            ("an rnn encoder (the default cell) with B=2, T=5, d_in=3, d_h=4", "rnn", 2, 5, 3, 4, False),
            ("a gru encoder with B=3, T=4, d_in=3, d_h=2", "gru", 3, 4, 3, 2, True),
            ("an rnn encoder with B=1, T=7, d_in = d_h = 3", "rnn", 1, 7, 3, 3, True),
            ("an rnn encoder on a sequence of length T=1", "rnn", 2, 1, 2, 3, True),
            ("a gru encoder with B=2, T=6, d_in=4, d_h=5", "gru", 2, 6, 4, 5, True)]:
        params = cell_params(rng, cell, d_in, d_h)
        cases.append(case(description, rng.normal(size=(B, T, d_in)), params, *([cell] if pass_cell else [])))
    X = np.array([[[1.0], [0.0], [-1.0]], [[0.0], [0.0], [2.0]]])  # the task's examples
    encode.check(function, cases + [
        case("the task's example", X, {"W_xh": np.array([[1.0]]), "W_hh": np.array([[0.5]]), "b_h": np.array([0.0])}),
        case("the task's example with a saturated GRU", X, _saturated_gru(1, 1), "gru")])


def check_decode_step(function):
    rng = seeded(SEED + 3)
    cases = []
    for description, cell, B, d_emb, d_c, d_h, pass_cell in [
            ("an rnn decoder (the default cell) with B=2, d_emb=3 and a context and state of size 4",
             "rnn", 2, 3, 4, 4, False),
            ("a gru decoder with B=3, d_emb=2 and a context and state of size 5", "gru", 3, 2, 5, 5, True),
            ("an rnn decoder with d_emb=4, a context of size 2 and a state of size 3", "rnn", 2, 4, 2, 3, True),
            ("a gru decoder with d_emb = d_c = d_h = 3", "gru", 2, 3, 3, 3, True)]:
        params = cell_params(rng, cell, d_emb + d_c, d_h)
        cases.append(case(description, rng.normal(size=(B, d_emb)), rng.uniform(-1, 1, size=(B, d_h)),
                          rng.normal(size=(B, d_c)), params, *([cell] if pass_cell else [])))
    example = (np.array([[0.5]]), np.array([[0.2, 0.4]]), np.array([[-0.5, 1.0]]))  # the task's: y, s, c
    decode_step.check(function, cases + [
        case("the task's example", *example, {"W_xh": np.array([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]),
                                              "W_hh": 0.5 * np.eye(2), "b_h": np.zeros(2)}),
        case("the task's example with a saturated GRU", *example, _saturated_gru(3, 2), "gru"),
        case("the task's batch of two different rows", np.array([[0.5], [-0.5]]), np.array([[0.2, 0.4], [0.0, 0.0]]),
             np.array([[-0.5, 1.0], [0.0, 0.0]]), {"W_xh": np.array([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]),
                                                   "W_hh": 0.5 * np.eye(2), "b_h": np.zeros(2)})])


def _task_model():
    """The task's hand-built model (X, params, bos_id, eos_id): the context's +1 moves one slot on per step."""
    succ = np.zeros((5, 5))
    succ[[1, 2, 3, 4], [2, 3, 4, 1]] = 1.0
    params = {"encoder": {"W_xh": 10 * np.eye(5), "W_hh": np.zeros((5, 5)), "b_h": np.zeros(5)},
              "decoder": {"W_xh": np.zeros((2 + 5, 5)), "W_hh": 10 * succ, "b_h": np.array([-10.0, 0, 0, 0, 0])},
              "embedding": np.arange(10.0).reshape(5, 2), "W_out": np.eye(5), "b_out": np.zeros(5)}
    X = np.zeros((3, 2, 5))
    X[:, -1] = 2 * np.eye(5)[[2, 3, 4]] - 1
    return X, params, 0, 4


def check_greedy_decode(function):
    def problem(description, name, max_len, pass_cell=True):
        X, params, bos_id, eos_id, cell = greedy_problem(name)
        return case(description, X, params, bos_id, eos_id, max_len, *([cell] if pass_cell else []))

    X, params, bos_id, eos_id = _task_model()  # with a decoder that reads the previous token: 0 → 1 → 2 → 3 → 4
    params.update(decoder={"W_xh": np.vstack([10 * np.eye(5, k=1), np.zeros((5, 5))]), "W_hh": np.zeros((5, 5)),
                           "b_h": np.zeros(5)}, embedding=np.eye(5))
    greedy_decode.check(function, [
        problem("an rnn model whose rows finish at different steps, one never (max_len=9)", "rnn", 9, False),
        problem("the same model with max_len=3, before most rows finish", "rnn", 3),
        problem("an rnn model whose rows all finish before max_len=12, with bos_id=5 and eos_id=2",
                "rnn-finishing", 12),
        problem("a gru model with bos_id=3 and eos_id=6 (max_len=8)", "gru", 8),
        problem("the rnn model with max_len=1", "rnn", 1),
        *[case(f"the task's model with max_len={max_len}", *_task_model(), max_len) for max_len in (6, 3)],
        case("the task's model whose decoder reads the previous token", X[:1], params, bos_id, eos_id, 4)])
