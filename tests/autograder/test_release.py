"""The student notebooks are generated, current, and fail where the instructor's pass."""

import nbformat
import pytest

from autograder import course
from autograder.release import HELPERS_CELL, release, sync_check_helpers

SLUGS = course.assignments()


def test_every_chapter_with_an_instructor_notebook_is_an_assignment():
    assert "scaled_dot_product" in SLUGS
    for slug in SLUGS:
        assert (course.ROOT / "book" / f"{slug}.md").is_file()


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exercises")
    release(folder)
    return folder


@pytest.mark.parametrize("slug", SLUGS)
def test_exercises_are_up_to_date(slug, regenerated):
    committed = course.EXERCISES / f"{slug}.ipynb"
    assert committed.is_file(), f"run `make release`: {committed} is missing"
    assert committed.read_bytes() == (regenerated / f"{slug}.ipynb").read_bytes(), (
        f"exercises/{slug}.ipynb is stale: run `make release` and commit the result")


@pytest.mark.parametrize("slug", SLUGS)
def test_instructor_helper_cell_is_autograder_checks_checking(slug):
    assert not sync_check_helpers(course.SOURCE / slug / f"{slug}.ipynb"), (
        "the helper cell differed from autograder/checks/checking.py: it has been synced, commit it")


@pytest.mark.parametrize("slug", SLUGS)
def test_student_notebook_says_it_is_generated_and_holds_no_solution(slug):
    notebook = nbformat.read(course.EXERCISES / f"{slug}.ipynb", as_version=4)
    assert "generated" in notebook.cells[0].source
    text = "\n".join(cell.source for cell in notebook.cells)
    for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "from solutions", "autograder.checks"):
        assert secret not in text
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    helpers = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == HELPERS_CELL]
    assert helpers[0].source == course.CHECK_HELPERS.read_text().rstrip("\n")


def validate(path, tmp_path, *flags):
    result = course.nbgrader(tmp_path, "validate", str(path), *flags)
    return result.stdout


@pytest.mark.parametrize("slug", SLUGS)
def test_instructor_notebook_passes_nbgrader_validate(slug, tmp_path):
    output = validate(course.SOURCE / slug / f"{slug}.ipynb", tmp_path)
    assert "Success! Your notebook passes all the tests." in output, output


@pytest.mark.parametrize("slug", SLUGS)
def test_student_notebook_fails_every_test(slug, tmp_path):
    output = validate(course.EXERCISES / f"{slug}.ipynb", tmp_path, "--invert")
    assert "Success! The notebook does not pass any tests." in output, output
