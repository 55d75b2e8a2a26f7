"""Hidden checks for the RNN encoder-decoder exercise.

Each ``check_*`` runs the student's function on seeded random inputs and on
inputs that expose the usual mistakes, compares with the reference in
``solutions/`` and, at the first difference, raises ``CheckFailed`` with one
sentence that names the mistake when it can be recognised from the output
(GRU gates swapped, reset gate after the matrix product, a missing bias or
tanh, a wrong initial state, states in the wrong order, the decoder input
concatenated the wrong way round, BOS in the output, decoding that stops too
early or too late, finished rows not padded with EOS, logits instead of
token ids). Any correct implementation passes: only results are compared,
never how they were computed.

Later tasks may call earlier ones (``encode`` calls the cells, ``greedy_decode``
calls ``encode`` and ``decode_step``, a ``gru_cell`` may compute its candidate with
``rnn_cell``). A later task is graded on its own: it is
called with the reference's earlier functions standing in for the student's
(``GRADED``), so that one mistake in ``gru_cell`` costs the points of
``gru_cell`` only.
"""


import numpy as np

from solutions import rnn_encoder_decoder as reference

from autograder.engine.checking import check, check_close, check_shape, close
from autograder.engine.harness import call, diagnose, seeded

SEED = 20140603  # Cho et al.'s "Learning phrase representations..." appeared on arXiv
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.rnn_cell, reference.gru_cell, reference.encode, reference.decode_step, reference.greedy_decode)

# A gate pre-activation this large makes sigmoid exactly 0 or 1 in float64.
SATURATED = 60.0

# -- inputs ------------------------------------------------------------------

def cell_params(rng, cell, d_in, d_h, bias_scale=0.5):
    """Random parameters of an "rnn" or "gru" cell, with nonzero biases."""
    params = {}
    for gate in ("h",) if cell == "rnn" else ("z", "r", "h"):
        params[f"W_x{gate}"] = rng.normal(size=(d_in, d_h)) / np.sqrt(d_in)
        params[f"W_h{gate}"] = rng.normal(size=(d_h, d_h)) / np.sqrt(d_h)
        params[f"b_{gate}"] = bias_scale * rng.normal(size=d_h)
    return params


def seq2seq_params(rng, cell, d_in, d_h, d_emb, V, bos_id, eos_id, eos_bias):
    """Random encoder-decoder parameters; `eos_bias` makes EOS more or less likely."""
    b_out = 0.5 * rng.normal(size=V)
    b_out[eos_id] += eos_bias
    b_out[bos_id] -= 10.0  # a trained model never predicts BOS
    return {"encoder": cell_params(rng, cell, d_in, d_h),
            "decoder": cell_params(rng, cell, d_emb + d_h, d_h),
            "embedding": rng.normal(size=(V, d_emb)),
            "W_out": 2.0 * rng.normal(size=(d_h, V)),
            "b_out": b_out}


# Greedy-decoding problems, found by searching seeds (see
# tests/solutions/test_rnn_encoder_decoder.py, which asserts what each one
# exercises): rows that finish at different steps, a row that never finishes,
# an argmax never closer than 1e-3 to a tie.
#   name -> (seed, cell, B, T, d_in, d_h, d_emb, V, bos_id, eos_id, eos_bias)
GREEDY_PROBLEMS = {
    "rnn": (64, "rnn", 5, 6, 3, 6, 4, 7, 0, 1, 0.0),            # rows finish at 3, 1, -, 7, -
    "rnn-finishing": (21, "rnn", 4, 5, 3, 5, 3, 6, 5, 2, 0.0),  # rows finish at 4, 5, 4, 3
    "gru": (10, "gru", 5, 4, 3, 6, 4, 7, 3, 6, 0.5),            # rows finish at 3, 2, -, 5, -
}


def greedy_problem(name):
    """(X, params, bos_id, eos_id, cell) of one of GREEDY_PROBLEMS."""
    seed, cell, B, T, d_in, d_h, d_emb, V, bos_id, eos_id, eos_bias = GREEDY_PROBLEMS[name]
    rng = np.random.default_rng(seed)
    params = seq2seq_params(rng, cell, d_in, d_h, d_emb, V, bos_id, eos_id, eos_bias)
    X = rng.normal(size=(B, T, d_in))
    return X, params, bos_id, eos_id, cell


# -- rnn_cell ------------------------------------------------------------------

def check_rnn_cell(rnn_cell):
    rng = seeded(SEED)
    cases = [
        ("a batch of 3 with d_in=4 and d_h=5", 3, 4, 5, 1.0),
        ("one row with d_in = d_h = 3", 1, 3, 3, 1.0),
        ("a batch of 2 with d_in=2 and d_h=6", 2, 2, 6, 1.0),
        ("inputs of size about 30, where tanh saturates", 2, 3, 4, 30.0),
    ]
    for description, B, d_in, d_h, scale in cases:
        params = cell_params(rng, "rnn", d_in, d_h)
        x, h = scale * rng.normal(size=(B, d_in)), rng.uniform(-1, 1, size=(B, d_h))
        name = f"rnn_cell on {description}"
        actual = call(rnn_cell, x, h, params, on=description)
        expected = reference.rnn_cell(x, h, params)
        check_shape(actual, expected.shape, name)
        check(np.all(np.isfinite(actual)), f"{name} contains inf or NaN.")
        if not close(actual, expected):
            W_xh, W_hh, b_h = params["W_xh"], params["W_hh"], params["b_h"]
            pre = x @ W_xh + h @ W_hh + b_h
            mistakes = [
                (np.tanh(pre - b_h), "the bias b_h is missing: add it before the tanh"),
                (pre, "apply tanh to x_t W_xh + h_prev W_hh + b_h"),
                (reference.sigmoid(pre), "the nonlinearity is tanh, not the sigmoid"),
                (np.tanh(x @ W_xh + b_h), "h_prev @ W_hh is missing: the new state depends on the previous one"),
                (np.tanh(h @ W_hh + b_h), "x_t @ W_xh is missing: the new state depends on the input"),
                (np.tanh(x @ W_xh + h @ W_hh.T + b_h),
                 "use h_prev @ W_hh with W_hh as given (row vectors), not its transpose"),
            ]
            if d_in == d_h:
                mistakes.append((np.tanh(x @ W_xh.T + h @ W_hh + b_h),
                                 "use x_t @ W_xh with W_xh as given (row vectors), not its transpose"))
            diagnose(actual, mistakes, f"on {description}, ")
        check_close(actual, expected, name, "it differs from tanh(x_t W_xh + h_prev W_hh + b_h)")


# -- gru_cell ------------------------------------------------------------------

def check_gru_cell(gru_cell):
    rng = seeded(SEED + 1)
    cases = [
        ("a batch of 3 with d_in=4 and d_h=5", 3, 4, 5, 1.0),
        ("a batch of 2 with d_in = d_h = 3", 2, 3, 3, 1.0),
        ("one row with d_in=2 and d_h=4", 1, 2, 4, 1.0),
        ("inputs of size about 20, where the gates saturate", 2, 3, 4, 20.0),
    ]
    for description, B, d_in, d_h, scale in cases:
        params = cell_params(rng, "gru", d_in, d_h)
        x, h = scale * rng.normal(size=(B, d_in)), rng.uniform(-1, 1, size=(B, d_h))
        name = f"gru_cell on {description}"
        actual = call(gru_cell, x, h, params, on=description, stand_ins=GRADED)
        expected = reference.gru_cell(x, h, params)
        check_shape(actual, expected.shape, name)
        check(np.all(np.isfinite(actual)),
              f"{name} contains inf or NaN: compute the sigmoid without overflow.")
        if not close(actual, expected):
            diagnose(actual, _gru_mistakes(x, h, params), f"on {description}, ")
        check_close(actual, expected, name,
                    "it differs from z ⊙ h_prev + (1 − z) ⊙ h̃ with the gates of Cho et al.")


def _gru_mistakes(x, h, p):
    """(what a known mistake would give, its one-sentence description)."""
    def changed(**new):
        return reference.gru_cell(x, h, {**p, **new})

    def candidate(reset_after=False, activation=np.tanh, bias=True):
        r = reference.sigmoid(x @ p["W_xr"] + h @ p["W_hr"] + p["b_r"])
        recurrent = r * (h @ p["W_hh"]) if reset_after else (r * h) @ p["W_hh"]
        return activation(x @ p["W_xh"] + recurrent + (p["b_h"] if bias else 0.0))

    z = reference.sigmoid(x @ p["W_xz"] + h @ p["W_hz"] + p["b_z"])
    zero = {key: np.zeros_like(p[key]) for key in ("b_z", "b_r", "b_h")}
    return [
        (changed(W_xz=-p["W_xz"], W_hz=-p["W_hz"], b_z=-p["b_z"]),
         "z and 1 − z are swapped: in Cho et al.'s GRU, h_t = z ⊙ h_prev + (1 − z) ⊙ h̃, "
         "so z close to 1 keeps the old state"),
        (z * h + (1 - z) * candidate(reset_after=True),
         "the reset gate multiplies h_prev before the matrix product: "
         "(r ⊙ h_prev) @ W_hh, not r ⊙ (h_prev @ W_hh)"),
        (changed(W_xr=0 * p["W_xr"], W_hr=0 * p["W_hr"], b_r=np.full_like(p["b_r"], SATURATED)),
         "the reset gate is not used: the candidate needs (r ⊙ h_prev) @ W_hh"),
        (changed(W_xz=p["W_xr"], W_hz=p["W_hr"], b_z=p["b_r"],
                 W_xr=p["W_xz"], W_hr=p["W_hz"], b_r=p["b_z"]),
         "the update and reset gates are swapped: z uses W_xz, W_hz, b_z and r uses W_xr, W_hr, b_r"),
        (changed(W_xz=0 * p["W_xz"], W_hz=0 * p["W_hz"], b_z=np.full_like(p["b_z"], -SATURATED)),
         "h_t is not the candidate h̃ alone: it is z ⊙ h_prev + (1 − z) ⊙ h̃"),
        (changed(b_h=zero["b_h"]), "the bias b_h of the candidate is missing"),
        (changed(**zero), "the biases b_z, b_r and b_h are missing"),
        (changed(b_z=zero["b_z"]), "the bias b_z of the update gate is missing"),
        (changed(b_r=zero["b_r"]), "the bias b_r of the reset gate is missing"),
        (z * h + (1 - z) * candidate(activation=lambda a: a),
         "apply tanh to the candidate: h̃ = tanh(x W_xh + (r ⊙ h_prev) W_hh + b_h)"),
    ]


# -- encode ----------------------------------------------------------------------

def check_encode(encode):
    rng = seeded(SEED + 2)
    cases = [  # description, cell, B, T, d_in, d_h, pass the cell argument
        ("an rnn encoder (the default cell) with B=2, T=5, d_in=3, d_h=4", "rnn", 2, 5, 3, 4, False),
        ("a gru encoder with B=3, T=4, d_in=3, d_h=2", "gru", 3, 4, 3, 2, True),
        ("an rnn encoder with B=1, T=7, d_in = d_h = 3", "rnn", 1, 7, 3, 3, True),
        ("an rnn encoder on a sequence of length T=1", "rnn", 2, 1, 2, 3, True),
        ("a gru encoder with B=2, T=6, d_in=4, d_h=5", "gru", 2, 6, 4, 5, True),
    ]
    for description, cell, B, T, d_in, d_h, pass_cell in cases:
        params = cell_params(rng, cell, d_in, d_h)
        _check_encode_case(encode, description, rng.normal(size=(B, T, d_in)), params, cell, pass_cell)
    X = np.array([[[1.0], [0.0], [-1.0]], [[0.0], [0.0], [2.0]]])  # the task's examples
    _check_encode_case(encode, "the task's example", X,
                       {"W_xh": np.array([[1.0]]), "W_hh": np.array([[0.5]]), "b_h": np.array([0.0])}, "rnn", False)
    _check_encode_case(encode, "the task's example with a saturated GRU", X, _saturated_gru(1, 1), "gru", True)


def _saturated_gru(d_in, d_h):
    """The tasks' GRU whose update gate is 1 whatever its input: it keeps its state."""
    return {**{f"W_x{g}": np.ones((d_in, d_h)) for g in "zrh"}, **{f"W_h{g}": np.ones((d_h, d_h)) for g in "zrh"},
            "b_z": np.full(d_h, 60.0), "b_r": np.zeros(d_h), "b_h": np.zeros(d_h)}


def _check_encode_case(encode, description, X, params, cell, pass_cell):
    B, T, _ = X.shape
    d_h = params["W_hh"].shape[0]
    result = call(encode, X, params, *([cell] if pass_cell else []), on=description, stand_ins=GRADED)
    check(isinstance(result, tuple) and len(result) == 2,
          f"encode should return a pair (H, h_T), but on {description} it returned "
          f"a {type(result).__name__}.")
    H, h_T = result
    expected_H, expected_h_T = reference.encode(X, params, cell)
    if np.shape(H) == (B, d_h) and np.shape(h_T) == (B, T, d_h):
        check(False, "return (H, h_T) in this order, not (h_T, H).")
    if np.shape(H) == (T, B, d_h) and T != B:
        check(False, f"on {description}, H has shape (T, B, d_h) = {(T, B, d_h)}; it should be "
                     "(B, T, d_h): stack the states along axis 1.")
    if np.shape(H) == (B, T + 1, d_h):
        check(False, f"on {description}, H has T + 1 states: it holds the T states computed after "
                     "reading x_0 … x_(T−1), not the zero initial state.")
    check_shape(H, expected_H.shape, f"H on {description}")
    check(np.all(np.isfinite(H)), f"H on {description} contains inf or NaN.")
    if not close(H, expected_H):
        step = reference.rnn_cell if cell == "rnn" else reference.gru_cell
        mistakes = [(expected_H[:, ::-1], "H is in reverse order: H[:, t] is the state after "
                                          "reading x_t, so H[:, 0] comes after x_0")]
        if cell == "gru":
            mistakes.insert(0, (reference.encode(X, params, "rnn")[0],
                                "encode ignores cell='gru' and runs rnn_cell"))
        backwards = reference.encode(X[:, ::-1], params, cell)[0]
        mistakes += [(backwards, "encode reads X from the end: read x_0 first"),
                     (backwards[:, ::-1], "encode reads X from the end: read x_0 first")]
        diagnose(H, mistakes, f"on {description}, ")
        if T > 1 and close(H[:, 1:], _steps(step, X[:, 1:], H[:, :-1], params)) \
                and not close(H[:, 0], step(X[:, 0], np.zeros((B, d_h)), params)):
            check(False, f"on {description}, H[:, 0] should be the cell applied to x_0 and a zero "
                         "state: start from h = 0.")
        check_close(H, expected_H, f"H on {description}",
                    "H[:, t] should be cell(x_t, H[:, t−1]), starting from a zero state")
    check_shape(h_T, expected_h_T.shape, f"h_T on {description}")
    if T > 1 and not close(h_T, expected_h_T) and close(h_T, expected_H[:, 0]):
        check(False, f"on {description}, h_T should be the last state H[:, -1], not the first.")
    check_close(h_T, expected_h_T, f"h_T on {description}", "it should be the last state, H[:, -1]")


def _steps(step, X, H_prev, params):
    """step(X[:, t], H_prev[:, t]) for every t, stacked along axis 1."""
    return np.stack([step(X[:, t], H_prev[:, t], params) for t in range(X.shape[1])], axis=1)


# -- decode_step ---------------------------------------------------------------------

def check_decode_step(decode_step):
    rng = seeded(SEED + 3)
    cases = [  # description, cell, B, d_emb, d_c, d_h, pass the cell argument
        ("an rnn decoder (the default cell) with B=2, d_emb=3 and a context and state of size 4",
         "rnn", 2, 3, 4, 4, False),
        ("a gru decoder with B=3, d_emb=2 and a context and state of size 5", "gru", 3, 2, 5, 5, True),
        ("an rnn decoder with d_emb=4, a context of size 2 and a state of size 3",
         "rnn", 2, 4, 2, 3, True),
        ("a gru decoder with d_emb = d_c = d_h = 3", "gru", 2, 3, 3, 3, True),
    ]
    problems = []
    for description, cell, B, d_emb, d_c, d_h, pass_cell in cases:
        params = cell_params(rng, cell, d_emb + d_c, d_h)
        problems.append((description, cell, rng.normal(size=(B, d_emb)), rng.uniform(-1, 1, size=(B, d_h)),
                         rng.normal(size=(B, d_c)), params, pass_cell))
    example = (np.array([[0.5]]), np.array([[0.2, 0.4]]), np.array([[-0.5, 1.0]]))  # the task's: y, s, c
    problems += [("the task's example", "rnn", *example, {"W_xh": np.array([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]),
                                                          "W_hh": 0.5 * np.eye(2), "b_h": np.zeros(2)}, False),
                 ("the task's example with a saturated GRU", "gru", *example, _saturated_gru(3, 2), True)]
    for description, cell, y, s, c, params, pass_cell in problems:
        d_c = c.shape[1]
        d_h = s.shape[1]
        name = f"s_t on {description}"
        actual = call(decode_step, y, s, c, params, *([cell] if pass_cell else []), on=description,
                      stand_ins=GRADED)
        expected = reference.decode_step(y, s, c, params, cell)
        check_shape(actual, expected.shape, name)
        if not close(actual, expected):
            step = reference.rnn_cell if cell == "rnn" else reference.gru_cell
            mistakes = [
                (step(np.concatenate([c, y], -1), s, params),
                 "the cell's input is concatenate([y_prev, context]), in this order, "
                 "not [context, y_prev]"),
                (step(np.concatenate([y, c], -1), np.zeros_like(s), params),
                 "pass s_prev to the cell as its previous state"),
            ]
            if cell == "gru":
                mistakes.append((reference.rnn_cell(np.concatenate([y, c], -1), s, params),
                                 "decode_step ignores cell='gru' and runs rnn_cell"))
            if d_c == d_h:
                mistakes.append((step(np.concatenate([y, s], -1), c, params),
                                 "the previous state is s_prev and the context goes into the "
                                 "input, not the other way round"))
            diagnose(actual, mistakes, f"on {description}, ")
        check_close(actual, expected, name, "it should be cell(concatenate([y_prev, context], -1), s_prev)")


# -- greedy_decode ---------------------------------------------------------------------

def check_greedy_decode(greedy_decode):
    cases = [  # description, problem, max_len, pass the cell argument
        ("an rnn model whose rows finish at different steps, one never (max_len=9)", "rnn", 9, False),
        ("the same model with max_len=3, before most rows finish", "rnn", 3, True),
        ("an rnn model whose rows all finish before max_len=12, with bos_id=5 and eos_id=2",
         "rnn-finishing", 12, True),
        ("a gru model with bos_id=3 and eos_id=6 (max_len=8)", "gru", 8, True),
        ("the rnn model with max_len=1", "rnn", 1, True),
    ]
    for description, problem, max_len, pass_cell in cases:
        X, params, bos_id, eos_id, cell = greedy_problem(problem)
        _check_greedy_case(greedy_decode, description, X, params, bos_id, eos_id, max_len, cell, pass_cell)
    for max_len in (6, 3):
        _check_greedy_case(greedy_decode, f"the task's model with max_len={max_len}", *_task_model(), max_len,
                           "rnn", False)
    X, params, bos_id, eos_id = _task_model()  # its decoder that reads the previous token: 0 → 1 → 2 → 3 → 4
    params.update(decoder={"W_xh": np.vstack([10 * np.eye(5, k=1), np.zeros((5, 5))]), "W_hh": np.zeros((5, 5)),
                           "b_h": np.zeros(5)}, embedding=np.eye(5))
    _check_greedy_case(greedy_decode, "the task's model whose decoder reads the previous token", X[:1], params,
                       bos_id, eos_id, 4, "rnn", False)


def _task_model():
    """The task's hand-built model (X, params, bos_id, eos_id): the context's +1 moves one slot on per step."""
    succ = np.zeros((5, 5))
    for i, j in [(1, 2), (2, 3), (3, 4), (4, 1)]:
        succ[i, j] = 1.0
    params = {"encoder": {"W_xh": 10 * np.eye(5), "W_hh": np.zeros((5, 5)), "b_h": np.zeros(5)},
              "decoder": {"W_xh": np.zeros((2 + 5, 5)), "W_hh": 10 * succ, "b_h": np.array([-10.0, 0, 0, 0, 0])},
              "embedding": np.arange(10.0).reshape(5, 2), "W_out": np.eye(5), "b_out": np.zeros(5)}
    X = np.zeros((3, 2, 5))
    X[:, -1] = 2 * np.eye(5)[[2, 3, 4]] - 1
    return X, params, 0, 4


def _check_greedy_case(greedy_decode, description, X, params, bos_id, eos_id, max_len, cell, pass_cell):
    args = (X, params, bos_id, eos_id, max_len) + ((cell,) if pass_cell else ())
    actual = call(greedy_decode, *args, on=description, stand_ins=GRADED)
    expected = reference.greedy_decode(X, params, bos_id, eos_id, max_len, cell)
    B, L = expected.shape
    name = f"the tokens on {description}"
    if isinstance(actual, np.ndarray) and actual.ndim == 3:
        check(False, f"on {description}, greedy_decode returned an array of shape {actual.shape}: "
                     "return the token ids (the argmax over the vocabulary), shape (B, L), "
                     "not scores or probabilities.")
    check(isinstance(actual, np.ndarray),
          f"{name} should be a NumPy array of token ids, but it is a {type(actual).__name__}.")
    if actual.ndim == 2 and not np.issubdtype(actual.dtype, np.integer):
        integral = np.all(np.isfinite(actual)) and np.array_equal(actual, np.round(actual))
        check(not integral, f"{name} should be an integer array (token ids), not {actual.dtype}.")
        check(False, f"on {description}, greedy_decode returned {actual.dtype} numbers that are "
                     "not token ids: return the argmax of the logits at each step, not "
                     "probabilities or logits.")
    check(actual.ndim == 2 and actual.shape[0] == B,
          f"{name} has shape {actual.shape}, but it should have shape (B, L) with B={B}.")
    if _same(actual, expected):
        return

    check_greedy_length(actual, expected, bos_id, max_len, description)
    variants = [
        (dict(start="zeros"), "the decoder starts from s_0 = c = h_T (the last encoder state), "
                              "not from zeros"),
        (dict(feed="bos"), "at each step the decoder reads the embedding of the token it "
                           "produced last, not of BOS"),
        (dict(pad=False), "a row that has produced eos_id keeps producing eos_id: fill the rest "
                          "of a finished row with eos_id"),
    ]
    for options, mistake in variants:
        if _same(actual, greedy_variant(X, params, bos_id, eos_id, max_len, cell, **options)):
            check(False, f"on {description}, {mistake}.")
    check_greedy_contract(actual, expected, eos_id, max_len, description)
    check_shape(actual, expected.shape, name)
    check(False, f"{name} differ from greedy decoding: at each step take the argmax of "
                 "s_t @ W_out + b_out and feed its embedding back.")


def greedy_variant(X, params, bos_id, eos_id, max_len, cell, *, start="context", feed="previous",
                   pad=True, stop="all"):
    """Greedy decoding as the reference does it, or with one known mistake.

    start: "context" (s_0 = c) or "zeros"; feed: "previous" or "bos" (the input
    embedding at every step); pad: finished rows produce EOS; stop: "all"
    (the reference), "first" (when row 0 has produced EOS), "any" or "never".
    """
    encode, decode_step = reference.encode, reference.decode_step
    _, context = encode(X, params["encoder"], cell)
    state = context if start == "context" else np.zeros_like(context)
    B = context.shape[0]
    previous, finished, tokens = np.full(B, bos_id), np.zeros(B, dtype=bool), []
    for _ in range(max_len):
        y = params["embedding"][previous if feed == "previous" else np.full(B, bos_id)]
        state = decode_step(y, state, context, params["decoder"], cell)
        token = np.argmax(state @ params["W_out"] + params["b_out"], axis=-1)
        if pad:
            token = np.where(finished, eos_id, token)
        tokens.append(token)
        previous = token
        finished |= token == eos_id
        if {"all": finished.all(), "first": finished[0], "any": finished.any(),
                "never": False}[stop]:
            break
    return np.stack(tokens, axis=1) if tokens else np.zeros((B, 0), dtype=int)


# -- helpers -------------------------------------------------------------------------


def _same(actual, expected):
    return np.shape(actual) == np.shape(expected) and np.array_equal(actual, expected)


def check_greedy_length(actual, expected, bos_id, max_len, description):
    """Fail when ``actual`` starts with BOS or holds more than ``max_len`` tokens (shared by
    the Transformer's greedy decoding, which has the same output contract)."""
    k, L = actual.shape[1], expected.shape[1]
    if k >= 1 and np.all(actual[:, 0] == bos_id) and k - 1 <= L \
            and np.array_equal(actual[:, 1:], expected[:, :k - 1]):
        check(False, f"on {description}, the output starts with BOS: it should hold only the "
                     "generated tokens, from the first one after BOS.")
    check(k <= max_len, f"on {description}, greedy_decode produced {k} tokens: at most "
                        f"max_len={max_len}.")


def check_greedy_contract(actual, expected, eos_id, max_len, description):
    """Name a broken output contract of greedy decoding (shared by the Transformer's).

    ``actual`` and ``expected`` are token arrays (B, steps); fails when ``actual``
    is ``expected`` stopped too early, run too long, or not padded with
    ``eos_id`` after a row's first ``eos_id``.
    """
    k, L = actual.shape[1], expected.shape[1]
    if k < L and np.array_equal(actual, expected[:, :k]):
        when = ("once a row had produced eos_id" if np.any(expected[:, :k] == eos_id)
                else "before any row had produced eos_id")
        check(False, f"on {description}, greedy_decode stopped after {k} step{'s' * (k != 1)}, "
                     f"{when}: go on until every row has produced it or max_len={max_len} "
                     "tokens are out.")
    if k > L and np.array_equal(actual[:, :L], expected):
        check(False, f"on {description}, every row had produced eos_id after {L} steps: "
                     "stop there instead of running to max_len.")
    if k == L:
        eos_seen = np.cumsum(expected == eos_id, axis=1)
        after_eos = (eos_seen - (expected == eos_id)) > 0  # positions after a row's first EOS
        if np.array_equal(actual[~after_eos], expected[~after_eos]):
            check(False, f"on {description}, a row that has produced eos_id keeps producing "
                         "eos_id: fill the rest of a finished row with eos_id.")
