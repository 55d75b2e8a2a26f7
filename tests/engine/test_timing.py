"""Time limits that follow the work (autograder/engine/timing.py): derived from the reference's time,
stored with each assignment, and a function that ran out of time is not called again."""

import re

import nbformat
import pytest

from autograder.engine import assignment, course, grade, timing
from autograder.engine.assignment import grade_id
from autograder.engine.sandbox import Limits
from tests.support import COURSE
from autograder.samples.submissions import SLUG, implementations, submission, write

SLUGS = course.assignments(COURSE)


@pytest.mark.parametrize("slug", SLUGS)
def test_every_assignment_stores_the_reference_times_of_its_cells_and_calls(slug):
    measured = timing.load(COURSE, slug)
    assert measured is not None, f"{timing.path(COURSE, slug)} is missing: run `make release` and commit it"
    released = nbformat.read(COURSE.exercises / f"{slug}.ipynb", as_version=4)
    code_cells = {grade_id(c) for c in released.cells if c.cell_type == "code"} - {None}
    assert set(measured["cells"]) == code_cells, (
        f"{timing.path(COURSE, slug)} is stale (its cells are not the assignment's): run `make release`")
    assert measured["calls"], "the hidden checks call the student's functions: their times are missing"
    assert all(isinstance(s, float) and s >= 0 for s in [*measured["cells"].values(),
                                                          *measured["calls"].values()])


def test_the_stored_calls_are_those_the_hidden_checks_make():
    """Only the set of names is compared: the figures depend on the machine."""
    cells, calls = timing.measure_once(COURSE, SLUG)
    stored = timing.load(COURSE, SLUG)
    assert set(cells) == set(stored["cells"]) and set(calls) == set(stored["calls"]), (
        f"{timing.path(COURSE, SLUG)} is stale: run `make release`")


def test_limits_are_factor_times_the_reference_within_floor_and_ceiling(monkeypatch):
    monkeypatch.setattr(timing, "load", lambda course, name: {"cells": {"a": 0.001, "b": 0.1, "c": 10.0},
                                                       "calls": {"f": 0.001, "g": 0.2}})
    cells = [("0", "a"), ("1", "b"), ("2", "c"), ("3", None)]
    derived = timing.timeouts(COURSE, SLUG, cells, Limits())
    assert derived.cells == {"0": 1.0, "1": 5.0, "2": 60.0, "3": 60.0}  # floor, 50x, ceiling, own cell
    assert derived.calls == {"f": 1.0, "g": 10.0} and derived.call == 10.0
    fixed = timing.timeouts(COURSE, SLUG, cells, Limits(cell_seconds=7, fixed_cells=True, call_seconds=3,
                                                fixed_calls=True))
    assert set(fixed.cells.values()) == {7} and set(fixed.calls.values()) == {3} and fixed.call == 3
    tuned = timing.timeouts(COURSE, SLUG, cells, Limits(time_factor=10, min_seconds=0.5))
    assert tuned.cells["1"] == pytest.approx(1.0) and tuned.calls["f"] == 0.5


def test_an_assignment_never_measured_gets_the_ceilings(monkeypatch):
    monkeypatch.setattr(timing, "path", lambda course, name: COURSE.root / "no" / "timing.json")
    derived = timing.timeouts(COURSE, SLUG, [("0", "softmax"), ("1", None)], Limits(cell_seconds=9, call_seconds=4))
    assert derived.cells == {"0": 9, "1": 9} and derived.calls == {} and derived.call == 4


# -- grading with the derived limits ------------------------------------------------------

STUCK = {
    "loops": "    while True:\n        pass",
    "sleeps": "    import time\n    time.sleep(3600)",
    # finite, but O(T^4) on the checks' inputs: far beyond 50x the reference
    "is-slow": "    total = 0\n    for _ in range(10 ** 9):\n        total += 1\n"
               "    return Q @ K.swapaxes(-1, -2) @ V, None",
}
STUCK_ONLY_IN_HIDDEN_CHECKS = (  # passes the visible check cells, loops on the hidden checks' inputs
    "    if Q.shape[-1] not in (1, 4):\n        while True:\n            pass\n"  # d_k of the visible cases
    "    import numpy as np\n"
    "    s = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])\n"
    "    if mask is not None:\n        s = np.where(mask, s, -np.inf)\n"
    "    top = s.max(-1, keepdims=True)\n"
    "    w = np.exp(s - np.where(np.isfinite(top), top, 0.0))\n"
    "    total = w.sum(-1, keepdims=True)\n"
    "    w = w / np.where(total == 0, 1.0, total)\n    return w @ V, w")


def stuck(body):
    notebook = submission(SLUG, implementations(SLUG).CORRECT)
    for cell in notebook.cells:
        if grade_id(cell) == "scaled_dot_product_attention":
            cell.source = f"def scaled_dot_product_attention(Q, K, V, mask=None):\n{body}\n"
    return notebook


@pytest.fixture(scope="module")
def graded_stuck(tmp_path_factory):
    folder, out = tmp_path_factory.mktemp("submissions"), tmp_path_factory.mktemp("out")
    for name, body in STUCK.items():
        write(folder, f"submitted-attention-{name}", stuck(body))
    write(folder, "submitted-attention-loops-on-hidden-inputs", stuck(STUCK_ONLY_IN_HIDDEN_CHECKS))
    tried = submission(SLUG, implementations(SLUG).CORRECT)
    tried.cells.append(nbformat.v4.new_code_cell(  # the student's own cell: too much work, no bug
        "Q = np.ones((2, 4))\nfor _ in range(10 ** 9):\n    scaled_dot_product_attention(Q, Q, Q)"))
    write(folder, "submitted-correct-own-cell-too-long", tried)
    results = grade.grade(COURSE, folder, out, workers=2, log=lambda message: None)
    return {r.student_id: r for r in results}


def test_stuck_attention_costs_one_limit_and_loses_only_its_checks(graded_stuck):
    results = graded_stuck
    maximum = {t.grade_id: t.points for t in assignment.load(COURSE, SLUG).tests}
    for name in STUCK:
        result = results[f"submitted-attention-{name}"]
        checks = {c.name: c for c in result.checks}
        assert result.status == "timeout", (name, result.notes)
        # the functions that do not use attention keep their points
        for kept in ("test_softmax", "test_causal_mask", "test_padding_mask"):
            assert checks[kept].score == maximum[kept], (name, checks[kept])
        first, later = checks["test_attention"], checks["test_attention_masks"]
        assert first.score == later.score == 0
        assert "scaled_dot_product_attention ran longer than its limit of 1 s" in first.message, first
        assert "is not called again" in later.message, later  # it failed at once, not after its limit
        assert "in the check cell of task “Scaled dot-product attention”" in later.message, later
        # the submission's note names the task and the function, not a cell number
        assert any(note.startswith("scaled_dot_product_attention ran longer than its time limit of 1 s in "
                                   "the check cell of task “Scaled dot-product attention”")
                   for note in result.notes), (name, result.notes)
        # one limit, not two: the clock decides no test (benchmarks/slow_students.py measures it)
        assert sum("time limit" in note for note in result.notes) == 1, (name, result.notes)


def test_stuck_only_on_hidden_inputs_fails_the_remaining_calls_at_once(graded_stuck):
    results = graded_stuck
    result = results["submitted-attention-loops-on-hidden-inputs"]
    checks = {c.name: c for c in result.checks}
    assert result.status == "timeout"
    assert checks["test_attention"].score == 0
    assert ("ran longer than its limit of 1 s in a check of task “Scaled dot-product attention”"
            in checks["test_attention"].message)
    assert any(note.startswith("scaled_dot_product_attention ran longer than its time limit of 1 s in a check "
                               "of task “Scaled dot-product attention”") for note in result.notes), result.notes
    assert "is not called again" in checks["test_attention_masks"].message
    assert sum("time limit" in note for note in result.notes) == 1, result.notes


def test_a_function_that_ran_too_long_in_the_students_own_cell_keeps_its_points(graded_stuck):
    results = graded_stuck
    result = results["submitted-correct-own-cell-too-long"]
    assert result.status == "timeout" and result.score == result.max_score, result
    assert any("a cell of your own after task “Attention with masks”" in note for note in result.notes), result


def test_no_time_limit_message_names_a_cell_by_its_number(graded_stuck):
    """Cell numbers count Markdown cells and are shown nowhere: a message names the task."""
    results = graded_stuck
    for result in results.values():
        messages = result.notes + [check.message for check in result.checks]
        assert not [m for m in messages if re.search(r"\bcell \d", m)], result.student_id
        assert all("task “" in note for note in result.notes if "time limit" in note), result.notes


def test_correct_code_written_with_loops_keeps_every_point_under_the_derived_limits(tmp_path):
    """The catalogues' alternatives (Python loops where the reference is vectorised) of every
    assignment, graded with the default limits, which follow the reference's time."""
    folder = tmp_path / "submissions"
    for slug in SLUGS:
        write(folder, "submitted-correct-by-other-means", submission(slug, implementations(slug).CORRECT), slug)
    results = grade.grade(COURSE, folder, tmp_path / "out", workers=2, log=lambda message: None)
    for result in results:
        assert (result.status, result.score) == ("graded", result.max_score), (
            result.assignment, result.notes, [c for c in result.checks if c.score < c.max_score])
