"""`python -m autograder grade` end to end, on one batch of submissions named by their state."""

import html
import json
import os
import re

import nbformat
import pytest

from autograder.engine import course, grade, hidden
from tests.support import COURSE
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.engine.grading import details, grades, max_score, run_grader, softmax_wrong_beyond_the_visible_checks

SLUGS = course.assignments(COURSE)
CORRECT = implementations(SLUG).CORRECT


def warning_softmax(x, axis=-1):
    import sys
    import warnings
    warnings.warn("this softmax is correct but noisy", RuntimeWarning)
    print("a debugging line on stderr", file=sys.stderr)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))  # noqa: F821 (np is the notebook's)
    return e / e.sum(axis=axis, keepdims=True)


def exiting_softmax(x, axis=-1):
    import os
    os._exit(1)  # kills the notebook's process


def looping_softmax(x, axis=-1):
    while True:
        pass


def asking_causal_mask(T):
    answer = input("T? ")  # nobody answers while grading
    return np.tril(np.ones((int(answer), int(answer)), dtype=bool))  # noqa: F821


def with_extra_cell(notebook, source, after=None):
    """`notebook` with a student's own code cell (after the cell with grade_id `after`)."""
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]
    notebook.cells.insert(ids.index(after) + 1 if after else len(ids), nbformat.v4.new_code_cell(source))
    return notebook


def edited(notebook, change):
    """`notebook` after `change(cells, index_of_grade_id)`."""
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]
    change(notebook.cells, ids.index)
    return notebook


def duplicated_solution(cells, index):
    copy = nbformat.from_dict(json.loads(json.dumps(cells[index("softmax")])))
    copy.id, copy.source = "softmax-again", "def softmax(x, axis=-1):\n    return x  # a later, wrong attempt"
    cells.insert(index("softmax") + 1, copy)


def crashing_softmax_cell(cells, index):
    cells[index("softmax")].source = "raise RuntimeError('oops')\n" + cells[index("softmax")].source


def deleted_check(cells, index):
    del cells[index("test_attention")]


def renamed_solution(cells, index):
    cells[index("softmax")].metadata["nbgrader"]["grade_id"] = "my_softmax"


def edited_check(cells, index):
    cells[index("test_attention")].source = "pass  # checks? what checks?"


STATES = {  # student -> (SLUG notebook or text, expected status)
    "submitted-warns": (lambda: submission(SLUG, {**CORRECT, "softmax": warning_softmax}), "graded"),
    "submitted-hidden-only-mistake": (lambda: submission(
        SLUG, {**CORRECT, "softmax": softmax_wrong_beyond_the_visible_checks}), "graded"),
    "submitted-invalid-json": (lambda: '{"cells": [', "unreadable"),
    "submitted-empty": (lambda: "", "unreadable"),
    "submitted-not-a-notebook": (lambda: '{"name": "a JSON file, not a notebook"}', "unreadable"),
    "submitted-duplicated-cell": (lambda: edited(submission(SLUG, CORRECT), duplicated_solution),
                                  "invalid-structure"),
    "submitted-deleted-check-cell": (lambda: edited(submission(SLUG, CORRECT), deleted_check),
                                     "invalid-structure"),
    "submitted-renamed-cell": (lambda: edited(submission(SLUG, CORRECT), renamed_solution),
                               "invalid-structure"),
    "submitted-edited-check-cell": (lambda: edited(submission(SLUG, {}), edited_check), "invalid-structure"),
    "submitted-infinite-loop": (lambda: submission(SLUG, {**CORRECT, "softmax": looping_softmax}),
                                "timeout"),
    "submitted-huge-output": (lambda: with_extra_cell(submission(SLUG, CORRECT),
                                                      "while True:\n    print('spam ' * 1000)"),
                              "resource-limit"),
    "submitted-memory-hog": (lambda: with_extra_cell(submission(SLUG, CORRECT),
                                                     "hog = np.ones((1024, 1024, 1024))"), "resource-limit"),
    "submitted-os-exit": (lambda: submission(SLUG, {**CORRECT, "softmax": exiting_softmax}), "crashed"),
    "submitted-crashing-cell": (lambda: edited(submission(SLUG, CORRECT), crashing_softmax_cell), "graded"),
    "submitted-asks-input": (lambda: submission(SLUG, {**CORRECT, "causal_mask": asking_causal_mask}),
                             "graded"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade one batch holding every fixture submission; return (out, grades, details, log)."""
    folder = tmp_path_factory.mktemp("submissions")
    for slug in SLUGS:
        students = implementations(slug)
        write(folder, "submitted-correct", submission(slug, students.CORRECT), slug)
        write(folder, "submitted-unchanged", submission(slug, {}), slug)
        for mistake in students.GRADED_MISTAKES:
            task, wrong, _, _ = students.MISTAKES[mistake]
            write(folder, f"submitted-{mistake}", submission(slug, {**students.CORRECT, task: wrong}), slug)
    for student, (make, _) in STATES.items():
        write(folder, student, make())
    (folder / "stray-file.txt").write_text("not a student")
    (folder / "submitted-correct" / "notes.txt").write_text("not a notebook")
    (folder / "bad id!").mkdir()
    os.symlink("/etc", folder / "linked-student")

    out = tmp_path_factory.mktemp("out")
    process = run_grader("grade", folder, "--out", out, "--workers", 2, "--cell-timeout", 10,
                         "--memory", 1024)
    assert process.returncode == 0, process.stderr
    return out, grades(out), details(out), process.stderr


def test_outputs_have_the_api_columns(graded):
    out, _, _, _ = graded
    assert open(out / "grades.csv").readline().strip() == "student_id,assignment,score,max_score,status"
    assert (open(out / "details.csv").readline().strip()
            == "student_id,assignment,check,score,max_score,message")


@pytest.mark.parametrize("slug", SLUGS)
def test_correct_submission_gets_full_marks(graded, slug):
    _, grades, details, _ = graded
    row = grades["submitted-correct", slug]
    assert (row["score"], row["max_score"], row["status"]) == (
        f"{max_score(slug):g}", f"{max_score(slug):g}", "graded")
    assert all(check["message"] == "" for check in details["submitted-correct", slug].values())


@pytest.mark.parametrize("slug", SLUGS)
def test_untouched_student_notebook_scores_zero(graded, slug):
    _, grades, details, _ = graded
    assert grades["submitted-unchanged", slug]["score"] == "0"
    assert grades["submitted-unchanged", slug]["status"] == "graded"
    assert all("not implemented" in c["message"] for c in details["submitted-unchanged", slug].values())


@pytest.mark.parametrize("slug, mistake", [(slug, mistake) for slug in SLUGS
                                           for mistake in implementations(slug).GRADED_MISTAKES])
def test_each_mistake_loses_points_with_a_reason(graded, slug, mistake):
    _, grades, details, _ = graded
    student, checks = f"submitted-{mistake}", details[f"submitted-{mistake}", slug]
    failing = _check_cell(slug, implementations(slug).MISTAKES[mistake][2])
    assert grades[student, slug]["status"] == "graded"
    assert 0 < float(grades[student, slug]["score"]) < max_score(slug)
    assert checks[failing]["score"] == "0"
    assert checks[failing]["message"]  # one sentence saying why
    assert "Traceback" not in checks[failing]["message"]


def _check_cell(slug, check):
    """The grade_id of the check cell whose hidden part calls `check` (a task's resource rule is a
    check of its own, in the task's cell)."""
    notebook = nbformat.read(COURSE.notebook(slug), as_version=4)
    return next(cell.metadata["nbgrader"]["grade_id"] for cell in notebook.cells
                if cell.metadata.get("nbgrader", {}).get("grade") and f"{check}(" in cell.source)


@pytest.mark.parametrize("student", STATES)
def test_every_submission_ends_with_its_status(graded, student):
    _, grades, _, _ = graded
    assert grades[student, SLUG]["status"] == STATES[student][1]


def test_a_student_without_a_notebook_for_an_assignment_is_missing(graded):
    _, grades, details, _ = graded
    row = grades["submitted-warns", "transformer_decoder"]
    assert (row["status"], row["score"]) == ("missing", "0")
    assert all("no notebook" in c["message"] for c in details["submitted-warns", "transformer_decoder"].values())


def test_correct_code_that_warns_and_prints_to_stderr_keeps_its_points(graded):
    _, grades, _, _ = graded
    assert grades["submitted-warns", SLUG]["score"] == f"{max_score(SLUG):g}"


@pytest.mark.parametrize("student", ["submitted-invalid-json", "submitted-empty", "submitted-not-a-notebook"])
def test_unreadable_submission_is_reported_and_the_batch_goes_on(graded, student):
    out, grades, details, _ = graded
    row = grades[student, SLUG]
    assert (row["score"], row["max_score"]) == ("0", f"{max_score(SLUG):g}")
    assert all("not a valid notebook" in c["message"] for c in details[student, SLUG].values())
    assert "not graded" in (out / "feedback" / student / f"{SLUG}.html").read_text()


@pytest.mark.parametrize("student", ["submitted-duplicated-cell", "submitted-deleted-check-cell",
                                     "submitted-renamed-cell"])
def test_a_broken_structure_is_reported_and_what_can_be_graded_is(graded, student):
    out, grades, _, _ = graded
    assert grades[student, SLUG]["score"] == f"{max_score(SLUG):g}"  # the correct code still counts
    result = json.loads((out / "results" / student / f"{SLUG}.json").read_text())
    assert result["notes"], "the structure problem is said"
    assert "was put back" in " ".join(result["notes"]) or student != "submitted-deleted-check-cell"


def test_an_edited_check_cell_is_graded_as_released(graded):
    _, grades, details, _ = graded
    assert details["submitted-edited-check-cell", SLUG]["test_attention"]["score"] == "0"
    assert grades["submitted-edited-check-cell", SLUG]["score"] == "0"


def test_an_endless_loop_loses_only_what_it_breaks(graded):
    _, grades, details, _ = graded
    checks = details["submitted-infinite-loop", SLUG]
    assert checks["test_softmax"]["score"] == "0"
    assert "softmax ran longer than its limit of 10 s" in checks["test_softmax"]["message"]
    assert checks["test_causal_mask"]["score"] == "1"  # a task that does not use softmax


def test_a_mistake_that_only_the_hidden_checks_see_loses_its_task_with_their_message(graded):
    """`validate` says ready to this softmax (tests/engine/test_validate.py); grading takes its points,
    with the hidden check's sentence, and only its own: attention is judged with a stand-in."""
    _, grades, details, _ = graded
    checks = details["submitted-hidden-only-mistake", SLUG]
    assert checks["test_softmax"]["score"] == "0"
    assert checks["test_softmax"]["message"].startswith(
        "softmax on a (3, 5) array along the last axis does not sum to 1 along axis -1")
    assert float(grades["submitted-hidden-only-mistake", SLUG]["score"]) == max_score(SLUG) - 2


def test_input_fails_fast_with_a_plain_reason(graded):
    _, _, details, _ = graded
    message = details["submitted-asks-input", SLUG]["test_causal_mask"]["message"]
    assert "input()" in message


def test_a_check_names_the_student_s_cell_whose_error_left_its_function_undefined(graded):
    _, _, details, _ = graded
    message = details["submitted-crashing-cell", SLUG]["test_softmax"]["message"]
    assert re.fullmatch(r"`softmax` is not defined because your answer cell of task “[^”]+” raised "
                        r"RuntimeError: oops, at line 1: raise RuntimeError\('oops'\)", message), message


def test_a_submission_that_kills_its_process_is_reported_as_crashed_and_loses_only_that_function_s_points(graded):
    # its check cell is run no more (the notebook runs again without it); the other tasks' checks
    # have the reference's softmax stand in, as beside any wrong softmax
    out, grades, details, _ = graded
    checks = details["submitted-os-exit", SLUG]
    assert grades["submitted-os-exit", SLUG]["status"] == "crashed"
    assert checks["test_softmax"]["score"] == "0" and "process died in this cell" in checks["test_softmax"]["message"]
    assert all(c["score"] == c["max_score"] for name, c in checks.items() if name != "test_softmax"), checks
    assert "crashed" in (out / "feedback" / "submitted-os-exit" / f"{SLUG}.html").read_text()


def test_stray_files_links_and_bad_names_are_reported_and_skipped(graded):
    _, grades, _, log = graded
    for name in ("stray-file.txt", "notes.txt", "bad id!", "linked-student"):
        assert name in log
    students = {student for student, _ in grades}
    assert not students & {"stray-file.txt", "bad id!", "linked-student"}


def test_feedback_per_student_shows_reasons_but_no_hidden_tests(graded):
    out, grades, details, _ = graded
    for student, slug in grades:
        page = (out / "feedback" / student / f"{slug}.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))  # as read: code is highlighted span by span
        # (a stamped given cell's header names the solutions/ files it comes from: no import)
        for secret in ("BEGIN HIDDEN TESTS", "autograder.checks", "from solutions.", "from solutions import",
                       "import solutions", "Traceback (most recent call last)"):
            assert secret not in text, (student, slug, secret)
    page = (out / "feedback" / "submitted-attention-unscaled" / f"{SLUG}.html").read_text()
    message = details["submitted-attention-unscaled", SLUG]["test_attention"]["message"]
    assert "Your checks" in page and "√d_k" in message and message in page


def test_summary_shows_distributions_failures_and_what_was_not_graded(graded):
    out, _, details, _ = graded
    page = (out / "summary.html").read_text()
    assert page.count("<svg") >= 2 * len(SLUGS)  # a histogram and a bar chart per assignment
    message = details["submitted-attention-unscaled", SLUG]["test_attention"]["message"]
    assert message in page  # among the most common failure messages
    for student in ("submitted-os-exit", "submitted-infinite-loop", "submitted-empty"):
        assert student in page


def test_a_hidden_cause_is_added_to_a_visible_failure_only_where_it_can_explain_it():
    cause = "the scores are not divided by √d_k"
    assert hidden._with_cause("the weights: expected [[0.25, 0.75]], got [[0.1, 0.9]].", cause) == (
        "the weights: expected [[0.25, 0.75]], got [[0.1, 0.9]]. The hidden checks find why: " + cause + ".")
    for message in ("the weights with every position masked contains NaN or inf.", "the output is inf at [0, 1]."):
        assert hidden._with_cause(message, cause) == message  # a missing scale gives no NaN
