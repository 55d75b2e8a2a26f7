"""nbgrader's own example course, its students, and stock `nbgrader autograde` on them.

`make_course` runs `nbgrader quickstart course101` (assignment ps1: problem1 with
autograded tests, manually graded answers and a task; problem2 with manually
graded answers; the header notebook), then adds what the quickstart lacks and
real courses have: a hidden test, a test that reads a data file beside the
notebook, and a test cell that displays partial credit. `generate` releases it
with stock nbgrader; `submission` writes a student's notebooks from the release
(`KINDS`: right, blank, partly wrong, crashing, tampered with, writing to
stderr, deleting test cells); `autograde`
grades a `submitted/` folder with stock `nbgrader autograde` and reads its
gradebook.

Used by tests/engine/test_nbgrader_course.py (scores equal nbgrader's) and
by benchmarks/nbgrader_course.py (the time of both).
"""

import copy
import re
import shutil
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from autograder.engine.nbgrader_course import source_folder
from autograder.samples.plain_nbgrader import run

ASSIGNMENT = "ps1"
HIDDEN = ("\n### BEGIN HIDDEN TESTS\nassert squares(3) == [1, 4, 9]\n"
          "n = int(open('data/numbers.txt').read())\nassert len(squares(n)) == n\n### END HIDDEN TESTS\n")
PARTIAL = ("score = 0\nif squares(2) == [1, 4]:\n    score += 1\n"
           "if squares(4) == [1, 4, 9, 16]:\n    score += 0.5\nscore")
KINDS = ("right", "blank", "wrong", "crashing", "tampered", "noisy", "deleting")


def make_course(folder):
    """nbgrader's quickstart course101 in `folder`, with a hidden test, a data file and a
    partial-credit test added; returns its path."""
    folder = Path(folder)
    run(None, folder, "quickstart", "course101")
    course = folder / "course101"
    source = course / "source" / ASSIGNMENT
    (source / "data").mkdir()
    (source / "data" / "numbers.txt").write_text("7\n")
    path = source / "problem1.ipynb"
    notebook = nbformat.read(path, as_version=4)
    cells = notebook.cells
    for index, cell in enumerate(cells):
        if _grade_id(cell) == "correct_squares":
            cell.source += HIDDEN
            partial = new_code_cell(PARTIAL)
            if notebook.nbformat_minor < 5:  # cell ids came with nbformat 4.5
                del partial["id"]
            partial.metadata["nbgrader"] = {"grade": True, "grade_id": "squares_partly", "locked": False,
                                            "points": 2, "schema_version": 3, "solution": False}
            cells.insert(index + 1, partial)
            break
    nbformat.write(notebook, path)
    return course


def generate(course):
    run(None, course, "generate_assignment", ASSIGNMENT, "--force")
    return {path.stem: nbformat.read(path, as_version=4)
            for path in sorted((course / "release" / ASSIGNMENT).glob("*.ipynb"))}


def _grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _solution(source):
    """A source cell's code with nbgrader's solution markers taken out."""
    return re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", "", source, flags=re.M)


def submission(course, released, kind):
    """{notebook name: notebook} handed in by a student of `kind` (see KINDS)."""
    source = source_folder(course) / ASSIGNMENT  # CourseDirectory.source_directory
    sources = {name: {_grade_id(c): c for c in nbformat.read(source / f"{name}.ipynb", as_version=4).cells
                      if _grade_id(c)}
               for name in released}
    notebooks = {}
    for name, notebook in released.items():
        notebook = copy.deepcopy(notebook)
        for cell in notebook.cells:
            meta = cell.metadata.get("nbgrader", {})
            if kind != "blank" and meta.get("solution"):
                cell.source = _solution(sources[name][meta["grade_id"]].source)
            if kind == "wrong" and _grade_id(cell) == "sum_of_squares":
                cell.source = "def sum_of_squares(n):\n    return sum(i * i for i in range(n))"
            if kind == "crashing" and _grade_id(cell) == "squares":
                cell.source = ("def squares(n):\n    return [i ** 2 for i in range(1, n + 1)]\n"
                               "raise RuntimeError('oops')")
            if kind == "crashing" and _grade_id(cell) == "sum_of_squares":
                cell.source = "import undefined_module_of_nobody\n" + cell.source
            if kind == "tampered":
                if _grade_id(cell) == "squares":
                    cell.source = "def squares(n):\n    return [1]"
                if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
                    cell.source, meta["points"] = "pass", 100
            if kind == "noisy" and _grade_id(cell) == "squares":
                cell.source = ("import sys\n\ndef squares(n):\n    if n < 1:\n        raise ValueError(n)\n"
                               "    print('computing', n, file=sys.stderr)\n"
                               "    return [i ** 2 for i in range(1, n + 1)]")
        if kind == "deleting":  # a test cell deleted
            notebook.cells = [cell for cell in notebook.cells if _grade_id(cell) != "correct_squares"]
        notebooks[name] = notebook
    return notebooks


def write_submitted(folder, student, notebooks, timestamp=None):
    """Write `notebooks` as nbgrader's folder/<student>/ps1/<notebook>.ipynb (+ timestamp.txt)."""
    target = Path(folder) / student / ASSIGNMENT
    target.mkdir(parents=True, exist_ok=True)
    for name, notebook in notebooks.items():
        nbformat.write(notebook, target / f"{name}.ipynb")
    if timestamp:
        (target / "timestamp.txt").write_text(timestamp)
    return target


def autograde(course, submitted):
    """Stock `nbgrader autograde ps1` of the students of `submitted` (copied into the course's
    submitted/): ({student: {"<notebook>/<grade_id>": (score, needs manual grade)}}, seconds)."""
    from nbgrader.api import Gradebook

    target = course / "submitted"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(submitted, target)
    shutil.rmtree(course / "autograded", ignore_errors=True)
    started = time.perf_counter()
    run(None, course, "autograde", ASSIGNMENT, "--force")
    seconds = time.perf_counter() - started
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for folder in sorted(target.iterdir()):
            student = folder.name
            submission = gradebook.find_submission(ASSIGNMENT, student)
            scores[student] = {f"{notebook.name}/{grade.name}": (float(grade.score),
                                                                 bool(grade.needs_manual_grade))
                               for notebook in submission.notebooks for grade in notebook.grades}
    return scores, seconds
