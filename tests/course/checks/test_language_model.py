"""The language-model checks hold their cases on every secret, and judge sample_next on its own."""

import types

import numpy as np
import pytest

from autograder.engine import harness
from autograder.engine.checking import CheckFailed
from autograder.checks import language_model as checks
from solutions import language_model as reference
from autograder.samples.implementations import language_model as students

MANY_SECRETS = range(100, 200)


def beside(sample_next, filter_logits):
    """``sample_next`` in a notebook whose ``filter_logits`` is the given one."""
    return types.FunctionType(sample_next.__code__, {**vars(students), "filter_logits": filter_logits},
                              sample_next.__name__, sample_next.__defaults__)


def test_filtering_before_the_temperature_fails_with_its_reason_on_every_secret():
    for secret in MANY_SECRETS:
        with harness.secret(secret), pytest.raises(CheckFailed, match="it filters before dividing by"):
            checks.check_sample_next(students.sample_next_filter_first)


@pytest.mark.parametrize("mistake", [name for name, (task, *_) in students.MISTAKES.items()
                                     if task == "filter_logits"])
def test_a_right_sample_next_beside_a_wrong_filter_logits_passes(mistake):
    wrong_filter = students.MISTAKES[mistake][1]
    for secret in (None, 7, 2 ** 40):
        with harness.secret(secret):
            checks.check_sample_next(beside(students.correct_sample_next, wrong_filter))


def test_an_unfinished_filter_logits_costs_sample_next_nothing_but_a_stub_or_a_greedy_one_fails():
    """sample_next is judged with the reference's filter_logits standing in: beside an unfinished
    filter_logits, a right one passes, and one that only does temperature 0 (which passed when only
    temperature 0 could be judged beside it: the last red team's 9/11 for 7/11 earned) fails."""
    def unfinished(*args, **kwargs):
        raise NotImplementedError()
    checks.check_sample_next(beside(students.correct_sample_next, unfinished))
    with pytest.raises(CheckFailed, match="is not implemented yet"):
        checks.check_sample_next(beside(unfinished, unfinished))
    greedy_only = beside(lambda logits, rng, temperature=1.0, top_k=None, top_p=None:
                         np.argmax(logits, -1) if temperature == 0 else filter_logits(logits), unfinished)  # noqa: F821
    with pytest.raises(CheckFailed, match="should return an int array"):
        checks.check_sample_next(greedy_only)


@pytest.mark.parametrize("secret", range(300, 305))
def test_every_secret_holds_a_row_where_each_beam_mistake_changes_the_answer(secret):
    with harness.secret(secret):
        settings = checks._beam_settings(harness.seeded(checks.SEED + 3))
    for mistake in checks.BEAM_MISTAKES:
        assert any(checks._rows_differ(
            checks.beam_variant(sources, params, 2, checks.BOS, checks.EOS, max_len, size, alpha, mistake)[0],
            reference.beam_search(sources, params, 2, checks.BOS, checks.EOS, max_len, size, alpha)[0])
            for params, sources, max_len, size, alpha, _ in settings), (secret, mistake)


def test_the_beam_variants_without_a_mistake_are_the_reference():
    rng = np.random.default_rng(5)
    for seed in range(4):
        params = checks._beam_model(np.random.default_rng(seed))
        sources = rng.integers(3, 7, size=(6, 4))
        for max_len, size, alpha in ((6, 3, 1.0), (4, 2, 3.0), (0, 2, 1.0), (3, 343, 0.6)):
            mine = checks.beam_variant(sources, params, 2, 1, 2, max_len, size, alpha, None)
            theirs = reference.beam_search(sources, params, 2, 1, 2, max_len, size, alpha)
            assert np.array_equal(mine[0], theirs[0]) and np.allclose(mine[1], theirs[1])
