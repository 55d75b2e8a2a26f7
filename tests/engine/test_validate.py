"""`python -m autograder validate NOTEBOOK`: the student's check before hand-in."""

import inspect
import json
import textwrap

import nbformat
import numpy as np
import pytest

from autograder.checks.efficient_attention import check_flash_attention_memory
from autograder.engine import assignment, tasks
from autograder.engine.checking import CheckFailed
from tests.support import COURSE
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.engine.grading import run_grader, softmax_wrong_beyond_the_visible_checks

CORRECT = implementations(SLUG).CORRECT
TESTS = [test.grade_id for test in assignment.load(COURSE, SLUG).tests]


def validate(path, *options):
    process = run_grader("validate", path, *options, timeout=300)
    return process.returncode, process.stdout.strip().splitlines(), process.stderr


def test_a_correct_notebook_is_ready(tmp_path):
    code, lines, stderr = validate(write(tmp_path, "me", submission(SLUG, CORRECT)))
    assert code == 0, (lines, stderr)
    check_lines = [line for line in lines if "[test_" in line]
    assert [line.split("[")[1].split(",")[0] for line in check_lines] == TESTS  # one line per check
    assert all(": ok" in line for line in check_lines)
    assert "A stable softmax [test_softmax, 2 points]: ok" in lines[0]
    spec = assignment.load(COURSE, SLUG)  # what the visible checks cannot tell, computed for this assignment
    assert lines[-2] == assignment.hidden_points_sentence(spec.hidden_points, spec.max_score)
    assert f"({spec.max_score:g} points)" in lines[-2] or f"{spec.hidden_points:g} of the" in lines[-2]
    assert lines[-1] == "ready to hand in"


def test_the_released_notebook_is_not_ready(tmp_path):
    code, lines, _ = validate(write(tmp_path, "me", submission(SLUG, {})))
    assert code == 1
    assert sum("FAIL: not implemented yet" in line for line in lines) == len(TESTS)


def test_a_visible_mistake_fails_its_check_in_one_line(tmp_path):
    task, wrong, _, _ = implementations(SLUG).MISTAKES["attention-unscaled"]
    code, lines, _ = validate(write(tmp_path, "me", submission(SLUG, {**CORRECT, task: wrong})))
    assert code == 1
    failed = [line for line in lines if "FAIL" in line]
    assert failed[0].startswith("Scaled dot-product attention [test_attention, 3 points]")
    assert "√d_k" in failed[0] and "Traceback" not in "\n".join(lines)
    # the template's html.baseurl leads nowhere: the chapter and its section, by their titles, and no address
    assert failed[0].endswith(" (the chapter explains it: “Scaled dot-product attention”, section "
                              "“The matrix form”)")


def test_a_notebook_that_only_worked_out_of_order_fails(tmp_path):
    notebook = submission(SLUG, {**CORRECT})
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]
    # softmax uses a helper that the student defined in a cell *below* it: it ran
    # in their session, it does not in a fresh run in order
    notebook.cells[ids.index("softmax")].source = (
        "def softmax(x, axis=-1):\n    return my_softmax(x, axis)\n\nsoftmax(np.ones(3))")
    notebook.cells.append(nbformat.v4.new_code_cell(
        "def my_softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis=axis, keepdims=True))\n"
        "    return e / e.sum(axis=axis, keepdims=True)"))
    code, lines, _ = validate(write(tmp_path, "me", notebook))
    assert code == 1
    assert any("test_softmax" in line and "FAIL" in line for line in lines)


def test_structure_problems_are_named(tmp_path):
    notebook = submission(SLUG, CORRECT)
    notebook.cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_attention"]
    code, lines, _ = validate(write(tmp_path, "me", notebook))
    assert code == 1
    assert any(line.startswith("structure:") and "test_attention" in line for line in lines)


def test_hidden_checks_are_never_run_or_shown(tmp_path):
    # a softmax wrong only beyond the visible checks' arrays fails a hidden check when graded
    # (tests/engine/test_grade.py): validate, which never runs the hidden checks, says ok
    notebook = submission(SLUG, {**CORRECT, "softmax": softmax_wrong_beyond_the_visible_checks})
    code, lines, _ = validate(write(tmp_path, "me", notebook))
    assert code == 0
    text = "\n".join(lines)
    for secret in ("BEGIN HIDDEN TESTS", "autograder.checks", "solutions", "harness", "check_softmax"):
        assert secret not in text


@pytest.mark.parametrize("content, expected", [('{"cells": [', "not a valid notebook"),
                                               (json.dumps({"name": "x"}), "not a valid notebook")])
def test_an_unreadable_notebook_is_not_ready(tmp_path, content, expected):
    code, lines, _ = validate(write(tmp_path, "me", content))
    assert code == 1 and expected in "\n".join(lines)


def test_a_4_4_notebook_whose_cells_have_ids_is_read_as_4_5(tmp_path):
    """nbgrader's generate_assignment gives a 4.4 notebook's cells ids; stock autograde grades it."""
    from autograder.engine.kinds import read_notebook

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    notebook.nbformat_minor = 4
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps(notebook))  # the cell keeps the id that 4.4 does not define
    assert read_notebook(path).cells[0].id == notebook.cells[0].id
    notebook.cells[0].id = "not a valid id!"
    path.write_text(json.dumps(notebook))
    with pytest.raises(ValueError, match="not a valid notebook"):
        read_notebook(path)


def test_the_assignment_comes_from_the_name_or_the_option(tmp_path):
    path = write(tmp_path, "me", submission(SLUG, CORRECT))
    renamed = path.rename(tmp_path / "my homework.ipynb")
    code, lines, _ = validate(renamed)
    assert code == 1 and "--assignment" in lines[0]
    code, _, _ = validate(renamed, "--assignment", SLUG)
    assert code == 0


def test_resource_rules_run_as_the_grader_runs_them_with_its_message(tmp_path):
    """A FlashAttention tiled at the sizes of the notebook's checks (its memory check too, T_k = 32768)
    that forms the whole score matrix beyond them passes the visible checks; the grader's memory rule
    (T_k = 131072) fails it, and `validate` runs that rule too: same sizes, same cap, same message."""
    slug = "efficient_attention"
    students = implementations(slug)
    task, wrong, _, _ = students.MISTAKES["flash-whole-score-matrix"]
    with pytest.raises(CheckFailed) as failure:  # the grader's rule, on a plain function (a forked child)
        check_flash_attention_memory(wrong)
    message = str(failure.value).replace(wrong.__name__, task)
    assert "did not run within 64 MiB on T_q=512, T_k=131072" in message
    notebook = submission(slug, students.CORRECT)
    cell = next(cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade_id") == task)
    cell.source += (f"\n\n\n{textwrap.dedent(inspect.getsource(wrong))}\n\n"
                    f"tiled = {task}\n\n\ndef {task}(Q, K, V, block_size=64, causal=False):\n"
                    f"    if K.shape[-2] > 32768:  # beyond the notebook's checks\n"
                    f"        return {wrong.__name__}(Q, K, V, block_size, causal)\n"
                    f"    return tiled(Q, K, V, block_size, causal)")
    code, lines, _ = validate(write(tmp_path, "wrong", notebook, slug))
    assert code == 1 and lines[-1] == "not ready: see the lines above"
    assert [line for line in lines if "FAIL" in line] == [
        f"FlashAttention [test_flash_attention, 5 points]: FAIL: {message}"
        f"{tasks.explained_in(COURSE, slug, 'test_flash_attention')}"]
    code, lines, _ = validate(write(tmp_path, "right", submission(slug, students.CORRECT), slug))
    assert code == 0, lines
    assert [line.split(": ", 1)[1] for line in lines if "[test_flash_attention" in line] == [
        "ok (visible checks and resource rules; more checks run at grading)"] * 2


def softmax_of_rows(x, axis=-1):
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis)[:, None]  # written for 2-D x: a 1-D x's sum is a number


def test_an_exception_of_the_students_code_says_where_and_on_what(tmp_path):
    """The student's function raises inside a visible check: the line says the function, the inputs
    of the call that failed and the line of the student's cell that raised (never the checks' code)."""
    code, lines, _ = validate(write(tmp_path, "me", submission(SLUG, {**CORRECT, "softmax": softmax_of_rows})))
    line = next(line for line in lines if "[test_softmax," in line)
    assert line.endswith(
        "FAIL: IndexError: invalid index to scalar variable., raised in softmax(x: array (2,) float64, axis=-1), "
        "at line 3 of softmax in your answer cell of task “A stable softmax”: return shifted / "
        "shifted.sum(axis=axis)[:, None]  # written for 2-D x: a 1-D x's sum is a number"
        + tasks.explained_in(COURSE, SLUG, "test_softmax"))
    assert code == 1


def test_a_right_task_beside_an_unfinished_earlier_one_is_ok_and_the_notebook_is_not_ready(tmp_path):
    """validate judges each task on its own, as grading does: the right attention beside a softmax as
    released is ok, says so in its line, and the notebook is not ready (softmax fails)."""
    students = implementations(SLUG)
    right = {**{task: f for task, f in CORRECT.items() if task != "softmax"},
             "scaled_dot_product_attention": students.attention_with_own_softmax}  # it calls softmax
    code, lines, _ = validate(write(tmp_path, "me", submission(SLUG, right)))
    assert code == 1 and lines[-1] != "ready to hand in"
    verdicts = {line.split("[")[1].split(",")[0]: line for line in lines if "[test_" in line}
    assert "FAIL: not implemented yet" in verdicts["test_softmax"]
    assert ": ok (" in verdicts["test_attention"], verdicts["test_attention"]
    assert "checked with a correct softmax: your softmax is not finished" in verdicts["test_attention"]
    # with a mask it fills -1e9 where a correct one puts -inf: softmax gets inputs the record does not
    # hold, so the task cannot be judged before softmax is finished; it is not failed
    assert ": not checked yet: scaled_dot_product_attention uses your softmax" in verdicts["test_attention_masks"]


def test_a_task_that_cannot_be_judged_yet_is_not_checked_not_ok(tmp_path):
    """greedy_decode's calls are too large to record: beside a decoder_layer as released, its check
    cannot judge it, says which function to finish first, and the notebook is not ready."""
    slug = "transformer_decoder"
    right = {task: f for task, f in implementations(slug).CORRECT.items() if task != "decoder_layer"}
    code, lines, _ = validate(write(tmp_path, "me", submission(slug, right), slug))
    assert code == 1
    verdicts = {line.split("[")[1].split(",")[0]: line for line in lines if "[test_" in line}
    assert "FAIL" in verdicts["test_decoder_layer"]
    assert ": ok (" in verdicts["test_decoder"] and "your decoder_layer is not finished" in verdicts["test_decoder"]
    line = verdicts["test_greedy_decode"]  # it calls the student's decoder, which calls decoder_layer
    assert ": not checked yet: greedy_decode uses your decoder_layer" in line and "Fix decoder_layer first" in line
    assert ": ok (" in verdicts["test_greedy_decode_cache"]  # the cache's steps do not use decoder_layer
