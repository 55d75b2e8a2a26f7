"""No surprise at grading: every wrong implementation of the samples that grading rejects, `validate`
flags, or this file says why not.

The wrong implementations are those kept in autograder/samples/implementations/<slug>.py
(`MISTAKES` and `DOUBLE_MISTAKES`), which tests/course/checks assert the hidden checks reject.
What `validate` does with each (the visible checks and the resource rules) is computed
in-process by `visible_audit` (a forked child per wrong implementation), and cross-checked
with the real command on a few.

`NO_VISIBLE_EXAMPLE` would list the wrong implementations that pass every visible check although a
hidden check rejects them: a requirement the notebook shows no example of (none is left). Each would
be a gap to close in its notebook (a visible example and a sentence in its task), then to take off
the list; the test fails on an entry that `validate` flags, so the list stays true.
`SECRET_ONLY` would list those that only secret values can tell (none so far).
"""

import pytest

from autograder.engine import course
from autograder.samples.submissions import implementations, submission, write
from tests.course.visible_audit import flagged
from tests.engine.grading import run_grader
from tests.support import COURSE

SLUGS = course.assignments(COURSE)

NO_VISIBLE_EXAMPLE = {}  # (slug, mistake) -> what no visible check shows (none left)
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
                                           ("efficient_attention", "sw-not-causal"),
                                           ("backpropagation", "softmax-backward-wrong-only")])
def test_the_audit_says_what_the_real_validate_says(slug, mistake, audit, tmp_path):
    """The in-process audit against the command it stands for, on wrong implementations that fail
    a visible check (the first, with the cause named), fail the visible memory check (measured in
    the notebook), fail a visible check further on, and are wrong in two tasks (the first task's
    check cell sees its wrong function, though the second task's check cell only says to fix the
    first). (That `validate` says ready where the visible checks pass, and that it runs a resource
    rule itself: tests/engine/test_validate.py.)"""
    students = implementations(slug)
    wrongs = dict(wrong_implementations(slug))[mistake]
    path = write(tmp_path, "me", submission(slug, {**students.CORRECT, **wrongs}), slug)
    process = run_grader("validate", path, timeout=600)
    failed = [line.split(" [")[1].split(",")[0] for line in process.stdout.splitlines() if ": FAIL" in line]
    expected = [name.removeprefix("rule of ") for name in audit(slug)[mistake]]
    assert failed[:1] == expected, process.stdout
    assert process.returncode == (1 if expected else 0)
