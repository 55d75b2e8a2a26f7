"""Tests and benchmarks import nothing of each other: what both need lives in autograder/samples/.

A benchmark is free to change what it measures, and a test what it asserts,
without breaking the other.
"""

import ast

import pytest

from tests.support import ROOT


def imported_modules(path):
    """The absolute module names that the file at `path` imports."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


@pytest.mark.parametrize("folder, other", [("tests", "benchmarks"), ("benchmarks", "tests"),
                                           ("autograder/samples", "tests"),
                                           ("autograder/samples", "benchmarks")])
def test_no_import_crosses_between_tests_and_benchmarks(folder, other):
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files
    crossing = [f"{path.relative_to(ROOT)} imports {module}" for path in files
                for module in imported_modules(path) if module.split(".")[0] == other]
    assert not crossing, crossing


def test_the_rule_sees_an_import_that_crosses(tmp_path):
    path = tmp_path / "example.py"
    path.write_text("import os\nfrom benchmarks import batch\nfrom tests.engine.grading import run_grader\n")
    assert {"benchmarks", "tests.engine.grading"} <= set(imported_modules(path))
