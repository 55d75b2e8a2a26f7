"""Hidden checks for the Bahdanau attention exercise.

Each ``check_*`` runs the student's function on seeded random inputs and on
the inputs that expose the usual mistakes, compares with the reference in
``solutions/`` and, at the first difference, raises ``CheckFailed`` with one
sentence that names the mistake when it can be recognised from the output:
backward states left in reading order, halves swapped, the backward RNN run
on the forward order, ``W_a`` and ``U_a`` swapped, ``tanh`` or ``v_a``
missing, the softmax over the wrong axis, the mask ignored, an all-masked row
that is uniform or NaN, the context computed from the new state, the cell's
input concatenated in the wrong order. Any correct implementation passes:
only results are compared, never how they were computed.
"""

import numpy as np

from solutions import bahdanau as reference
from solutions.rnn_encoder_decoder import encode, gru_cell, rnn_cell

from autograder.engine.checking import check, check_close, check_shape, close
from autograder.engine.harness import call, check_weights, compare, diagnose, seeded
from .rnn_encoder_decoder import cell_params

# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.bidirectional_encode, reference.additive_score, reference.masked_softmax,
          reference.bahdanau_attention, reference.bahdanau_decode_step)

SEED = 20140901  # "Neural machine translation by jointly learning to align and translate", arXiv v1
CELLS = {"rnn": rnn_cell, "gru": gru_cell}


# -- random inputs ---------------------------------------------------------------

def _attention_params(rng, d_s, d_h, d_a):
    return {"W_a": rng.normal(size=(d_s, d_a)) / np.sqrt(d_s),
            "U_a": rng.normal(size=(d_h, d_a)) / np.sqrt(d_h),
            "v_a": 1.5 * rng.normal(size=d_a)}


def _mask(lengths, T):
    return np.arange(T) < np.asarray(lengths)[:, None]




# -- bidirectional_encode --------------------------------------------------------------

def check_bidirectional_encode(bidirectional_encode):
    rng = seeded(SEED)
    cases = [
        ("a GRU with the default cell (B=2, T=5, d_in=3, d_h=4)", (2, 5, 3, 4), None),
        ("a plain RNN (cell='rnn', B=3, T=4, d_in=2, d_h=3)", (3, 4, 2, 3), "rnn"),
        ("a GRU (cell='gru') over one sequence of 6 positions (d_in=4, d_h=2)", (1, 6, 4, 2), "gru"),
        ("a GRU over sequences of one position (B=2, T=1)", (2, 1, 3, 3), "gru"),
    ]
    for description, (B, T, d_in, d_h), cell in cases:
        kind = cell or "gru"
        X = rng.normal(size=(B, T, d_in))
        params_fwd = cell_params(rng, kind, d_in, d_h, bias_scale=0.3)
        params_bwd = cell_params(rng, kind, d_in, d_h, bias_scale=0.3)
        if cell is None:
            actual = call(bidirectional_encode, X, params_fwd, params_bwd, on=description)
        else:
            actual = call(bidirectional_encode, X, params_fwd, params_bwd, cell=cell, on=description)
        expected = reference.bidirectional_encode(X, params_fwd, params_bwd, kind)
        name = f"the annotations on {description}"
        if isinstance(actual, np.ndarray) and actual.shape == (B, 2 * T, d_h) and T > 1:
            check(False, f"{name} have shape {actual.shape}: concatenate the two halves along "
                         "the last axis (the features), not along the time axis.")
        check_shape(actual, expected.shape, name)
        if not close(actual, expected):
            default_note = "the default cell is 'gru'" if cell is None else "cell='gru'"
            _diagnose_bidirectional(actual, X, params_fwd, params_bwd, kind, name, default_note)
        check_close(actual, expected, name,
                    "position j should hold [h_fwd_j ; h_bwd_j], the forward RNN's state after "
                    "x_0 … x_j and the backward RNN's state after x_{T-1} … x_j")


def _diagnose_bidirectional(actual, X, params_fwd, params_bwd, cell, name, default_note):
    fwd = encode(X, params_fwd, cell)[0]
    bwd_reading_order = encode(X[:, ::-1], params_bwd, cell)[0]
    bwd = bwd_reading_order[:, ::-1]
    bwd_forward_order = encode(X, params_bwd, cell)[0]
    both = lambda first, second: np.concatenate([first, second], axis=-1)  # noqa: E731
    T = X.shape[1]
    if T > 1 and close(actual, both(fwd, bwd_reading_order)):
        check(False, f"{name}: the backward states are still in reading order; flip them back "
                     "(H_bwd[:, ::-1]) so that position j holds the backward state of x_j.")
    if close(actual, both(bwd, fwd)):
        check(False, f"{name}: the halves are in the wrong order; position j holds "
                     "[h_fwd_j ; h_bwd_j], the forward half first.")
    if T > 1 and any(close(actual, both(fwd, H)) for H in (
            bwd_forward_order, bwd_forward_order[:, ::-1], bwd_forward_order[::-1],
            encode(X[:, :, ::-1], params_bwd, cell)[0])):
        check(False, f"{name}: the backward RNN must read each sequence from its end; run it on "
                     "X[:, ::-1] (the time axis) and flip its states back.")
    fwd_with_bwd_params = encode(X, params_bwd, cell)[0]
    bwd_with_fwd_params = encode(X[:, ::-1], params_fwd, cell)[0][:, ::-1]
    if any(close(actual, H) for H in (both(fwd, bwd_with_fwd_params),
                                       both(fwd_with_bwd_params, bwd),
                                       both(fwd_with_bwd_params, bwd_with_fwd_params))):
        check(False, f"{name}: use params_fwd for the forward RNN and params_bwd for the "
                     "backward RNN.")
    # GRU parameters hold the plain RNN's keys too: a forgotten `cell` runs the RNN.
    if cell == "gru" and close(actual, reference.bidirectional_encode(
            X, params_fwd, params_bwd, "rnn")):
        check(False, f"{name}: they come from the plain RNN cell, but the cell is the GRU "
                     f"here ({default_note}); pass cell on to encode.")


# -- additive_score -------------------------------------------------------------------

def check_additive_score(additive_score):
    rng = seeded(SEED + 1)
    cases = [
        ("a batch with B = T = 3 and d_s = d_h = 4 (d_a=5)", (3, 3, 4, 4, 5)),
        ("B=2, T=5, d_s=3, d_h=6, d_a=4", (2, 5, 3, 6, 4)),
        ("one sequence of one position (B=1, T=1, d_s=2, d_h=3, d_a=2)", (1, 1, 2, 3, 2)),
        ("B=4, T=2, d_s=5, d_h=2, d_a=7", (4, 2, 5, 2, 7)),
    ]
    problems = []
    for description, (B, T, d_s, d_h, d_a) in cases:
        s_prev, H = rng.normal(size=(B, d_s)), rng.normal(size=(B, T, d_h))
        problems.append((description, s_prev, H, _attention_params(rng, d_s, d_h, d_a)))
    problems.append(("the task's two sequences (B = T = 2) with W_a = U_a = v_a = 1", np.array([[1.0], [-1.0]]),
                     np.array([[[0.0], [1.0]], [[0.0], [1.0]]]),
                     {"W_a": np.ones((1, 1)), "U_a": np.ones((1, 1)), "v_a": np.ones(1)}))
    for description, s_prev, H, params in problems:
        actual = call(additive_score, s_prev, H, params, on=description, stand_ins=GRADED)
        expected = reference.additive_score(s_prev, H, params)
        name = f"the scores on {description}"
        check_shape(actual, expected.shape, name)
        if not close(actual, expected):
            _diagnose_score(actual, s_prev, H, params, name)
        check_close(actual, expected, name,
                    "e_j should be v_a · tanh(s_prev @ W_a + H_j @ U_a)")


def _diagnose_score(actual, s_prev, H, params, name):
    W_a, U_a, v_a = params["W_a"], params["U_a"], params["v_a"]
    state, annotations = (s_prev @ W_a)[:, None, :], H @ U_a  # (B, 1, d_a), (B, T, d_a)
    if W_a.shape == U_a.shape and close(
            actual, reference.additive_score(s_prev, H, {"W_a": U_a, "U_a": W_a, "v_a": v_a})):
        check(False, f"{name}: W_a applies to the decoder state s_prev and U_a to the "
                     "annotations H, not the other way round.")
    if close(actual, (state + annotations) @ v_a):
        check(False, f"{name}: apply tanh to s_prev @ W_a + H_j @ U_a before the dot product "
                     "with v_a.")
    if close(actual, np.tanh(state + annotations).sum(axis=-1)):
        check(False, f"{name}: take the dot product of the hidden layer tanh(…) with v_a, "
                     "not its sum.")
    if close(actual, (np.tanh(state) + np.tanh(annotations)) @ v_a):
        check(False, f"{name}: tanh applies to the sum s_prev @ W_a + H_j @ U_a, not to "
                     "each term.")
    B, T = H.shape[:2]
    if B == T and close(actual, np.tanh((s_prev @ W_a)[None, :, :] + annotations) @ v_a):
        check(False, f"{name}: add s_prev @ W_a of each sequence to every position of that "
                     "sequence; insert the time axis, (s_prev @ W_a)[:, None, :].")


# -- masked_softmax -------------------------------------------------------------------

def check_masked_softmax(masked_softmax):
    rng = seeded(SEED + 2)
    fully_masked_column = np.ones((4, 3), dtype=bool)
    fully_masked_column[:, 1] = False
    fully_masked_column[0, 2] = False
    three_axes = rng.normal(size=(2, 3, 4))
    cases = [
        ("(3, 5) scores without a mask", rng.normal(size=(3, 5)), None, -1),
        ("(4, 3) scores without a mask, along axis 0", rng.normal(size=(4, 3)), None, 0),
        ("(3, 5) scores with a padding mask (lengths 5, 3, 1)",
         rng.normal(size=(3, 5)), _mask([5, 3, 1], 5), -1),
        ("(3, 4) scores where row 1 is all masked (lengths 4, 0, 2)",
         rng.normal(size=(3, 4)), _mask([4, 0, 2], 4), -1),
        ("(2, 3, 4) scores with a (2, 1, 4) mask", three_axes, _mask([3, 2], 4)[:, None, :], -1),
        ("(4, 3) scores along axis 0 where column 1 is all masked",
         rng.normal(size=(4, 3)), fully_masked_column, 0),
        ("scores around 1e4 with a padding mask", 1e4 + 5 * rng.normal(size=(2, 5)),
         _mask([5, 2], 5), -1),
        ("scores around -1e4 with a padding mask", -1e4 + 5 * rng.normal(size=(2, 5)),
         _mask([4, 3], 5), -1),
    ]
    for description, scores, mask, axis in cases:
        name = f"masked_softmax of {description}"
        if mask is None:
            actual = call(masked_softmax, scores, axis=axis, on=description, stand_ins=GRADED)
        else:
            actual = call(masked_softmax, scores, mask, axis=axis, on=description, stand_ins=GRADED)
        _check_weights(actual, reference.masked_softmax(scores, mask, axis=axis), scores, mask,
                       axis, name)
        check_close(actual, reference.masked_softmax(scores, mask, axis=axis), name,
                    "the values differ from a softmax of the kept entries along the axis")


def _check_weights(actual, expected, scores, mask, axis, name):
    """Weights of a masked softmax along ``axis``: the known mistakes, the facts, the values."""
    check_shape(actual, expected.shape, name)
    allowed = np.ones(expected.shape, dtype=bool) if mask is None \
        else np.broadcast_to(mask, expected.shape)
    if not close(actual, expected):
        mistakes = []
        if mask is not None:
            # an inverted mask decides the rows that have masked entries; only those are compared
            inverted = reference.masked_softmax(scores, ~allowed, axis=axis)
            rows = np.broadcast_to((~allowed).any(axis=axis, keepdims=True), expected.shape)
            check(not (rows.any() and close(actual[rows], inverted[rows])),
                  f"{name}: the mask is inverted; True marks the entries that are kept.")
            mistakes += [(reference.masked_softmax(np.where(allowed, scores, -1e9), None, axis=axis),
                          "a row whose entries are all masked gets a uniform distribution: it "
                          "must get all-zero weights"),
                         (np.where(allowed, reference.masked_softmax(scores, None, axis=axis), 0),
                          "the mask is applied to the weights after the softmax: apply it to the "
                          "scores, before the softmax"),
                         (reference.masked_softmax(scores, None, axis=axis),
                          "the mask is ignored: masked entries must get weight 0")]
        if scores.ndim > 1:
            other = -1 if axis in (0, -scores.ndim) else 0
            mistakes.append((reference.masked_softmax(scores, mask, axis=other),
                             f"the weights are normalised along axis {other}, not along axis {axis}"))
        diagnose(actual, mistakes, f"{name}: ")
    check_weights(actual, allowed, name, keys="entries", row="a row", axis=axis)


# -- bahdanau_attention ---------------------------------------------------------------

def check_bahdanau_attention(bahdanau_attention):
    rng = seeded(SEED + 3)
    cases = []
    for description, (B, T, d_s, d_h, d_a), lengths in [
        ("no mask (B=2, T=4, d_s=3, d_h=6, d_a=5)", (2, 4, 3, 6, 5), None),
        ("a padding mask (B=3, T=5, lengths 5, 2, 3)", (3, 5, 4, 2, 3), [5, 2, 3]),
        ("a sequence whose positions are all masked (lengths 3, 0)", (2, 3, 2, 4, 3), [3, 0]),
        ("one sequence (B=1, T=6, d_s=2, d_h=3, d_a=4)", (1, 6, 2, 3, 4), None),
    ]:
        cases.append((description, rng.normal(size=(B, d_s)), rng.normal(size=(B, T, d_h)),
                      _attention_params(rng, d_s, d_h, d_a), None if lengths is None else _mask(lengths, T)))
    s_prev, H, params = _example()
    cases += [("the task's example", s_prev, H, params, None),
              ("the task's example with position 1 masked", s_prev, H, params, np.array([[True, False]])),
              ("the task's example with every position masked", s_prev, H, params, np.array([[False, False]]))]
    for description, s_prev, H, params, mask in cases:
        kwargs = {} if mask is None else {"mask": mask}
        result = call(bahdanau_attention, s_prev, H, params, on=description, stand_ins=GRADED, **kwargs)
        context, weights = reference.bahdanau_attention(s_prev, H, params, mask)
        check(isinstance(result, tuple) and len(result) == 2,
              f"bahdanau_attention should return a pair (context, weights), but on "
              f"{description} it returned a {type(result).__name__}.")
        actual_context, actual_weights = result
        if (np.shape(actual_context), np.shape(actual_weights)) == (weights.shape, context.shape) \
                and weights.shape != context.shape:
            check(False, "return (context, weights) in this order, not (weights, context).")
        name = f"the weights on {description}"
        check_shape(actual_weights, weights.shape, name)
        _check_weights(actual_weights, weights, reference.additive_score(s_prev, H, params), mask, -1, name)
        compare(actual_weights, weights, name,
                hint="they should be masked_softmax(additive_score(s_prev, H, params), mask)")
        compare(actual_context, np.einsum("bt,bth->bh", actual_weights, H), f"the context on {description}",
                hint="it should be Σ_j weights_j h_j")


def _example(W_a=0.0):
    """The tasks' visible example: two annotations (0, 4) and (1, 0), scores (0, ln 3) from s_prev = 0."""
    return np.zeros((1, 1)), np.array([[[0.0, 4.0], [1.0, 0.0]]]), {
        "W_a": np.array([[W_a]]), "U_a": np.array([[1.0], [0.0]]), "v_a": np.array([np.log(3.0) / np.tanh(1.0)])}


# -- bahdanau_decode_step -------------------------------------------------------------

def check_bahdanau_decode_step(bahdanau_decode_step):
    rng = seeded(SEED + 4)
    cases = [
        ("a GRU decoder with the default cell (B=2, T=4, d_emb=3, d_h=6, d_s=5)",
         (2, 4, 3, 6, 5), None, None),
        ("a GRU decoder (cell='gru') with a padding mask (lengths 4, 2)",
         (2, 4, 2, 4, 3), [4, 2], "gru"),
        ("a plain RNN decoder (cell='rnn', B=3, T=3, d_emb=2, d_h=4, d_s=3)",
         (3, 3, 2, 4, 3), [3, 1, 2], "rnn"),
        ("a GRU decoder where one sequence is all masked (lengths 0, 3)",
         (2, 3, 2, 2, 4), [0, 3], "gru"),
    ]
    problems = []
    for description, (B, T, d_emb, d_h, d_s), lengths, cell in cases:
        params = {"attention": _attention_params(rng, d_s, d_h, 4),
                  "cell": cell_params(rng, cell or "gru", d_emb + d_h, d_s, bias_scale=0.3)}
        problems.append((description, rng.normal(size=(B, d_emb)), rng.normal(size=(B, d_s)),
                         rng.normal(size=(B, T, d_h)), params, None if lengths is None else _mask(lengths, T), cell))
    _, H, attention = _example(W_a=5.0)
    params = {"attention": attention, "cell": {"W_xh": np.array([[1.0], [1.0], [0.0]]), "W_hh": np.zeros((1, 1)),
                                               "b_h": np.zeros(1)}}
    problems += [("the task's example", np.array([[0.5]]), np.zeros((1, 1)), H, params, None, "rnn"),
                 ("the task's example with position 1 masked", np.array([[0.5]]), np.zeros((1, 1)), H, params,
                  np.array([[True, False]]), "rnn")]
    gru = {name: np.zeros((3, 1)) for name in ("W_xz", "W_xr")}  # the task's GRU: every weight 0 but W_xh
    gru.update({name: np.zeros((1, 1)) for name in ("W_hz", "W_hr", "W_hh")})
    gru.update({name: np.zeros(1) for name in ("b_z", "b_r", "b_h")}, W_xh=params["cell"]["W_xh"])
    problems.append(("the task's example with the default cell", np.array([[0.5]]), np.zeros((1, 1)), H,
                     {**params, "cell": gru}, None, None))
    for description, y_prev, s_prev, H, params, mask, cell in problems:
        kind = cell or "gru"
        kwargs = {} if mask is None else {"mask": mask}
        if cell is not None:
            kwargs["cell"] = cell
        result = call(bahdanau_decode_step, y_prev, s_prev, H, params, on=description, stand_ins=GRADED, **kwargs)
        expected = reference.bahdanau_decode_step(y_prev, s_prev, H, params, mask, kind)
        check(isinstance(result, tuple) and len(result) == 3,
              f"bahdanau_decode_step should return a triple (s_t, context, weights), but on "
              f"{description} it returned a {type(result).__name__}.")
        shapes = tuple(np.shape(a) for a in result)
        wanted = tuple(a.shape for a in expected)
        if shapes != wanted and sorted(shapes) == sorted(wanted):
            check(False, "return (s_t, context, weights) in this order.")
        s_t, context, weights = result
        _check_step(s_t, context, weights, expected, y_prev, s_prev, H, params, mask, kind,
                    description, default=cell is None)


def _check_step(s_t, context, weights, expected, y_prev, s_prev, H, params, mask, cell,
                description, default):
    expected_s, expected_context, expected_weights = expected
    name = f"the weights on {description}"
    check_shape(weights, expected_weights.shape, name)
    check_shape(s_t, expected_s.shape, f"s_t on {description}")
    if not close(weights, expected_weights):
        if np.all(np.isfinite(s_t)) and close(
                weights, reference.bahdanau_attention(s_t, H, params["attention"], mask)[1]):
            check(False, f"on {description}, the context is computed from the new state s_t; "
                         "Bahdanau computes it from the previous state s_prev, before the "
                         "cell runs.")
        if mask is not None and close(
                weights, reference.bahdanau_attention(s_prev, H, params["attention"])[1]):
            check(False, f"{name}: padding positions get weight; pass the mask on to "
                         "bahdanau_attention.")
        _check_weights(weights, expected_weights,
                       reference.additive_score(s_prev, H, params["attention"]), mask, -1, name)
        check(False, f"{name} differ from bahdanau_attention(s_prev, H, params['attention'], "
                     "mask): compute the context from the previous state s_prev, with the mask.")
    check_close(context, expected_context, f"the context on {description}",
                "it should be the context that bahdanau_attention returns")
    if not close(s_t, expected_s):
        step = CELLS[cell]
        swapped = step(np.concatenate([expected_context, y_prev], axis=-1), s_prev,
                       params["cell"])
        if close(s_t, swapped):
            check(False, f"s_t on {description}: the cell's input is "
                         "concatenate([y_prev, context]), y_prev first.")
        if cell == "gru" and close(s_t, rnn_cell(
                np.concatenate([y_prev, expected_context], axis=-1), s_prev, params["cell"])):
            note = "the default cell is 'gru'" if default else "cell='gru'"
            check(False, f"s_t on {description} comes from the plain RNN cell, but the cell "
                         f"is the GRU here ({note}); use the cell that `cell` names.")
    check_close(s_t, expected_s, f"s_t on {description}",
                "it should be cell(concatenate([y_prev, context]), s_prev) with params['cell']")
