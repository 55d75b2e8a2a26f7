"""Feedback never guesses: with two mistakes at once, no message names a mistake the code does not make.

Each autograder/samples/implementations/<slug>.py keeps `DOUBLE_MISTAKES`:
name -> ({task: wrong function, ...}, the grade_id of the check cell to run, the words
a message may name). The functions are pasted into a namespace built from the
instructor notebook, as a student's cells would be (so a task calls the student's own
earlier tasks), then that check cell's visible checks (without the hidden part) and the
hidden checks of every replaced task run. A failure may name a cause only with the allowed words: for the visible
checks, `CheckFailed.cause` (set by `check_close` when a mistake's value is reproduced);
for the hidden checks, none of the words of the single mistakes (`MISTAKES`) of the
replaced tasks that the code does not make may appear in the message.
"""

import importlib
import inspect
import textwrap

import nbformat
import pytest

from autograder.engine import course
from autograder.engine.checking import CheckFailed
from autograder.samples.submissions import implementations
from tests.support import COURSE

HIDDEN = "### BEGIN HIDDEN TESTS"


DOUBLES = [(slug, name) for slug in course.assignments(COURSE)
           for name in getattr(implementations(slug), "DOUBLE_MISTAKES", {})]


def test_every_assignment_keeps_two_double_mistakes():
    for slug in course.assignments(COURSE):
        assert len(getattr(implementations(slug), "DOUBLE_MISTAKES", {})) >= 2, slug


def student_namespace(slug, replacements):
    """The namespace of the instructor notebook's cells, with the student's functions pasted in."""
    notebook = nbformat.read(COURSE.source / slug / f"{slug}.ipynb", as_version=4)
    namespace, test_cells = {}, {}
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("grade"):
            test_cells[meta["grade_id"]] = cell.source.split(HIDDEN)[0]
        else:
            exec(compile(cell.source, meta.get("grade_id", "cell"), "exec"), namespace)
    for task, function in replacements.items():
        exec(textwrap.dedent(inspect.getsource(function)), namespace)
        namespace[task] = namespace[function.__name__]
    return namespace, test_cells


def allowed(text, words):
    return any(word in text for word in words)


@pytest.mark.parametrize("slug, name", DOUBLES)
def test_double_mistake_is_never_blamed_on_a_mistake_it_does_not_make(slug, name):
    students = implementations(slug)
    replacements, check_cell, words = students.DOUBLE_MISTAKES[name]
    namespace, test_cells = student_namespace(slug, replacements)
    checks = importlib.import_module(f"autograder.checks.{slug}")
    forbidden = [w for t, _, _, w in students.MISTAKES.values() if t in replacements and not allowed(w, words)]
    messages, failures = [], 0

    # the visible checks of the task, as the notebook runs them
    try:
        exec(test_cells[check_cell], namespace)
    except Exception as failure:  # the notebook's own CheckFailed class
        assert type(failure).__name__ == "CheckFailed", f"the visible checks crashed: {failure!r}"
        cause = getattr(failure, "cause", None)
        assert cause is None or allowed(cause, words), f"visible check blames: {failure}"
        messages.append(str(failure))
        failures += 1

    # the hidden checks of every replaced task
    for replaced in replacements:
        for check in students.CHECKS_OF_TASK[replaced]:
            try:
                getattr(checks, check)(namespace[replaced])
            except CheckFailed as failure:
                assert failure.cause is None or allowed(failure.cause, words), f"{check} blames: {failure}"
                messages.append(str(failure))
                failures += 1
    assert failures, f"{name}: no check failed"
    for message in messages:
        named = [w for w in forbidden if w in message]
        assert not named, f"{name}: the message names {named}, a mistake the code does not make: {message}"


def run_check_cell(slug, replacements, check_cell):
    namespace, test_cells = student_namespace(slug, replacements)
    try:
        exec(test_cells[check_cell], namespace)
    except Exception as failure:  # the notebook's own CheckFailed class
        assert type(failure).__name__ == "CheckFailed", repr(failure)
        return namespace, str(failure)
    return namespace, None


def test_the_training_check_holds_out_unseen_sources_and_fails_a_loop_without_adams_state():
    students = implementations("training")
    namespace, message = run_check_cell("training", {"train": students.correct_train}, "test_train")
    assert message is None
    held_out = {tuple(source) for source in namespace["held_src"]}
    assert len(held_out) > 300 and not held_out & namespace["seen"]  # never in a training batch
    _, message = run_check_cell("training", {"train": students.train_without_state}, "test_train")
    assert "as a first step of Adam does" in message  # it reached 92.6% on 500 seen sources before
