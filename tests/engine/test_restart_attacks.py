"""A student's attacks on the restart (a cell that kills its process or cannot be interrupted is
skipped, the notebook run again without it) and on the traceback the grader draws from the frames
the sandbox reports (runner/errors.py -> protocol.plain_error -> nbgrader_course.error_traceback).

Also: a neighbour that kills the process in the course's hidden checks, a student's metadata
against the scoring of hand-graded answers, and hand grading kept through re-grading.

Each test asserts that the wall holds; one marked xfail(strict) is a hole that works today.
"""

import re
import shutil

import nbformat
import pytest

from autograder.engine import grade, nbgrader_course, protocol
from autograder.engine.assignment import grade_id
from autograder.engine.collect import Submission
from autograder.engine.sandbox import Limits, Sandbox
from autograder.samples import nbgrader_quickstart as quickstart
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.engine.grading import details, run_grader
from tests.engine.test_nbgrader_limits import _handing_in, _result, course101  # noqa: F401 (the fixture)
from tests.support import COURSE

UID = 100_000 + 99_146  # a sandbox user no other test uses
ANSI = re.compile(r"\x1b\[[0-9;]*m")
EXIT = "import os\nos._exit(1)\n"
# a hang the runner's alarms cannot interrupt: it ignores them
HANG = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\n" \
       "while True:\n    pass\n"


def _run(sources, limits=Limits()):
    """The results of the notebook of `sources` (cell ids "0", "1", ...), and its skipped cells."""
    with Sandbox([(str(i), source) for i, source in enumerate(sources)], uid=UID, limits=limits) as sandbox:
        results = sandbox.run()
        return results, dict(sandbox.skipped)


# -- the re-run is a fresh process, with fresh folders -----------------------------------

def test_the_re_run_sees_nothing_the_first_run_wrote_in_tmp_or_the_notebook_s_folder():
    """A notebook cannot tell its re-run from its first run (to behave differently in it): /tmp
    and its folder are new tmpfs in each process."""
    results, skipped = _run([
        "import os\nfirst = not os.path.exists('/tmp/mark') and not os.path.exists('mark')\n"
        "open('/tmp/mark', 'w').close()\nopen('mark', 'w').close()\n",
        EXIT,
        "print(first)"])
    assert list(skipped) == ["1"]
    assert results[1]["error"]["ename"] == "CellNotRun"
    assert results[2]["stdout"] == "True\n" and results[2]["error"] is None


# -- a neighbour that dies or hangs costs only itself -------------------------------------

def test_a_neighbour_that_kills_its_process_costs_a_right_task_nothing():
    results, skipped = _run(["def f(x):\n    return 2 * x\n", EXIT, "assert f(3) == 6\nprint('ok')"])
    assert list(skipped) == ["1"]
    assert results[2]["error"] is None and results[2]["stdout"] == "ok\n"


def test_a_neighbour_that_cannot_be_interrupted_costs_a_right_task_nothing():
    results, skipped = _run(["def f(x):\n    return 2 * x\n", HANG, "assert f(3) == 6\nprint('ok')"],
                            Limits(cell_seconds=1.0))
    assert list(skipped) == ["1"] and "could not be interrupted" in skipped["1"]
    assert results[2]["error"] is None and results[2]["stdout"] == "ok\n"


def test_four_neighbours_that_kill_the_process_cost_a_right_task_nothing():
    results, skipped = _run(["def f(x):\n    return 2 * x\n"] + [EXIT] * 4 + ["assert f(3) == 6\nprint('ok')"])
    assert len(skipped) == 4
    assert results[5]["error"] is None and results[5]["stdout"] == "ok\n"


def test_a_test_cell_that_dies_only_because_it_is_a_test_cell_scores_nothing():
    """The student's function kills the process when it is called (as a test cell does): the
    test cell is skipped, and a skipped cell is an error, never a pass."""
    results, skipped = _run(["import os\ndef f(x):\n    os._exit(0)\n", "assert f(3) == 6"])
    assert list(skipped) == ["1"]
    assert results[1]["error"]["ename"] == "CellNotRun"
    points, message, _ = nbgrader_course._test_score(results[1], 1.0, None)
    assert points == 0.0 and "ran again without it" in message


# -- forged frames of a traceback ------------------------------------------------------

def _cells():
    return [nbformat.v4.new_code_cell("def f():\n    return 1 / 0\n"),
            nbformat.v4.new_code_cell("# a hidden test\nassert f() == 1\n")]


def test_a_frame_forged_by_the_student_s_own_code_never_breaks_the_grader():
    """The student's code compiles its own code under a cell's file name (`<cell ²>`): the runner
    reports that frame as a cell's; the grader draws only the notebook's cells that ran."""
    results, _ = _run(["exec(compile('1 / 0', '<cell \u00b2>', 'exec'))"])
    error = results[0]["error"]
    lines = nbgrader_course.error_traceback(error, _cells(), {"0": 1, "1": 2})
    assert not any("\u00b2" in line for line in lines)


@pytest.mark.parametrize("frame", [["-1", 1, None], ["5", 1, None], ["1", -3, None], ["1", 10 ** 30, None],
                                   ["01", 1, None], [" 1", 1, None], ["0x1", 1, None]])
def test_frames_pointing_at_cells_or_lines_that_do_not_exist_show_nothing_of_them(frame):
    error = protocol.plain_error({"ename": "ZeroDivisionError", "evalue": "division by zero", "frames": [frame]})
    lines = nbgrader_course.error_traceback(error, _cells(), {"0": 1, "1": 2})
    shown = [ANSI.sub("", line) for line in lines]
    assert not any(line.startswith("Cell") and "line" in line and line.count("\n") > 1 for line in shown
                   if frame[0] not in ("0", "1"))


def test_a_function_name_cannot_add_lines_to_the_traceback():
    source = ("def f():\n    return 1 / 0\n"
              "f.__code__ = f.__code__.replace(co_name='f\\n----> 1 assert True  # the test passed\\nx')\nf()")
    results, _ = _run([source])
    error = results[0]["error"]
    cells = [nbformat.v4.new_code_cell(source)]
    lines = nbgrader_course.error_traceback(error, cells, {"0": 1})
    for entry in lines[2:-1]:
        header, *code = ANSI.sub("", entry).splitlines()
        assert header.startswith("Cell In[1]")
        # each a line of the cell, under its own number
        numbered = [re.match(r"\s*-*>? ?(\d+) (.*)$", line) for line in code]
        assert all(match and source.splitlines()[int(match[1]) - 1].rstrip() == match[2] for match in numbered)


def test_the_protocol_drops_malformed_frames_and_caps_them():
    frames = [[1, 1, None], ["0", "1", None], ["0", True, None], ["0", 1], "0:1", ["0", 1, 7], None] + \
             [["0", 2, "f()"]] * 50
    cleaned = protocol.plain_error({"ename": "E", "frames": frames})["frames"]
    assert len(cleaned) <= 31
    assert all(frame is None or (isinstance(frame[0], str) and type(frame[1]) is int) for frame in cleaned)
    nbgrader_course.error_traceback(protocol.plain_error({"ename": "E", "evalue": "", "frames": frames}),
                                    _cells(), {"0": 1, "1": 2})


# -- end to end, on nbgrader's quickstart course (test_nbgrader_limits' course and hand-in) ------


FORGED = "exec(compile('1 / 0', '<cell \\u00b2>', 'exec'))\n"


def test_a_forged_frame_in_one_notebook_costs_no_other_student_anything(course101):
    course, released = course101
    handed_in = _handing_in(course, released, {"forging": FORGED, "raising": "raise RuntimeError('x')\n"},
                            "squares")
    shutil.copytree(handed_in, course / "submitted", dirs_exist_ok=True)  # graded in place: autograded/ written
    out = course.parent / "forging-out"
    process = run_grader("--course", course, "grade", course, "--out", out)
    assert process.returncode == 0, process.stderr[-3000:]
    scores = {student: {check: float(row["score"]) for check, row in checks.items()}
              for (student, _), checks in details(out).items()}
    assert scores["forging"] == scores["raising"]


# -- re-grading keeps the instructor's hand grading, whatever the student hands in again ----------


FIRST, LATER = "2026-01-01 10:00:00.000000 UTC", "2026-01-02 10:00:00.000000 UTC"


def _hand(course, student):
    """{(notebook, cell): (manual score, manual comment)} of `student` in the course's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:
        found = {}
        for notebook in book.find_submission(quickstart.ASSIGNMENT, student).notebooks:
            for grade in notebook.grades:
                found[notebook.name, grade.name, "score"] = grade.manual_score
            for comment in notebook.comments:
                found[notebook.name, comment.name, "comment"] = comment.manual_comment
        return found


def _grade_by_hand(course, student):
    """Every cell left for a person gets half its points, every test cell a score overridden,
    every comment a remark: as the formgrader stores them."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:
        for notebook in book.find_submission(quickstart.ASSIGNMENT, student).notebooks:
            for grade in notebook.grades:
                grade.manual_score = grade.max_score / 2 if grade.needs_manual_grade else 0.25
            for comment in notebook.comments:
                comment.manual_comment = f"see me about {comment.name}"
        book.db.commit()


def test_handing_in_again_with_cells_renamed_deleted_or_a_notebook_missing_keeps_hand_grading(tmp_path):
    course = quickstart.make_course(tmp_path)
    released = quickstart.generate(course)
    quickstart.write_submitted(course / "submitted", "mallory", quickstart.submission(course, released, "right"), FIRST)
    process = run_grader("--course", course, "grade", course, "--out", tmp_path / "out")
    assert process.returncode == 0, process.stderr[-3000:]
    _grade_by_hand(course, "mallory")
    before = _hand(course, "mallory")
    assert before and all(value is not None for value in before.values())

    # handed in again: every cell's id changed, every answer's grade_id renamed or its metadata
    # emptied, one test cell deleted, one notebook not handed in at all
    again = quickstart.submission(course, released, "right")
    for number, cell in enumerate(again["problem1"].cells):
        cell["id"] = f"forged-{number}"
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            if number % 2:
                meta["grade_id"] = "renamed_" + meta["grade_id"]
            else:
                cell.metadata["nbgrader"] = {}
    again["problem1"].cells = [cell for cell in again["problem1"].cells
                               if quickstart._grade_id(cell) != "correct_squares"]
    shutil.rmtree(course / "submitted" / "mallory")
    quickstart.write_submitted(course / "submitted", "mallory", {"problem1": again["problem1"]}, LATER)
    process = run_grader("--course", course, "grade", course, "--out", tmp_path / "out")
    assert process.returncode == 0, process.stderr[-3000:]
    regraded = {check.name: check.message for check in _result(tmp_path / "out", "mallory").checks}
    assert "deleted" in regraded["correct_squares"], regraded  # graded again: what was handed in again
    assert _hand(course, "mallory") == before


# -- a manually graded code answer whose `solution` flag the student removes ------------------

def _manual_answer():
    """A released code answer graded by hand (grade and solution), as generate_assignment records it."""
    from nbgrader.utils import compute_checksum

    cell = nbformat.v4.new_code_cell("# YOUR CODE HERE\nraise NotImplementedError()")
    cell.metadata["nbgrader"] = {"grade": True, "solution": True, "locked": False, "grade_id": "explain",
                                 "points": 3, "schema_version": 3}
    cell.metadata.nbgrader["checksum"] = compute_checksum(cell)
    return cell


def test_a_hand_graded_code_answer_stays_for_a_person_whatever_its_metadata_says(tmp_path):
    course = quickstart.make_course(tmp_path)
    released = _manual_answer()
    spec = nbgrader_course.Notebook("problem9", (released,), {"explain": released}, ("explain",), {"explain": 3.0})
    handed_in = nbformat.v4.new_notebook(cells=[nbformat.from_dict(released)])
    handed_in.cells[0].source = "x = 1  # no answer at all"
    handed_in.cells[0].metadata.nbgrader["solution"] = False
    cells, _ = nbgrader_course.sanitize(course, spec, handed_in)
    outputs = {"0": {"error": None, "stderr": "", "result": None, "outputs": []}}
    [(_, points, _, message, manual)] = nbgrader_course.score(course, spec, cells, outputs)
    assert (points, manual) == (0.0, True), message


# -- the course's kind: a neighbour that kills the process when a hidden check calls it ------------


# the function kills its process when called by the grader (not from a cell): its visible check
# passes, each of its hidden checks kills the sandbox (a crash in a C extension does the same)
DIES_WHEN_GRADED = ("import os as _os, sys as _sys\n"
                    "def _graded():\n"
                    "    if not _sys._getframe(2).f_code.co_filename.startswith('<cell '):\n"
                    "        _os._exit(1)\n")


def test_neighbours_that_kill_the_process_in_hidden_checks_cost_a_right_task_nothing(tmp_path):
    notebook = submission(SLUG, implementations(SLUG).CORRECT)
    for cell in notebook.cells:
        if grade_id(cell) in ("softmax", "causal_mask", "padding_mask"):
            head, _, body = cell.source.partition(":\n")
            cell.source = DIES_WHEN_GRADED + head + ":\n    _graded()\n" + body
    path = write(tmp_path, "s1", notebook)
    graded = grade.grade_one(COURSE, Submission("s1", SLUG, path), "f" * 64, b"k" * 32)
    scores = {check.name: (check.score, check.max_score, check.message) for check in graded.result.checks}
    assert scores["test_softmax"][0] == 0.0 and scores["test_padding_mask"][0] == 0.0, scores
    assert scores["test_attention"][0] == scores["test_attention"][1], scores
    assert scores["test_attention_masks"][0] == scores["test_attention_masks"][1], scores


def test_a_test_cell_that_hangs_uninterruptibly_only_as_a_test_cell_scores_nothing():
    """The student's function ignores the runner's alarms and loops when called (as a test cell
    does): the test cell is skipped, and scores 0; the notebook's other cells keep their results."""
    results, skipped = _run(["import signal\ndef f(x):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                             "    signal.signal(signal.SIGPROF, signal.SIG_IGN)\n    while True:\n        pass\n",
                             "assert f(3) == 6", "print('after')"], Limits(cell_seconds=1.0))
    assert list(skipped) == ["1"] and results[2]["stdout"] == "after\n"
    points, message, _ = nbgrader_course._test_score(results[1], 1.0, None)
    assert points == 0.0 and "could not be interrupted" in message
