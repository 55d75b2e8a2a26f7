"""Red-team attacks on a task judged on its own in the notebook (`recorded.on_its_own`, the
recorded answers cell, validate's verdicts, grade and plain nbgrader).

Each test states the right behaviour; the attacks that worked when they were written (a helper of the
student's named like one of the helper cell's, an argument the record ignored, a solution cell that
redefines on_its_own or adds to the record) are closed: the helper cell keeps its helpers in a
namespace of their own, a call passing an argument the record has not goes to the student's own
function, and validate says a notebook that redefines what the checks use is not ready.

Most tests run the released helper cell (`release.check_helpers`) in a namespace of their own with
cells written as a student would (as tests/engine/test_recorded.py does): cheap. A few run
`python -m autograder validate` / `grade` on a notebook of the course (a few seconds each)."""

import textwrap

import numpy as np
import pytest

from tests.engine.test_recorded import (  # noqa: F401 (the same notebook, record and functions)
    ATTENTION, CELL, RECORD, RIGHT_SOFTMAX, SCORES, UNFINISHED_SOFTMAX, WEIGHTS, WRONG_SOFTMAX, notebook)


# ---------------------------------------------------------------------------------------------
# Direction 2: right code loses, or is told something false.

# A student's own top-level names that the helper cell also defines (it is one namespace): a helper
# of their own called swap, a variable called bound or arguments while exploring...
COLLISIONS = {
    "swap": "def swap(a, b):\n    return b, a\n",
    "arguments": "arguments = (1, 2)\n",
    "bound": "bound = 10.0\n",
    "same_argument": "def same_argument(a, b):\n    return a is b\n",
    "given_to": "given_to = {}\n",
    "own_copy": "def own_copy(x):\n    return x.copy()\n",
    "undoing": "undoing = False\n",
    "copying": "copying = None\n",
    "inspect": "def inspect(x):\n    print(x.shape)\n",
    "close": "def close(a, b):\n    return np.allclose(a, b)\n",
    "shown": "shown = []\n",
    "literal": "literal = 'x'\n",
    "retarget": "retarget = None\n",
    "reached": "reached = set()\n",
    "chosen": "chosen = 3\n",
    "binds": "binds = None\n",
    "swappable": "swappable = True\n",
}


@pytest.mark.parametrize("softmax", [RIGHT_SOFTMAX, WRONG_SOFTMAX], ids=["right softmax", "wrong softmax"])
@pytest.mark.parametrize("name", sorted(COLLISIONS))
def test_a_right_task_passes_whatever_names_the_students_own_code_uses(capsys, name, softmax):
    namespace = notebook(softmax, COLLISIONS[name], ATTENTION)
    exec(CELL, namespace)  # right attention: passes (a wrong softmax only adds a line)
    out = capsys.readouterr().out
    assert "Not checked" not in out and "Judged with your own" not in out, out


def test_a_right_task_is_not_told_a_neighbour_is_wrong_when_it_only_takes_a_keyword_of_its_own(capsys):
    # the student's right softmax takes an extra keyword; attention does not use it
    softmax = "def softmax(x, axis=-1, temperature=1.0):\n" \
              "    e = np.exp(x / temperature - (x / temperature).max(axis=axis, keepdims=True))\n" \
              "    return e / e.sum(axis=axis, keepdims=True)\n"
    namespace = notebook(softmax, ATTENTION)
    exec(CELL, namespace)
    assert capsys.readouterr().out == ""


def test_a_right_task_calling_the_neighbour_with_the_axis_counted_from_the_front_passes_beside_a_right_one(capsys):
    # axis=1 of a 2-D array is axis -1: an equivalent call the record does not hold; the student's
    # own right softmax answers it
    namespace = notebook(RIGHT_SOFTMAX, "def attention(scores, values):\n"
                                        "    return softmax(scores, axis=scores.ndim - 1) @ values\n")
    exec(CELL, namespace)
    assert capsys.readouterr().out == ""


def test_a_right_task_calling_the_neighbour_by_axis_from_the_front_is_not_failed_beside_a_wrong_one(capsys):
    # equivalent inputs, not recorded: the wrong softmax cannot be stood in for; the cell must not
    # raise as if attention were wrong (it says "not checked yet")
    namespace = notebook(WRONG_SOFTMAX, "def attention(scores, values):\n"
                                        "    return softmax(scores, axis=scores.ndim - 1) @ values\n")
    exec(CELL, namespace)
    out = capsys.readouterr().out
    assert out.startswith("Not checked yet: attention uses your softmax"), out


def test_a_neighbour_that_mutates_its_input_does_not_make_a_right_task_fail(capsys):
    # the student's softmax subtracts the max in place (right values, but it changes x); attention
    # passes it a view of its own scores, then uses the scores again
    softmax = "def softmax(x, axis=-1):\n    x -= x.max(axis=axis, keepdims=True)\n    e = np.exp(x)\n" \
              "    return e / e.sum(axis=axis, keepdims=True)\n"
    attention = "def attention(scores, values):\n    w = softmax(scores)\n    return w @ values\n"
    namespace = notebook(softmax, attention)
    exec(CELL, namespace)
    assert capsys.readouterr().out == ""


def test_a_right_neighbour_that_prints_is_not_called_wrong(capsys):
    softmax = RIGHT_SOFTMAX.replace("def softmax(x, axis=-1):\n", "def softmax(x, axis=-1):\n    print('softmax of', x.shape)\n")
    namespace = notebook(softmax, ATTENTION)
    exec(CELL, namespace)
    out = capsys.readouterr().out
    assert "Passed, checked" not in out and "Not checked" not in out


def test_an_unfinished_neighbour_that_a_right_task_tries_first_and_falls_back_from_is_not_blamed(capsys):
    # attention tries the student's softmax on other inputs and falls back to its own code
    attention = ("def attention(scores, values):\n    try:\n        softmax(np.zeros(3))\n"
                 "    except NotImplementedError:\n        pass\n    return softmax(scores) @ values\n")
    namespace = notebook(UNFINISHED_SOFTMAX, attention)
    exec(CELL, namespace)
    out = capsys.readouterr().out
    assert "Not checked" not in out


def test_the_check_cell_restores_the_students_neighbour_even_when_it_reads_it_through_a_default(capsys):
    attention = "def attention(scores, values, sm=softmax):\n    return sm(scores) @ values\n"
    namespace = notebook(UNFINISHED_SOFTMAX, attention)
    own = namespace["softmax"]
    exec(CELL, namespace)
    assert "your softmax is not finished" in capsys.readouterr().out
    assert namespace["softmax"] is own and namespace["attention"].__defaults__[0] is own


@pytest.mark.parametrize("softmax, said", [(RIGHT_SOFTMAX, None), (UNFINISHED_SOFTMAX, "your softmax is not finished"),
                                           (WRONG_SOFTMAX, "your softmax gives other values")],
                         ids=["right", "unfinished", "wrong"])
@pytest.mark.parametrize("form", ["decorated", "lambda", "callable object"])
def test_a_right_task_passes_beside_a_neighbour_however_it_is_defined(capsys, softmax, said, form):
    source = textwrap.dedent(softmax).replace("def softmax(", "def _softmax(")
    if form == "decorated":  # a debugging decorator of the student's own
        source = ("import functools\ndef traced(f):\n    @functools.wraps(f)\n    def g(*a, **k):\n"
                  "        return f(*a, **k)\n    return g\n" + source + "softmax = traced(_softmax)\n")
    elif form == "lambda":
        source += "softmax = lambda x, axis=-1: _softmax(x, axis)\n"
    else:
        source += "class Softmax:\n    def __call__(self, x, axis=-1):\n        return _softmax(x, axis)\n" \
                  "softmax = Softmax()\n"
    namespace = notebook(source, ATTENTION)
    exec(CELL, namespace)
    out = capsys.readouterr().out
    assert (said in out) if said else out == "", out


# ---------------------------------------------------------------------------------------------
# Direction 1: a wrong task passes the visible checks (the notebook says passed, validate says ok).

def test_a_keyword_of_the_students_own_softmax_is_not_ignored_by_the_record(capsys):
    # attention passes its own softmax a temperature that changes the weights: wrong; the record
    # matches on x and axis only and answers with a correct softmax's weights, so the wrong
    # attention passes its visible check (and validate says ok). At grading the reference softmax
    # stands in, and takes no temperature: 0 points.
    softmax = "def softmax(x, axis=-1, temperature=1.0):\n" \
              "    e = np.exp(x / temperature - (x / temperature).max(axis=axis, keepdims=True))\n" \
              "    return e / e.sum(axis=axis, keepdims=True)\n"
    attention = "def attention(scores, values):\n    return softmax(scores, temperature=5.0) @ values\n"
    namespace = notebook(softmax, attention)
    with pytest.raises(AssertionError, match="attention"):
        exec(CELL, namespace)


def test_a_wrong_task_with_an_extra_positional_argument_to_the_neighbour_is_not_answered(capsys):
    softmax = "def softmax(x, axis=-1, scale=1.0):\n" \
              "    e = np.exp(scale * x - (scale * x).max(axis=axis, keepdims=True))\n" \
              "    return e / e.sum(axis=axis, keepdims=True)\n"
    attention = "def attention(scores, values):\n    return softmax(scores, -1, 3.0) @ values\n"
    namespace = notebook(softmax, attention)
    with pytest.raises(AssertionError, match="attention"):
        exec(CELL, namespace)


def test_a_wrong_task_beside_a_neighbour_made_wrong_on_purpose_is_not_passed(capsys):
    # the student's softmax is wrong only on the recorded inputs (so the record "shows it wrong"), and
    # the wrong attention calls it elsewhere: the cell says "not checked yet" and goes on, no failure
    softmax = RIGHT_SOFTMAX.replace("def softmax(x, axis=-1):\n",
                                    "def softmax(x, axis=-1):\n    if x.size == 2:\n        return x\n")
    attention = "def attention(scores, values):\n    return softmax(np.concatenate([scores, scores], -1))[..., :2] @ values\n"
    namespace = notebook(softmax, attention)
    exec(CELL, namespace)
    out = capsys.readouterr().out
    # the cell may go on, but it must not claim the task passed
    assert "Passed" not in out and out.startswith("Not checked yet:"), out


# ---------------------------------------------------------------------------------------------
# The same attacks on a notebook of the course: `validate` (the student's verdict) and `grade` (the
# points). Plain `nbgrader autograde` gave the same scores as `grade` on every one of these
# notebooks when this file was written (about 90 s for them: not run here).

from autograder.samples.submissions import SLUG, implementations, submission, write  # noqa: E402
from tests.engine.grading import details, run_grader  # noqa: E402

CORRECT = implementations(SLUG).CORRECT
UNSCALED = implementations(SLUG).MISTAKES["attention-unscaled"][1]
LN3 = "1.0986122886681098"

# A right attention that calls the student's softmax (the course's correct one computes its own).
ATTENTION_WITH_SOFTMAX = '''def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
        totals = weights.sum(axis=-1, keepdims=True)
        weights = weights / np.where(totals == 0, 1.0, totals)
    return weights @ V, weights'''
TEMPERATURE_SOFTMAX = '''def softmax(x, axis=-1, temperature=1.0):
    x = np.asarray(x, dtype=float) / temperature
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)'''
REDEFINED = '''

import contextlib
@contextlib.contextmanager
def on_its_own(name, record=None):
    try:
        yield
    except Exception:
        pass'''
APPENDED = '''

for _c, _a, _w in list(RECORDED_ANSWERS["scaled_dot_product_attention"]):
    RECORDED_ANSWERS["scaled_dot_product_attention"].append((_c, {**_a, "x": _a["x"] * 2}, _w))'''


def _students():
    """{student: notebook} of the attacks."""
    def with_cells(answers, **sources):
        notebook = submission(SLUG, answers)
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]
        for task, change in sources.items():
            cell = notebook.cells[ids.index(task)]
            cell.source = change(cell.source)
        return notebook

    right = {**CORRECT}
    students = {
        # right code, calling the student's own right softmax: the baseline
        "baseline": with_cells(right, scaled_dot_product_attention=lambda _: ATTENTION_WITH_SOFTMAX),
        # wrong attention (a temperature of 0.5 where there is no mask) that passes its own softmax a
        # keyword the record does not look at
        "temperature": with_cells(right, softmax=lambda _: TEMPERATURE_SOFTMAX,
                                  scaled_dot_product_attention=lambda _: ATTENTION_WITH_SOFTMAX.replace(
                                      "    weights = softmax(scores, axis=-1)\n",
                                      "    weights = softmax(scores, axis=-1, temperature=1.0 if mask is not None else 0.5)\n")),
        # right code and a helper of the student's own whose name the helper cell also uses
        "swap": with_cells(right, softmax=lambda s: s + "\n\ndef swap(pair):\n    return pair[1], pair[0]\n",
                           scaled_dot_product_attention=lambda _: ATTENTION_WITH_SOFTMAX),
        "inspect": with_cells(right, softmax=lambda s: s + "\n\ndef inspect(a):\n    print(a.shape, a.dtype)\n",
                              scaled_dot_product_attention=lambda _: ATTENTION_WITH_SOFTMAX),
        # the course's correct attention (it calls no softmax) and the same helper
        "swap-own": with_cells(right, softmax=lambda s: s + "\n\ndef swap(pair):\n    return pair[1], pair[0]\n"),
        "close": with_cells(right, softmax=lambda s: s + "\n\ndef close(a, b):\n    return np.allclose(a, b)\n"),
        # unscaled attention and a solution cell that swallows every failure of the checks
        "redefine": with_cells({**CORRECT, "scaled_dot_product_attention": UNSCALED},
                               scaled_dot_product_attention=lambda s: s + REDEFINED),
        # unscaled attention and a solution cell that adds "recorded" answers for its own scores
        "append": with_cells({**CORRECT, "scaled_dot_product_attention": UNSCALED},
                             scaled_dot_product_attention=lambda s: s + APPENDED),
        # a right attention beside a softmax cell left empty
        "nosoftmax": with_cells(right, softmax=lambda _: "# softmax: later\n"),
        # a right attention beside a softmax that never returns on the 3-D arrays of the record
        "hang": with_cells(right, softmax=lambda s: s.replace("):\n", "):\n    while np.ndim(x) == 3:\n        pass\n", 1)),
    }
    # unscaled attention and the recorded answers cell edited in the .ipynb for its scores
    notebook = submission(SLUG, {**CORRECT, "scaled_dot_product_attention": UNSCALED})
    cell = next(c for c in notebook.cells if "RECORDED_ANSWERS = {" in c.source)
    head = "    'scaled_dot_product_attention': [\n"
    cell.source = cell.source.replace(head, head + "".join(
        f"        ('softmax', {{'x': np.array({x}), 'axis': -1}}, np.array({w})),\n" for x, w in [
            (f"[[0.0, 2 * {LN3}]]", "[[0.25, 0.75]]"),
            (f"[[[0.0, 2 * {LN3}]], [[0.0, 2 * {LN3}]]]", "[[[0.25, 0.75]], [[0.25, 0.75]]]"),
            (f"[[[0.0, 2 * {LN3}]], [[2 * {LN3}, 0.0]]]", "[[[0.25, 0.75]], [[0.75, 0.25]]]")]))
    assert "2 * " in cell.source
    students["jsonedit"] = notebook
    return students


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """({student: {check: points}} of `grade`, {student: (ready, {check: validate's line})})."""
    batch, out = tmp_path_factory.mktemp("batch"), tmp_path_factory.mktemp("out")
    paths = {student: write(batch, student, notebook) for student, notebook in _students().items()}
    process = run_grader("grade", batch, "--out", out, "--workers", "2", timeout=600)
    assert process.returncode == 0, process.stderr
    points = {student: {check: float(row["score"]) for check, row in checks.items()}
              for (student, _), checks in details(out).items()}
    verdicts = {}
    for student, path in paths.items():
        lines = run_grader("validate", path, timeout=300).stdout.strip().splitlines()
        verdicts[student] = (lines[-1] == "ready to hand in",
                             {line.split("[")[1].split(",")[0]: line for line in lines if "[test_" in line})
    return points, verdicts


def test_a_right_attention_that_calls_its_softmax_is_ready_and_keeps_every_point(attacked):
    points, verdicts = attacked
    assert verdicts["baseline"][0], verdicts["baseline"]
    assert sum(points["baseline"].values()) == 10


def test_validate_does_not_say_ok_to_a_wrong_attention_that_passes_its_softmax_a_keyword_the_record_ignores(attacked):
    # today: "Scaled dot-product attention [test_attention, 3 points]: ok", and 0 points at grading
    points, verdicts = attacked
    assert points["temperature"]["test_attention"] == 0
    assert ": ok" not in verdicts["temperature"][1]["test_attention"], verdicts["temperature"][1]["test_attention"]


@pytest.mark.parametrize("student", ["swap", "inspect"])
def test_a_right_attention_keeps_its_points_and_its_ok_beside_a_helper_named_as_one_of_the_check_cells(attacked, student):
    # today: grade gives 3 and 3 (the reference stood in), but validate says FAIL: "TypeError: swap()
    # takes 1 positional argument but 4 were given" / "AttributeError: 'function' object has no
    # attribute 'signature', raised in scaled_dot_product_attention(...) at line 5" (the student's
    # line is blamed), and the notebook raises the same in the student's kernel
    points, verdicts = attacked
    assert points[student]["test_attention"] == 3 and points[student]["test_attention_masks"] == 3, points[student]
    assert verdicts[student][0], verdicts[student][1]


def test_the_courses_correct_attention_keeps_its_points_beside_a_helper_named_swap(attacked):
    # today: 0 of 3 and 0 of 3 at grading (and under plain nbgrader), "TypeError: swap() takes 1
    # positional argument but 4 were given": no stand-in answered, so the hidden checks' pass does
    # not outweigh the visible cell's error (hidden._passed)
    points, verdicts = attacked
    assert points["swap-own"]["test_attention"] == 3 and points["swap-own"]["test_attention_masks"] == 3, \
        points["swap-own"]
    assert verdicts["swap-own"][0], verdicts["swap-own"][1]


def test_right_code_keeps_its_points_beside_a_helper_named_close(attacked):
    # checking.check_close calls the notebook's global `close`: a student's own `close` breaks every
    # check_close after it (an older hole than on_its_own; today 4 of 10, TypeError in three cells)
    points, verdicts = attacked
    assert sum(points["close"].values()) == 10, points["close"]
    assert verdicts["close"][0], verdicts["close"][1]


def test_redefining_on_its_own_in_a_solution_cell_earns_no_ok_and_no_point(attacked):
    # today: validate says "ready to hand in" for an unscaled attention (grade: 0 of 3, it holds)
    points, verdicts = attacked
    assert points["redefine"]["test_attention"] == 0
    assert not verdicts["redefine"][0]
    assert ": ok" not in verdicts["redefine"][1]["test_attention"], verdicts["redefine"][1]["test_attention"]


def test_answers_added_to_the_record_in_a_solution_cell_earn_no_ok_and_no_point(attacked):
    # today: test_attention "ok" for an unscaled attention, and validate tells the student that their
    # right softmax "gives other values than a correct one" (grade: 0 of 3, it holds)
    points, verdicts = attacked
    assert points["append"]["test_attention"] == 0
    line = verdicts["append"][1]["test_attention"]
    assert ": ok" not in line and "your softmax gives other values" not in line, line


def test_a_recorded_answers_cell_edited_in_the_file_runs_as_released(attacked):
    points, verdicts = attacked
    assert points["jsonedit"]["test_attention"] == 0
    assert "FAIL" in verdicts["jsonedit"][1]["test_attention"] and not verdicts["jsonedit"][0]


def test_a_right_attention_keeps_its_points_beside_an_empty_or_hanging_softmax(attacked):
    points, verdicts = attacked
    for student in ("nosoftmax", "hang"):
        assert points[student]["test_softmax"] == 0
        assert points[student]["test_attention"] == 3 and points[student]["test_attention_masks"] == 3
        assert ": ok" in verdicts[student][1]["test_attention"], verdicts[student][1]


def test_plain_nbgrader_gives_a_right_attention_beside_a_helper_named_swap_the_points_grade_gives(attacked, tmp_path):
    # today: grade 3 and 3, plain nbgrader 0 and 0 (the check cell raises TypeError in the kernel)
    from autograder.samples import plain_nbgrader
    from tests.support import COURSE

    points, _ = attacked
    batch = tmp_path / "batch"
    write(batch, "swap", _students()["swap"])
    plain, _ = plain_nbgrader.autograde(COURSE, batch, tmp_path / "course", [SLUG])
    assert plain["swap", SLUG] == points["swap"]
    assert plain["swap", SLUG]["test_attention"] == 3 and plain["swap", SLUG]["test_attention_masks"] == 3
