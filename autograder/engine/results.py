"""What grading produces, as typed data, and where it is kept: a Graded per submission (its Result,
with a Check per check cell, and what its feedback page shows), the Result kept in
OUT/results/<student>/<assignment>.json, each written atomically with its feedback page.

Grading (`grade`) makes the results; this module keeps them and renders nothing: `reports`
rebuilds grades.csv, details.csv and summary.html from every result in OUT (and `merge`
combines shards), `feedback`, `report` and `summary` render.
"""

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .collect import Layout
from .course import assignments

# OUT/feedback/: one page per student and assignment; an nbgrader assignment's page links to a
# page per notebook
FEEDBACK = Layout("{student_id}/{assignment}.html")
NOTEBOOK_FEEDBACK = Layout("{student_id}/{assignment}/{notebook}.html")


# A submission's status: `graded`, or the worst thing that happened to it (the first of these).
# `grader error` is the grader's own failure (not the student's: their page says so); `crashed`
# is the student's process dying.
STATUSES = ["missing", "link", "not-a-file", "too-large", "unreadable", "unsupported-kernel", "grader error",
            "crashed", "timeout", "resource-limit", "invalid-structure", "graded"]
GRADER_ERROR = "grader error"
# Whose fault a lost point is: the student's (their code), or the grader's (its own code failed:
# the course's checks, or the engine). A check that lost nothing has no fault ('').
STUDENT, GRADER = "student", "grader"


def worst(statuses):
    """The status of a submission to which all of `statuses` happened (`graded` if none)."""
    return min(statuses, key=STATUSES.index, default="graded")


@dataclass
class Check:
    name: str
    score: float
    max_score: float
    message: str = ""
    notebook: str = ""      # its notebook, in an nbgrader assignment ('' in a course file's)
    manual: bool = False    # left for a person (nbgrader's "needs manual grading"): 0 autograded points
    cause: str = ""         # the known mistake the message names ('' when it names none)
    fault: str = ""         # whose fault the lost points are: STUDENT or GRADER ('' if none lost)
    trace: str = ""         # GRADER: the traceback of the grader's failure, for the instructor only

    @property
    def label(self):
        """The check's name in details.csv: `<notebook>/<grade_id>` in an nbgrader assignment."""
        return f"{self.notebook}/{self.name}" if self.notebook else self.name


@dataclass
class Result:
    student_id: str
    assignment: str
    status: str
    checks: list
    notes: list = field(default_factory=list)  # what happened, for the instructor and the student
    fingerprint: str = ""
    flags: list = field(default_factory=list)  # what the code does to the grading, for the instructor
    seconds: dict = field(default_factory=dict)  # where the time went: start, imports, cells, checks
    submitted_at: str = ""  # as the LMS export or nbgrader's timestamp.txt says ('' if unknown)
    code: list = field(default_factory=list)  # [grade_id or None, source] of the student's own code cells
    notebooks: list = field(default_factory=list)  # an nbgrader assignment's notebooks: a page each
    errors: list = field(default_factory=list)  # tracebacks of the grader's own failures, for the instructor

    @property
    def score(self):
        return sum(c.score for c in self.checks)

    @property
    def max_score(self):
        return sum(c.max_score for c in self.checks)

    def to_json(self):
        return json.dumps(asdict(self), indent=1, ensure_ascii=False)

    @classmethod
    def from_json(cls, text):
        data = json.loads(text)
        return cls(**{**data, "checks": [Check(**c) for c in data["checks"]]})

    @property
    def grader_errors(self):
        """The grader's failures on this submission, with their tracebacks: for the instructor."""
        return [*self.errors, *(f"{c.label}: {c.trace}" for c in self.checks if c.trace)]


@dataclass
class Graded:
    """What grading one submission gives, as data: its Result, and what its feedback shows."""
    result: Result
    cells: list = None      # the graded notebook's cells (a course file's assignment) ...
    outputs: dict = None    # ... and the sandbox's output per cell
    notebooks: dict = None  # an nbgrader assignment's: {notebook: (its Result, cells, outputs)}
    reason: str = ""        # why it was not graded


def save(out, result, page, pages=None):
    """Write the feedback page (and an nbgrader assignment's `pages`, {notebook: page}), then the
    result: a result on disk always has its pages. Atomically, but not synced to the disk one by
    one (a sync waits ~10 ms, twice per notebook, with its worker idle): an interrupted run loses
    nothing, and `grade` syncs the batch's files once at its end; after a crash of the machine
    itself, a result or page left empty is graded again (`earlier_result`)."""
    for notebook, notebook_page in (pages or {}).items():
        write_atomic(out / "feedback" / NOTEBOOK_FEEDBACK.path(
            student_id=result.student_id, assignment=result.assignment, notebook=notebook), notebook_page,
                     durable=False)
    write_atomic(feedback_path(out, result.student_id, result.assignment), page, durable=False)
    write_atomic(result_path(out, result.student_id, result.assignment), result.to_json(), durable=False)


def feedback_path(out, student_id, name):
    return out / "feedback" / FEEDBACK.path(student_id=student_id, assignment=name)


def result_path(out, student_id, name):
    return out / "results" / student_id / f"{name}.json"


def earlier_result(out, submission, fingerprint):
    path = result_path(out, submission.student_id, submission.assignment)
    try:
        result = Result.from_json(path.read_text())
    except (OSError, ValueError, TypeError, KeyError):
        return None
    pages = [feedback_path(out, submission.student_id, submission.assignment)]
    pages += [out / "feedback" / NOTEBOOK_FEEDBACK.path(student_id=submission.student_id,
                                                        assignment=submission.assignment, notebook=notebook)
              for notebook in result.notebooks]
    return result if result.fingerprint == fingerprint and all(_written(page) for page in pages) else None


def _written(path):
    """Whether `path` is a file with something in it (not left empty by a crash before a sync)."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def load_results(course, out):
    """Every result in OUT/results, ordered by student and by the order of `course`'s assignments."""
    order = {name: i for i, name in enumerate(assignments(course))}
    results = []
    for path in sorted((Path(out) / "results").glob("*/*.json")):
        try:
            results.append(Result.from_json(path.read_text()))
        except (ValueError, TypeError, KeyError):
            continue  # not ours
    return sorted(results, key=lambda r: (r.student_id, order.get(r.assignment, len(order))))


def write_atomic(path, text, durable=True):
    """Write `text` to `path` so that readers see the old file or the new one, never half;
    `durable`: on the disk before it replaces the old one (else when the system writes it back)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp",
                                     encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        if durable:
            os.fsync(handle.fileno())
    os.replace(handle.name, path)
