"""No surprise at grading: every wrong implementation of the samples that grading rejects, `validate`
flags, or this file says why not.

The wrong implementations are those kept in autograder/samples/implementations/<slug>.py
(`MISTAKES` and `DOUBLE_MISTAKES`), which tests/course/checks assert the hidden checks reject.
What `validate` does with each (the visible checks and the resource rules) is computed
in-process by `visible_audit` (a forked child per wrong implementation), and cross-checked
with the real command on a few.

`NO_VISIBLE_EXAMPLE` lists the wrong implementations that pass every visible check although a
hidden check rejects them: a requirement the notebook shows no example of. Each is a gap to
close in its notebook (a visible example and a sentence in its task), then to take off the
list; the test fails on an entry that `validate` now flags, so the list stays true.
`SECRET_ONLY` would list those that only secret values can tell (none so far).
"""

import pytest

from autograder.engine import course
from autograder.samples.submissions import implementations, submission, write
from tests.course.visible_audit import flagged
from tests.engine.grading import run_grader
from tests.support import COURSE

SLUGS = course.assignments(COURSE)

NO_VISIBLE_EXAMPLE = {  # (slug, mistake) -> what no visible check shows
    ("rnn_encoder_decoder", "greedy-feeds-bos"): "greedy decoding that feeds BOS at every step",
    ("rnn_encoder_decoder", "rnn-cell-transposed-recurrent-weights"): "h_prev @ W_hh.T instead of h_prev @ W_hh",
    ("bahdanau", "bahdanau-score-state-not-broadcast"): "additive_score with B = T, where s_prev @ W_a without "
    "its time axis still broadcasts",
    ("bahdanau", "bahdanau-score-tanh-of-each-term"): "tanh of each term instead of tanh of the sum",
    ("bahdanau", "bahdanau-step-default-cell-rnn"): "bahdanau_decode_step called without `cell` (default 'gru')",
    ("scaled_dot_product", "softmax-wrong-axis"): "softmax along an axis other than the last",
    ("multi_head", "mha-merge-without-transpose"): "heads merged by a reshape alone",
    ("positional_encoding", "rope-positions-flattened"): "rotary_embedding with positions of shape (B, T)",
    ("backpropagation", "ce-summed"): "the cross-entropy with more than one counted position (sum and mean differ)",
    ("backpropagation", "mha-mask-ignored"): "multi_head_attention_backward whose mask changes the gradients",
    ("backpropagation", "softmax-backward-wrong-only"): "the attention's backward through a softmax_backward that "
    "keeps only the diagonal",
    ("training", "adam-default-eps-1e-8"): "adam_step with gradients near eps, where 1e-8 and 1e-9 differ",
    ("language_model", "beam-search-greedy"): "a beam search whose best hypothesis is not the greedy one",
    ("language_model", "beam-search-higher-id-first"): "a beam search with ties",
    ("language_model", "beam-search-live-slots"): "a beam search where hypotheses finish with eos_id and take no "
    "slot",
    ("language_model", "beam-search-pad-0"): "a beam search whose rows end at different lengths (padded with "
    "eos_id)",
}
SECRET_ONLY = {}  # (slug, mistake) -> why only the hidden checks' secret values can tell it


def wrong_implementations(slug):
    """[(name, {task: wrong function})]: every MISTAKE and DOUBLE_MISTAKE of `slug`."""
    students = implementations(slug)
    found = [(name, {task: wrong}) for name, (task, wrong, _, _) in students.MISTAKES.items()]
    return found + [(name, dict(wrongs)) for name, (wrongs, _, _) in getattr(students, "DOUBLE_MISTAKES", {}).items()]


@pytest.fixture(scope="module")
def audit():
    """{slug: {name: the check cells or rules that fail}}, computed once per slug when asked."""
    cache = {}

    def of(slug):
        if slug not in cache:
            cache[slug] = flagged(COURSE, slug, wrong_implementations(slug))
        return cache[slug]
    return of


@pytest.mark.parametrize("slug", SLUGS)
def test_validate_flags_every_wrong_implementation_or_the_list_says_why(slug, audit):
    results = audit(slug)
    assert set(results) == {name for name, _ in wrong_implementations(slug)}  # every one was tried
    passing = {name for name, failed in results.items() if not failed}
    listed = {name for (where, name) in {**NO_VISIBLE_EXAMPLE, **SECRET_ONLY} if where == slug}
    assert passing - listed == set(), f"validate says ready to these, and nothing says why: {sorted(passing - listed)}"
    assert listed - passing == set(), f"validate flags these now: take them off the list: {sorted(listed - passing)}"


def test_the_memory_rules_are_no_longer_a_surprise(audit):
    """The wrong implementations that break a memory rule: `validate` flags them at their own task,
    by the check cell's visible memory check (measured in the notebook) or by the grader's rule."""
    for slug, names in (("efficient_attention", ["flash-whole-score-matrix", "flash-whole-key-rows",
                                                 "backward-whole-matrices"]),
                        ("linear_attention", ["linear-whole-matrix", "chunked-whole-matrix"])):
        for name in names:
            task = implementations(slug).MISTAKES[name][0]
            assert audit(slug)[name][:1] in ([f"test_{task}"], [f"rule of test_{task}"]), (slug, name, audit(slug)[name])


@pytest.mark.parametrize("slug, mistake", [("scaled_dot_product", "softmax-wrong-axis"),
                                           ("linear_attention", "linear-whole-matrix"),
                                           ("efficient_attention", "sw-not-causal")])
def test_the_audit_says_what_the_real_validate_says(slug, mistake, audit, tmp_path):
    """The in-process audit against the command it stands for, on wrong implementations that pass
    the visible checks, fail the visible memory check (measured in the notebook), and fail a visible
    check. (That `validate` runs a resource rule itself: tests/engine/test_validate.py.)"""
    students = implementations(slug)
    task, wrong, _, _ = students.MISTAKES[mistake]
    path = write(tmp_path, "me", submission(slug, {**students.CORRECT, task: wrong}), slug)
    process = run_grader("validate", path, timeout=600)
    failed = [line.split(" [")[1].split(",")[0] for line in process.stdout.splitlines() if ": FAIL" in line]
    expected = [name.removeprefix("rule of ") for name in audit(slug)[mistake]]
    assert failed[:1] == expected, process.stdout
    assert process.returncode == (1 if expected else 0)
