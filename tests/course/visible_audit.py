"""What `validate` sees of a wrong implementation, cheaply: the visible checks run in-process.

`validate` runs a notebook in the grader's sandbox and reports every check cell's visible
checks and every resource rule (`assignment.Test.rules`). Running it once per wrong
implementation of the samples (over two hundred of them) would take an hour; this runs the
same cells in-process instead: the instructor notebook's code cells in order (solution
cells give the reference, check cells run without their hidden blocks, as released), and,
right after the solution cell of a task, one forked child per wrong implementation of that
task, which puts the wrong function in the notebook's namespace and runs the rest of the
notebook (a wrong implementation of several tasks from the first of them on, kept in place
after the later ones' solution cells, so that each task's check cell sees it as `validate`
does), with the resource rules of every check cell whose visible checks pass (on the
visible inputs: no secret), up to the first failure. The parent goes on with the reference, so the notebook's prefix
runs once per task, not once per wrong implementation. tests/course/test_no_surprise.py
cross-checks a few answers with the real `validate` command.
"""

import contextlib
import io
import json
import os
import warnings

import matplotlib
import nbformat

from autograder.engine import assignment as assignments_
from autograder.engine import harness
from autograder.engine.checking import CheckFailed

matplotlib.use("Agg")  # cells that plot draw nowhere


def flagged(course, name, substitutions):
    """{label: [the grade_id of the first check cell, or "rule of <grade_id>", that fails]} for every
    (label, {task: wrong function}) of `substitutions`, the notebook `name` of `course`
    otherwise right: an empty list means `validate` would say "ready to hand in"."""
    source = nbformat.read(course.notebook(name), as_version=4)
    spec = assignments_.load(course, name)
    rules = {test.grade_id: test.rules for test in spec.tests}
    pending = list(substitutions)
    results = {}
    namespace = {"__name__": "__main__"}
    code = [cell for cell in source.cells if cell.cell_type == "code"]
    for index, cell in enumerate(code):
        error = _run(cell, namespace)
        if error is not None:  # the reference must pass, or every wrong implementation would seem flagged
            raise AssertionError(f"{name}: the cell {assignments_.grade_id(cell)} fails on the reference: {error!r}")
        task = assignments_.grade_id(cell)
        here = [(label, wrong) for label, wrong in pending if task in wrong and _first_task(wrong, code) == task]
        for label, wrong in here:
            results[label] = _in_child(lambda: _rest(code[index + 1:], {**namespace, **wrong}, rules, wrong))
    return results


def _first_task(wrong, code):
    """The task of `wrong` whose solution cell comes first: the substitution starts after it."""
    order = [assignments_.grade_id(cell) for cell in code]
    return min(wrong, key=order.index)


def _run(cell, namespace):
    """Run one cell as released (no hidden block) in `namespace`; its error, or None."""
    source = assignments_.HIDDEN.sub("", cell.source)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            exec(compile(source, f"<cell {assignments_.grade_id(cell)}>", "exec"), namespace)
        except Exception as error:  # a check failed, or the wrong function raised
            return error
    return None


def _rest(cells, namespace, rules, wrong):
    """[the first check cell, or resource rule, that fails when `cells` run in `namespace`], or []:
    one failure is enough for `validate` to say "not ready", so nothing runs after it. The
    functions of `wrong` stay in place: a later task's solution cell would put the reference back."""
    for cell in cells:
        error = _run(cell, namespace)
        namespace.update(wrong)
        grade_id = assignments_.grade_id(cell)
        if cell.metadata.get("nbgrader", {}).get("grade"):
            if error is not None:
                return [grade_id]
            if rules.get(grade_id):
                try:
                    with harness.secret(None), contextlib.redirect_stdout(io.StringIO()):
                        exec(compile(rules[grade_id], f"<rules of {grade_id}>", "exec"), dict(namespace))
                except CheckFailed:
                    return [f"rule of {grade_id}"]
    return []


def _in_child(compute):
    """compute() in a forked child (JSON data back through a pipe): the parent's namespace stays
    the reference's."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(reader)
            answer = json.dumps(compute())
            with os.fdopen(writer, "w") as stream:
                stream.write(answer)
            status = 0
        finally:
            os._exit(status)
    os.close(writer)
    with os.fdopen(reader) as stream:
        text = stream.read()
    _, status = os.waitpid(pid, 0)
    return json.loads(text) if text else [f"the child died (status {status})"]
