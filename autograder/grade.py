"""`python -m autograder grade SUBMISSIONS --out OUT [--workers N]`.

Each submission is graded by nbgrader (autograde, then generate_feedback) in
a course directory of its own, copied from a template prepared once per run,
so that one broken submission can neither stop the batch nor touch another
student's gradebook. Scores come from nbgrader's gradebook; the one-sentence
reason of each failed check comes from the autograded notebook.

Outputs, written atomically (a file is complete or absent):
  OUT/grades.csv   student_id,assignment,score,max_score,status
  OUT/details.csv  student_id,assignment,check,score,max_score,message
  OUT/feedback/<student_id>/<assignment>.html
"""

import csv
import html
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from .course import SOURCE, assignments, make_course_dir, nbgrader
from .preprocessors import cell_message

# Student ids become folder names: letters, digits and a few separators only.
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}$")
SUBMISSION_TIMEOUT = 600  # seconds for a whole notebook (a cell has Execute.timeout)
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024

GRADES_COLUMNS = ["student_id", "assignment", "score", "max_score", "status"]
DETAILS_COLUMNS = ["student_id", "assignment", "check", "score", "max_score", "message"]


@dataclass
class Submission:
    student_id: str
    assignment: str
    path: Path


@dataclass
class Check:
    name: str
    score: float
    max_score: float
    message: str = ""


@dataclass
class Result:
    submission: Submission
    status: str
    checks: list = field(default_factory=list)

    @property
    def score(self):
        return sum(c.score for c in self.checks)

    @property
    def max_score(self):
        return sum(c.max_score for c in self.checks)


def grade(submissions, out, workers=None, log=None):
    """Grade every submission under `submissions` (a folder or a .zip) into `out`."""
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    out = Path(out)
    workers = workers or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        tmp = Path(tmp)
        folder = _unpack(Path(submissions), tmp / "unpacked", log)
        batch = _collect(folder, log)
        names = [name for name in assignments() if any(s.assignment == name for s in batch)]
        template = _prepare_template(tmp / "template", names)
        checks = {name: _checks_of(name) for name in names}
        done = []

        def grade_and_report(submission):
            feedback = out / "feedback" / submission.student_id / f"{submission.assignment}.html"
            result = _grade_one(submission, template, checks[submission.assignment], tmp, feedback)
            done.append(result)
            log(f"[{len(done)}/{len(batch)}] {submission.student_id} {submission.assignment}: "
                f"{result.status} {_number(result.score)}/{_number(result.max_score)}")
            return result

        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(grade_and_report, batch))
    _write_outputs(out, results)
    return results


# -- input -----------------------------------------------------------------

def _unpack(path, destination, log):
    """The folder of submissions: `path` itself, or a zip extracted safely."""
    if path.is_dir():
        return path
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is neither a folder nor a .zip of submissions")
    destination.mkdir(parents=True)
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            parts = Path(member.filename).parts
            is_link = stat.S_ISLNK(member.external_attr >> 16)
            if member.is_dir():
                continue
            if is_link or member.filename.startswith("/") or ".." in parts or not parts:
                log(f"skipped {member.filename!r} in {path.name}: not a plain relative file")
                continue
            if member.file_size > MAX_NOTEBOOK_BYTES:
                log(f"skipped {member.filename!r} in {path.name}: larger than {MAX_NOTEBOOK_BYTES} bytes")
                continue
            target = destination.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(target, "wb") as sink:
                shutil.copyfileobj(source, sink)
    # A zip of the folder itself holds one top folder around the student folders.
    entries = list(destination.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not any(entries[0].glob("*.ipynb")):
        return entries[0]
    return destination


def _collect(folder, log):
    """Submissions `<student_id>/<assignment>.ipynb` under `folder`; the rest is reported."""
    known = set(assignments())
    batch = []
    for student_dir in sorted(folder.iterdir()):
        if student_dir.is_symlink() or not student_dir.is_dir():
            log(f"skipped {student_dir.name!r}: not a student folder")
            continue
        if not STUDENT_ID.match(student_dir.name):
            log(f"skipped {student_dir.name!r}: not a valid student id")
            continue
        for path in sorted(student_dir.iterdir()):
            assignment = path.stem if path.suffix == ".ipynb" else None
            if assignment not in known or path.is_symlink() or not path.is_file():
                log(f"skipped {student_dir.name}/{path.name}: not <assignment>.ipynb "
                    f"for one of {sorted(known)}")
                continue
            batch.append(Submission(student_dir.name, assignment, path))
    return batch


# -- grading ---------------------------------------------------------------

def _prepare_template(root, names):
    """A course directory whose gradebook knows every assignment of the batch."""
    course = make_course_dir(root, names)
    for name in names:
        result = nbgrader(course, "generate_assignment", name, "--force")
        if result.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {name} failed:\n{result.stderr}")
    return course


def _checks_of(name):
    """The graded cells of an assignment, in notebook order: [(grade_id, points)]."""
    notebook = nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)
    return [(meta["grade_id"], float(meta["points"]))
            for meta in (c.metadata.get("nbgrader", {}) for c in notebook.cells)
            if meta.get("grade")]


def _grade_one(submission, template, checks, tmp, feedback_path):
    """Grade one submission, write its feedback page to `feedback_path`, return its result."""
    def not_graded(status, reason):
        return _not_graded(submission, checks, feedback_path, status, reason)

    try:
        if submission.path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return not_graded("unreadable", f"the file is larger than {MAX_NOTEBOOK_BYTES} bytes")
        notebook = nbformat.read(submission.path, as_version=4)
        nbformat.validate(notebook)
    except Exception as error:  # invalid JSON, not a notebook, empty, unreadable
        return not_graded("unreadable", f"the file is not a valid notebook ({_first_line(error)})")

    course = tmp / "courses" / f"{submission.student_id}--{submission.assignment}"
    shutil.copytree(template, course)
    try:
        return _autograde(submission, course, checks, feedback_path)
    finally:
        shutil.rmtree(course, ignore_errors=True)  # a batch of thousands must not fill the disk


def _autograde(submission, course, checks, feedback_path):
    """nbgrader autograde and generate_feedback on `submission` in `course`."""
    student, name = submission.student_id, submission.assignment

    def not_graded(status, reason, graded=None):
        return _not_graded(submission, checks, feedback_path, status, reason, graded)

    submitted = course / "submitted" / student / name
    submitted.mkdir(parents=True)
    shutil.copy(submission.path, submitted / f"{name}.ipynb")
    try:
        result = nbgrader(course, "autograde", name, "--student", student, "--force",
                          timeout=SUBMISSION_TIMEOUT)
    except subprocess.TimeoutExpired:
        return not_graded("timeout", f"grading took longer than {SUBMISSION_TIMEOUT} s")
    autograded = course / "autograded" / student / name / f"{name}.ipynb"
    if result.returncode != 0 or not autograded.is_file():
        return not_graded("crashed", _nbgrader_error(result.stderr))

    scores = _scores(course, name, student)
    messages = _messages(nbformat.read(autograded, as_version=4))
    graded = [Check(check, scores.get(check, 0.0), points,
                    messages.get(check, "") if scores.get(check, 0.0) < points else "")
              for check, points in checks]
    feedback = nbgrader(course, "generate_feedback", name, "--student", student, "--force")
    feedback_file = course / "feedback" / student / name / f"{name}.html"
    if feedback.returncode != 0 or not feedback_file.is_file():
        return not_graded("crashed", "its feedback could not be generated", graded)
    _write_atomic(feedback_path, feedback_file.read_text())
    return Result(submission, "graded", graded)


def _not_graded(submission, checks, feedback_path, status, reason, graded=None):
    """The result of a submission that could not be graded, and its feedback page."""
    _write_atomic(feedback_path, _not_graded_html(submission, status, reason))
    return Result(submission, status, graded or
                  [Check(check, 0.0, points, f"not graded: {reason}") for check, points in checks])


def _scores(course, name, student):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(name, name, student)
        return {grade.name: float(grade.score) for grade in notebook.grades}


def _messages(notebook):
    """grade_id -> why the check cell lost its points, from its outputs."""
    return {cell.metadata["nbgrader"]["grade_id"]: cell_message(cell)
            for cell in notebook.cells
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")}


def _nbgrader_error(stderr):
    """The last error nbgrader logged, as the reason a submission was not graded."""
    if "DeadKernelError" in stderr:
        return "the notebook's Python process died while it ran (os._exit, a crash, or out of memory)"
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "[ERROR]" in line or "Error" in line] or lines
    return _first_line(errors[-1]) if errors else "nbgrader failed without a message"


def _first_line(text):
    text = str(text).strip()
    return text.splitlines()[0][:300] if text else ""


def _number(x):
    return f"{x:g}"


# -- output ----------------------------------------------------------------

def _write_outputs(out, results):
    order = {name: i for i, name in enumerate(assignments())}
    results = sorted(results, key=lambda r: (r.submission.student_id, order[r.submission.assignment]))
    _write_csv(out / "grades.csv", GRADES_COLUMNS, [
        [r.submission.student_id, r.submission.assignment, _number(r.score), _number(r.max_score), r.status]
        for r in results])
    _write_csv(out / "details.csv", DETAILS_COLUMNS, [
        [r.submission.student_id, r.submission.assignment, c.name, _number(c.score), _number(c.max_score),
         c.message]
        for r in results for c in r.checks])


def _write_csv(path, columns, rows):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    _write_atomic(path, buffer.getvalue())


def _write_atomic(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp",
                                     encoding="utf-8") as handle:
        handle.write(text)
    os.replace(handle.name, path)


def _not_graded_html(submission, status, reason):
    title = f"{submission.assignment}: {submission.student_id}"
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"</head><body><h1>{html.escape(title)}</h1><p>Your submission was not graded "
            f"(<b>{html.escape(status)}</b>): {html.escape(reason)}.</p>"
            f"<p>Score: 0. Ask your instructor if you believe this is a mistake.</p></body></html>\n")
