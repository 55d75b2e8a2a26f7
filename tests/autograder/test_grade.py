"""`python -m autograder grade` end to end, on submissions named by their state."""

import csv
import subprocess
import sys
import zipfile

import nbformat
import pytest

from autograder import course
from tests.autograder.implementations import scaled_dot_product as students
from tests.conftest import submission

SLUG = "scaled_dot_product"
MAX_SCORE = 10
# Mistakes graded end to end (all of them are checked against the hidden
# checks directly in tests/autograder/checks/).
GRADED_MISTAKES = ["softmax-wrong-axis", "attention-unscaled", "attention-softmax-over-queries",
                   "attention-mask-after-softmax", "attention-nan-when-fully-masked",
                   "causal-mask-upper", "padding-mask-off-by-one"]


def check_cell(check_function):
    """The test cell that runs a hidden check: check_x -> test_x."""
    return "test_" + check_function.removeprefix("check_")


def write(folder, student, notebook_or_text):
    path = folder / student / f"{SLUG}.ipynb"
    path.parent.mkdir(parents=True)
    if isinstance(notebook_or_text, str):
        path.write_text(notebook_or_text)
    else:
        nbformat.write(notebook_or_text, path)


def warning_softmax(x, axis=-1):
    import sys
    import warnings
    warnings.warn("this softmax is correct but noisy", RuntimeWarning)
    print("a debugging line on stderr", file=sys.stderr)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))  # noqa: F821 (np is the notebook's)
    return e / e.sum(axis=axis, keepdims=True)


def exiting_softmax(x, axis=-1):
    import os
    os._exit(1)  # kills the notebook's kernel


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade one batch holding every fixture submission; return the outputs."""
    folder = tmp_path_factory.mktemp("submissions")
    write(folder, "submitted-correct", submission(SLUG, students.CORRECT))
    write(folder, "submitted-unchanged", submission(SLUG, {}))
    write(folder, "submitted-warns", submission(SLUG, {**students.CORRECT, "softmax": warning_softmax}))
    write(folder, "submitted-os-exit", submission(SLUG, {**students.CORRECT, "softmax": exiting_softmax}))
    write(folder, "submitted-invalid-json", '{"cells": [')
    write(folder, "submitted-empty", "")
    for mistake in GRADED_MISTAKES:
        task, wrong, _, _ = students.MISTAKES[mistake]
        write(folder, f"submitted-{mistake}", submission(SLUG, {**students.CORRECT, task: wrong}))
    (folder / "stray-file.txt").write_text("not a student")
    (folder / "submitted-correct" / "notes.txt").write_text("not a notebook")

    out = tmp_path_factory.mktemp("out")
    process = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(folder), "--out", str(out), "--workers", "2"],
        cwd=course.ROOT, capture_output=True, text=True, timeout=900)
    assert process.returncode == 0, process.stderr
    grades = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    details = {}
    for row in csv.DictReader(open(out / "details.csv")):
        details.setdefault(row["student_id"], {})[row["check"]] = row
    return out, grades, details, process.stderr


def test_outputs_have_the_api_columns(graded):
    out, _, _, _ = graded
    assert open(out / "grades.csv").readline().strip() == "student_id,assignment,score,max_score,status"
    assert (open(out / "details.csv").readline().strip()
            == "student_id,assignment,check,score,max_score,message")


def test_correct_submission_gets_full_marks(graded):
    _, grades, details, _ = graded
    row = grades["submitted-correct"]
    assert (row["assignment"], row["score"], row["max_score"], row["status"]) == (
        SLUG, str(MAX_SCORE), str(MAX_SCORE), "graded")
    assert all(check["message"] == "" for check in details["submitted-correct"].values())


def test_untouched_student_notebook_scores_zero(graded):
    _, grades, details, _ = graded
    assert grades["submitted-unchanged"]["score"] == "0"
    assert grades["submitted-unchanged"]["status"] == "graded"
    assert all("not implemented" in c["message"] for c in details["submitted-unchanged"].values())


def test_correct_code_that_warns_and_prints_to_stderr_keeps_its_points(graded):
    _, grades, _, _ = graded
    assert grades["submitted-warns"]["score"] == str(MAX_SCORE)


@pytest.mark.parametrize("mistake", GRADED_MISTAKES)
def test_each_mistake_loses_the_points_of_its_check_only(graded, mistake):
    _, grades, details, _ = graded
    student = f"submitted-{mistake}"
    failing = check_cell(students.MISTAKES[mistake][2])
    assert grades[student]["status"] == "graded"
    assert 0 < float(grades[student]["score"]) < MAX_SCORE
    assert details[student][failing]["score"] == "0"
    assert details[student][failing]["message"]  # one sentence saying why
    assert "Traceback" not in details[student][failing]["message"]
    if "softmax" not in mistake:  # a wrong softmax may break the attention that uses it
        lost = {name for name, c in details[student].items() if c["score"] != c["max_score"]}
        assert lost <= {failing, "test_attention", "test_attention_masks"}


@pytest.mark.parametrize("student", ["submitted-invalid-json", "submitted-empty"])
def test_unreadable_submission_is_reported_and_the_batch_goes_on(graded, student):
    out, grades, details, _ = graded
    assert grades[student]["status"] == "unreadable" and grades[student]["score"] == "0"
    assert grades[student]["max_score"] == str(MAX_SCORE)
    assert all("not a valid notebook" in c["message"] for c in details[student].values())
    assert "not graded" in (out / "feedback" / student / f"{SLUG}.html").read_text()


def test_a_submission_that_kills_its_kernel_is_reported_as_crashed(graded):
    out, grades, details, _ = graded
    assert grades["submitted-os-exit"]["status"] == "crashed"
    assert grades["submitted-os-exit"]["score"] == "0"
    assert all("process died" in c["message"] for c in details["submitted-os-exit"].values())
    assert "crashed" in (out / "feedback" / "submitted-os-exit" / f"{SLUG}.html").read_text()


def test_stray_files_are_reported_and_skipped(graded):
    _, grades, _, log = graded
    assert "stray-file.txt" in log and "notes.txt" in log
    assert "stray-file.txt" not in grades


def test_feedback_per_student_shows_reasons_but_no_hidden_tests(graded):
    out, grades, details, _ = graded
    for student in grades:
        page = (out / "feedback" / student / f"{SLUG}.html").read_text()
        for secret in ("BEGIN HIDDEN TESTS", "autograder.checks", "check_attention(",
                       "Traceback (most recent call last)", "----&gt;"):
            assert secret not in page, (student, secret)
    page = (out / "feedback" / "submitted-attention-unscaled" / f"{SLUG}.html").read_text()
    message = details["submitted-attention-unscaled"]["test_attention"]["message"]
    assert "Your checks" in page and "√d_k" in message
    assert message.replace("√", "&#8730;") in page or message in page


def test_a_zip_of_the_folder_grades_like_the_folder(graded, tmp_path):
    _, grades, _, _ = graded
    folder = tmp_path / "class"
    write(folder, "alice", submission(SLUG, students.CORRECT))
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(folder / "alice" / f"{SLUG}.ipynb", f"class/alice/{SLUG}.ipynb")
        zipped.writestr("../escape/evil.ipynb", "{}")
    out = tmp_path / "out"
    process = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(archive), "--out", str(out)],
        cwd=course.ROOT, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr
    assert "evil.ipynb" in process.stderr and not (tmp_path / "escape").exists()
    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert [(r["student_id"], r["score"], r["status"]) for r in rows] == [("alice", "10", "graded")]
