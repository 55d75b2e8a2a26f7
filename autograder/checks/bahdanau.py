"""Hidden checks for the Bahdanau attention exercise, as case tables (`engine.cases`): per task the
mistakes it knows (backward states in reading order, halves swapped, W_a and U_a swapped, tanh or v_a
missing, the softmax over the wrong axis, the mask ignored or inverted, an all-masked row that is
uniform, the maximum taken over the masked scores too, the context from the new state, the cell's
input in the wrong order) and the facts of every right value; per check its cases."""

import numpy as np

from solutions import bahdanau as reference
from solutions.rnn_encoder_decoder import encode

from autograder.engine.cases import Exercise, Mistake, Output, case, given, mask_mistakes, weight_facts
from autograder.engine.harness import seeded
from .rnn_encoder_decoder import cell_params
from .scaled_dot_product import max_over_masked

SEED = 20140901  # "Neural machine translation by jointly learning to align and translate", arXiv v1
GRU_IS_DEFAULT = "the cell is the GRU here (the default cell is 'gru')"


def _attention_params(rng, d_s, d_h, d_a):
    return {"W_a": rng.normal(size=(d_s, d_a)) / np.sqrt(d_s), "U_a": rng.normal(size=(d_h, d_a)) / np.sqrt(d_h),
            "v_a": 1.5 * rng.normal(size=d_a)}


def _mask(lengths, T):
    """The padding mask of sequences of `lengths` (None: no mask)."""
    return None if lengths is None else np.arange(T) < np.asarray(lengths)[:, None]


def _example(W_a=0.0):
    """The tasks' visible example: two annotations (0, 4) and (1, 0), scores (0, ln 3) from s_prev = 0."""
    return np.zeros((1, 1)), np.array([[[0.0, 4.0], [1.0, 0.0]]]), {
        "W_a": np.array([[W_a]]), "U_a": np.array([[1.0], [0.0]]), "v_a": np.array([np.log(3.0) / np.tanh(1.0)])}


def _halves(change):
    """The annotations with the reference's halves changed: `change(forward, backward, X, params_bwd, cell)`."""
    def annotations(X, params_fwd, params_bwd, cell):
        forward, backward = np.split(reference.bidirectional_encode(X, params_fwd, params_bwd, cell), 2, axis=-1)
        return change(forward, backward, X, params_bwd, cell)
    return annotations


def _additive(combine):
    """The scores v_a · combine(s_prev @ W_a, H @ U_a) with the state's terms on the time axis."""
    return lambda s_prev, H, params: combine((s_prev @ params["W_a"])[:, None, :], H @ params["U_a"], params["v_a"])


def _softmax_mistakes(inputs, ignored=None):
    """The mistakes of a masked softmax of `inputs(**arguments)` = (scores, mask, axis); `ignored`: the message
    of an ignored mask, if not the default."""
    def softmax(change):
        return lambda **arguments: change(*inputs(**arguments))

    return [*[Mistake("the mask is inverted; True marks the entries that are kept", softmax(inverted),
                      when=lambda **arguments: inputs(**arguments)[1] is not None) for inverted in (
                lambda scores, mask, axis: reference.masked_softmax(scores, ~np.broadcast_to(mask, scores.shape), axis),
                lambda scores, mask, axis: reference.masked_softmax(np.where(mask, -1e9, scores), None, axis))],
            *mask_mistakes(reference.masked_softmax, inputs, keys="entries", row="a row", ignored=ignored),
            max_over_masked(inputs, keys="entries"),
            *[Mistake(f"the weights are normalised along axis {other}, not along axis {wanted}", softmax(
                lambda scores, mask, axis, other=other: reference.masked_softmax(scores, mask, axis=other)),
                when=lambda wanted=wanted, **arguments: inputs(**arguments)[2] == wanted)
              for other, wanted in ((0, -1), (-1, 0))]]


def _from_new_state(y_prev, s_prev, H, params, mask, cell):
    """The weights from the state a cell reaches from y_prev and a zero context (Luong's order)."""
    s_t = reference.cell_function(cell)(np.concatenate([y_prev, 0 * H[:, 0]], -1), s_prev, params["cell"])
    return reference.bahdanau_attention(s_t, H, params["attention"], mask)[1]


exercise = Exercise(reference)
bidirectional_encode = exercise.task(
    "bidirectional_encode", hint="position j should hold [h_fwd_j ; h_bwd_j], the forward RNN's state after x_0 … "
                                 "x_j and the backward RNN's state after x_{T-1} … x_j", mistakes=[
        Mistake("the backward states are still in reading order; flip them back (H_bwd[:, ::-1]) so that position j "
                "holds the backward state of x_j",
                _halves(lambda fwd, bwd, *_: np.concatenate([fwd, bwd[:, ::-1]], -1))),
        Mistake("the halves are in the wrong order; position j holds [h_fwd_j ; h_bwd_j], the forward half first",
                _halves(lambda fwd, bwd, *_: np.concatenate([bwd, fwd], -1))),
        *[Mistake("the backward RNN must read each sequence from its end; run it on X[:, ::-1] (the time axis) and "
                  "flip its states back", _halves(lambda fwd, bwd, X, params, cell, backward=backward: np.concatenate(
                      [fwd, backward(X, params, cell)], -1)), when=lambda X, **_: X.shape[1] > 1)
          for backward in (lambda X, params, cell: encode(X, params, cell)[0],
                           lambda X, params, cell: encode(X, params, cell)[0][:, ::-1],
                           lambda X, params, cell: encode(X, params, cell)[0][::-1],
                           lambda X, params, cell: encode(X[:, :, ::-1], params, cell)[0])],
        *[Mistake("use params_fwd for the forward RNN and params_bwd for the backward RNN",
                  lambda X, params_fwd, params_bwd, cell, pick=pick: reference.bidirectional_encode(
                      X, *pick(params_fwd, params_bwd), cell))
          for pick in (lambda fwd, bwd: (fwd, fwd), lambda fwd, bwd: (bwd, bwd), lambda fwd, bwd: (bwd, fwd))],
        Mistake(f"they come from the plain RNN cell, but {GRU_IS_DEFAULT}; pass cell on to encode",
                lambda X, params_fwd, params_bwd, cell: reference.bidirectional_encode(
                    X, params_fwd, params_bwd, "rnn")),
        Mistake("concatenate the two halves along the last axis (the features), not along the time axis",
                _halves(lambda fwd, bwd, *_: np.concatenate([fwd, bwd], 1)))])
additive_score = exercise.task("additive_score", hint="e_j should be v_a · tanh(s_prev @ W_a + H_j @ U_a)", mistakes=[
    Mistake("W_a applies to the decoder state s_prev and U_a to the annotations H, not the other way round",
            lambda s_prev, H, params: reference.additive_score(s_prev, H, {**params, "W_a": params["U_a"],
                                                                           "U_a": params["W_a"]})),
    Mistake("apply tanh to s_prev @ W_a + H_j @ U_a before the dot product with v_a",
            _additive(lambda state, annotations, v_a: (state + annotations) @ v_a)),
    Mistake("take the dot product of the hidden layer tanh(…) with v_a, not its sum",
            _additive(lambda state, annotations, v_a: np.tanh(state + annotations).sum(axis=-1))),
    Mistake("tanh applies to the sum s_prev @ W_a + H_j @ U_a, not to each term",
            _additive(lambda state, annotations, v_a: (np.tanh(state) + np.tanh(annotations)) @ v_a)),
    Mistake("add s_prev @ W_a of each sequence to every position of that sequence; insert the time axis, "
            "(s_prev @ W_a)[:, None, :]", _additive(lambda state, annotations, v_a: np.tanh(
                state[:, 0][None] + annotations) @ v_a))])
masked_softmax = exercise.task(
    "masked_softmax", hint="the values differ from a softmax of the kept entries along the axis",
    mistakes=_softmax_mistakes(lambda scores, mask, axis: (scores, mask, axis)),
    facts=weight_facts(keys="entries", row="a row"))
bahdanau_attention = exercise.task("bahdanau_attention", order=("weights", "context"), outputs=[
    Output("context", hint="it should be Σ_j weights_j h_j",
           expected=lambda got, s_prev, H, params, mask: np.einsum("bt,bth->bh", got["weights"], H)),
    Output("weights", hint="they should be masked_softmax(additive_score(s_prev, H, params), mask)",
           mistakes=_softmax_mistakes(lambda s_prev, H, params, mask: (
               reference.additive_score(s_prev, H, params), mask, -1)),
           facts=weight_facts(keys="entries", row="a row"))])
bahdanau_decode_step = exercise.task("bahdanau_decode_step", order=("weights", "context", "s_t"), outputs=[
    Output("s_t", hint="it should be cell(concatenate([y_prev, context]), s_prev) with params['cell']", mistakes=[
        Mistake("the cell's input is concatenate([y_prev, context]), y_prev first",
                lambda y_prev, s_prev, H, params, mask, cell: reference.cell_function(cell)(np.concatenate(
                    [reference.bahdanau_attention(s_prev, H, params["attention"], mask)[0], y_prev], -1),
                    s_prev, params["cell"])),
        Mistake(f"it comes from the plain RNN cell, but {GRU_IS_DEFAULT}: use the cell that `cell` names",
                lambda y_prev, s_prev, H, params, mask, cell: reference.bahdanau_decode_step(
                    y_prev, s_prev, H, params, mask, "rnn"))]),
    Output("context", hint="it should be the context that bahdanau_attention returns"),
    Output("weights", hint="compute the context from the previous state s_prev, with the mask: "
                           "bahdanau_attention(s_prev, H, params['attention'], mask)", mistakes=[
        Mistake("the context is computed from the new state s_t; Bahdanau computes it from the previous state s_prev, "
                "before the cell runs", _from_new_state),
        *_softmax_mistakes(lambda y_prev, s_prev, H, params, mask, cell: (
            reference.additive_score(s_prev, H, params["attention"]), mask, -1),
            ignored="padding positions get weight; pass the mask on to bahdanau_attention")],
        facts=weight_facts(keys="entries", row="a row"))])


def check_bidirectional_encode(function):
    rng = seeded(SEED)
    cases = []
    for description, (B, T, d_in, d_h), cell in [
            ("a GRU with the default cell (B=2, T=5, d_in=3, d_h=4)", (2, 5, 3, 4), None),
            ("a plain RNN (cell='rnn', B=3, T=4, d_in=2, d_h=3)", (3, 4, 2, 3), "rnn"),
            ("a GRU (cell='gru') over one sequence of 6 positions (d_in=4, d_h=2)", (1, 6, 4, 2), "gru"),
            ("a GRU over sequences of one position (B=2, T=1)", (2, 1, 3, 3), "gru")]:
        X = rng.normal(size=(B, T, d_in))
        params = [cell_params(rng, cell or "gru", d_in, d_h, bias_scale=0.3) for _ in ("fwd", "bwd")]
        cases.append(case(description, X, *params, **given(cell=cell)))
    scalar = [{"W_xh": np.ones((1, 1)), "W_hh": np.full((1, 1), w_hh), "b_h": np.zeros(1)} for w_hh in (0.0, 1.0)]
    bidirectional_encode.check(function, cases + [
        case("the task's two sequences x = (0, 0, 20) and (20, 0, 0)", np.array([[[0.0], [0.0], [20.0]],
                                                                                 [[20.0], [0.0], [0.0]]]),
             *scalar, cell="rnn")])


def check_additive_score(function):
    rng = seeded(SEED + 1)
    cases = []
    for description, (B, T, d_s, d_h, d_a) in [
            ("a batch with B = T = 3 and d_s = d_h = 4 (d_a=5)", (3, 3, 4, 4, 5)),
            ("B=2, T=5, d_s=3, d_h=6, d_a=4", (2, 5, 3, 6, 4)),
            ("one sequence of one position (B=1, T=1, d_s=2, d_h=3, d_a=2)", (1, 1, 2, 3, 2)),
            ("B=4, T=2, d_s=5, d_h=2, d_a=7", (4, 2, 5, 2, 7))]:
        s_prev, H = rng.normal(size=(B, d_s)), rng.normal(size=(B, T, d_h))
        cases.append(case(description, s_prev, H, _attention_params(rng, d_s, d_h, d_a)))
    ones = {"W_a": np.ones((1, 1)), "U_a": np.ones((1, 1)), "v_a": np.ones(1)}
    additive_score.check(function, cases + [case("the task's two sequences (B = T = 2) with W_a = U_a = v_a = 1",
                                                 np.array([[1.0], [-1.0]]), np.array([[[0.0], [1.0]]] * 2), ones)])


def check_masked_softmax(function):
    rng = seeded(SEED + 2)
    fully_masked_column = np.ones((4, 3), dtype=bool)
    fully_masked_column[:, 1] = False
    fully_masked_column[0, 2] = False
    three_axes = rng.normal(size=(2, 3, 4))
    large_masked = rng.normal(size=(3, 4))
    large_masked[0, 3] = 1e4                                               # masked: row 0 has length 3
    masked_softmax.check(function, [
        case("(3, 5) scores without a mask", rng.normal(size=(3, 5)), axis=-1),
        case("(4, 3) scores without a mask, along axis 0", rng.normal(size=(4, 3)), axis=0),
        case("(3, 5) scores with a padding mask (lengths 5, 3, 1)", rng.normal(size=(3, 5)), _mask([5, 3, 1], 5),
             axis=-1),
        case("(3, 4) scores where row 1 is all masked (lengths 4, 0, 2)", rng.normal(size=(3, 4)),
             _mask([4, 0, 2], 4), axis=-1),
        case("(2, 3, 4) scores with a (2, 1, 4) mask", three_axes, _mask([3, 2], 4)[:, None, :], axis=-1),
        case("(4, 3) scores along axis 0 where column 1 is all masked", rng.normal(size=(4, 3)), fully_masked_column,
             axis=0),
        case("scores around 1e4 with a padding mask", 1e4 + 5 * rng.normal(size=(2, 5)), _mask([5, 2], 5), axis=-1),
        case("scores around -1e4 with a padding mask", -1e4 + 5 * rng.normal(size=(2, 5)), _mask([4, 3], 5), axis=-1),
        case("(3, 4) scores whose masked entry [0, 3] is 1e4 (lengths 3, 4, 2)", large_masked, _mask([3, 4, 2], 4),
             axis=-1),
        case("the task's scores (0, 1e4, ln 3) and (ln 3, 0, 5), the 1e4 and the 5 masked",
             np.array([[0.0, 1e4, np.log(3.0)], [np.log(3.0), 0.0, 5.0]]),
             np.array([[True, False, True], [True, True, False]]), axis=-1)])


def check_bahdanau_attention(function):
    rng = seeded(SEED + 3)
    cases = []
    for description, (B, T, d_s, d_h, d_a), lengths in [
            ("no mask (B=2, T=4, d_s=3, d_h=6, d_a=5)", (2, 4, 3, 6, 5), None),
            ("a padding mask (B=3, T=5, lengths 5, 2, 3)", (3, 5, 4, 2, 3), [5, 2, 3]),
            ("a sequence whose positions are all masked (lengths 3, 0)", (2, 3, 2, 4, 3), [3, 0]),
            ("one sequence (B=1, T=6, d_s=2, d_h=3, d_a=4)", (1, 6, 2, 3, 4), None)]:
        s_prev, H = rng.normal(size=(B, d_s)), rng.normal(size=(B, T, d_h))
        cases.append(case(description, s_prev, H, _attention_params(rng, d_s, d_h, d_a),
                          **given(mask=_mask(lengths, T))))
    _, H, params = _example()
    a = np.arctanh(np.log(3.0) / 1e4)                                      # 1e4 tanh(a) = ln 3
    large = (np.zeros((2, 1)), np.array([[[0.0, 4.0], [20.0, 0.0], [a, 0.0]], [[a, 2.0], [0.0, 4.0], [a, 0.0]]]),
             {**params, "v_a": np.array([1e4])})
    bahdanau_attention.check(function, cases + [
        case("the task's batch of two", np.zeros((2, 1)), np.concatenate([H, [[[1.0, 0.0], [0.0, 0.0]]]]), params),
        case("the task's batch whose masked position 1 of sequence 0 has the score 1e4", *large,
             mask=np.array([[True, False, True], [True, True, False]])),
        case("the task's example", *_example()),
        case("the task's example with position 1 masked", *_example(), mask=np.array([[True, False]])),
        case("the task's example with every position masked", *_example(), mask=np.array([[False, False]]))])


def check_bahdanau_decode_step(function):
    rng = seeded(SEED + 4)
    cases = []
    for description, (B, T, d_emb, d_h, d_s), lengths, cell in [
            ("a GRU decoder with the default cell (B=2, T=4, d_emb=3, d_h=6, d_s=5)", (2, 4, 3, 6, 5), None, None),
            ("a GRU decoder (cell='gru') with a padding mask (lengths 4, 2)", (2, 4, 2, 4, 3), [4, 2], "gru"),
            ("a plain RNN decoder (cell='rnn', B=3, T=3, d_emb=2, d_h=4, d_s=3)", (3, 3, 2, 4, 3), [3, 1, 2], "rnn"),
            ("a GRU decoder where one sequence is all masked (lengths 0, 3)", (2, 3, 2, 2, 4), [0, 3], "gru")]:
        params = {"attention": _attention_params(rng, d_s, d_h, 4),
                  "cell": cell_params(rng, cell or "gru", d_emb + d_h, d_s, bias_scale=0.3)}
        y_prev, s_prev, H = rng.normal(size=(B, d_emb)), rng.normal(size=(B, d_s)), rng.normal(size=(B, T, d_h))
        cases.append(case(description, y_prev, s_prev, H, params, **given(mask=_mask(lengths, T), cell=cell)))
    _, H, attention = _example(W_a=5.0)
    rnn = {"W_xh": np.array([[1.0], [1.0], [0.0]]), "W_hh": np.zeros((1, 1)), "b_h": np.zeros(1)}
    gru = {**{f"W_x{gate}": np.zeros((3, 1)) for gate in "zr"}, **{f"W_h{gate}": np.zeros((1, 1)) for gate in "zrh"},
           **{f"b_{gate}": np.zeros(1) for gate in "zrh"}, "W_xh": rnn["W_xh"]}  # every weight 0 but W_xh
    example = (np.array([[0.5]]), np.zeros((1, 1)), H)
    a = np.arctanh(np.log(3.0) / 1e4)                                      # 1e4 tanh(a) = ln 3
    large = (np.array([[0.5], [-0.5]]), np.zeros((2, 1)),
             np.array([[[0.0, 4.0], [20.0, 0.0], [a, 0.0]], [[a, 2.0], [0.0, 4.0], [a, 0.0]]]),
             {"attention": {**attention, "v_a": np.array([1e4])}, "cell": rnn})
    bahdanau_decode_step.check(function, cases + [
        case("the task's batch whose masked position 1 of sequence 0 has the score 1e4", *large,
             mask=np.array([[True, False, True], [True, True, False]]), cell="rnn"),
        case("the task's example", *example, {"attention": attention, "cell": rnn}, cell="rnn"),
        case("the task's example with position 1 masked", *example, {"attention": attention, "cell": rnn},
             mask=np.array([[True, False]]), cell="rnn"),
        case("the task's example with the default cell", *example, {"attention": attention, "cell": gru})])
