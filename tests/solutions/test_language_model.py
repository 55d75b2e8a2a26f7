"""The reference decoder-only model and its decoding: gradients against central
differences, the cache against the whole prefix, the filters' tie rules, the
exact use of ``rng`` in sampling, and beam search against an exhaustive search."""

import copy
import itertools

import numpy as np
import pytest

from tests.support import COURSE

from solutions.backpropagation import cross_entropy
from solutions.language_model import (
    beam_search, bigram_bits_per_token, filter_logits, generate, init_language_model,
    init_language_model_cache, language_model_block, language_model_logits,
    language_model_loss_and_grads, language_model_step, log_softmax, post_ln_loss_and_grads,
    sample_next, train_language_model)
from solutions.scaled_dot_product import causal_mask, padding_mask, softmax
from solutions.training import init_transformer
from solutions.transformer_decoder import decoder_step, encoder, greedy_decode, init_decoder_cache
from solutions.transformer_encoder import encoder_layer, layer_norm
from tests.solutions.test_training import central_differences, leaves, structure


def tiny_language_model(seed=0, V=7, d=4, d_ff=6, num_layers=2):
    """A tiny model whose norms, biases and embedding are all away from their initial values."""
    rng = np.random.default_rng(seed + 100)
    params = init_language_model(V, d, d_ff, num_layers, seed=seed)
    for _, leaf in leaves(params):
        leaf += 0.2 * rng.normal(size=leaf.shape)
    return params


def test_init_has_the_documented_keys_and_draws_as_init_transformer():
    params = init_language_model(11, 8, 16, 3, seed=5)
    transformer = init_transformer(11, 8, 16, 3, seed=5)
    assert set(params) == {"embedding", "layers", "final_norm"}
    assert len(params["layers"]) == 3
    assert all(set(layer) == {"norm1", "self_attn", "norm2", "ffn"} for layer in params["layers"])
    assert np.array_equal(params["embedding"], transformer["embedding"])
    assert np.array_equal(params["final_norm"]["gamma"], np.ones(8))
    assert structure(params["layers"]) == structure(transformer["encoder_layers"])


def test_a_block_is_pre_ln_written_out():
    params = tiny_language_model()["layers"][0]
    X = np.random.default_rng(1).normal(size=(2, 5, 4))
    from solutions.multi_head import multi_head_attention
    from solutions.transformer_encoder import position_wise_ffn
    normed = layer_norm(X, **params["norm1"])
    middle = X + multi_head_attention(normed, normed, normed, params["self_attn"], 2,
                                      causal_mask(5))[0]
    expected = middle + position_wise_ffn(layer_norm(middle, **params["norm2"]), params["ffn"])
    assert np.allclose(language_model_block(X, params, 2, causal_mask(5)), expected)


def test_the_logits_are_causal():
    params = tiny_language_model()
    tokens = np.random.default_rng(2).integers(0, 7, size=(2, 6))
    changed = tokens.copy()
    changed[:, 4:] = (changed[:, 4:] + 1) % 7
    a, b = language_model_logits(tokens, params, 2), language_model_logits(changed, params, 2)
    assert np.allclose(a[:, :4], b[:, :4]) and not np.allclose(a[:, 4:], b[:, 4:])


@pytest.mark.parametrize("masked", [False, True])
def test_the_gradient_of_every_parameter_matches_central_differences(masked):
    params = tiny_language_model(seed=3)
    tokens = np.random.default_rng(3).integers(0, 7, size=(3, 5))
    mask = padding_mask(np.array([5, 3, 2]), 5) if masked else None
    loss, grads = language_model_loss_and_grads(tokens, params, 2, mask, label_smoothing=0.1)
    assert structure(grads) == structure(params)
    expected = cross_entropy(language_model_logits(tokens[:, :-1], params, 2), tokens[:, 1:],
                             None if mask is None else mask[:, 1:], 0.1)[0]
    assert np.isclose(loss, expected)
    numerical = central_differences(
        lambda p: language_model_loss_and_grads(tokens, p, 2, mask, 0.1)[0], params)
    for (path, a), (_, b) in zip(leaves(grads), leaves(numerical)):
        assert np.allclose(a, b, rtol=1e-5, atol=1e-8), path


def test_the_post_ln_model_is_the_causal_encoder_and_its_gradient_is_right():
    transformer = init_transformer(7, 4, 6, 2, seed=4)
    params = {"embedding": transformer["embedding"], "encoder_layers": transformer["encoder_layers"]}
    tokens = np.random.default_rng(4).integers(0, 7, size=(2, 5))
    from solutions.transformer_encoder import embed
    X = embed(tokens[:, :-1], params["embedding"])
    for layer in params["encoder_layers"]:
        X = encoder_layer(X, layer, 2, causal_mask(4))
    loss, grads = post_ln_loss_and_grads(tokens, params, 2)
    assert np.isclose(loss, cross_entropy(X @ params["embedding"].T, tokens[:, 1:])[0])
    numerical = central_differences(lambda p: post_ln_loss_and_grads(tokens, p, 2)[0], params)
    for (path, a), (_, b) in zip(leaves(grads), leaves(numerical)):
        assert np.allclose(a, b, rtol=1e-5, atol=1e-8), path


def test_each_cached_step_gives_the_logits_of_the_whole_prefix_and_leaves_its_cache_alone():
    params = tiny_language_model(seed=5)
    tokens = np.random.default_rng(5).integers(0, 7, size=(3, 6))
    full = language_model_logits(tokens, params, 2)
    cache = init_language_model_cache(params, 3, 2)
    assert [set(layer) for layer in cache] == [{"k", "v"}] * 2
    assert cache[0]["k"].shape == (3, 2, 0, 2)
    for t in range(6):
        saved = copy.deepcopy(cache)
        logits, new = language_model_step(tokens[:, t], cache, params, 2)
        assert np.allclose(logits, full[:, t])
        assert all(np.array_equal(a["k"], b["k"]) for a, b in zip(cache, saved))
        assert new[1]["v"].shape == (3, 2, t + 1, 2)
        cache = new


def test_a_step_rejects_tokens_that_do_not_fit_the_cache():
    params = tiny_language_model()
    cache = init_language_model_cache(params, 2, 2)
    for token in (np.array([1]), np.array([1.0, 2.0]), np.array([0, 7])):
        with pytest.raises(ValueError):
            language_model_step(token, cache, params, 2)


def test_top_k_keeps_ties_at_the_boundary_and_everything_when_k_is_at_least_v():
    logits = np.array([[1.0, 3.0, 2.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0, 5.0]])
    kept = np.isfinite(filter_logits(logits, top_k=2))
    assert kept.tolist() == [[False, True, False, True, False], [True] * 5]
    assert np.isfinite(filter_logits(logits, top_k=3)).tolist()[0] == [False, True, True, True, True]
    assert np.array_equal(filter_logits(logits, top_k=5), logits)
    assert np.array_equal(filter_logits(logits, top_k=50), logits)
    assert np.array_equal(filter_logits(logits), logits)


def test_top_p_keeps_the_shortest_prefix_reaching_p_lower_ids_first_on_ties():
    logits = np.log(np.array([[0.1, 0.3, 0.3, 0.2, 0.1]]))
    keep = lambda p: np.isfinite(filter_logits(logits, top_p=p))[0].tolist()  # noqa: E731
    assert keep(0.25) == [False, True, False, False, False]      # the lower id of the tie
    assert keep(0.29) == [False, True, False, False, False]
    assert keep(0.5) == [False, True, True, False, False]
    assert keep(0.85) == [True, True, True, True, False]
    assert keep(1e-9) == [False, True, False, False, False]      # at least one token
    assert keep(1.0) == [True] * 5
    tiny = np.array([[0.0, -1e4, 3.0]])
    assert np.isfinite(filter_logits(tiny, top_p=1.0)).all()     # even of probability 0


def test_top_p_applies_to_what_top_k_kept():
    logits = np.log(np.array([[0.4, 0.3, 0.2, 0.1]]))
    # Renormalised over the top 2: 4/7, 3/7; top_p = 0.6 needs both.
    assert np.isfinite(filter_logits(logits, top_k=2, top_p=0.6))[0].tolist() == [True, True, False, False]
    assert np.isfinite(filter_logits(logits, top_p=0.6))[0].tolist() == [True, True, False, False]
    assert np.isfinite(filter_logits(logits, top_p=0.5))[0].tolist() == [True, True, False, False]


@pytest.mark.parametrize("kwargs", [{"top_k": 0}, {"top_k": 1.5}, {"top_p": 0.0}, {"top_p": 1.2}])
def test_bad_filters_raise(kwargs):
    with pytest.raises(ValueError):
        filter_logits(np.zeros((1, 3)), **kwargs)


def test_sampling_is_inverse_transform_on_one_draw_per_row():
    logits = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]))
    u = np.random.default_rng(7).random(2)
    got = sample_next(logits, np.random.default_rng(7))
    expected = [int(np.argmax(np.cumsum(softmax(row)) > ui)) for row, ui in zip(logits, u)]
    assert got.tolist() == expected
    rng = np.random.default_rng(8)
    sample_next(logits, rng)
    assert np.random.default_rng(8).random(2)[1] != rng.random()      # exactly one call of B draws


class Fixed:
    """A generator whose ``random(n)`` returns the given numbers."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=float)

    def random(self, size):
        assert size == len(self.values)
        return self.values.copy()


def test_sample_next_picks_the_first_token_whose_cumulative_probability_exceeds_u():
    logits = np.log(np.array([[0.25, 0.25, 0.5]] * 3))
    assert sample_next(logits, Fixed([0.0, 0.25, 0.9999])).tolist() == [0, 1, 2]
    # A filtered token is never drawn, whatever u is.
    assert sample_next(logits, Fixed([0.0, 0.3, 0.99]), top_k=1).tolist() == [2, 2, 2]
    # Rounding leaves no cumulative sum above u: the last token of non-zero probability.
    assert sample_next(np.array([[0.0, 0.0, -np.inf]]), Fixed([1.0])).tolist() == [1]


def test_temperature_zero_is_the_argmax_lowest_id_first_and_draws_nothing():
    class NoDraw:
        def random(self, size):
            raise AssertionError("rng used")
    logits = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
    assert sample_next(logits, NoDraw(), temperature=0).tolist() == [1, 0]
    with pytest.raises(ValueError):
        sample_next(logits, NoDraw(), temperature=-1.0)


def test_temperature_divides_the_logits():
    logits = np.array([[0.0, 1.0, 2.0]])
    u = [0.3]
    assert sample_next(logits, Fixed(u), temperature=0.5).tolist() == \
        sample_next(2 * logits, Fixed(u)).tolist()


def test_generate_is_the_prompt_then_sample_next_on_each_cached_step():
    params = tiny_language_model(seed=6)
    prompt = np.array([[1, 2], [3, 4]])
    out = generate(prompt, params, 2, 4, np.random.default_rng(9), temperature=0.8, top_k=4)
    assert out.shape == (2, 6) and np.array_equal(out[:, :2], prompt)
    rng, tokens = np.random.default_rng(9), prompt
    for _ in range(4):
        logits = language_model_logits(tokens, params, 2)[:, -1]
        tokens = np.concatenate([tokens, sample_next(logits, rng, 0.8, 4)[:, None]], axis=1)
    assert np.array_equal(out, tokens)


# -- beam search ---------------------------------------------------------------------

def small_transformer(seed, V=5):
    params = init_transformer(V, 8, 16, 1, seed=seed)
    params["embedding"] = params["embedding"] * 4       # sharper distributions
    return params


def exhaustive(src_row, params, bos, eos, max_len, alpha):
    """The best of all sequences: every token string of length ≤ max_len that ends at its first EOS."""
    V = params["embedding"].shape[0]
    memory = encoder(src_row[None], params, 2)
    best = None
    for length in range(1, max_len + 1):
        for body in itertools.product([v for v in range(V) if v != eos], repeat=length - 1):
            for last in range(V):
                sequence = list(body) + [last]
                if last != eos and length < max_len:
                    continue
                cache = init_decoder_cache(memory, params, 2)
                log_p, previous = 0.0, bos
                for token in sequence:
                    output, cache = decoder_step(np.array([previous]), cache, params, 2)
                    log_p += log_softmax(output @ params["embedding"].T)[0, token]
                    previous = token
                score = log_p / ((5 + length) / 6) ** alpha
                if best is None or score > best[0] + 1e-12:
                    best = (score, sequence)
    return best


@pytest.mark.parametrize("seed", range(4))
def test_a_beam_as_large_as_all_sequences_finds_the_best_of_them(seed):
    params = small_transformer(seed)
    src = np.random.default_rng(seed).integers(3, 5, size=(2, 3))
    tokens, scores = beam_search(src, params, 2, 1, 2, 3, beam_size=5 ** 3, length_penalty=0.6)
    for b in range(2):
        score, sequence = exhaustive(src[b], params, 1, 2, 3, 0.6)
        assert np.isclose(scores[b], score)
        assert tokens[b, :len(sequence)].tolist() == sequence


@pytest.mark.parametrize("seed", range(4))
def test_a_beam_of_one_without_penalty_is_greedy_decoding(seed):
    params = small_transformer(seed, V=6)
    src = np.random.default_rng(seed).integers(3, 6, size=(5, 4))
    tokens, _ = beam_search(src, params, 2, 1, 2, 6, beam_size=1, length_penalty=0.0)
    assert np.array_equal(tokens, greedy_decode(src, params, 2, 1, 2, 6))


def test_rows_are_padded_with_eos_and_scores_are_log_p_over_the_penalty():
    params = small_transformer(1, V=6)
    src = np.random.default_rng(11).integers(3, 6, size=(6, 4))
    tokens, scores = beam_search(src, params, 2, 1, 2, 5, beam_size=3, length_penalty=1.0)
    for row, score, source in zip(tokens, scores, src):
        ends = np.flatnonzero(row == 2)
        n = ends[0] + 1 if ends.size else len(row)
        prefix = np.concatenate([[1], row[:n]])
        log_p = log_softmax(
            __import__("solutions.transformer_decoder", fromlist=["x"]).transformer_logits(
                source[None], prefix[None, :-1], params, 2))[0]
        total = log_p[np.arange(n), row[:n]].sum()
        assert np.isclose(score, total / ((5 + n) / 6))
        assert (row[n:] == 2).all()


def test_ties_keep_the_earlier_hypothesis_then_the_lower_token():
    # A model whose every distribution is uniform: all extensions tie, so the beam keeps
    # [BOS, 0], [BOS, 1], ...; with EOS = 0 the first kept one finishes at once.
    params = init_transformer(4, 4, 4, 1, seed=0)
    params["embedding"] = np.zeros((4, 4))
    tokens, scores = beam_search(np.array([[1, 2]]), params, 2, 3, 0, 3, beam_size=2)
    assert tokens.tolist() == [[0]] and np.isclose(scores[0], np.log(0.25) / (6 / 6) ** 0.6)
    tokens, _ = beam_search(np.array([[1, 2]]), params, 2, 3, 3, 2, beam_size=2, length_penalty=0)
    assert tokens.tolist() == [[0, 0]]    # no EOS: the first hypothesis of the beam at max_len


def test_the_bigram_baseline_counts_pairs():
    train = np.array([0, 1, 0, 1, 0, 1])
    bits = bigram_bits_per_token(train, np.array([0, 1]), 2, alpha=1e-12)
    assert np.isclose(bits, 0.0)
    assert np.isclose(bigram_bits_per_token(train, np.array([1, 1]), 2, alpha=1.0), -np.log2(1 / 4))


def test_training_is_deterministic_and_lowers_the_loss():
    ids = np.tile(np.arange(5), 60)
    losses = []
    params = train_language_model(ids, 5, 30, seq_len=8, batch_size=4, d_model=8, d_ff=16,
                                  num_layers=1, num_heads=2, warmup_steps=5, seed=1,
                                  on_step=lambda s, loss, p: losses.append(loss))
    again = train_language_model(ids, 5, 30, seq_len=8, batch_size=4, d_model=8, d_ff=16,
                                 num_layers=1, num_heads=2, warmup_steps=5, seed=1)
    assert np.array_equal(params["embedding"], again["embedding"])
    assert losses[-1] < 0.5 * losses[0]


# -- the chapter's model, saved and loaded ----------------------------------------------------

from solutions.language_model import (  # noqa: E402
    CourseModel, course_model_key, load_course_model, save_course_model, write)


def a_course(tmp_path):
    """A copy of the course's code, chapters and the frozen text the model learns from."""
    for folder, pattern in (("solutions", "*.py"), ("book", "*.md"), ("book/data", "*.txt")):
        (tmp_path / folder).mkdir(parents=True)
        for path in (COURSE.root / folder).glob(pattern):
            (tmp_path / folder / path.name).write_bytes(path.read_bytes())
    return tmp_path


def appended(path):
    with open(path, "a", encoding="utf-8") as file:
        file.write("\n")


@pytest.mark.parametrize("changed", ["solutions/language_model.py", "solutions/training.py",
                                     "book/language_model.md", "book/data/course_prose.txt",
                                     "book/data/held_out_prose.txt"])
def test_the_key_changes_with_the_code_and_with_the_text_the_model_learns_from(tmp_path, changed):
    root = a_course(tmp_path)
    key = course_model_key(root)
    assert course_model_key(root) == key == course_model_key(COURSE.root)
    appended(root / changed)
    assert course_model_key(root) != key


def test_the_chapter_is_executed_again_when_any_file_of_the_key_besides_the_code_changes(tmp_path):
    """_config.yml's chapter_data_files for the chapter lists exactly the non-code files of the key: a
    build re-executes the chapter (and saves the model again) whenever the key changes."""
    import yaml
    config = yaml.safe_load((COURSE.root / "_config.yml").read_text(encoding="utf-8"))
    patterns = config["sphinx"]["config"]["chapter_data_files"]["book/language_model"]
    listed = {path.relative_to(COURSE.root).as_posix() for pattern in patterns for path in COURSE.root.glob(pattern)}
    root = a_course(tmp_path)
    in_key = set()
    for path in sorted(root.glob("book/**/*.*")):
        key = course_model_key(root)
        appended(path)
        if course_model_key(root) != key:
            in_key.add(path.relative_to(root).as_posix())
    assert listed == in_key == {"book/data/course_prose.txt", "book/data/held_out_prose.txt",
                                "book/language_model.md"}


@pytest.mark.parametrize("changed", ["book/intro.md", "book/bahdanau.md", "book/linear_attention.md"])
def test_editing_another_chapter_keeps_the_key(tmp_path, changed):
    """The model learns from the frozen copy in book/data/, not from the chapters as they are now."""
    root = a_course(tmp_path)
    key = course_model_key(root)
    appended(root / changed)
    assert course_model_key(root) == key


def test_a_saved_model_loads_with_its_weights_vocabulary_and_heads(tmp_path):
    params = tiny_language_model(V=5)
    characters = ["a", " ", "\n", "é", "$"]
    path = save_course_model(params, characters, 2, tmp_path, key="k1")
    model = load_course_model(tmp_path, key="k1")
    assert path == tmp_path / "course-model-k1.npz" and isinstance(model, CourseModel)
    assert model.characters == tuple(characters) and model.num_heads == 2 and model.key == "k1"
    assert structure(model.params) == structure(params)
    for (name, a), (_, b) in zip(leaves(model.params), leaves(params)):
        assert np.array_equal(a, b), name
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left


def test_saving_removes_the_models_of_other_keys_and_an_old_key_does_not_load(tmp_path):
    save_course_model(tiny_language_model(V=5), "abcde", 2, tmp_path, key="old")
    save_course_model(tiny_language_model(V=5, seed=1), "abcde", 2, tmp_path, key="new")
    assert [p.name for p in tmp_path.iterdir()] == ["course-model-new.npz"]
    with pytest.raises(FileNotFoundError, match="make book") as error:
        load_course_model(tmp_path, key="old")
    assert "other code or text" in str(error.value)


def test_without_a_saved_model_the_error_says_to_run_make_book(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"run `make book`") as error:
        load_course_model(tmp_path / "nothing")
    assert "none has been saved" in str(error.value)


@pytest.mark.parametrize("kwargs", [dict(), dict(temperature=0.0), dict(temperature=0.7, top_k=3),
                                    dict(top_p=0.8, seed=4)])
def test_write_is_generate_on_the_saved_model_with_the_seed(tmp_path, kwargs):
    characters = "ab cd\n$"
    params = tiny_language_model(V=len(characters))
    save_course_model(params, characters, 2, tmp_path, key="k")
    model = load_course_model(tmp_path, key="k")
    settings = dict(temperature=1.0, top_k=None, top_p=None) | {k: v for k, v in kwargs.items() if k != "seed"}
    tokens = generate(np.array([[0, 2, 1]]), params, 2, 12, np.random.default_rng(kwargs.get("seed", 0)),
                      **settings)
    text = write("a b", 12, model=model, **kwargs)
    assert text == "a b" + "".join(characters[t] for t in tokens[0, 3:])
    assert write("a b", 12, model=model, **kwargs) == text  # the same seed, the same text


def test_write_rejects_characters_the_model_does_not_know_and_an_empty_prompt(tmp_path):
    save_course_model(tiny_language_model(V=5), "abcde", 2, tmp_path, key="k")
    model = load_course_model(tmp_path, key="k")
    with pytest.raises(ValueError, match="'z'"):
        write("abz", 3, model=model)
    with pytest.raises(ValueError, match="at least one character"):
        write("", 3, model=model)


def test_the_next_token_logits_are_the_models_last_position(tmp_path):
    params = tiny_language_model(V=5)
    save_course_model(params, "abcde", 2, tmp_path, key="k")
    model = load_course_model(tmp_path, key="k")
    assert np.allclose(model.next_token_logits("bad"), language_model_logits(np.array([[1, 0, 3]]), params, 2)[0, -1])
