"""The reference training functions: the whole gradient against central differences,
Adam's and the schedule's formulas, the initialisation."""

import copy
import math

import numpy as np
import pytest

from solutions.backpropagation import cross_entropy, numerical_gradient
from solutions.scaled_dot_product import padding_mask
from solutions.training import (
    adam_step, init_transformer, noam_learning_rate, transformer_loss_and_grads)
from solutions.transformer_decoder import transformer_logits


def leaves(tree, path=()):
    """Every array of a nested dict/list, with its path, dict keys in sorted order."""
    if isinstance(tree, dict):
        for key in sorted(tree):
            yield from leaves(tree[key], path + (key,))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from leaves(value, path + (index,))
    else:
        yield path, tree


def structure(tree):
    return [(path, np.shape(leaf)) for path, leaf in leaves(tree)]


def tiny_model(seed=0, V=7, d=4, d_ff=6, num_layers=2):
    """A tiny model whose norms, biases and embedding are all away from their initial values."""
    rng = np.random.default_rng(seed + 100)
    params = init_transformer(V, d, d_ff, num_layers, seed=seed)
    for _, leaf in leaves(params):
        leaf += 0.2 * rng.normal(size=leaf.shape)
    return params


def tiny_batch(seed=0, V=7, B=3, S=5, T=4):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, V, size=(B, S))
    tgt = rng.integers(0, V, size=(B, T + 1))
    tgt[:, 0] = 1                                          # BOS
    src_mask = padding_mask(np.array([S, 3, 1])[:B], S)
    tgt_mask = padding_mask(np.array([T + 1, 3, 2])[:B], T + 1)
    return src, tgt, src_mask, tgt_mask


def central_differences(loss, params):
    """The gradient of ``loss(params)`` by central differences, one parameter array at a time."""
    grads = copy.deepcopy(params)
    for (path, leaf), (_, grad) in zip(leaves(params), leaves(grads)):
        def loss_of(value, leaf=leaf):
            saved = leaf.copy()
            leaf[...] = value
            try:
                return loss(params)
            finally:
                leaf[...] = saved
        grad[...] = numerical_gradient(loss_of, leaf)
    return grads


def assert_gradients_match(grads, numerical):
    assert structure(grads) == structure(numerical)
    for (path, got), (_, expected) in zip(leaves(grads), leaves(numerical)):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8, err_msg=str(path))


# -- transformer_loss_and_grads -------------------------------------------------------

@pytest.mark.parametrize("masks, smoothing", [(False, 0.0), (True, 0.1)],
                         ids=["no masks, no smoothing", "padded source and target, smoothing 0.1"])
def test_every_gradient_matches_central_differences(masks, smoothing):
    params = tiny_model()
    src, tgt, src_mask, tgt_mask = tiny_batch()
    if not masks:
        src_mask = tgt_mask = None
    num_heads = 2

    def loss(p):
        return transformer_loss_and_grads(src, tgt, p, num_heads, src_mask, tgt_mask, smoothing)[0]

    value, grads = transformer_loss_and_grads(src, tgt, params, num_heads, src_mask, tgt_mask,
                                              smoothing)
    assert value == pytest.approx(loss(params))
    assert_gradients_match(grads, central_differences(loss, params))


def test_the_loss_is_the_cross_entropy_of_the_logits_of_the_shifted_target():
    params = tiny_model(1)
    src, tgt, src_mask, tgt_mask = tiny_batch(1)
    logits = transformer_logits(src, tgt[:, :-1], params, 2, src_mask)
    expected, _ = cross_entropy(logits, tgt[:, 1:], tgt_mask[:, 1:], 0.1)
    loss, _ = transformer_loss_and_grads(src, tgt, params, 2, src_mask, tgt_mask)
    assert loss == pytest.approx(expected, rel=1e-12)


def test_padded_positions_change_neither_the_loss_nor_the_gradients():
    params = tiny_model(2)
    src, tgt, src_mask, tgt_mask = tiny_batch(2)
    loss, grads = transformer_loss_and_grads(src, tgt, params, 2, src_mask, tgt_mask)
    other_src = np.where(src_mask, src, (src + 3) % 7)
    other_tgt = np.where(tgt_mask, tgt, (tgt + 2) % 7)
    other_loss, other_grads = transformer_loss_and_grads(other_src, other_tgt, params, 2,
                                                         src_mask, tgt_mask)
    assert other_loss == pytest.approx(loss, rel=1e-12)
    # The embedding too: a padded token's position gets exactly zero gradient.
    for (path, a), (_, b) in zip(leaves(grads), leaves(other_grads)):
        np.testing.assert_allclose(a, b, atol=1e-12, err_msg=str(path))


def test_the_inputs_are_not_modified():
    params = tiny_model(3)
    src, tgt, src_mask, tgt_mask = tiny_batch(3)
    saved = copy.deepcopy((src, tgt, params, src_mask, tgt_mask))
    transformer_loss_and_grads(src, tgt, params, 2, src_mask, tgt_mask)
    for (_, a), (_, b) in zip(leaves([src, tgt, params, src_mask, tgt_mask]), leaves(list(saved))):
        np.testing.assert_array_equal(a, b)


def test_bad_shapes_raise_value_errors_that_name_them():
    params = tiny_model()
    src, tgt, src_mask, tgt_mask = tiny_batch()
    with pytest.raises(ValueError, match=r"\(3, 1\)"):
        transformer_loss_and_grads(src, tgt[:, :1], params, 2)
    with pytest.raises(ValueError, match=r"\(2, 5\)"):
        transformer_loss_and_grads(src[:2], tgt, params, 2)
    with pytest.raises(ValueError, match="tgt_mask"):
        transformer_loss_and_grads(src, tgt, params, 2, src_mask, tgt_mask[:, 1:])


# -- adam_step -------------------------------------------------------------------------

def test_the_first_adam_step_moves_every_parameter_by_lr_against_the_sign_of_its_gradient():
    # m̂ = g and v̂ = g² on the first step (bias correction with step = 1), so the
    # step is lr · g / (|g| + ε): lr · sign(g), up to ε.
    params = {"W": np.array([[1.0, -2.0], [0.5, 3.0]]), "b": np.array([0.0, 1.0])}
    grads = {"W": np.array([[0.3, -4.0], [1e-3, 2.0]]), "b": np.array([-0.5, 7.0])}
    new, state = adam_step(params, grads, lr=0.01)
    assert state["step"] == 1
    for key in params:
        step = 0.01 * grads[key] / (np.abs(grads[key]) + 1e-9)
        np.testing.assert_allclose(new[key], params[key] - step, rtol=1e-12)
        np.testing.assert_allclose(step, 0.01 * np.sign(grads[key]), rtol=1e-5)


def test_adam_follows_the_formulas_for_several_steps_on_nested_structures():
    rng = np.random.default_rng(4)
    params = {"a": rng.normal(size=(2, 3)), "layers": [{"w": rng.normal(size=4)}, {"w": rng.normal(size=1)}]}
    lr, beta1, beta2, eps = 0.05, 0.8, 0.9, 1e-3
    expected, m, v = copy.deepcopy(params), None, None
    state, current = None, params
    for step in range(1, 5):
        grads = {"a": rng.normal(size=(2, 3)),
                 "layers": [{"w": rng.normal(size=4)}, {"w": rng.normal(size=1)}]}
        flat_g = [g for _, g in leaves(grads)]
        m = [(1 - beta1) * g for g in flat_g] if m is None else [beta1 * a + (1 - beta1) * g for a, g in zip(m, flat_g)]
        v = [(1 - beta2) * g * g for g in flat_g] if v is None else [beta2 * a + (1 - beta2) * g * g for a, g in zip(v, flat_g)]
        for (_, p), mi, vi in zip(leaves(expected), m, v):
            p -= lr * (mi / (1 - beta1 ** step)) / (np.sqrt(vi / (1 - beta2 ** step)) + eps)
        current, state = adam_step(current, grads, state, lr, beta1, beta2, eps)
        assert state["step"] == step
        assert structure(current) == structure(params)
        assert structure(state["m"]) == structure(params) == structure(state["v"])
        for (path, got), (_, want) in zip(leaves(current), leaves(expected)):
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=str(path))


def test_adam_adds_eps_outside_the_square_root_and_uses_the_papers_defaults():
    # With g = 1e-5 on the first step: √v̂ = 1e-5, so ε = 1e-9 barely matters outside the
    # root; inside it (√(1e-10 + 1e-9)) the step would shrink by a factor of 3.3.
    new, state = adam_step({"p": np.zeros(1)}, {"p": np.full(1, 1e-5)}, lr=1.0)
    assert new["p"][0] == pytest.approx(-1e-5 / (1e-5 + 1e-9), rel=1e-12)
    # β₂ = 0.98: after one step v = 0.02 g² (0.001 g² with PyTorch's 0.999).
    assert state["v"]["p"][0] == pytest.approx(0.02 * 1e-10, rel=1e-12)
    assert state["m"]["p"][0] == pytest.approx(0.1 * 1e-5, rel=1e-12)


def test_adam_modifies_none_of_its_inputs():
    params = {"w": np.ones(3), "layers": [{"b": np.zeros(2)}]}
    grads = {"w": np.full(3, 0.5), "layers": [{"b": np.ones(2)}]}
    _, state = adam_step(params, grads)
    saved = copy.deepcopy((params, grads, state))
    new, new_state = adam_step(params, grads, state)
    assert new_state is not state and new_state["step"] == 2 and state["step"] == 1
    for (_, a), (_, b) in zip(leaves([params, grads, state["m"], state["v"]]),
                              leaves([saved[0], saved[1], saved[2]["m"], saved[2]["v"]])):
        np.testing.assert_array_equal(a, b)


def test_adam_refuses_gradients_of_another_structure():
    with pytest.raises(ValueError, match="same keys"):
        adam_step({"w": np.ones(2)}, {"W": np.ones(2)})
    with pytest.raises(ValueError, match=r"\(2,\)"):
        adam_step({"w": np.ones(2)}, {"w": np.ones(3)})


# -- noam_learning_rate -------------------------------------------------------------------

def test_noam_values_of_the_paper():
    # base model: d_model = 512, 4000 warm-up steps; the peak is at step 4000.
    peak = 512 ** -0.5 * 4000 ** -0.5
    assert noam_learning_rate(4000, 512) == pytest.approx(peak, rel=1e-12)
    assert noam_learning_rate(1, 512) == pytest.approx(512 ** -0.5 * 4000 ** -1.5, rel=1e-12)
    assert noam_learning_rate(2000, 512) == pytest.approx(peak / 2, rel=1e-12)
    assert noam_learning_rate(16000, 512) == pytest.approx(peak / 2, rel=1e-12)
    assert noam_learning_rate(100, 64, warmup_steps=10, scale=2.0) == pytest.approx(
        2.0 / 8 / 10, rel=1e-12)
    rates = [noam_learning_rate(s, 512) for s in range(1, 10000)]
    assert int(np.argmax(rates)) + 1 == 4000


@pytest.mark.parametrize("step", [0, -1, 0.5])
def test_noam_refuses_steps_below_one(step):
    with pytest.raises(ValueError, match="from 1"):
        noam_learning_rate(step, 512)


# -- init_transformer -----------------------------------------------------------------------

def test_init_has_the_structure_transformer_logits_reads_and_runs():
    params = init_transformer(11, 16, 40, 3, seed=5)
    assert len(params["encoder_layers"]) == len(params["decoder_layers"]) == 3
    assert params["embedding"].shape == (11, 16)
    encoder_keys = {"self_attn", "norm1", "ffn", "norm2"}
    assert all(layer.keys() == encoder_keys for layer in params["encoder_layers"])
    assert all(layer.keys() == encoder_keys | {"cross_attn", "norm3"} for layer in params["decoder_layers"])
    layer = params["decoder_layers"][2]
    assert layer["ffn"]["W_1"].shape == (16, 40) and layer["ffn"]["W_2"].shape == (40, 16)
    assert layer["cross_attn"]["W_q"].shape == (16, 16) and layer["cross_attn"]["b_o"].shape == (16,)
    logits = transformer_logits(np.zeros((2, 3), int), np.ones((2, 4), int), params, 4)
    assert logits.shape == (2, 4, 11) and np.all(np.isfinite(logits))


def test_init_draws_glorot_uniform_weights_unit_norms_and_a_scaled_normal_embedding():
    params = init_transformer(3000, 64, 256, 1, seed=0)
    E = params["embedding"]
    assert E.std() == pytest.approx(64 ** -0.5, rel=0.02) and abs(E.mean()) < 0.002
    for path, leaf in leaves(params):
        name = path[-1]
        if name.startswith("W_"):
            bound = math.sqrt(6 / sum(leaf.shape))
            assert np.abs(leaf).max() <= bound and np.abs(leaf).max() > 0.98 * bound, path
            assert leaf.std() == pytest.approx(bound / math.sqrt(3), rel=0.05), path
        elif name.startswith("b_") or name == "beta":
            assert np.all(leaf == 0), path
        elif name == "gamma":
            assert np.all(leaf == 1), path


def test_init_same_seed_same_parameters_other_seed_others():
    a, b, c = (init_transformer(5, 8, 16, 2, seed=s) for s in (7, 7, 8))
    for (path, x), (_, y), (_, z) in zip(leaves(a), leaves(b), leaves(c)):
        np.testing.assert_array_equal(x, y)
        if path[-1].startswith("W_") or path == ("embedding",):
            assert not np.array_equal(x, z), path


@pytest.mark.parametrize("args", [(0, 8, 16, 1), (5, 8, 0, 1), (5, 8, 16, -1), (5, 8.0, 16, 1)])
def test_init_refuses_bad_sizes(args):
    with pytest.raises(ValueError, match="must be"):
        init_transformer(*args)
