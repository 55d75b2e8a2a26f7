"""`python -m autograder release`: the student notebooks, generated.

nbgrader's generate_assignment removes the solutions and hidden tests from
each instructor notebook (autograder/source/<slug>/<slug>.ipynb) and clears
outputs; this module adds the "generated" note and writes the result to
exercises/<slug>.ipynb. A test regenerates them and fails when they differ.
"""

import tempfile
from pathlib import Path

import nbformat

from .course import CHECK_HELPERS, EXERCISES, SOURCE, assignments, make_course_dir, nbgrader

HELPERS_CELL = "check_helpers"  # grade_id of the helper cell in every source notebook


class ReleaseError(RuntimeError):
    pass


def release(exercises_dir=EXERCISES, names=None):
    """Regenerate the student notebooks of `names` (default: all) into `exercises_dir`."""
    names = assignments() if names is None else list(names)
    for name in names:
        sync_check_helpers(SOURCE / name / f"{name}.ipynb")
    exercises_dir = Path(exercises_dir)
    exercises_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        course = make_course_dir(tmp, names)
        for name in names:
            result = nbgrader(course, "generate_assignment", name, "--force", "--no-db")
            if result.returncode != 0:
                raise ReleaseError(f"nbgrader generate_assignment {name} failed:\n{result.stderr}")
            notebook = nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
            notebook.cells.insert(0, _generated_note(name))
            nbformat.write(notebook, exercises_dir / f"{name}.ipynb")
    return [exercises_dir / f"{name}.ipynb" for name in names]


def sync_check_helpers(path):
    """Make the helper cell of the notebook at `path` equal autograder/checks/checking.py.

    Returns True when the notebook had to be rewritten.
    """
    notebook = nbformat.read(path, as_version=4)
    helpers = CHECK_HELPERS.read_text().rstrip("\n")
    cells = [c for c in notebook.cells
             if c.metadata.get("nbgrader", {}).get("grade_id") == HELPERS_CELL]
    if len(cells) != 1:
        raise ReleaseError(f"{path} needs exactly one cell with grade_id {HELPERS_CELL!r}")
    if cells[0].source == helpers:
        return False
    cells[0].source = helpers
    nbformat.write(notebook, path)
    return True


def _generated_note(name):
    source = f"autograder/source/{name}/{name}.ipynb"
    return nbformat.v4.new_markdown_cell(
        f"*This student notebook is generated from `{source}` by "
        "`python -m autograder release`: course authors edit that source, not this file. "
        "Students: this is your copy, work in it and hand it in.*",
        id="generated-note",
    )
