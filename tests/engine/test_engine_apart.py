"""The engine is one folder, autograder/engine/, that names no course and imports nothing of this one.

Its modules import only the standard library, their dependencies and each other; no
string in them names this course's ids, packages or paths. The course value is built
at the entry point and passed down: no module keeps a current course.
"""

import ast
import re
import tomllib

from autograder.engine import course
from tests.support import COURSE, ROOT

ENGINE_FILES = sorted(path for path in course.ENGINE.rglob("*")
                      if path.is_file() and "__pycache__" not in path.parts)
# What belongs to this course: its packages and the folders its course file names.
COURSE_PACKAGES = {"solutions", "tests", "autograder.checks", "benchmarks", "book"}


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def test_the_engine_imports_nothing_of_the_course():
    python = [path for path in ENGINE_FILES if path.suffix == ".py"]
    assert len(python) > 20
    for path in python:
        for module in _imports(path):
            assert not any(module == p or module.startswith(p + ".") for p in COURSE_PACKAGES), (
                f"{path.relative_to(ROOT)} imports {module}")
            assert module.split(".")[0] != "autograder" or module.startswith("autograder.engine"), (
                f"{path.relative_to(ROOT)} imports {module}, outside the engine")


def test_no_engine_file_names_this_course():
    data = tomllib.loads(COURSE.file.read_text())
    words = {data["id"], *course.assignments(COURSE)}
    packages = {*data["references"], data["checks"], *data.get("private", [])}
    paths = {str(getattr(COURSE, field).relative_to(ROOT)) for field in  # those in a folder of the course
             ("source", "exercises", "done_cell", "nbgrader_config", "toc", "book_config")} - {"exercises", "_toc.yml", "_config.yml"}
    for path in ENGINE_FILES:
        if path.suffix not in (".py", ".toml", ".yaml", ".md"):
            continue
        text = path.read_text(encoding="utf-8")
        for word in words:
            assert not re.search(rf"\b{re.escape(word)}\b", text), f"{path} names {word!r}"
        for package in packages:
            named = re.search(rf"(?:from|import)\s+{re.escape(package)}\b|\b{re.escape(package)}/|"
                              rf"[\"']{re.escape(package)}[\"']", text)
            assert not named, f"{path} names the package {package!r}: {named.group(0)}"
        for named in paths:
            assert named not in text, f"{path} names this course's {named}"


def test_the_course_is_passed_down_not_kept():
    """No module of the engine keeps a course: no current(), no use(), no environment switch."""
    for path in ENGINE_FILES:
        if path.suffix == ".py":
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"\bcurrent\(\)|\bcourse\.use\(|os\.environ\[ENVIRONMENT\] =", text), path


def test_the_course_material_stays_outside_the_engine():
    assert COURSE.source.parent == COURSE.nbgrader_config.parent == ROOT / "autograder"
    assert course.ENGINE not in COURSE.source.parents and course.ENGINE not in COURSE.done_cell.parents
    assert not (ROOT / "autograder" / "__init__.py").exists()  # a namespace package: engine and course share it
    assert (course.ENGINE / "pyproject.toml").is_file()  # it installs on its own
