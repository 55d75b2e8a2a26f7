"""The hidden checks of one check cell, run in the grader: the one way hidden code runs, for
`grade` (on inputs drawn from the submission's secret), `validate` (the resource rules, no
secret) and `timing` (the reference, measured at release).

A check returns typed data (`results.Check`): its points, the message, the known mistake it
names (`cause`) and whose fault a loss is (`fault`). The student's: a check failed on their
function, their process stopped, or a function their notebook was to define is missing. The
grader's: any other exception of the course's own check code (a `NameError` in a checks module,
a typo in a hidden block, a check that breaks on a value), which costs the student nothing
they can fix: their page says it was not their fault, and the traceback is kept for the
instructor (`Check.trace`).
"""

import dataclasses
import re
import traceback

from . import harness
from .assignment import grade_id
from .checking import CheckFailed
from .messages import bound_names, caused_by, failure_message
from .results import GRADER, STUDENT, Check
from .sandbox import SandboxStopped

FILE = "<hidden checks of {}>"  # the file name of a check cell's hidden code, in tracebacks
GRADER_FAILED = ("not graded: the grader's own check failed here, which is not your fault "
                 "(your instructor has its report)")


def run_test(test, visible, sandbox, secret, earlier=(), names=None):
    """The Check of one check cell: its visible part ran in the sandbox, its hidden part runs here,
    on inputs drawn with the submission's `secret`. Where the visible part failed, its message
    stands, with the mistake the hidden part names when it names one (`_with_cause`); a name it
    lacks is said to be missing because of the student's cell that was to define it and raised,
    when that cell alone explains it (`caused_by`, `earlier` the cells that ran before). `names`:
    the names the notebook is to define (None: any name the hidden code lacks)."""
    def failed(message, cause=None):
        if visible is not None and visible["error"] is not None:
            message = (caused_by(visible["error"], earlier)
                       or _with_cause(failure_message(visible["error"]), cause))
        return Check(test.grade_id, 0.0, test.points, message, cause=cause or "", fault=STUDENT)

    if visible is None:
        return failed("not graded: the notebook stopped before this check ran")
    if not sandbox.alive:
        return failed("not graded: the notebook's process had stopped before this check ran")
    try:
        with harness.secret(secret), harness.answering() as stood_in:
            exec(compile(test.hidden, FILE.format(test.grade_id), "exec"), dict(sandbox.functions))
    except CheckFailed as failure:
        return failed(str(failure), failure.cause)
    except SandboxStopped as stop:
        return failed(f"not graded: {stop.reason}")
    except Exception as error:
        name = _missing_name(error, names)
        if name is None:  # the course's own check code failed: not the student's doing
            return Check(test.grade_id, 0.0, test.points, GRADER_FAILED, fault=GRADER,
                         trace="".join(traceback.format_exception(error)))
        return failed(caused_by({"ename": "NameError", "evalue": f"name '{name}' is not defined"}, earlier)
                      or f"{name} is not defined in the notebook (was its cell deleted or renamed, "
                         "or did it fail to run?)")
    return _passed(test, visible, stood_in, failed)


JUDGED_WITH = "Judged with a correct "  # the message of a task that kept its points beside a wrong neighbour


def _passed(test, visible, stood_in, failed):
    """The Check of hidden checks that passed: full points, unless the visible checks failed on the
    task's own code."""
    if visible["error"] is not None and stood_in:
        # The hidden checks, which include the visible check's cases, passed with the reference's
        # versions of the student's other functions standing in: the visible failure came from those
        # (whose own checks take their points), not from this task's code. One story: full points,
        # and which neighbours it was judged without (`only_lost`), never the notebook's failure.
        return Check(test.grade_id, test.points, test.points, JUDGED_WITH + " and ".join(sorted(stood_in)))
    if visible["error"] is not None:
        return failed("")
    return Check(test.grade_id, test.points, test.points)


def only_lost(checks):
    """`checks` with each "Judged with a correct E" naming only the neighbours E whose own check
    cells (test_E, test_E_...) lost points: a right neighbour is not news."""
    lost = {check.name for check in checks if check.score < check.max_score}

    def kept(check):
        if not check.message.startswith(JUDGED_WITH):
            return check
        names = [name for name in check.message[len(JUDGED_WITH):].split(" and ")
                 if any(own == f"test_{name}" or own.startswith(f"test_{name}_") for own in lost)]
        return dataclasses.replace(check, message=JUDGED_WITH + " and ".join(names) if names else "")
    return [kept(check) for check in checks]


def _missing_name(error, names):
    """The name of the student's that the hidden code itself lacks (a NameError raised in the hidden
    block, for a name the notebook was to define), else None: the check code's own fault."""
    if not isinstance(error, NameError):
        return None
    frame = error.__traceback__
    while frame.tb_next is not None:
        frame = frame.tb_next
    name = getattr(error, "name", None) or str(error)
    in_hidden = frame.tb_frame.f_code.co_filename.startswith(FILE.partition("{")[0])
    return name if in_hidden and (names is None or name in names) else None


def notebook_names(cells):
    """The names the code `cells` (a released notebook's) bind at their top level: what a student's
    notebook is to define."""
    return frozenset().union(*(bound_names(cell.source) for cell in cells if cell.cell_type == "code"))


def _with_cause(message, cause):
    """The visible check's message, and the one mistake the hidden check found in the same function
    (named only when it alone explains the values; the hidden inputs are never shown). Not beside NaN
    or inf: the cause explains values the hidden check saw, not where the visible check's NaN came from."""
    if not cause or cause in message or re.search(r"\bNaN\b|\binf\b", message):
        return message
    return f"{message.rstrip('.')}. The hidden checks find why: {cause}."


def earlier_cells(released, solutions, cells, outputs, places):
    """{grade_id of a check cell: [(where, source, error, the student's own)] of the code cells that
    ran before it}, for `messages.caused_by` (`released`: the released notebook's cells,
    `solutions`: the grade_ids of the student's cells)."""
    course = {grade_id(c) for c in released} - solutions - {None}
    ran, earlier = [], {}
    for index, cell in enumerate(cells):
        output = outputs.get(str(index)) if cell.cell_type == "code" else None
        if output is None:
            continue
        earlier.setdefault(grade_id(cell), list(ran))
        ran.append((places.get(str(index), "a cell"), cell.source, output["error"], grade_id(cell) not in course))
    return earlier
