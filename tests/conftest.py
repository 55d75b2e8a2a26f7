"""Shared helpers: student submissions made from the generated exercise notebooks."""

import inspect
import os
import sys
import textwrap
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "exercises"

# The marker of each folder of tests (`pytest -m engine`, `pytest -m course`; pyproject.toml).
MARKERS = {"engine": "engine", "course": "course", "solutions": "course", "book": "course"}


def pytest_collection_modifyitems(items):
    for item in items:
        folder = Path(item.fspath).relative_to(ROOT / "tests").parts[0]
        if folder in MARKERS:
            item.add_marker(MARKERS[folder])


# nbgrader and the Jupyter kernel are found on PATH: put this environment first.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]


def submission(slug, implementations):
    """The student notebook of `slug` with solution cells replaced.

    `implementations` maps a task (the grade_id of its solution cell, which is
    also the function's name) to a function whose source goes into that cell,
    renamed to the task, as a student would have typed it.
    """
    notebook = nbformat.read(EXERCISES / f"{slug}.ipynb", as_version=4)
    for cell in notebook.cells:
        task = cell.metadata.get("nbgrader", {}).get("grade_id")
        if task in implementations:
            function = implementations[task]
            source = textwrap.dedent(inspect.getsource(function))
            cell.source = source.replace(f"def {function.__name__}(", f"def {task}(", 1).strip()
    return notebook
