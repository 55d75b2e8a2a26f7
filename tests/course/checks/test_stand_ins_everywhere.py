"""Every call of a student's function in the hidden checks passes the exercise's stand-ins.

A task is judged on its own only if every call of the student's function runs with the
reference's earlier graded functions standing in (`Task.check` and `Task.judge` of the case tables,
`engine/cases.py`, always pass them; a plain `harness.call(..., stand_ins=...)` must): one call
without them, and a right function built on a wrong earlier task loses its points. This test reads
autograder/checks/*.py with `ast`, so that a new check cannot forget them.

A student's function is a parameter of a ``check_*`` function, a name bound to one, or the
parameter of a helper of the checks (of the same module or imported from another) that is
given one. Each may go, as the function called, only to ``call``, ``call_in_memory`` or
``standing_in`` with ``stand_ins``, or to such a helper (with ``stand_ins`` if it takes them);
it is never called directly nor handed to anything else (except to read its name). Exempt: the
first task of each exercise (nothing before it stands in) and the modules of ``EXEMPT``.
(linear_attention's exercise stands in only its reference's ``elu_feature_map``: the reference's
linear_attention would compute its memory cases outside the cap.)
"""

import ast
import importlib

import pytest

from autograder.engine.checking import CheckFailed
from tests.course.checks.test_double_mistakes import student_namespace
from tests.engine import standin_attacks as attacks
from tests.support import ROOT

CHECKS = ROOT / "autograder" / "checks"
CALLERS = {"call", "call_in_memory", "standing_in"}  # harness functions that call their first argument
HARMLESS = {"getattr", "hasattr", "isinstance", "callable", "id"}  # they read a function, never call it
# Modules whose calls need no stand-ins, each with why.
EXEMPT = {
    # its memory rules are measured in the student's process, and a stand-in's work is done in the
    # grader, outside the cap; its reference functions call no other graded function
    "efficient_attention",
}


def _functions(module):
    tree = ast.parse((CHECKS / f"{module}.py").read_text())
    functions = {node.name: (module, node) for node in tree.body if isinstance(node, ast.FunctionDef)}
    for node in tree.body:  # helpers imported from another check module
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            imported = _functions(node.module)
            functions.update({alias.asname or alias.name: imported[alias.name]
                              for alias in node.names if alias.name in imported})
    return functions


def _called_by_checks():
    """The names of the functions that a check module calls."""
    return {node.func.id for path in CHECKS.glob("*.py") for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


def _first_task(module):
    """The name of the first graded function of ``module`` (the first of its stand-ins: ``GRADED``,
    or ``FEATURE_MAP``, or the first task its exercise declares), the one task with nothing before
    it to stand in."""
    for node in ast.parse((CHECKS / f"{module}.py").read_text()).body:
        if isinstance(node, ast.Assign) and {getattr(t, "id", None) for t in node.targets} & {"GRADED", "FEATURE_MAP"}:
            return node.value.elts[0].attr
    tasks = _tasks(module)
    return next(iter(tasks.values()), None)


def _tasks(module):
    """The module-level names bound to a task its exercise declares (``name = exercise.task("f", ...)``),
    with the task's function: ``Task.check`` and ``Task.judge`` always call it with the exercise's stand-ins."""
    tasks = {}
    for node in ast.parse((CHECKS / f"{module}.py").read_text()).body:
        value = node.value if isinstance(node, ast.Assign) else None
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "task"
                and value.args and isinstance(value.args[0], ast.Constant)):
            tasks.update({target.id: value.args[0].value for target in node.targets if isinstance(target, ast.Name)})
    return tasks


def _passes_stand_ins(call, parameters):
    """Whether ``call``, of a function with these ``parameters``, gives it ``stand_ins``."""
    by_position = "stand_ins" in parameters and parameters.index("stand_ins") < len(call.args)
    return by_position or any(keyword.arg == "stand_ins" for keyword in call.keywords)


def _parameters(function):
    arguments = function.args
    return [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]


def unguarded_calls(module):
    """Where a student's function in ``module``'s checks goes without the stand-ins: (line, text)."""
    if module in EXEMPT:
        return []
    functions = _functions(module)
    first = _first_task(module)
    tasks = _tasks(module)
    problems, queue, seen = [], [], set()
    for name, (owner, node) in functions.items():
        # the checks a notebook calls (check_* that no check calls) on the student's function, but the first task's
        if owner == module and name.startswith("check_") and name not in _called_by_checks():
            queue += [(owner, node, parameter) for parameter in _parameters(node)[:1] if parameter != first]
    while queue:
        owner, function, student = queue.pop()
        if (owner, function.name, student) in seen:
            continue
        seen.add((owner, function.name, student))
        names = {student}
        for node in ast.walk(function):  # names bound to the student's function
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in names:
                names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        where = f"{owner}.py:{function.name}"
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func.id if isinstance(node.func, ast.Name) else None
            judged = (isinstance(node.func, ast.Attribute) and node.func.attr in ("check", "judge")
                      and isinstance(node.func.value, ast.Name) and node.func.value.id in tasks)
            if callee in names:
                problems.append((f"{where}:{node.lineno}", f"{callee} is called directly"))
            given = [(position, a) for position, a in enumerate(node.args)
                     if isinstance(a, ast.Name) and a.id in names]
            given += [(k.arg, k.value) for k in node.keywords if isinstance(k.value, ast.Name) and k.value.id in names]
            for position, argument in given:
                if judged and position == 0:
                    continue  # the engine calls it with the exercise's stand-ins
                if callee in CALLERS and position == 0:
                    if not _passes_stand_ins(node, ["function", "stand_ins"] if callee == "standing_in" else []):
                        problems.append((f"{where}:{node.lineno}", f"{callee}({argument.id}, ...) without stand_ins"))
                elif callee in functions:
                    helper_owner, helper = functions[callee]
                    parameters = _parameters(helper)
                    parameter = parameters[position] if isinstance(position, int) else position
                    queue.append((helper_owner, helper, parameter))
                    if "stand_ins" in parameters and not _passes_stand_ins(node, parameters):
                        problems.append((f"{where}:{node.lineno}", f"{callee}({argument.id}, ...) without stand_ins"))
                elif callee not in HARMLESS:
                    problems.append((f"{where}:{node.lineno}", f"{argument.id} is given to {ast.unparse(node.func)}"))
    return sorted(set(problems))


MODULES = sorted(path.stem for path in CHECKS.glob("*.py") if path.stem != "__init__")


@pytest.mark.parametrize("module", MODULES)
def test_every_call_of_a_students_function_passes_the_stand_ins(module):
    assert unguarded_calls(module) == []


def test_the_reader_finds_a_call_without_stand_ins(tmp_path, monkeypatch):
    """The test can fail: a check that calls the student's function plainly, directly, or gives it away."""
    monkeypatch.setitem(globals(), "CHECKS", tmp_path)
    (tmp_path / "made_up.py").write_text(
        "def check_f(f):\n"
        "    call(f, 1, on='x')\n"
        "    call(f, 1, on='x', stand_ins=GRADED)\n"
        "    g = f\n"
        "    g(2)\n"
        "    _helper(g)\n"
        "    _helper(g, GRADED)\n"
        "    quietly(f)\n"
        "\n"
        "def _helper(function, stand_ins=()):\n"
        "    call_in_memory(function, on='y', limit_bytes=1)\n")
    found = sorted(problem for _, problem in unguarded_calls("made_up"))
    assert found == ["_helper(g, ...) without stand_ins", "call(f, ...) without stand_ins",
                     "call_in_memory(function, ...) without stand_ins", "f is given to quietly", "g is called directly"]


# -- a right function built on a wrong earlier task keeps its points --------------------------------
# (the student code: tests/engine/standin_attacks.py)

# (exercise, earlier task, its wrong code, its check, later task, its right code built on the earlier, its check)
BUILT_ON = [
    ("luong", "dot_score", attacks.dot_score_scaled, "check_dot_score",
     "general_score", attacks.general_score_via_dot_score, "check_general_score"),
    ("rnn_encoder_decoder", "rnn_cell", attacks.rnn_cell_without_bias, "check_rnn_cell",
     "gru_cell", attacks.gru_cell_via_rnn_cell, "check_gru_cell"),
]


@pytest.mark.parametrize("slug, earlier, wrong, earlier_check, later, right, later_check", BUILT_ON,
                         ids=[f"{row[4]}-on-{row[1]}" for row in BUILT_ON])
def test_a_right_function_on_a_wrong_earlier_task_keeps_its_points(slug, earlier, wrong, earlier_check,
                                                                    later, right, later_check):
    namespace, _ = student_namespace(slug, {earlier: wrong, later: right})
    checks = importlib.import_module(f"autograder.checks.{slug}")
    with pytest.raises(CheckFailed):  # the earlier task loses its own points
        getattr(checks, earlier_check)(namespace[earlier])
    getattr(checks, later_check)(namespace[later])  # the later one, judged with the reference's earlier, keeps its
    namespace, _ = student_namespace(slug, {later: right})
    getattr(checks, later_check)(namespace[later])  # and passes beside the student's own right earlier task
