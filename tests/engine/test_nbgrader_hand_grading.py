"""nbgrader's own workflow around `grade`: grade, grade by hand in the formgrader, grade again,
`nbgrader export`, side by side with stock `nbgrader autograde` on a copy of the course.

The course is nbgrader's quickstart (`nbgrader_quickstart`). alice and bob hand in; both
courses are graded, then the same hand grades and comments are entered through the formgrader's
own REST API (a Jupyter server with the formgrader extension, on localhost); then alice hands in
again, later, and carol hands in a blank notebook late, and both courses are graded again (stock
autograde grades what is new: alice's newer submission and carol's).
"""

import contextlib
import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest

from autograder.engine import nbgrader_course
from autograder.samples import nbgrader_quickstart as quickstart
from autograder.samples.plain_nbgrader import run
from tests.engine.grading import run_grader

FIRST, LATER = "2026-01-01 10:00:00.000000 UTC", "2026-01-02 10:00:00.000000 UTC"
TOKEN = "hand-grading-test"


@contextlib.contextmanager
def formgrader(root):
    """A function (method, path, body) -> JSON of the formgrader's REST API of the course `root`,
    served by a Jupyter server of our own with the formgrader extension, stopped on leaving."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}",
         "--ServerApp.jpserver_extensions=nbgrader.server_extensions.formgrader=True"],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    def call(method, path, body=None):
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    try:
        ends = time.monotonic() + 60
        while True:
            try:
                call("GET", "/formgrader/api/status")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > ends:
                    raise RuntimeError(f"the formgrader did not start: {server.stderr.read()[-2000:]}") from None
                time.sleep(0.2)
        yield call
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server we started, with anything it started
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        server.stderr.close()


def hand_grade(root):
    """Grade alice and bob by hand in the formgrader of `root`, as an instructor does: every cell
    left for a person gets half its points, bob's first test cell is overridden, every answer cell
    gets a comment."""
    with formgrader(root) as call:
        for notebook in ("problem1", "problem2"):
            for submitted in call("GET", f"/formgrader/api/submitted_notebooks/{quickstart.ASSIGNMENT}/{notebook}"):
                student = submitted["student"]
                for grade in call("GET", f"/formgrader/api/grades?submission_id={submitted['id']}"):
                    if grade["needs_manual_grade"]:
                        call("PUT", f"/formgrader/api/grade/{grade['id']}", {"manual_score": grade["max_score"] / 2})
                    elif student == "bob" and grade["name"] == "correct_squares":
                        call("PUT", f"/formgrader/api/grade/{grade['id']}", {"manual_score": 0.5})
                for comment in call("GET", f"/formgrader/api/comments?submission_id={submitted['id']}"):
                    call("PUT", f"/formgrader/api/comment/{comment['id']}",
                         {"manual_comment": f"{student}: see me about {comment['name']}"})


def gradebook(root):
    """{(student, notebook, cell): (auto_score, manual_score, needs_manual_grade)} and
    {(student, notebook, cell): (auto_comment, manual_comment)} of the course's gradebook."""
    from nbgrader.api import Gradebook

    grades, comments = {}, {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as book:
        for student in ("alice", "bob", "carol"):
            for notebook in book.find_submission(quickstart.ASSIGNMENT, student).notebooks:
                for grade in notebook.grades:
                    grades[student, notebook.name, grade.name] = (grade.auto_score, grade.manual_score,
                                                                  grade.needs_manual_grade)
                for comment in notebook.comments:
                    comments[student, notebook.name, comment.name] = (comment.auto_comment,
                                                                      comment.manual_comment)
    return grades, comments


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    """(ours, stock): the course graded by the engine and its copy by stock autograde, after
    grade, hand grading, late submissions, grade again, `nbgrader export`."""
    folder = tmp_path_factory.mktemp("hand-grading")
    ours = quickstart.make_course(folder)
    released = quickstart.generate(ours)
    for student, kind in (("alice", "right"), ("bob", "wrong")):
        quickstart.write_submitted(ours / "submitted", student, quickstart.submission(ours, released, kind), FIRST)
    stock = shutil.copytree(ours, folder / "stock" / ours.name)
    out = folder / "out"

    def grade_both():
        process = run_grader("--course", ours, "grade", ours, "--out", out)
        assert process.returncode == 0, process.stderr
        run(None, stock, "autograde", quickstart.ASSIGNMENT)

    grade_both()
    hand_grade(ours)
    hand_grade(stock)
    for root in (ours, stock):  # alice hands in again, changed; carol hands in nothing done, late
        quickstart.write_submitted(root / "submitted", "alice", quickstart.submission(ours, released, "wrong"), LATER)
        quickstart.write_submitted(root / "submitted", "carol", quickstart.submission(ours, released, "blank"), LATER)
    grade_both()
    for root in (ours, stock):
        run(None, root, "export")
    return ours, stock


def test_grading_again_keeps_the_hand_grades_and_nbgrader_exports_what_stock_exports(courses):
    ours, stock = courses
    exported = (ours / "grades.csv").read_bytes()
    assert exported == (stock / "grades.csv").read_bytes()
    # the hand grades count: alice's and bob's scores are above their autograded points
    grades, _ = gradebook(ours)
    rows = {row["student_id"]: float(row["score"]) for row in csv.DictReader(io.StringIO(exported.decode()))}
    for student in ("alice", "bob"):
        autograded = sum(auto or 0 for (who, *_), (auto, _, _) in grades.items() if who == student)
        assert rows[student] > autograded, (student, rows[student], autograded)


def test_the_gradebook_holds_stock_s_scores_hand_scores_and_flags(courses):
    ours, stock = courses
    (our_grades, _), (stock_grades, _) = gradebook(ours), gradebook(stock)
    assert our_grades == stock_grades
    # what the comparison covers: hand scores kept, alice's re-graded ones flagged for a new look,
    # bob's untouched
    assert any(manual is not None and flagged for (who, *_), (_, manual, flagged) in our_grades.items()
               if who == "alice")
    assert any(manual is not None and not flagged for (who, *_), (_, manual, flagged) in our_grades.items()
               if who == "bob")


def test_the_gradebook_holds_stock_s_comments_hand_written_and_no_response(courses):
    ours, stock = courses
    (_, our_comments), (_, stock_comments) = gradebook(ours), gradebook(stock)
    assert our_comments == stock_comments
    # carol's answers left as released
    assert any(auto == "No response." for (who, *_), (auto, _) in our_comments.items() if who == "carol")


def test_the_autograded_notebooks_keep_the_kernel_s_language_info_as_stock_s(courses):
    ours, stock = courses
    for student in ("alice", "bob", "carol"):
        for notebook in ("problem1", "problem2"):
            path = f"autograded/{student}/{quickstart.ASSIGNMENT}/{notebook}.ipynb"
            theirs = nbformat.read(stock / path, as_version=4).metadata
            assert nbformat.read(ours / path, as_version=4).metadata == theirs
            assert theirs["language_info"]["name"] == "python"


ANSI = re.compile(r"\x1b\[[0-9;]*m")
ARROW = re.compile(r"-+> \d+ ")  # the line a frame ended on


def error_outputs(path):
    """[(cell index, ename, evalue, traceback lines without their colours)] of a notebook."""
    notebook = nbformat.read(path, as_version=4)
    return [(index, output.ename, output.evalue, [ANSI.sub("", line) for line in output.traceback])
            for index, cell in enumerate(notebook.cells) for output in cell.get("outputs", ())
            if output.output_type == "error"]


def test_a_failed_cell_shows_stock_s_traceback_its_lines_and_the_grader_s_reason(courses):
    ours, stock = courses
    compared = 0
    for student in ("alice", "bob", "carol"):
        for notebook in ("problem1", "problem2"):
            path = f"autograded/{student}/{quickstart.ASSIGNMENT}/{notebook}.ipynb"
            theirs, mine = error_outputs(stock / path), error_outputs(ours / path)
            assert [error[:3] for error in mine] == [error[:3] for error in theirs]
            for (*_, lines), (*_, stock_lines) in zip(mine, theirs):
                # the same frames (stock's code coloured by its syntax: the colours aside), each
                # with its line and lines around it (IPython picks them by statements: some
                # more), then, where it says more than the error's last line, the grader's reason
                assert len(lines) >= len(stock_lines)
                for entry, stock_entry in zip(lines, stock_lines):
                    entry, stock_entry = entry.splitlines(), stock_entry.splitlines()
                    assert entry[:1] == stock_entry[:1]
                    assert [line for line in entry if ARROW.match(line)] == [
                        line for line in stock_entry if ARROW.match(line)]
                    assert set(entry) <= set(stock_entry)
                assert all(line.startswith("The grader: ") for line in lines[len(stock_lines):])
                compared += 1
    assert compared >= 3  # bob's failed asserts, carol's functions not written
    assert any("----> " in line for *_, lines in error_outputs(ours / f"autograded/bob/{quickstart.ASSIGNMENT}/problem1.ipynb")
               for line in lines)


def test_a_traceback_s_text_is_plain_capped_and_names_only_the_notebook_s_cells():
    cells = [nbformat.v4.new_code_cell("def f():\n    raise ValueError('\x1b[2J' + 'x' * 5000)"),
             nbformat.v4.new_code_cell("f()  # \x1b]8;;http://example.org\x1b\\link")]
    error = {"ename": "ValueError", "evalue": "\x1b[2J" + "x" * 1990, "place": None, "inputs": None,
             "frames": [["1", 1, None], ["0", 2, "f()"], ["7", 1, "g()"], ["0", 99, "f()"], None]}
    lines = nbgrader_course.error_traceback(error, cells, {"0": 1, "1": 2})
    assert not any("\x1b" in ANSI.sub("", line) for line in lines)  # only the colours we add
    assert "Cell In[2], line 1" in ANSI.sub("", lines[2]) and "Cell In[1], line 2, in f()" in ANSI.sub("", lines[3])
    assert not any("g()" in line for line in lines)  # no cell 7 ran
    assert ANSI.sub("", lines[4]) == "Cell In[1], line 99, in f()\n"  # a line the cell does not have
    assert lines[5] == "[... frames left out ...]"
    assert max(len(line) for line in lines) < 2500
