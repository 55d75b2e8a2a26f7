"""The markers of the test folders, and the environment every test runs in."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The marker of each folder of tests (`pytest -m engine`, `pytest -m course`; pyproject.toml).
MARKERS = {"engine": "engine", "course": "course", "solutions": "course", "book": "course"}


def pytest_collection_modifyitems(items):
    for item in items:
        folder = Path(item.fspath).relative_to(ROOT / "tests").parts[0]
        if folder in MARKERS:
            item.add_marker(MARKERS[folder])


# nbgrader and the Jupyter kernel are found on PATH: put this environment first.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
