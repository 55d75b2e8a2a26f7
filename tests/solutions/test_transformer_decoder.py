"""The reference Transformer decoder: cases worked out by hand, properties, equivalences."""

import copy

import numpy as np
import pytest

from autograder.checks.transformer_decoder import model_params
from solutions.multi_head import multi_head_attention
from solutions.positional_encoding import sinusoidal_encoding
from solutions.scaled_dot_product import causal_mask, padding_mask
from solutions.transformer_decoder import (
    copy_model, decoder, decoder_layer, decoder_step, greedy_decode, init_decoder_cache,
    transformer_logits)
from solutions.transformer_encoder import embed, encoder, layer_norm, position_wise_ffn

rng = np.random.default_rng(0)


def layer_params(d=8, d_ff=16):
    return model_params(rng, 5, d, d_ff, 0, 1)["decoder_layers"][0]


def switched_off(params):
    """The layer's parameters with every sub-layer's output zero."""
    off = copy.deepcopy(params)
    for name in ("self_attn", "cross_attn"):
        off[name]["W_o"][:] = 0.0
        off[name]["b_o"][:] = 0.0
    off["ffn"]["W_2"][:] = 0.0
    off["ffn"]["b_2"][:] = 0.0
    return off


# -- decoder_layer -----------------------------------------------------------------

def test_decoder_layer_with_its_sub_layers_switched_off_only_normalises_three_times():
    params = switched_off(layer_params())
    Y, memory = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 4, 8))
    expected = layer_norm(layer_norm(layer_norm(Y, **params["norm1"]), **params["norm2"]),
                          **params["norm3"])
    np.testing.assert_allclose(decoder_layer(Y, memory, params, 2), expected)


def test_cross_attention_with_zero_queries_averages_the_real_memory_rows():
    params = switched_off(layer_params())
    d = 8
    params["cross_attn"].update(W_q=np.zeros((d, d)), b_q=np.zeros(d), W_v=np.eye(d),
                                b_v=np.zeros(d), W_o=np.eye(d))
    Y, memory = rng.normal(size=(2, 3, d)), rng.normal(size=(2, 4, d))
    mask = padding_mask(np.array([4, 1]), 4)[:, None, None, :]
    mean = np.stack([memory[0].mean(axis=0), memory[1, 0]])[:, None, :]
    X1 = layer_norm(Y, **params["norm1"])
    expected = layer_norm(layer_norm(X1 + mean, **params["norm2"]), **params["norm3"])
    np.testing.assert_allclose(decoder_layer(Y, memory, params, 2, memory_mask=mask), expected)


def test_decoder_layer_is_the_three_sub_layers_written_out():
    params = layer_params()
    Y, memory = rng.normal(size=(3, 4, 8)), rng.normal(size=(3, 5, 8))
    self_mask, memory_mask = causal_mask(4), padding_mask(np.array([5, 2, 3]), 5)[:, None, None, :]
    Y_before = Y.copy()
    for b in range(3):  # one sequence at a time
        y, m = Y[b:b + 1], memory[b:b + 1]
        x = layer_norm(y + multi_head_attention(y, y, y, params["self_attn"], 2, self_mask)[0],
                       **params["norm1"])
        x = layer_norm(x + multi_head_attention(x, m, m, params["cross_attn"], 2,
                                                memory_mask[b:b + 1])[0], **params["norm2"])
        x = layer_norm(x + position_wise_ffn(x, params["ffn"]), **params["norm3"])
        np.testing.assert_allclose(decoder_layer(Y, memory, params, 2, self_mask, memory_mask)[b],
                                   x[0])
    np.testing.assert_array_equal(Y, Y_before)  # the input is not modified


def test_with_the_causal_mask_no_position_sees_a_later_target():
    params = layer_params()
    Y, memory = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 3, 8))
    changed = Y.copy()
    changed[:, 3] += 5.0
    before = decoder_layer(Y, memory, params, 2, causal_mask(5))
    after = decoder_layer(changed, memory, params, 2, causal_mask(5))
    np.testing.assert_allclose(after[:, :3], before[:, :3])
    assert not np.allclose(after[:, 3:], before[:, 3:])
    # without the mask, the earlier positions see the change
    assert not np.allclose(decoder_layer(changed, memory, params, 2)[:, :3],
                           decoder_layer(Y, memory, params, 2)[:, :3])


def test_padded_memory_positions_do_not_matter():
    params = layer_params()
    Y, memory = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 4, 8))
    mask = padding_mask(np.array([4, 2]), 4)[:, None, None, :]
    changed = memory.copy()
    changed[1, 2:] = 100.0
    np.testing.assert_allclose(decoder_layer(Y, changed, params, 2, causal_mask(3), mask),
                               decoder_layer(Y, memory, params, 2, causal_mask(3), mask))


def test_decoder_layer_rejects_heads_that_do_not_divide_d_model():
    params = layer_params(d=6)
    with pytest.raises(ValueError, match="num_heads"):
        decoder_layer(rng.normal(size=(1, 2, 6)), rng.normal(size=(1, 2, 6)), params, 4)


# -- decoder -----------------------------------------------------------------------

def test_decoder_without_layers_is_the_embedding():
    E = rng.normal(size=(6, 8))
    tgt = rng.integers(0, 6, size=(2, 4))
    np.testing.assert_allclose(decoder(tgt, rng.normal(size=(2, 3, 8)),
                                       {"embedding": E, "decoder_layers": []}, 2),
                               E[tgt] * np.sqrt(8) + sinusoidal_encoding(4, 8))


def test_decoder_applies_the_layers_in_order_with_the_causal_and_padding_masks():
    params = model_params(rng, 7, 8, 16, 0, 3)
    tgt, memory = rng.integers(0, 7, size=(2, 4)), rng.normal(size=(2, 5, 8))
    src_mask = padding_mask(np.array([5, 3]), 5)
    X = embed(tgt, params["embedding"])
    for layer in params["decoder_layers"]:
        X = decoder_layer(X, memory, layer, 2, causal_mask(4), src_mask[:, None, None, :])
    np.testing.assert_allclose(decoder(tgt, memory, params, 2, src_mask), X)


def test_the_decoder_is_causal_over_the_target_tokens():
    params = model_params(rng, 7, 8, 16, 0, 2)
    tgt, memory = rng.integers(0, 7, size=(3, 6)), rng.normal(size=(3, 4, 8))
    out = decoder(tgt, memory, params, 2)
    for t in range(6):  # the prefix alone gives the same outputs
        np.testing.assert_allclose(decoder(tgt[:, :t + 1], memory, params, 2), out[:, :t + 1])


# -- transformer_logits --------------------------------------------------------------

def test_logits_are_the_decoder_output_times_the_transposed_embedding():
    params = model_params(rng, 9, 8, 16, 2, 2)
    src, tgt = rng.integers(0, 9, size=(2, 5)), rng.integers(0, 9, size=(2, 3))
    src_mask = padding_mask(np.array([5, 2]), 5)
    logits = transformer_logits(src, tgt, params, 4, src_mask)
    assert logits.shape == (2, 3, 9)
    memory = encoder(src, params, 4, src_mask)
    out = decoder(tgt, memory, params, 4, src_mask)
    for v in range(9):
        np.testing.assert_allclose(logits[..., v], out @ params["embedding"][v])
    assert not np.allclose(logits.sum(axis=-1), 1.0)  # logits, not probabilities


def test_one_embedding_matrix_serves_source_target_and_output():
    params = model_params(rng, 6, 8, 16, 1, 1)
    src, tgt = rng.integers(0, 6, size=(1, 4)), rng.integers(0, 6, size=(1, 3))
    before = transformer_logits(src, tgt, params, 2)
    changed = {**params, "embedding": params["embedding"].copy()}
    unused = [v for v in range(6) if v not in src and v not in tgt][0]
    changed["embedding"][unused] += 1.0  # a token in neither sequence: only its own logit moves
    after = transformer_logits(src, tgt, changed, 2)
    others = [v for v in range(6) if v != unused]
    np.testing.assert_allclose(after[..., others], before[..., others])
    assert not np.allclose(after[..., unused], before[..., unused])


# -- greedy_decode ---------------------------------------------------------------------

def copy_sources(lengths, eos_id=2, pad=0):
    S = max(lengths) + 1
    src = np.full((len(lengths), S), pad)
    for b, n in enumerate(lengths):
        src[b, :n] = rng.integers(3, 16, size=n)
        src[b, n] = eos_id
    return src, padding_mask(np.array(lengths) + 1, S)


@pytest.mark.parametrize("use_cache", [False, True])
def test_the_copy_model_copies_up_to_eos_and_pads_with_eos(use_cache):
    src, src_mask = copy_sources([3, 1, 5])
    tokens = greedy_decode(src, copy_model(), 2, 1, 2, 10, src_mask, use_cache=use_cache)
    assert np.issubdtype(tokens.dtype, np.integer)
    np.testing.assert_array_equal(tokens, [[*src[0, :4], 2, 2], [src[1, 0], 2, 2, 2, 2, 2],
                                           list(src[2])])


def test_the_reverse_model_reverses():
    src = np.concatenate([np.full((50, 1), 2), rng.integers(3, 16, size=(50, 7))], axis=1)
    tokens = greedy_decode(src, copy_model(reverse_length=8), 2, 1, 2, 12)
    np.testing.assert_array_equal(tokens, src[:, ::-1])


def test_greedy_decode_stops_at_max_len_and_without_bos():
    src, src_mask = copy_sources([6, 7])
    tokens = greedy_decode(src, copy_model(), 2, 1, 2, 3, src_mask)
    np.testing.assert_array_equal(tokens, src[:, :3])
    assert greedy_decode(src, copy_model(), 2, 1, 2, 0, src_mask).shape == (2, 0)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(src, copy_model(), 2, 1, 2, -1, src_mask)


def test_greedy_decode_is_the_argmax_of_the_logits_of_the_whole_prefix():
    params = model_params(rng, 10, 8, 16, 1, 2, embedding_scale=0.1)
    src = rng.integers(0, 10, size=(3, 5))
    src_mask = padding_mask(np.array([5, 2, 4]), 5)
    tokens = greedy_decode(src, params, 2, 0, 7, 8, src_mask)
    prefix = np.zeros((3, 1), dtype=int)
    finished = np.zeros(3, dtype=bool)
    for t in range(tokens.shape[1]):
        step = transformer_logits(src, prefix, params, 2, src_mask)[:, -1].argmax(axis=-1)
        step = np.where(finished, 7, step)
        finished |= step == 7
        np.testing.assert_array_equal(tokens[:, t], step)
        prefix = np.concatenate([prefix, step[:, None]], axis=1)
    assert finished.all() or tokens.shape[1] == 8


@pytest.mark.parametrize("seed", range(5))
def test_the_cache_gives_exactly_the_same_tokens(seed):
    local = np.random.default_rng(seed)
    params = model_params(local, 12, 8, 16, 1, 3, embedding_scale=0.1)
    src = local.integers(0, 12, size=(4, 6))
    src_mask = padding_mask(np.array([6, 3, 1, 5]), 6)
    for mask in (src_mask, None):
        np.testing.assert_array_equal(
            greedy_decode(src, params, 4, 0, 11, 12, mask, use_cache=True),
            greedy_decode(src, params, 4, 0, 11, 12, mask))


def cache_after(tgt, memory, params, num_heads, src_mask=None):
    """The cache after decoding the target tokens tgt (B, t), and the outputs of the steps."""
    cache, outputs = init_decoder_cache(memory, params, num_heads, src_mask), []
    for t in range(tgt.shape[1]):
        output, cache = decoder_step(tgt[:, t], cache, params, num_heads)
        outputs.append(output)
    return cache, outputs


def test_a_fresh_cache_holds_the_memory_projected_per_layer_and_no_position():
    params = model_params(rng, 9, 8, 16, 1, 2)
    memory, src_mask = rng.normal(size=(3, 5, 8)), padding_mask(np.array([5, 2, 4]), 5)
    cache = init_decoder_cache(memory, params, 2, src_mask)
    assert isinstance(cache, list) and len(cache) == 2
    for layer, kept in zip(params["decoder_layers"], cache):
        assert set(kept) == {"memory_k", "memory_v", "k", "v", "src_mask"}
        cross = layer["cross_attn"]
        for name in "kv":
            projected = (memory @ cross[f"W_{name}"] + cross[f"b_{name}"]).reshape(3, 5, 2, 4)
            np.testing.assert_allclose(kept[f"memory_{name}"], projected.transpose(0, 2, 1, 3))
            assert kept[name].shape == (3, 2, 0, 4)
        np.testing.assert_array_equal(kept["src_mask"], src_mask)
    assert init_decoder_cache(memory, params, 2)[0]["src_mask"] is None
    with pytest.raises(ValueError, match=r"\(3, 5\)"):
        init_decoder_cache(memory, params, 2, src_mask[:, :4])


def test_each_step_is_the_decoder_at_the_newest_position():
    params = model_params(rng, 9, 8, 16, 1, 2)
    src, tgt = rng.integers(0, 9, size=(2, 4)), rng.integers(0, 9, size=(2, 6))
    src_mask = padding_mask(np.array([4, 2]), 4)
    memory = encoder(src, params, 2, src_mask)
    full = decoder(tgt, memory, params, 2, src_mask)
    cache, outputs = cache_after(tgt, memory, params, 2, src_mask)
    for t, output in enumerate(outputs):
        np.testing.assert_allclose(output, full[:, t], rtol=1e-10, atol=1e-12)
    assert cache[0]["k"].shape == cache[1]["v"].shape == (2, 2, 6, 4)  # (B, h, t, d_head)


def test_a_step_embeds_the_newest_token_alone_at_its_position():
    """With every sub-layer switched off, the output is E[token]·√d + PE[t], normalised three times."""
    params = model_params(rng, 9, 8, 16, 0, 1)
    layer = switched_off(params["decoder_layers"][0])
    layer.update({f"norm{i}": {"gamma": np.ones(8), "beta": np.zeros(8)} for i in (1, 2, 3)})
    params["decoder_layers"] = [layer]
    tgt, memory = rng.integers(0, 9, size=(2, 5)), rng.normal(size=(2, 3, 8))
    _, outputs = cache_after(tgt, memory, params, 2)
    embedded = embed(tgt, params["embedding"])
    ones = {"gamma": np.ones(8), "beta": np.zeros(8)}
    for t, output in enumerate(outputs):
        expected = layer_norm(layer_norm(layer_norm(embedded[:, t], **ones), **ones), **ones)
        np.testing.assert_allclose(output, expected, atol=1e-12)


def test_a_step_leaves_its_cache_alone_and_returns_a_new_one():
    params = model_params(rng, 9, 8, 16, 1, 2)
    memory, tgt = rng.normal(size=(2, 4, 8)), rng.integers(0, 9, size=(2, 3))
    cache, _ = cache_after(tgt, memory, params, 2, padding_mask(np.array([4, 1]), 4))
    before = copy.deepcopy(cache)
    _, new = decoder_step(np.array([1, 2]), cache, params, 2)
    assert new is not cache and all(a is not b for a, b in zip(new, cache))
    for kept, old, longer in zip(cache, before, new):
        assert kept.keys() == old.keys() == longer.keys()
        for key in ("memory_k", "memory_v", "k", "v", "src_mask"):
            np.testing.assert_array_equal(kept[key], old[key])
        assert longer["k"].shape[2] == kept["k"].shape[2] + 1


def test_a_cache_built_elsewhere_continues_where_it_ends():
    """Plain data: a cache written out by hand (the keys and values of a prefix) works as well."""
    params = model_params(rng, 9, 8, 16, 1, 1)
    memory, tgt = rng.normal(size=(1, 3, 8)), rng.integers(0, 9, size=(1, 4))
    cache, _ = cache_after(tgt[:, :3], memory, params, 2)
    by_hand = [{key: np.array(value) if value is not None else None for key, value in kept.items()}
               for kept in cache]
    output, _ = decoder_step(tgt[:, 3], by_hand, params, 2)
    np.testing.assert_allclose(output, decoder(tgt, memory, params, 2)[:, 3], atol=1e-12)


@pytest.mark.parametrize("token, words", [(np.array([1]), r"\(2,\)"),
                                          (np.array([1.0, 2.0]), "integer"),
                                          (np.array([1, 9]), r"\[0, 9\)")])
def test_a_step_rejects_tokens_that_do_not_fit_the_cache(token, words):
    params = model_params(rng, 9, 8, 16, 1, 1)
    cache = init_decoder_cache(rng.normal(size=(2, 3, 8)), params, 2)
    with pytest.raises(ValueError, match=words):
        decoder_step(token, cache, params, 2)
    with pytest.raises(ValueError, match="layers"):
        decoder_step(np.array([1, 2]), cache + cache, params, 2)
