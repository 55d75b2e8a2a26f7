"""What grading produces, as data, and where it is kept: a Result per student and assignment, with
a Check per check cell, in OUT/results/<student>/<assignment>.json, each written atomically with
its feedback page; and the reports rebuilt from every result in OUT (grades.csv, details.csv,
summary.html), also when `merge` combines the OUT folders of shards. Grading (`grade`) makes the
results; this module keeps them; `report`, `feedback` and `summary` render them.
"""

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import deadlines, feedback, report, summary
from .collect import Layout
from .course import assignments

# OUT/feedback/: one page per student and assignment; an nbgrader assignment's page links to a
# page per notebook
FEEDBACK = Layout("{student_id}/{assignment}.html")
NOTEBOOK_FEEDBACK = Layout("{student_id}/{assignment}/{notebook}.html")


@dataclass
class Check:
    name: str
    score: float
    max_score: float
    message: str = ""
    notebook: str = ""      # its notebook, in an nbgrader assignment ('' in a course file's)
    manual: bool = False    # left for a person (nbgrader's "needs manual grading"): 0 autograded points

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


def write_reports(course, out):
    """grades.csv, details.csv and summary.html from every result in OUT."""
    results, policy = load_results(course, out), deadlines.load(out)
    write_atomic(out / "grades.csv", report.grades_csv(results, policy))
    write_atomic(out / "details.csv", report.details_csv(results))
    similarity = {path.stem for path in (out / "similarity").glob("*.html")}  # `similarity` wrote them
    write_atomic(out / "summary.html", summary.summary_html(course, results, policy, similarity))
    for result in results:  # what the deadline did, on the student's page
        page = feedback_path(out, result.student_id, result.assignment)
        try:
            text = page.read_text(encoding="utf-8")
        except OSError:
            continue
        updated = feedback.with_deadline(text, result, policy)
        if updated != text:
            write_atomic(page, updated)


def merge(course, outs, out):
    """Combine the OUT folders of shards into `out` and rebuild its reports."""
    out = Path(out)
    policies = [policy for policy in map(deadlines.load, outs) if policy]
    if any(policy != policies[0] for policy in policies):
        raise ValueError("the shards were graded with different deadlines (their deadlines.json differ)")
    out.mkdir(parents=True, exist_ok=True)
    deadlines.save(out, policies[0] if policies else None)
    for source in map(Path, outs):
        for folder in ("feedback", "results"):
            for path in sorted((source / folder).rglob("*")):
                if path.is_file() and not path.is_symlink():
                    target = out / folder / path.relative_to(source / folder)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
    write_reports(course, out)
    return load_results(course, out)


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
