"""`python -m autograder validate NOTEBOOK [--assignment NAME]`: check a notebook before hand-in.

The notebook runs as the grader runs it: fitted onto the released assignment
(`assignment.fit`, which names deleted, duplicated, edited or renamed cells),
then every cell once, in order, from a fresh process, in the same bubblewrap
sandbox with the same limits. So a notebook that only worked because its
cells were run out of order fails here too. Each check cell's visible checks
give one line: ok, FAIL (and why), or "not checked yet" where the task calls an earlier one that
must be fixed first (the line the cell printed: `recorded.on_its_own`); the notebook is ready only when every line is ok; the hidden checks are never run, and nothing of them is shown,
except the resource rules (`assignment.Test.rules`): where its visible checks
pass, a check cell's rules run as the grader runs them (the student's function
in the same second sandbox, with the same limit and the same message), on the
sizes the task states and inputs of no secret.
"""


import dataclasses
import re

from . import assignment as assignments_
from . import tasks
from .course import assignments
from .hidden import notebook_names, run_test
from .kinds import read_notebook
from .messages import bound_names, failure_message
from .recorded import NOT_CHECKED, PASSED_BESIDE
from .recording import RECORDED
from .release import NOTEBOOK_NAMES
from .sandboxes import on_task, sandbox_for
from .sandbox import Limits, SandboxStopped, SandboxUnavailable, check_available


def validate(course, path, name=None, limits=Limits()):
    """(ok, lines): whether the notebook at `path` is gradable in `course` and passes every visible check,
    and one line per problem and per check cell, for the student."""
    name = name or path.stem
    if name not in assignments(course):
        return False, [f"{path.name}: not an assignment of this course; name it <assignment>.ipynb or "
                       f"give --assignment, one of: {', '.join(assignments(course))}"]
    try:
        check_available()
        notebook = read_notebook(path)
    except (SandboxUnavailable, ValueError) as error:
        return False, [f"not validated: {error}"]
    spec = assignments_.load(course, name)
    cells, problems = assignments_.fit(spec, notebook)
    touched = _checks_touched(spec, cells)
    problems = problems + touched
    lines = [f"structure: {problem}" for problem in problems]
    sandbox = sandbox_for(course, name, cells, limits)  # as the grader runs it, with its limits
    try:
        outputs = {output["id"]: output for output in sandbox.run()}
        visible = {assignments_.grade_id(cell): outputs.get(str(i)) for i, cell in enumerate(cells)}
        broken = {test.grade_id: _broken_rule(course, name, test, visible[test.grade_id], sandbox)
                  for test in spec.tests
                  if test.rules and visible.get(test.grade_id) and visible[test.grade_id]["error"] is None}
    except SandboxStopped as stop:
        return False, lines + [f"not gradable ({stop.status}): {stop.reason}"]
    finally:
        sandbox.close()
    lines += [f"{status}: {reason}" for status, reason in sandbox.events]
    passed = True
    for test in spec.tests:
        output = visible.get(test.grade_id)
        title = tasks.titles(course, name).get(test.grade_id, test.grade_id)
        if touched:
            verdict = "not checked: a cell of yours changes what the check cells use (see above)"
        elif output is None:
            verdict = "FAIL: the notebook stopped before this check ran"
        elif output["error"] is None and _printed(output, NOT_CHECKED):
            verdict = _printed(output, NOT_CHECKED)[0].lower() + _printed(output, NOT_CHECKED)[1:]
        elif output["error"] is not None:
            verdict = f"FAIL: {failure_message(output['error'])}"
        elif broken.get(test.grade_id):
            verdict = f"FAIL: {broken[test.grade_id]}"
        else:
            verdict = "ok (visible checks" + (" and resource rules" if test.rules else "") + \
                "; more checks run at grading)" + _neighbours_note(output)
        if not verdict.startswith("ok"):
            passed = False
            verdict += tasks.explained_in(course, name, test.grade_id)
        lines.append(f"{title} [{test.grade_id}, {test.points:g} point{'s' * (test.points != 1)}]: {verdict}")
    lines.append(assignments_.hidden_points_sentence(spec.hidden_points, spec.max_score))
    return passed and not problems and not sandbox.events, lines


def _checks_touched(spec, cells):
    """Problems of the student's cells that redefine what the check cells use (`release.NOTEBOOK_NAMES`)
    or read the recorded answers: the visible checks would no longer say what they say. Grading is
    not fooled (its hidden checks run apart); this notebook is just not ready."""
    course_cells = {assignments_.grade_id(c) for c in spec.cells} - spec.solutions - {None}
    theirs = [cell for cell in cells if cell.cell_type == "code" and assignments_.grade_id(cell) not in course_cells]
    problems = []
    for cell in theirs:
        bound = bound_names(cell.source) & set(NOTEBOOK_NAMES)
        read = {word for word in re.findall(r"\w+", cell.source) if word in RECORDED}
        for name in sorted(bound | read):
            where = f"the cell `{assignments_.grade_id(cell)}`" if assignments_.grade_id(cell) else "a cell of yours"
            problems.append(f"{where} {'redefines' if name in bound else 'uses'} {name}, which the check cells "
                            "use: leave it to them")
    return problems


def _printed(output, start):
    """The first line a check cell printed that begins with `start` (`recorded.on_its_own`'s), or ''."""
    text = output.get("stdout") or ""
    return next((line for line in text.splitlines() if line.startswith(start)), "")


def _neighbours_note(output):
    """What a passing check cell printed of the neighbours it was checked without ("Passed, checked
    with a correct E: your E ..."), or ''."""
    line = _printed(output, PASSED_BESIDE)
    return f"; {line[len('Passed, '):]}" if line else ""


def _broken_rule(course, name, test, visible, sandbox):
    """The grader's message when `test`'s resource rules fail on the student's functions of
    `sandbox`, or None when they hold: the grader's own step (`hidden.run_test`) with the rules
    as the only hidden checks and no secret."""
    on_task(sandbox, tasks.titles(course, name).get(test.grade_id))  # for its messages
    check = run_test(dataclasses.replace(test, hidden=test.rules), visible, sandbox, None, (),
                     notebook_names(assignments_.load(course, name).cells))
    return check.message if check.score < check.max_score else None
