"""An nbgrader notebook whose cell kills its process keeps the points of what does not depend on
that cell, and an nbgrader course's own cell timeout (its nbgrader_config.py) is its cells' limit.

The course is nbgrader's quickstart course101 (samples/nbgrader_quickstart.py). Stock `nbgrader
autograde` gives up on a notebook whose kernel dies (DeadKernelError: the submission is not
graded, nothing is kept); the engine runs the notebook again without that cell.
"""

import pytest
from nbgrader.api import Gradebook

from autograder.engine import nbgrader_course
from autograder.engine.results import Result
from autograder.engine.sandbox import Limits
from autograder.samples import nbgrader_quickstart as quickstart
from autograder.samples.plain_nbgrader import NbgraderFailed
from tests.engine.grading import details, run_grader

EXIT = "import os\nos._exit(1)  # kills the notebook's process\n"
RAISE = "raise RuntimeError('instead')\n"
LOOP = "while True:\n    pass\n"


def _handing_in(course, released, students, grade_id):
    """A submitted/ folder: each of `students` ({student: code}) hands in the right notebooks with
    its code put first in the cell `grade_id`."""
    submitted = course.parent / f"{'-'.join(students)}-handed-in" / "submitted"
    for student, code in students.items():
        notebooks = quickstart.submission(course, released, "right")
        cell = next(c for c in notebooks["problem1"].cells if quickstart._grade_id(c) == grade_id)
        cell.source = code + cell.source
        quickstart.write_submitted(submitted, student, notebooks)
    return submitted


@pytest.fixture(scope="module")
def course101(tmp_path_factory):
    """(the course folder, its released notebooks)."""
    course = quickstart.make_course(tmp_path_factory.mktemp("limits"))
    return course, quickstart.generate(course)


def test_a_cell_that_kills_its_process_costs_only_the_tests_that_depend_on_it(course101):
    """It scores as a cell that raised an error: the tests before it keep their points, and so do
    those that do not use what it was to define."""
    course, released = course101
    submitted = _handing_in(course, released, {"exiting": EXIT, "raising": RAISE}, "sum_of_squares")
    out = course.parent / "exiting-out"
    process = run_grader("--course", course, "grade", submitted.parent, "--out", out)
    assert process.returncode == 0, process.stderr
    scores = {student: {check: float(row["score"]) for check, row in checks.items()}
              for (student, _), checks in details(out).items()}
    assert scores["exiting"] == scores["raising"]
    assert scores["exiting"]["problem1/correct_squares"] == 1.0 and scores["exiting"]["problem1/squares_partly"] == 1.5
    assert scores["exiting"]["problem1/correct_sum_of_squares"] == 0.0
    result = _result(out, "exiting")
    assert result.status == "crashed"
    assert any(note.startswith("problem1.ipynb: the notebook's process died while it ran the cell "
                               "`sum_of_squares` (exit status 1")
               and note.endswith("the notebook ran again without that cell") for note in result.notes), result.notes

    # stock autograde gives up on a notebook whose kernel died: it keeps nothing of the submission
    # (and grades the cell that raised as the engine does)
    with pytest.raises(NbgraderFailed, match="error processing assignment 'ps1' for student 'exiting'"):
        quickstart.autograde(course, submitted)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        stock = {student: {f"{notebook.name}/{grade.name}": (grade.score, grade.auto_score)
                           for notebook in gradebook.find_submission(quickstart.ASSIGNMENT, student).notebooks
                           for grade in notebook.grades}
                 for student in ("exiting", "raising")}
    assert all(graded == (0.0, None) for graded in stock["exiting"].values()), stock["exiting"]
    assert {check: score for check, (score, _) in stock["raising"].items()} == scores["raising"]


def _result(out, student):
    return Result.from_json((out / "results" / student / f"{quickstart.ASSIGNMENT}.json").read_text())


def _with_settings(course, settings):
    """A copy of the course's nbgrader_config.py with `settings` added (the cached reading dropped)."""
    config = course / nbgrader_course.CONFIG_FILE
    original = config.read_text()
    config.write_text(original + settings)
    nbgrader_course.configuration.cache_clear()
    return original


@pytest.mark.parametrize("settings, seconds", [
    ("", 60.0),                                                        # none: the engine's
    ("c.Execute.timeout = 5\n", 5.0),
    ("c.ExecutePreprocessor.timeout = 7\n", 7.0),                      # the older name nbgrader reads
    ("c.ExecutePreprocessor.timeout = 7\nc.Execute.timeout = 5\n", 5.0),  # Execute's own wins
    ("c.Execute.timeout = None\n", 60.0),                              # no limit in nbgrader: the engine's
    ("c.Execute.timeout = -1\n", 60.0)])
def test_the_course_s_nbgrader_timeout_is_the_limit_of_its_cells(course101, settings, seconds):
    course, _ = course101
    original = _with_settings(course, settings)
    try:
        assert nbgrader_course.cell_limits(course, Limits()).cell_seconds == seconds
        # a limit fixed on the command line (--cell-timeout) wins, as nbgrader's own command line does
        fixed = Limits(cell_seconds=12, fixed_cells=True)
        assert nbgrader_course.cell_limits(course, fixed) == fixed
    finally:
        (course / nbgrader_course.CONFIG_FILE).write_text(original)
        nbgrader_course.configuration.cache_clear()


def test_a_timeout_that_is_not_a_number_is_an_error_naming_the_file(course101):
    course, _ = course101
    original = _with_settings(course, "c.Execute.timeout = 'soon'\n")
    try:
        with pytest.raises(nbgrader_course.NbgraderCourseError, match="nbgrader_config.py.*'soon'"):
            nbgrader_course.cell_seconds(course)
    finally:
        (course / nbgrader_course.CONFIG_FILE).write_text(original)
        nbgrader_course.configuration.cache_clear()


def test_a_looping_cell_is_stopped_at_the_course_s_timeout(course101):
    course, released = course101
    submitted = _handing_in(course, released, {"looping": LOOP}, "squares")
    original = _with_settings(course, "c.Execute.timeout = 5\n")
    try:
        out = course.parent / "looping-out"
        process = run_grader("--course", course, "grade", submitted.parent, "--out", out)
    finally:
        (course / nbgrader_course.CONFIG_FILE).write_text(original)
        nbgrader_course.configuration.cache_clear()
    assert process.returncode == 0, process.stderr
    result = _result(out, "looping")
    assert result.status == "timeout"
    assert ("problem1.ipynb: the cell `squares` ran longer than its time limit of 5 s (outside any function) "
            "and was stopped") in result.notes, result.notes
