"""A check cell judges its task on its own (`recorded.on_its_own`): the earlier tasks it calls answer
from the recorded answers of correct functions, and what the cell prints or raises says only what
the student's code does.

Each test runs the notebook's helper cell as released (`release.check_helpers`) in a namespace of
its own, with functions written there as a student would."""

import textwrap

import numpy as np
import pytest

from autograder.engine.recorded import literal
from autograder.engine.release import check_helpers

SCORES = np.array([[0.0, np.log(3.0)]])
WEIGHTS = np.array([[0.25, 0.75]])
RECORD = {"attention": [("softmax", {"x": SCORES, "axis": -1}, WEIGHTS)]}

ATTENTION = """
def attention(scores, values):
    return softmax(scores) @ values
"""
RIGHT_SOFTMAX = """
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
"""
WRONG_SOFTMAX = """
def softmax(x, axis=-1):
    return np.exp(x)  # not normalised
"""
UNFINISHED_SOFTMAX = """
def softmax(x, axis=-1):
    raise NotImplementedError()
"""
CELL = """
with on_its_own("attention"):
    check_close(attention(np.array([[0.0, np.log(3.0)]]), np.array([[1.0], [2.0]])), [[1.75]], "attention")
"""


def notebook(*cells, record=RECORD):
    namespace = {"__name__": "__main__"}
    exec(compile(check_helpers(), "<check_helpers>", "exec"), namespace)
    namespace["RECORDED_ANSWERS"] = record
    for cell in cells:
        exec(compile(textwrap.dedent(cell), "<cell>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("softmax, said", [(RIGHT_SOFTMAX, None), (WRONG_SOFTMAX, "your softmax gives other values"),
                                           (UNFINISHED_SOFTMAX, "your softmax is not finished")])
def test_a_right_task_passes_beside_any_neighbour_and_says_only_what_the_neighbour_does(capsys, softmax, said):
    namespace = notebook(softmax, ATTENTION)
    own = namespace["softmax"]
    exec(CELL, namespace)
    out = capsys.readouterr().out
    assert (said in out) if said else out == ""
    assert namespace["softmax"] is own  # restored
    if said:  # the cell's own calls after the block reach the student's softmax again
        with pytest.raises((NotImplementedError, AssertionError)):
            exec("check_close(softmax(np.array([[0.0, np.log(3.0)]])), [[0.25, 0.75]], 'softmax')", namespace)


def test_a_wrong_task_fails_beside_a_right_neighbour():
    namespace = notebook(RIGHT_SOFTMAX, "def attention(scores, values):\n    return softmax(scores) @ values * 2\n")
    with pytest.raises(AssertionError, match="attention: expected"):
        exec(CELL, namespace)


def test_an_unfinished_task_fails_as_released():
    namespace = notebook(WRONG_SOFTMAX, "def attention(scores, values):\n    raise NotImplementedError()\n")
    with pytest.raises(NotImplementedError):
        exec(CELL, namespace)


def test_a_call_the_record_does_not_hold_goes_to_the_students_own_and_an_unfinished_one_is_not_checked(capsys):
    # attention that scales its scores first calls softmax on inputs no correct attention gives it;
    # the cell goes on (its hidden checks judge it, at grading and under plain nbgrader)
    scaled = "def attention(scores, values):\n    return softmax(scores * 1.0001) @ values\n"
    namespace = notebook(UNFINISHED_SOFTMAX, scaled)
    exec(CELL, namespace)
    assert capsys.readouterr().out.startswith("Not checked yet: attention uses your softmax")


def test_the_unfinished_function_named_is_the_one_that_raised(capsys):
    # attention calls the student's finished helper (graded), which calls their unfinished softmax
    namespace = notebook(UNFINISHED_SOFTMAX, "def helper(x):\n    return softmax(x)\n",
                         "def attention(scores, values):\n    return helper(scores * 2) @ values\n",
                         record={"attention": [("helper", {"x": SCORES}, WEIGHTS)],
                                 "helper": [("softmax", {"x": SCORES, "axis": -1}, WEIGHTS)]})
    exec(CELL, namespace)
    assert "your softmax is not finished" in capsys.readouterr().out


def test_a_failure_after_a_call_the_record_lacks_says_which_own_function_it_was_judged_with(capsys):
    scaled = "def attention(scores, values):\n    return softmax(scores * 2) @ values\n"
    namespace = notebook(RIGHT_SOFTMAX, scaled)
    with pytest.raises(AssertionError, match="attention: expected"):
        exec(CELL, namespace)
    assert "Judged with your own softmax" in capsys.readouterr().out


def test_a_wrong_neighbour_on_a_call_the_record_lacks_is_not_checked_when_its_recorded_calls_show_it(capsys):
    scaled = "def attention(scores, values):\n    return softmax(scores * 2) @ values\n"
    namespace = notebook(WRONG_SOFTMAX, scaled)
    exec(CELL, namespace)
    out = capsys.readouterr().out
    assert out.startswith("Not checked yet:") and "your softmax gives other values" in out and "Fix softmax first" in out


def test_arguments_are_matched_by_name_whatever_way_they_are_passed(capsys):
    by_keyword = "def attention(scores, values):\n    return softmax(x=scores, axis=-1) @ values\n"
    namespace = notebook(UNFINISHED_SOFTMAX, by_keyword)
    exec(CELL, namespace)
    assert "not finished" in capsys.readouterr().out
    star = "def softmax(*args, **kwargs):\n    raise NotImplementedError()\n"  # names of its own
    namespace = notebook(star, ATTENTION)
    exec(CELL, namespace)


def test_a_neighbour_too_large_to_record_is_the_students_own(capsys):
    namespace = notebook(RIGHT_SOFTMAX, ATTENTION, record={"attention": [("softmax", None, None)]})
    exec(CELL, namespace)
    assert capsys.readouterr().out == ""
    namespace = notebook(UNFINISHED_SOFTMAX, ATTENTION, record={"attention": [("softmax", None, None)]})
    exec(CELL, namespace)
    assert capsys.readouterr().out.startswith("Not checked yet:")


@pytest.mark.parametrize("value", [
    np.array([[1.5, -np.inf], [np.nan, 1e-300]]), np.array([True, False]), np.arange(6).reshape(2, 3),
    np.zeros((2, 0)), np.zeros(0), np.array([1.0, 2.0], dtype=np.float32), np.float64(0.1), np.int64(3),
    {"W": np.eye(2), "layers": [{"b": np.zeros(2)}], "name": "x", "n": 3, "none": None}, (1.0, [2, 3]),
])
def test_a_literal_gives_the_value_back_exactly(value):
    arrays = {}
    text = literal(value, arrays)
    back = eval(text, {"np": np, "RECORDED_ARRAYS": [eval(source, {"np": np}) for source in arrays]})

    def same(a, b):
        if isinstance(a, np.ndarray) or isinstance(a, np.generic):
            return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and \
                np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
        return type(a) is type(b) and a == b
    assert same(value, back), text


def test_what_is_no_literal_is_not_recorded():
    for value in (np.random.default_rng(0), len, np.array(["a"])):
        with pytest.raises(TypeError):
            literal(value)
