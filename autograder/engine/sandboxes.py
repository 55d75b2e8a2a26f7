"""The one place grading builds a submission's Sandbox, sets what it needs to know (where its
cells are, which task the checks are on) and starts it again: for a course file's assignment
(`sandbox_for`, its time limits from the reference's, `timing`) and for an nbgrader notebook
(`nbgrader_sandbox`).
"""

import os
import time

from . import assignment as assignments_
from . import tasks, timing
from .sandbox import Sandbox, SandboxStopped, Timeouts

RESTARTS = 2  # times a sandbox that died during the hidden checks is started again
# Sandboxes run as an ordinary user of their own: BASE_UID + the grading process's id (mod
# UID_RANGE), so that concurrent workers, and concurrent batches, count their processes apart.
BASE_UID, UID_RANGE = 100_000, 100_000


def _uid():
    return BASE_UID + os.getpid() % UID_RANGE


def sandbox_for(course, name, cells, limits):
    """The sandbox that runs the fitted `cells` of assignment `name` of `course`: its code cells, by
    index, with the time limits derived from the reference's times (timing.py)."""
    code = [(str(i), cell.source) for i, cell in enumerate(cells) if cell.cell_type == "code"]
    timeouts = timing.timeouts(course, name, [(str(i), assignments_.grade_id(cell)) for i, cell in enumerate(cells)],
                               limits)
    sandbox = Sandbox(code, limits, uid=_uid(), timeouts=timeouts, hidden=course.packages)
    sandbox.places = tasks.places(course, name, cells)  # its messages name the task, not a cell number
    sandbox.own_cells = assignments_.own_cells(assignments_.load(course, name), cells)  # errors' places
    return sandbox


def nbgrader_sandbox(cells, limits, files, hidden, places):
    """The sandbox that runs the code `cells` of an nbgrader notebook (test cells included), with
    `files` beside it, one limit for every cell (the course's: `nbgrader_course.cell_limits`) and
    `places` ({cell id: where it is})."""
    sandbox = Sandbox([(str(i), cell.source) for i, cell in enumerate(cells) if cell.cell_type == "code"],
                      limits, uid=_uid(), timeouts=Timeouts(), files=files, hidden=hidden)
    sandbox.places = places
    return sandbox


def on_task(sandbox, title):
    """Tell `sandbox` the task whose hidden checks call the student's functions now (its messages
    name it)."""
    sandbox.task = title


def revived(sandbox, restarts):
    """(sandbox, restarts): a fresh sandbox for the remaining checks if the last one died or was
    stopped, at most RESTARTS times, plus once for each function not called again (it killed the
    process or could not be interrupted: wrong neighbours cannot use up a right task's restarts),
    and only while the submission has time left (past its deadline a fresh sandbox would only
    start, under load for seconds, to stop)."""
    allowed = RESTARTS + len(sandbox.submission.stopped)
    if sandbox.alive or restarts >= allowed or time.monotonic() >= sandbox.deadline:
        return sandbox, restarts
    return _restart(sandbox), restarts + 1


def _restart(sandbox):
    """A fresh sandbox for the remaining checks: the last one died or was stopped."""
    sandbox.close()
    fresh = Sandbox(submission=sandbox.submission)  # the same state: no new time, nor new calls of what ran out of it
    try:
        fresh.run()
    except SandboxStopped:
        pass  # recorded in its events; the remaining checks are not graded
    return fresh
