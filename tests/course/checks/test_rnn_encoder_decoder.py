"""What the RNN encoder-decoder checks do beyond the contract of test_hidden_checks.py."""

import numpy as np
import pytest

from autograder.checks import rnn_encoder_decoder as checks
from autograder.engine.checking import CheckFailed
from solutions.rnn_encoder_decoder import decode_step, encode, greedy_decode


# -- the hidden checks' greedy problems exercise what they claim ----------------------------

def finishing_steps(tokens, eos):
    return [int(np.flatnonzero(row == eos)[0]) + 1 if (row == eos).any() else None
            for row in tokens]


@pytest.mark.parametrize("name, max_len, steps", [
    ("rnn", 9, [3, 1, None, 7, None]),
    ("rnn-finishing", 12, [4, 5, 4, 3]),
    ("gru", 8, [3, 2, None, 5, None]),
])
def test_hidden_greedy_problems_finish_rows_at_different_steps(name, max_len, steps):
    X, params, bos, eos, cell = checks.greedy_problem(name)
    tokens = greedy_decode(X, params, bos, eos, max_len, cell)
    assert finishing_steps(tokens, eos) == steps
    assert not (tokens == bos).any()
    # each known mistake changes the answer
    for options in (dict(start="zeros"), dict(feed="bos"), dict(pad=False), dict(stop="first"),
                    dict(stop="any"), dict(stop="never")):
        if options == {"stop": "never"} and tokens.shape[1] == max_len:
            continue
        variant = checks.greedy_variant(X, params, bos, eos, max_len, cell, **options)
        assert variant.shape != tokens.shape or not np.array_equal(variant, tokens), options
    # the argmax is never close to a tie, so any correct float64 code agrees
    _, c = encode(X, params["encoder"], cell)
    s, previous = c, np.full(len(X), bos)
    for t in range(tokens.shape[1]):
        s = decode_step(params["embedding"][previous], s, c, params["decoder"], cell)
        logits = np.sort(s @ params["W_out"] + params["b_out"], axis=-1)
        running = ~(tokens[:, :t] == eos).any(axis=1)
        assert np.all((logits[:, -1] - logits[:, -2])[running] > 1e-3)
        previous = tokens[:, t]


STUDENT_WITH_A_WRONG_GRU = """
def rnn_cell(x_t, h_prev, params):
    return np.tanh(x_t @ params["W_xh"] + h_prev @ params["W_hh"] + params["b_h"])

def gru_cell(x_t, h_prev, params):
    return np.tanh(x_t @ params["W_xh"] + h_prev @ params["W_hh"])  # no gates: wrong

def encode(X, params, cell="rnn"):
    step = rnn_cell if cell == "rnn" else gru_cell
    h, states = np.zeros((X.shape[0], params["W_hh"].shape[0])), []
    for t in range(X.shape[1]):
        h = step(X[:, t], h, params)
        states.append(h)
    return np.stack(states, axis=1), h

def encode_doubled_for_gru(X, params, cell="rnn"):
    H, h = encode(X, params, cell)
    return (H, h) if cell == "rnn" else (2 * H, 2 * h)  # wrong for the gru
"""


def test_hidden_checks_grade_a_task_with_the_reference_standing_in_for_the_students_earlier_functions():
    namespace = {"np": np}
    exec(STUDENT_WITH_A_WRONG_GRU, namespace)
    checks.check_encode(namespace["encode"])  # right, beside the student's wrong gru_cell
    assert namespace["gru_cell"].__name__ == "gru_cell"  # the student's, restored after the checks
    with pytest.raises(CheckFailed, match="H on a gru encoder") as failure:
        checks.check_encode(namespace["encode_doubled_for_gru"])
    assert "gru_cell" not in str(failure.value)  # its own mistake, not the cell's
