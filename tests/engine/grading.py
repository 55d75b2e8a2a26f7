"""Helpers of the grading tests: writing submissions, running the command, reading its outputs."""

import csv
import importlib
import subprocess
import sys

import nbformat

from autograder.engine import course
from tests.support import COURSE

SLUG = "scaled_dot_product"  # the assignment of the fixtures that are about grading, not content


def implementations(slug):
    return importlib.import_module(f"tests.course.implementations.{slug}")


def max_score(slug):
    notebook = nbformat.read(COURSE.source / slug / f"{slug}.ipynb", as_version=4)
    return sum(c.metadata["nbgrader"].get("points", 0) for c in notebook.cells
               if c.metadata.get("nbgrader", {}).get("grade"))


def write(folder, student, notebook_or_text, slug=SLUG):
    path = folder / student / f"{slug}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(notebook_or_text, str):
        path.write_text(notebook_or_text)
    else:
        nbformat.write(notebook_or_text, path)
    return path


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
