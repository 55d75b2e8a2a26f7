"""Every notebook found gets a row in grades.csv, with the status that says why it was not graded."""

import os
import re
import zipfile

import pytest

from autograder.engine import collect, grade
from tests.support import COURSE
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.engine.grading import details, grades, max_score, run_grader

CORRECT = implementations(SLUG).CORRECT


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("found")
    elsewhere = write(tmp_path_factory.mktemp("elsewhere"), "x", submission(SLUG, CORRECT))
    write(folder, "ada", submission(SLUG, CORRECT))
    (folder / "linked").mkdir()
    os.symlink(elsewhere, folder / "linked" / f"{SLUG}.ipynb")
    (folder / "folder").mkdir()
    (folder / "folder" / f"{SLUG}.ipynb").mkdir()
    (folder / "pipe").mkdir()
    os.mkfifo(folder / "pipe" / f"{SLUG}.ipynb")  # reading it would block for ever
    (folder / "huge").mkdir()
    with open(folder / "huge" / f"{SLUG}.ipynb", "wb") as handle:
        handle.truncate(collect.MAX_NOTEBOOK_BYTES + 1)  # sparse: no disk used
    os.symlink(elsewhere, folder / f"ps1_lmslink_attempt_2026-03-01-10-00-00_{SLUG}.ipynb")
    out = tmp_path_factory.mktemp("out")
    process = run_grader("grade", folder, "--out", out, "--workers", 2)
    assert process.returncode == 0, process.stderr
    return out


@pytest.mark.parametrize("student, status, reason", [
    ("linked", "link", "symbolic link"), ("lmslink", "link", "symbolic link"),
    ("folder", "not-a-file", "not a regular file"), ("pipe", "not-a-file", "not a regular file"),
    ("huge", "too-large", "larger than 20 MB")])
def test_a_notebook_that_cannot_be_read_gets_a_row_saying_why(batch, student, status, reason):
    row = grades(batch)[student, SLUG]
    assert (row["status"], row["score"], row["max_score"]) == (status, "0", f"{max_score(SLUG):g}")
    assert all(reason in check["message"] for check in details(batch)[student, SLUG].values())
    assert reason in (batch / "feedback" / student / f"{SLUG}.html").read_text()


def test_the_readable_ones_are_graded_as_usual(batch):
    assert grades(batch)["ada", SLUG]["status"] == "graded"


def test_the_summary_links_every_student_to_a_feedback_page_that_exists(batch):
    page = (batch / "summary.html").read_text()
    table = page[page.index("<h2>Students</h2>"):]
    linked = re.findall(r"<a href='(feedback/[^']+)'>", table[:table.index("</table>")])
    assert sorted(linked) == sorted(f"feedback/{student}/{SLUG}.html" for student, _ in grades(batch))
    assert all((batch / url).is_file() for url in linked)


def test_links_and_oversized_files_in_a_zip_get_rows_too(tmp_path):
    archive = tmp_path / "batch.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("course/ada/scaled_dot_product.ipynb", "{}")
        link = zipfile.ZipInfo(f"course/linked/{SLUG}.ipynb")
        link.external_attr = (0o120777 << 16)
        bundle.writestr(link, "/etc/passwd")
        huge = zipfile.ZipInfo(f"course/huge/{SLUG}.ipynb")
        bundle.writestr(huge, b"x" * (collect.MAX_NOTEBOOK_BYTES + 1), compress_type=zipfile.ZIP_DEFLATED)
    out = tmp_path / "out"
    grade.grade(COURSE, archive, out, workers=1, log=lambda line: None)
    rows = grades(out)
    assert rows["linked", SLUG]["status"] == "link"
    assert rows["huge", SLUG]["status"] == "too-large"
    assert rows["ada", SLUG]["status"] == "unreadable"
