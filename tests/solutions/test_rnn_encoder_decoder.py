"""The reference RNN encoder-decoder: hand-computed cases and properties."""

import numpy as np
import pytest

from solutions.rnn_encoder_decoder import (
    decode_step, encode, greedy_decode, gru_cell, rnn_cell, sigmoid)

rng = np.random.default_rng(0)

LN3 = np.log(3.0)  # sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4


def random_params(cell, d_in, d_h):
    gates = "h" if cell == "rnn" else "zrh"
    params = {}
    for g in gates:
        params[f"W_x{g}"] = rng.normal(size=(d_in, d_h)) / np.sqrt(d_in)
        params[f"W_h{g}"] = rng.normal(size=(d_h, d_h)) / np.sqrt(d_h)
        params[f"b_{g}"] = 0.5 * rng.normal(size=d_h)
    return params


def random_model(cell="rnn", d_in=3, d_h=5, d_emb=4, V=6):
    return {"encoder": random_params(cell, d_in, d_h),
            "decoder": random_params(cell, d_emb + d_h, d_h),
            "embedding": rng.normal(size=(V, d_emb)),
            "W_out": 2.0 * rng.normal(size=(d_h, V)), "b_out": rng.normal(size=V)}


def counting_model():
    """A model whose decoder counts 1 → 2 → 3 → 4 (EOS) → 1 … from the slot set in c.

    Tokens: 0 = BOS, 1, 2, 3, 4 = EOS. The encoder's state copies its last
    input (h = tanh(10 x)); the decoder's state is ±1 with +1 in the slot of the
    token it produces, and each step moves the +1 to the next slot.
    """
    succ = {1: 2, 2: 3, 3: 4, 4: 1}
    P = np.zeros((5, 5))
    for i, j in succ.items():
        P[i, j] = 1.0
    d_emb = 2
    return {"encoder": {"W_xh": 10 * np.eye(5), "W_hh": np.zeros((5, 5)), "b_h": np.zeros(5)},
            "decoder": {"W_xh": np.zeros((d_emb + 5, 5)), "W_hh": 10 * P,
                        "b_h": np.array([-10.0, 0, 0, 0, 0])},
            "embedding": rng.normal(size=(5, d_emb)), "W_out": np.eye(5), "b_out": np.zeros(5)}


def counting_source(slots, T=2):
    """Sentences whose last input sets slot `k` of the context to +1 (others -1)."""
    X = rng.normal(size=(len(slots), T, 5))
    X[:, -1] = 2 * np.eye(5)[slots] - 1
    return X


# -- cells -------------------------------------------------------------------------

def test_sigmoid_is_stable_and_symmetric():
    x = np.array([-1000.0, -3.0, 0.0, 3.0, 1000.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is fine
        s = sigmoid(x)
    np.testing.assert_allclose(s, [0.0, 1 / (1 + np.exp(3)), 0.5, 1 / (1 + np.exp(-3)), 1.0])
    np.testing.assert_allclose(sigmoid(x) + sigmoid(-x), 1.0)


def test_rnn_cell_by_hand():
    x, h = np.array([[1.0, 2.0]]), np.array([[0.5, -0.5]])
    params = {"W_xh": np.array([[1.0, 0.0], [0.0, 0.5]]),  # x W_xh = [1, 1]
              "W_hh": np.array([[0.0, 1.0], [1.0, 0.0]]),  # h W_hh = [-0.5, 0.5]
              "b_h": np.array([0.0, -2.0])}
    np.testing.assert_allclose(rnn_cell(x, h, params), np.tanh([[0.5, -0.5]]))


def test_rnn_cell_matches_a_loop_over_units():
    params = random_params("rnn", 3, 4)
    x, h = rng.normal(size=(2, 3)), rng.normal(size=(2, 4))
    out = rnn_cell(x, h, params)
    for b in range(2):
        for j in range(4):
            pre = (sum(x[b, i] * params["W_xh"][i, j] for i in range(3))
                   + sum(h[b, k] * params["W_hh"][k, j] for k in range(4)) + params["b_h"][j])
            np.testing.assert_allclose(out[b, j], np.tanh(pre))


def gru_by_hand_params():
    zero = np.zeros((1, 2)), np.zeros((2, 2))
    return {"W_xz": zero[0], "W_hz": zero[1], "b_z": np.array([LN3, 0.0]),   # z = [3/4, 1/2]
            "W_xr": zero[0], "W_hr": zero[1], "b_r": np.array([LN3, -LN3]),  # r = [3/4, 1/4]
            "W_xh": np.array([[0.5, -0.5]]), "W_hh": np.array([[0.0, 1.0], [1.0, 0.0]]),
            "b_h": np.array([0.1, -0.1])}


def test_gru_cell_by_hand():
    # r ⊙ h = [0.6, -0.1], (r ⊙ h) W_hh = [-0.1, 0.6], x W_xh = [0.5, -0.5]
    # h̃ = tanh([0.5 - 0.1 + 0.1, -0.5 + 0.6 - 0.1]) = [tanh 0.5, 0]
    # h_t = z ⊙ h + (1 - z) ⊙ h̃ = [0.6 + 0.25 tanh 0.5, -0.2]
    x, h = np.array([[1.0]]), np.array([[0.8, -0.4]])
    np.testing.assert_allclose(gru_cell(x, h, gru_by_hand_params()),
                               [[0.6 + 0.25 * np.tanh(0.5), -0.2]], atol=1e-15)


def test_gru_update_gate_near_one_keeps_the_state_and_near_zero_takes_the_candidate():
    params = random_params("gru", 3, 4)
    x, h = rng.normal(size=(2, 3)), rng.uniform(-1, 1, size=(2, 4))
    keep = {**params, "W_xz": 0 * params["W_xz"], "W_hz": 0 * params["W_hz"], "b_z": np.full(4, 60.0)}
    np.testing.assert_allclose(gru_cell(x, h, keep), h)
    take = {**keep, "b_z": np.full(4, -60.0)}
    r = sigmoid(x @ params["W_xr"] + h @ params["W_hr"] + params["b_r"])
    candidate = np.tanh(x @ params["W_xh"] + (r * h) @ params["W_hh"] + params["b_h"])
    np.testing.assert_allclose(gru_cell(x, h, take), candidate)


def test_gru_reset_gate_zero_makes_the_candidate_forget_the_state():
    params = random_params("gru", 3, 4)
    params.update(W_xr=0 * params["W_xr"], W_hr=0 * params["W_hr"], b_r=np.full(4, -60.0),
                  W_xz=0 * params["W_xz"], W_hz=0 * params["W_hz"], b_z=np.full(4, -60.0))
    x = rng.normal(size=(2, 3))
    h1, h2 = rng.normal(size=(2, 4)), rng.normal(size=(2, 4))
    np.testing.assert_allclose(gru_cell(x, h1, params), gru_cell(x, h2, params))


def test_gru_cell_stays_finite_when_the_gates_saturate():
    params = random_params("gru", 3, 4)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        out = gru_cell(100 * rng.normal(size=(2, 3)), rng.normal(size=(2, 4)), params)
    assert np.all(np.isfinite(out)) and np.all(np.abs(out) < 10)


# -- encode ----------------------------------------------------------------------------

def test_encode_by_hand():
    params = {"W_xh": np.array([[1.0]]), "W_hh": np.array([[0.5]]), "b_h": np.array([0.0])}
    X = np.array([[[1.0], [0.0], [-1.0]]])
    h1 = np.tanh(1.0)
    h2 = np.tanh(0.5 * h1)
    h3 = np.tanh(-1.0 + 0.5 * h2)
    H, h_T = encode(X, params)
    np.testing.assert_allclose(H, [[[h1], [h2], [h3]]])
    np.testing.assert_allclose(h_T, [[h3]])


@pytest.mark.parametrize("cell", ["rnn", "gru"])
def test_encode_runs_the_cell_from_a_zero_state(cell):
    params = random_params(cell, 3, 4)
    X = rng.normal(size=(2, 6, 3))
    H, h_T = encode(X, params, cell)
    assert H.shape == (2, 6, 4) and h_T.shape == (2, 4)
    step = rnn_cell if cell == "rnn" else gru_cell
    h = np.zeros((2, 4))
    for t in range(6):
        h = step(X[:, t], h, params)
        np.testing.assert_allclose(H[:, t], h)
    np.testing.assert_array_equal(h_T, H[:, -1])


def test_encode_is_causal_and_rows_are_independent():
    params = random_params("gru", 3, 4)
    X = rng.normal(size=(3, 5, 3))
    H, _ = encode(X, params, "gru")
    changed = X.copy()
    changed[1, 3] += 1.0
    H2, _ = encode(changed, params, "gru")
    np.testing.assert_array_equal(H2[:, :3], H[:, :3])          # the past is untouched
    np.testing.assert_array_equal(H2[[0, 2]], H[[0, 2]])        # so are the other rows
    assert not np.allclose(H2[1, 3:], H[1, 3:])


def test_encode_of_an_empty_sequence_is_the_zero_state():
    H, h_T = encode(np.zeros((2, 0, 3)), random_params("rnn", 3, 4))
    assert H.shape == (2, 0, 4)
    np.testing.assert_array_equal(h_T, np.zeros((2, 4)))


# -- decode_step --------------------------------------------------------------------------

@pytest.mark.parametrize("cell", ["rnn", "gru"])
def test_decode_step_feeds_the_previous_token_then_the_context(cell):
    params = random_params(cell, 2 + 3, 4)
    y, s, c = rng.normal(size=(2, 2)), rng.normal(size=(2, 4)), rng.normal(size=(2, 3))
    step = rnn_cell if cell == "rnn" else gru_cell
    np.testing.assert_allclose(decode_step(y, s, c, params, cell),
                               step(np.concatenate([y, c], axis=-1), s, params))


def test_concatenating_the_context_is_a_separate_matrix_for_it():
    # Cho et al. write the decoder with one matrix for y_prev and one (C) for the context.
    params = random_params("rnn", 2 + 3, 4)
    y, s, c = rng.normal(size=(2, 2)), rng.normal(size=(2, 4)), rng.normal(size=(2, 3))
    W_y, C = params["W_xh"][:2], params["W_xh"][2:]
    np.testing.assert_allclose(decode_step(y, s, c, params),
                               np.tanh(y @ W_y + c @ C + s @ params["W_hh"] + params["b_h"]))


def test_decode_step_by_hand():
    # only the first input (y_prev) reaches the state: pre = y + s W_hh = [0.6, 0.7]
    params = {"W_xh": np.array([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]),
              "W_hh": 0.5 * np.eye(2), "b_h": np.zeros(2)}
    s_t = decode_step(np.array([[0.5]]), np.array([[0.2, 0.4]]), np.array([[-0.5, 1.0]]), params)
    np.testing.assert_allclose(s_t, np.tanh([[0.6, 0.7]]))


# -- greedy_decode --------------------------------------------------------------------------

def test_greedy_decode_counting_model_by_hand():
    # slot 2 -> 3, 4 ; slot 3 -> 4 ; slot 4 -> 1, 2, 3, 4
    model, X = counting_model(), counting_source([2, 3, 4])
    tokens = greedy_decode(X, model, bos_id=0, eos_id=4, max_len=6)
    np.testing.assert_array_equal(tokens, [[3, 4, 4, 4], [4, 4, 4, 4], [1, 2, 3, 4]])
    assert np.issubdtype(tokens.dtype, np.integer)
    # max_len cuts the rows that have not finished
    np.testing.assert_array_equal(greedy_decode(X, model, 0, 4, max_len=3),
                                  [[3, 4, 4], [4, 4, 4], [1, 2, 3]])
    np.testing.assert_array_equal(greedy_decode(X, model, 0, 4, max_len=0), np.zeros((3, 0)))


def test_greedy_decode_starts_the_decoder_from_the_context():
    # From zeros instead, the first step would give tanh(b_h): slots 1…4 tie and argmax picks 1.
    model, X = counting_model(), counting_source([2, 2])
    np.testing.assert_array_equal(greedy_decode(X, model, 0, 4, 5), [[3, 4], [3, 4]])


@pytest.mark.parametrize("cell", ["rnn", "gru"])
def test_greedy_decode_matches_a_step_by_step_loop(cell):
    model = random_model(cell)
    X = rng.normal(size=(6, 4, 3))
    bos, eos, max_len = 0, 1, 10
    tokens = greedy_decode(X, model, bos, eos, max_len, cell)
    _, c = encode(X, model["encoder"], cell)
    for b in range(6):
        s, previous, row = c[b:b + 1], bos, []
        for _ in range(max_len):
            s = decode_step(model["embedding"][[previous]], s, c[b:b + 1], model["decoder"], cell)
            previous = int(np.argmax(s @ model["W_out"] + model["b_out"]))
            row.append(previous)
            if previous == eos:
                break
        row += [eos] * (tokens.shape[1] - len(row))
        np.testing.assert_array_equal(tokens[b], row[:tokens.shape[1]])
    finished = (tokens == eos).any(axis=1)
    assert tokens.shape[1] == max_len or finished.all()
    if tokens.shape[1] < max_len:  # it stopped as soon as the last row finished
        assert not (tokens[:, :-1] == eos).any(axis=1).all()


def test_greedy_decode_does_not_modify_its_inputs():
    model = random_model()
    X = rng.normal(size=(2, 3, 3))
    copies = X.copy(), {k: v.copy() for k, v in model["encoder"].items()}, model["embedding"].copy()
    greedy_decode(X, model, 0, 1, 5)
    np.testing.assert_array_equal(X, copies[0])
    for key, value in copies[1].items():
        np.testing.assert_array_equal(model["encoder"][key], value)
    np.testing.assert_array_equal(model["embedding"], copies[2])


# -- errors ------------------------------------------------------------------------------------

def test_cells_name_the_shapes_that_do_not_fit():
    params = random_params("rnn", 3, 4)
    with pytest.raises(ValueError, match=r"\(2, 5\)"):
        rnn_cell(np.zeros((2, 5)), np.zeros((2, 4)), params)
    with pytest.raises(ValueError, match=r"W_hz"):
        gru_cell(np.zeros((2, 3)), np.zeros((2, 3)), random_params("gru", 3, 4))
    with pytest.raises(ValueError, match="same B"):
        rnn_cell(np.zeros((2, 3)), np.zeros((3, 4)), params)


@pytest.mark.parametrize("call", [
    lambda: encode(np.zeros((2, 3)), random_params("rnn", 3, 4)),
    lambda: encode(np.zeros((2, 3, 3)), random_params("rnn", 3, 4), cell="lstm"),
    lambda: greedy_decode(np.zeros((2, 3, 3)), random_model(), 0, 1, max_len=-1),
    lambda: greedy_decode(np.zeros((2, 3, 3)),
                          {**random_model(), "decoder": random_params("rnn", 4 + 5, 6)}, 0, 1, 3),
])
def test_impossible_arguments_raise_value_errors(call):
    with pytest.raises(ValueError):
        call()
