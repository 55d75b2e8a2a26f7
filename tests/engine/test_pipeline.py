"""The grading pipeline as one design: whose fault a failure is, and the grader's version."""

import dataclasses
import shutil

import pytest

from autograder.engine import assignment, grade, kinds
from autograder.engine.collect import Submission
from autograder.engine.hidden import run_test
from autograder.engine.results import GRADER, STUDENT, Result
from autograder.engine.sandbox import Limits
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.support import COURSE

CORRECT = implementations(SLUG).CORRECT


class _Alive:
    alive, functions = True, {}


def _visible_passed():
    return {"error": None}


# -- whose fault: the student's, or the grader's ---------------------------------------

def test_a_name_error_in_the_courses_own_check_code_is_the_graders_fault(tmp_path, monkeypatch):
    """A checks module that names what it never defined fails on every submission: the grader's
    bug, which the student is told is not theirs (the traceback is the instructor's)."""
    (tmp_path / "broken_checks.py").write_text("def check_softmax(softmax):\n    return undefined_helper(softmax)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    test = assignment.Test("test_softmax", 2.0, "from broken_checks import check_softmax\ncheck_softmax(None)")
    check = run_test(test, _visible_passed(), _Alive(), None, (), names=frozenset({"softmax"}))
    assert check.score == 0 and check.fault == GRADER
    assert "not your fault" in check.message and "undefined_helper" not in check.message
    assert "NameError" in check.trace and "undefined_helper" in check.trace and "broken_checks.py" in check.trace


@pytest.mark.parametrize("hidden", ["check_softmx(1)",  # a typo in a hidden block: no name of the notebook
                                    "1 / 0",             # any other exception of the check code
                                    "import no_such_checks_module"])
def test_any_other_exception_of_the_check_code_is_the_graders_fault(hidden):
    check = run_test(assignment.Test("test_softmax", 2.0, hidden), _visible_passed(), _Alive(), None, (),
                     names=frozenset({"softmax"}))
    assert (check.score, check.fault) == (0.0, GRADER) and "not your fault" in check.message
    assert check.trace


def test_a_function_of_the_notebook_that_is_missing_is_the_students_fault():
    check = run_test(assignment.Test("test_softmax", 2.0, "softmax([1.0])"), _visible_passed(), _Alive(), None, (),
                     names=frozenset({"softmax"}))
    assert (check.score, check.fault, check.trace) == (0.0, STUDENT, "")
    assert check.message.startswith("softmax is not defined in the notebook")


def test_a_failed_check_keeps_the_named_mistake_as_data():
    hidden = ("from autograder.engine.checking import CheckFailed\n"
              "raise CheckFailed('softmax: expected [0.5, 0.5], got [1, 1].', 'the sum is not divided out')")
    check = run_test(assignment.Test("test_softmax", 2.0, hidden), _visible_passed(), _Alive(), None)
    assert (check.fault, check.cause) == (STUDENT, "the sum is not divided out")


def test_the_grader_failing_on_a_submission_is_a_grader_error_not_a_crash(tmp_path, monkeypatch):
    """The student's page says it was not their fault; the traceback is kept for the instructor;
    `crashed` stays the student's process dying."""
    def failing(*args, **kwargs):
        raise RuntimeError("a bug of the grader")

    monkeypatch.setattr(grade, "grade_one", failing)
    path = write(tmp_path / "in", "s1", submission(SLUG, CORRECT))
    out = tmp_path / "out"
    result = grade._grade_or_report(COURSE, Submission("s1", SLUG, path), "f" * 64, out, b"k" * 32, Limits())
    assert result.status == "grader error" and result.score == 0
    assert any("RuntimeError: a bug of the grader" in error for error in result.grader_errors)
    assert all(check.message.startswith("not graded: the grader failed") for check in result.checks)
    page = (out / "feedback" / "s1" / f"{SLUG}.html").read_text()
    assert "not your fault" in page and "a bug of the grader" not in page
    kept = Result.from_json((out / "results" / "s1" / f"{SLUG}.json").read_text())
    assert kept.status == "grader error" and kept.errors


def test_a_check_whose_code_fails_makes_the_submission_a_grader_error(tmp_path, monkeypatch):
    """Graded end to end: the other checks keep their points, the broken one is the grader's."""
    spec = assignment.load(COURSE, SLUG)
    broken = tuple(dataclasses.replace(test, hidden="undefined_checks_helper()") if test.grade_id == "test_causal_mask"
                   else test for test in spec.tests)
    monkeypatch.setattr(kinds.assignments_, "load", lambda course, name: dataclasses.replace(spec, tests=broken))
    path = write(tmp_path, "s1", submission(SLUG, CORRECT))
    graded = grade.grade_one(COURSE, Submission("s1", SLUG, path), "f" * 64, b"k" * 32, Limits())
    checks = {check.name: check for check in graded.result.checks}
    assert graded.result.status == "grader error"
    assert checks["test_causal_mask"].fault == GRADER and "NameError" in checks["test_causal_mask"].trace
    assert all(c.score == c.max_score for name, c in checks.items() if name != "test_causal_mask")
    assert any("not your fault" in note for note in graded.result.notes)


# -- a cell that kills its process, or cannot be interrupted, costs what depends on it --------

EXIT = "import os\nos._exit(1)  # kills the notebook's process\n"
STUCK = ("import signal\n"  # the runner's alarms blocked: nothing can interrupt the loop
         "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})\nwhile True:\n    pass\n")


@pytest.mark.parametrize("code, status, why", [
    (EXIT, "crashed", "the notebook's process died while it ran your answer cell of task “Scaled dot-product "
                      "attention” (exit status 1"),
    (STUCK, "timeout", "your answer cell of task “Scaled dot-product attention” ran longer than 4 s and could not "
                       "be interrupted")])
def test_a_cell_that_kills_its_process_or_cannot_be_interrupted_costs_only_the_checks_that_use_it(
        tmp_path, code, status, why):
    """The notebook runs again without that cell: the tasks before it and those that do not use its
    function keep their points; the note names the cell."""
    notebook = submission(SLUG, CORRECT)
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                == "scaled_dot_product_attention")
    cell.source = code + cell.source
    path = write(tmp_path, "s1", notebook)
    graded = grade.grade_one(COURSE, Submission("s1", SLUG, path), "f" * 64, b"k" * 32,
                             Limits(cell_seconds=2, fixed_cells=True))
    scores = {check.name: (check.score, check.max_score) for check in graded.result.checks}
    lost = {"test_attention", "test_attention_masks"}  # the attention's, and the one that uses it
    assert all(score == (0.0 if name in lost else most) for name, (score, most) in scores.items()), scores
    assert graded.result.status == status
    assert any(note.startswith(why) and note.endswith("; the notebook ran again without that cell")
               for note in graded.result.notes), graded.result.notes
    message = next(c.message for c in graded.result.checks if c.name == "test_attention")
    assert message.startswith("`scaled_dot_product_attention` is not defined because your answer cell of task "
                              "“Scaled dot-product attention” was not run: "), message


# -- the grader's version: every file of the engine, no hand-kept list --------------------

def test_the_version_covers_every_file_of_the_engine_and_the_courses_graded_material():
    files = set(grade.graded_files(COURSE))
    engine = grade.ENGINE
    for name in ("standins.py", "grade.py", "kinds.py", "report.py", "feedback.py", "commands/grade.py",
                 "cluster/grade-merge.yaml", "pyproject.toml"):
        assert engine / name in files, name
    assert not any("__pycache__" in path.parts or path.suffix == ".pyc" for path in files)
    assert COURSE.file in files  # its settings
    assert set(COURSE.package_files(COURSE.checks)) <= files and COURSE.notebook(SLUG) in files


@pytest.mark.parametrize("name", ["standins.py", "report.py", "commands/grade.py", "cluster/grade-merge.yaml"])
def test_changing_any_file_of_the_engine_changes_the_version(tmp_path, name):
    copy = tmp_path / "engine"
    shutil.copytree(grade.ENGINE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    limits = Limits()
    assert grade._grader_version(COURSE, limits, copy) == grade._grader_version(COURSE, limits)  # wherever it is
    with open(copy / name, "a") as handle:
        handle.write("\n# changed\n")
    assert grade._grader_version(COURSE, limits, copy) != grade._grader_version(COURSE, limits)


def test_changing_a_file_of_the_engine_makes_grade_grade_again(tmp_path, monkeypatch):
    """`trampoline.py` (now standins.py) was missing from the hand-kept list: changing it kept the old grades."""
    write(tmp_path / "in", "s1", "not a notebook")  # graded without a sandbox: unreadable
    out, said = tmp_path / "out", []

    def run():
        said.clear()
        grade.grade(COURSE, tmp_path / "in", out, workers=1, log=said.append)
        return " ".join(said)

    run()
    assert "already graded by this grader" in run()
    copy = tmp_path / "engine"
    shutil.copytree(grade.ENGINE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "standins.py", "a") as handle:
        handle.write("\n# changed\n")
    monkeypatch.setattr(grade, "ENGINE", copy)
    assert "already graded by this grader" not in run()
    assert "already graded by this grader" in run()


def test_a_task_kept_beside_a_wrong_neighbour_names_only_neighbours_that_lost_points():
    """One story on the feedback page: a task with full points shows no failure of the notebook, and
    "Judged with a correct E" names only the neighbours whose own checks lost points."""
    from autograder.engine.hidden import JUDGED_WITH, only_lost
    from autograder.engine.results import Check

    checks = [Check("test_dot_score", 0.0, 1.0, "dot_score: expected …"), Check("test_general_score", 1.0, 1.0),
              Check("test_luong_attention", 2.0, 2.0, JUDGED_WITH + "dot_score and general_score"),
              Check("test_local_attention", 3.0, 3.0, JUDGED_WITH + "general_score")]
    messages = [check.message for check in only_lost(checks)]
    assert messages == ["dot_score: expected …", "", JUDGED_WITH + "dot_score", ""]
