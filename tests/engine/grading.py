"""Helpers of the grading tests: running the command, reading its outputs."""

import csv
import subprocess
import sys

import nbformat

from tests.support import COURSE


def max_score(slug):
    notebook = nbformat.read(COURSE.source / slug / f"{slug}.ipynb", as_version=4)
    return sum(c.metadata["nbgrader"].get("points", 0) for c in notebook.cells
               if c.metadata.get("nbgrader", {}).get("grade"))


def run_grader(*args, timeout=1200):
    """`python -m autograder ARGS`; the finished process (its exit status is checked by callers)."""
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=COURSE.root,
                          capture_output=True, text=True, timeout=timeout)


def grades(out):
    """{(student, assignment): row of grades.csv}."""
    return {(row["student_id"], row["assignment"]): row for row in csv.DictReader(open(out / "grades.csv"))}


def details(out):
    """{(student, assignment): {check: row of details.csv}}."""
    table = {}
    for row in csv.DictReader(open(out / "details.csv")):
        table.setdefault((row["student_id"], row["assignment"]), {})[row["check"]] = row
    return table


def softmax_wrong_beyond_the_visible_checks(x, axis=-1):
    """A softmax that only the hidden checks can tell wrong, by construction: right on arrays of at
    most 4 entries (every array of the visible softmax checks), normalised along axis 0 on larger
    ones (a hidden check's (3, 5) array along the last axis). The tests that need a mistake which
    passes `validate` and loses points at grading use it: the course's wrong softmaxes are all seen
    by a visible check (tests/course/test_no_surprise.py)."""
    x = np.asarray(x, dtype=float)  # noqa: F821 (np is the notebook's)
    if x.size > 4:
        axis = 0
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))  # noqa: F821
    return e / e.sum(axis=axis, keepdims=True)
