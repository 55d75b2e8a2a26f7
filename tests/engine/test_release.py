"""The student notebooks are generated, current, and fail where the instructor's pass."""

import re

import nbformat
import pytest

from autograder.engine import assignment, course, recording
from autograder.engine.release import (
    HELPERS_CELL, check_helpers, ReleaseError, release, stamp_given_cells, sync_check_helpers, sync_done_cell)
from tests.support import COURSE

SLUGS = course.assignments(COURSE)


def test_every_chapter_with_an_instructor_notebook_is_an_assignment():
    assert "scaled_dot_product" in SLUGS
    for slug in SLUGS:
        assert (COURSE.root / "book" / f"{slug}.md").is_file()


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exercises")
    release(COURSE, folder)
    return folder


@pytest.mark.parametrize("slug", SLUGS)
def test_exercises_are_up_to_date(slug, regenerated):
    committed = COURSE.exercises / f"{slug}.ipynb"
    assert committed.is_file(), f"run `make release`: {committed} is missing"
    assert committed.read_bytes() == (regenerated / f"{slug}.ipynb").read_bytes(), (
        f"exercises/{slug}.ipynb is stale: run `make release` and commit the result")


@pytest.mark.parametrize("slug", SLUGS)
def test_instructor_helper_cell_is_autograder_checks_checking(slug):
    assert not sync_check_helpers(COURSE.source / slug / f"{slug}.ipynb"), (
        "the helper cell differed from the engine's checking.py, standins.py and recorded.py: it has been synced, commit it")


@pytest.mark.parametrize("slug", SLUGS)
def test_the_recorded_answers_are_the_references_on_the_visible_inputs(slug):
    """The record in each instructor notebook (and so in the released one) is what the course's
    correct functions answer on the visible checks' inputs now: a stale record fails here."""
    path = COURSE.source / slug / f"{slug}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    found = recording.record(COURSE, slug, notebook)
    cells = [c.source for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == recording.CELL]
    assert cells == ([recording.source(found)] if found else []), (
        f"the recorded answers of {path.name} are stale: run `make release` and commit the result")


@pytest.mark.parametrize("slug", SLUGS)
def test_instructor_done_cell_is_autograder_cells_done(slug):
    assert not sync_done_cell(COURSE, COURSE.source / slug / f"{slug}.ipynb"), (
        "the closing cell differed from autograder/cells/done.md: it has been synced, commit it")


@pytest.mark.parametrize("slug", SLUGS)
def test_instructor_given_cells_are_stamped_from_solutions(slug):
    assert not stamp_given_cells(COURSE, COURSE.source / slug / f"{slug}.ipynb"), (
        "a given cell differed from the solutions/ definitions it lists: it has been stamped, commit it")


def given_notebook(tmp_path, specs, *other_sources):
    cells = [nbformat.v4.new_code_cell("old", metadata={"course": {"given": specs}})]
    cells += [nbformat.v4.new_code_cell(source) for source in other_sources]
    path = tmp_path / "given.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def test_given_cell_gets_the_definitions_and_their_imports(tmp_path):
    path = given_notebook(tmp_path, ["solutions.scaled_dot_product:softmax"])
    assert stamp_given_cells(COURSE, path)
    source = nbformat.read(path, as_version=4).cells[0].source
    assert source.startswith("# Given: generated from solutions/scaled_dot_product.py")
    assert "import numpy as np" in source and "def softmax(x, axis=-1):" in source
    namespace = {}
    exec(source, namespace)
    assert namespace["softmax"]([0.0, 0.0]).tolist() == [0.5, 0.5]
    assert not stamp_given_cells(COURSE, path)  # stamped: nothing more to do


def test_given_cell_must_list_what_its_definitions_use(tmp_path):
    path = given_notebook(tmp_path, ["solutions.multi_head:multi_head_attention"])
    with pytest.raises(ReleaseError, match="_check_heads"):
        stamp_given_cells(COURSE, path)
    # provided by another (locked) cell of the notebook: fine
    path = given_notebook(tmp_path, ["solutions.multi_head:multi_head_attention", "solutions.multi_head:_check_heads"],
                          "def split_heads(X, h): ...\ndef merge_heads(X): ...\n"
                          "def scaled_dot_product_attention(Q, K, V, mask=None): ...")
    assert stamp_given_cells(COURSE, path)
    with pytest.raises(ReleaseError, match="no top-level definition 'nothing'"):
        stamp_given_cells(COURSE, given_notebook(tmp_path, ["solutions.multi_head:nothing"]))


def test_given_cell_must_neither_replace_nor_use_what_students_write(tmp_path):
    solution = nbformat.v4.new_code_cell("def softmax(x, axis=-1):\n    raise NotImplementedError()",
                                         metadata={"nbgrader": {"solution": True}})
    for specs, words in ((["solutions.scaled_dot_product:softmax"], "must not replace"),
                         (["solutions.scaled_dot_product:masked_softmax",
                           "solutions.scaled_dot_product:_check_mask"], "give it the course's own")):
        path = given_notebook(tmp_path, specs)
        notebook = nbformat.read(path, as_version=4)
        notebook.cells.append(solution)
        nbformat.write(notebook, path)
        with pytest.raises(ReleaseError, match=words):
            stamp_given_cells(COURSE, path)


@pytest.mark.parametrize("slug", SLUGS)
def test_student_notebook_says_it_is_generated_and_holds_no_solution(slug):
    notebook = nbformat.read(COURSE.exercises / f"{slug}.ipynb", as_version=4)
    # said to course authors where Jupyter shows it not: the student's notebook opens on their introduction
    assert notebook.metadata["autograder"]["generated"].startswith(
        f"This student notebook is generated from autograder/source/{slug}/{slug}.ipynb")
    assert not any("course author" in cell.source for cell in notebook.cells)
    assert notebook.cells[0].source.startswith("# Exercise")
    text = "\n".join(cell.source for cell in notebook.cells)
    # imports of the reference (a stamped given cell's header names solutions/<module>.py: allowed)
    for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "from solutions.", "from solutions import",
                   "import solutions", "autograder.checks"):
        assert secret not in text
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    helpers = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == HELPERS_CELL]
    assert helpers[0].source == check_helpers()


def validate(path, tmp_path, *flags):
    result = course.nbgrader(COURSE, tmp_path, "validate", str(path), *flags)
    return result.stdout


@pytest.mark.parametrize("slug", SLUGS)
def test_instructor_notebook_passes_nbgrader_validate(slug, tmp_path):
    output = validate(COURSE.source / slug / f"{slug}.ipynb", tmp_path)
    assert "Success! Your notebook passes all the tests." in output, output


@pytest.mark.parametrize("slug", SLUGS)
def test_student_notebook_fails_every_test(slug, tmp_path):
    output = validate(COURSE.exercises / f"{slug}.ipynb", tmp_path, "--invert")
    assert "Success! The notebook does not pass any tests." in output, output


POINTS_IN_HEADING = re.compile(r"^#+ .*\((\d+(?: \+ \d+)*) points?( each)?\)", re.M)


@pytest.mark.parametrize("slug", SLUGS)
def test_each_task_heading_states_the_points_of_its_check_cells(slug):
    """ "(N points)", "(N + M points)" or "(N point each)" in a heading is what the checks after it give."""
    notebook = nbformat.read(COURSE.source / slug / f"{slug}.ipynb", as_version=4)
    tasks = []  # [heading, stated points, each, points of the check cells up to the next heading]
    for cell in notebook.cells:
        stated = POINTS_IN_HEADING.search(cell.source) if cell.cell_type == "markdown" else None
        if stated:
            numbers = [int(n) for n in stated.group(1).split(" + ")]
            tasks.append([stated.group(0), numbers, bool(stated.group(2)), []])
        elif cell.metadata.get("nbgrader", {}).get("grade"):
            assert tasks, f"{slug}: a check cell comes before any heading that states its points"
            tasks[-1][3].append(cell.metadata["nbgrader"]["points"])
    assert tasks
    for heading, numbers, each, points in tasks:
        if each:
            assert points and all(p == numbers[0] for p in points), (heading, points)
        elif len(numbers) > 1:
            assert points == numbers, (heading, points)
        else:
            assert sum(points) == numbers[0], (heading, points)


@pytest.mark.parametrize("slug", course.assignments(COURSE))
def test_the_done_cell_says_how_many_points_hidden_checks_decide(slug):
    notebook = nbformat.read(COURSE.exercises / f"{slug}.ipynb", as_version=4)
    spec = assignment.load(COURSE, slug)
    assert spec.hidden_points > 0
    assert assignment.hidden_points_sentence(spec.hidden_points, spec.max_score) in notebook.cells[-1].source


def test_the_hidden_points_sentence_counts_the_cells_with_hidden_checks():
    assert "every task (16 points)" in assignment.hidden_points_sentence(16, 16)
    assert "the tasks worth 3 of the 8 points" in assignment.hidden_points_sentence(3, 8)
    assert "visible checks decide all 8 points" in assignment.hidden_points_sentence(0, 8)
