"""`python -m autograder grade` end to end, on submissions named by their state."""

import csv
import importlib
import subprocess
import sys
import zipfile

import nbformat
import pytest

from autograder import course
from tests.conftest import submission

SLUGS = course.assignments()
SLUG = "scaled_dot_product"  # the assignment of the fixtures that are about grading, not content


def implementations(slug):
    return importlib.import_module(f"tests.autograder.implementations.{slug}")


def max_score(slug):
    notebook = nbformat.read(course.SOURCE / slug / f"{slug}.ipynb", as_version=4)
    return sum(c.metadata["nbgrader"].get("points", 0) for c in notebook.cells
               if c.metadata.get("nbgrader", {}).get("grade"))


def check_cell(check_function):
    """The test cell that runs a hidden check: check_x -> test_x."""
    return "test_" + check_function.removeprefix("check_")


def write(folder, student, notebook_or_text, slug=SLUG):
    path = folder / student / f"{slug}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
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
    for slug in SLUGS:
        students = implementations(slug)
        write(folder, "submitted-correct", submission(slug, students.CORRECT), slug)
        write(folder, "submitted-unchanged", submission(slug, {}), slug)
        for mistake in students.GRADED_MISTAKES:
            task, wrong, _, _ = students.MISTAKES[mistake]
            write(folder, f"submitted-{mistake}", submission(slug, {**students.CORRECT, task: wrong}), slug)
    correct = implementations(SLUG).CORRECT
    write(folder, "submitted-warns", submission(SLUG, {**correct, "softmax": warning_softmax}))
    write(folder, "submitted-os-exit", submission(SLUG, {**correct, "softmax": exiting_softmax}))
    write(folder, "submitted-invalid-json", '{"cells": [')
    write(folder, "submitted-empty", "")
    (folder / "stray-file.txt").write_text("not a student")
    (folder / "submitted-correct" / "notes.txt").write_text("not a notebook")

    out = tmp_path_factory.mktemp("out")
    process = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(folder), "--out", str(out), "--workers", "2"],
        cwd=course.ROOT, capture_output=True, text=True, timeout=1800)
    assert process.returncode == 0, process.stderr
    grades, details = {}, {}
    for row in csv.DictReader(open(out / "grades.csv")):
        grades[row["student_id"], row["assignment"]] = row
    for row in csv.DictReader(open(out / "details.csv")):
        details.setdefault((row["student_id"], row["assignment"]), {})[row["check"]] = row
    return out, grades, details, process.stderr


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


def test_correct_code_that_warns_and_prints_to_stderr_keeps_its_points(graded):
    _, grades, _, _ = graded
    assert grades["submitted-warns", SLUG]["score"] == f"{max_score(SLUG):g}"


@pytest.mark.parametrize("slug, mistake", [(slug, mistake) for slug in SLUGS
                                           for mistake in implementations(slug).GRADED_MISTAKES])
def test_each_mistake_loses_points_with_a_reason(graded, slug, mistake):
    _, grades, details, _ = graded
    student, checks = f"submitted-{mistake}", details[f"submitted-{mistake}", slug]
    failing = check_cell(implementations(slug).MISTAKES[mistake][2])
    assert grades[student, slug]["status"] == "graded"
    assert 0 < float(grades[student, slug]["score"]) < max_score(slug)
    assert checks[failing]["score"] == "0"
    assert checks[failing]["message"]  # one sentence saying why
    assert "Traceback" not in checks[failing]["message"]


@pytest.mark.parametrize("student", ["submitted-invalid-json", "submitted-empty"])
def test_unreadable_submission_is_reported_and_the_batch_goes_on(graded, student):
    out, grades, details, _ = graded
    row = grades[student, SLUG]
    assert (row["status"], row["score"], row["max_score"]) == ("unreadable", "0", f"{max_score(SLUG):g}")
    assert all("not a valid notebook" in c["message"] for c in details[student, SLUG].values())
    assert "not graded" in (out / "feedback" / student / f"{SLUG}.html").read_text()


def test_a_submission_that_kills_its_kernel_is_reported_as_crashed(graded):
    out, grades, details, _ = graded
    assert grades["submitted-os-exit", SLUG]["status"] == "crashed"
    assert grades["submitted-os-exit", SLUG]["score"] == "0"
    assert all("process died" in c["message"] for c in details["submitted-os-exit", SLUG].values())
    assert "crashed" in (out / "feedback" / "submitted-os-exit" / f"{SLUG}.html").read_text()


def test_stray_files_are_reported_and_skipped(graded):
    _, grades, _, log = graded
    assert "stray-file.txt" in log and "notes.txt" in log
    assert not any(student == "stray-file.txt" for student, _ in grades)


def test_feedback_per_student_shows_reasons_but_no_hidden_tests(graded):
    out, grades, details, _ = graded
    for student, slug in grades:
        page = (out / "feedback" / student / f"{slug}.html").read_text()
        for secret in ("BEGIN HIDDEN TESTS", "autograder.checks", "from solutions",
                       "Traceback (most recent call last)", "----&gt;"):
            assert secret not in page, (student, slug, secret)
    page = (out / "feedback" / "submitted-attention-unscaled" / f"{SLUG}.html").read_text()
    message = details["submitted-attention-unscaled", SLUG]["test_attention"]["message"]
    assert "Your checks" in page and "√d_k" in message
    assert message.replace("√", "&#8730;") in page or message in page


def test_a_zip_of_the_folder_grades_like_the_folder(graded, tmp_path):
    _, grades, _, _ = graded
    folder = tmp_path / "class"
    write(folder, "alice", submission(SLUG, implementations(SLUG).CORRECT))
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
    assert [(r["student_id"], r["score"], r["status"]) for r in rows] == [
        ("alice", f"{max_score(SLUG):g}", "graded")]
