"""`python -m autograder grade SUBMISSIONS --out OUT [--workers N] [--shard I/N]` and `merge`.

Every point is decided outside the student's process. For each submission:

1. the notebook is read and fitted onto the released assignment
   (`assignment.fit`: check cells as released, structure problems noted);
2. its cells run in a bubblewrap sandbox (`sandbox.Sandbox`): the student's
   code, and the visible checks, whose results only ever take points away;
3. the hidden checks run here, in the grader, on inputs drawn from a secret
   seed; they call the student's functions through proxies that send plain
   data to the sandbox and get plain data back, and compare with the
   reference (the course's checks package, named in its course file).

Submissions are graded in parallel by worker processes. Each finished
submission is written at once, atomically, to OUT/results/<student>/<assignment>.json
and its feedback page, so an interrupted run loses nothing and a re-run
grades only what is new or changed (same notebook, same grader: same result).
grades.csv, details.csv and summary.html are rebuilt from OUT/results at the
end of every run and by `merge`, which combines the OUT folders of shards
(`results` keeps the results; `feedback`, `summary` and `report` render them).
"""

import hashlib
import hmac
import multiprocessing
import os
import re
import secrets
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import assignment as assignments_
from . import deadlines, feedback, harness, progress, tasks, timing
from .checking import CheckFailed
from . import nbgrader_course
from .collect import (FLAT, LMS_PATTERN, MAX_NOTEBOOK_BYTES, NBGRADER, SUBMITTED, Submission, collect,
                      notebooks, problem_of, refused_rows, unpack)
from .course import ENGINE, assignments
from .flags import flags
from .messages import caused_by, failure_message
from .results import Check, Result, earlier_result, result_path, save, write_atomic, write_reports
from .sandbox import Limits, Sandbox, SandboxStopped, Timeouts, check_available

# A submission's status: `graded`, or the worst thing that happened to it.
STATUSES = ["missing", "link", "not-a-file", "too-large", "unreadable", "unsupported-kernel", "crashed", "timeout",
            "resource-limit", "invalid-structure", "graded"]
RESTARTS = 2  # times a sandbox that died during the hidden checks is started again
# Sandboxes run as an ordinary user of their own: BASE_UID + the grading process's id (mod
# UID_RANGE), so that concurrent workers, and concurrent batches, count their processes apart.
BASE_UID, UID_RANGE = 100_000, 100_000


# -- the batch -------------------------------------------------------------------

def grade(course, submissions, out, workers=None, shard=None, secret=None, limits=Limits(), log=None,
          lms_pattern=None, deadline=None):
    """Grade every submission of `course` under `submissions` (a folder or a .zip) into `out`.

    `shard` = (i, n) grades only the students of share i of n (1-based);
    `deadline` (a deadlines.Policy, or None) is applied to the reports.
    Returns the results of this run; OUT holds those of earlier runs too.
    A batch with no submission at all is a ValueError.

    For an nbgrader course graded in its own submitted_directory (`submissions`
    is the course folder or that folder), the engine also writes what
    `nbgrader autograde` writes: autograded/<student>/<assignment>/ and the
    course's gradebook (`autograde_outputs`).
    """
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    check_available()
    if not course.nbgrader and tasks.placeholder_base_url(course):
        log(f"warning: html.baseurl in {course.book_config.name} is still the template's "
            f"{tasks.base_url(course)}: the feedback links to the chapters lead nowhere until it is the "
            "published site's address (README: before publishing)")
    out = Path(out)
    (out / "results").mkdir(parents=True, exist_ok=True)  # even for a shard with no students
    key = _secret_key(Path(secret) if secret else out / "secret.key")
    deadlines.save(out, deadline)
    version = _grader_version(course, limits)
    autograded = None
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        refused = []
        folder = unpack(Path(submissions), Path(tmp) / "unpacked", log, refused)
        if course.nbgrader:  # the folder of submissions, found as the course configures it
            folder, own = nbgrader_course.batch_folder(course.root, folder)
            autograded = course.root if own else None
        found = collect(folder, set(assignments(course)), log, lms_pattern or LMS_PATTERN,
                        submitted=None if course.nbgrader else SUBMITTED)
        found += refused_rows(refused, set(assignments(course)), found)
        if not found:
            raise ValueError(f"no submission of {', '.join(assignments(course))} in {submissions}: "
                             f"expected {FLAT.pattern} or {NBGRADER.pattern} (or an LMS export, see "
                             "--lms-pattern)")
        students = sorted({s.student_id for s in found})
        names = [name for name in assignments(course) if any(s.assignment == name for s in found)]
        if shard:
            students = [s for s in students if in_shard(s, *shard)]
        if course.nbgrader:  # nbgrader's steps are imported once, before the workers fork
            for name in names:
                nbgrader_course.load(course.root, name)
        by_key = {(s.student_id, s.assignment): s for s in found}
        todo, results = [], []
        for student in students:
            for name in names:
                submission = by_key.get((student, name)) or Submission(student, name, None)
                fingerprint = _fingerprint(submission, version)
                earlier = earlier_result(out, submission, fingerprint)
                if earlier and autograded and submission.path and not nbgrader_course.autograded_folder(
                        autograded, student, name).is_dir():
                    earlier = None  # its autograded/ folder is gone: grade it again to write it
                if earlier and earlier.submitted_at != submission.timestamp:  # same notebook, new time
                    earlier.submitted_at = submission.timestamp
                    write_atomic(result_path(out, student, name), earlier.to_json())
                if earlier:
                    results.append(earlier)
                else:
                    todo.append((submission, fingerprint))
        if results:
            log(f"{len(results)} submissions already graded by this grader in {out}: kept")
        results += _grade_all(course, todo, out, key, limits, workers or os.cpu_count() or 1, log, autograded)
    write_reports(course, out)
    os.sync()  # the results and pages that `save` wrote without a sync each, on the disk at once
    if autograded and shard:  # shards would replace each other's gradebook: it comes after `merge`
        log(f"wrote {nbgrader_course.step_folder(course.root, 'autograded_directory')}; once the shards are "
            f"merged, `export OUT --to nbgrader --output {nbgrader_course.database(course.root)}` fills the "
            "course's gradebook")
    elif autograded:
        autograde_outputs(course, out, names, log)
    return results


def autograde_outputs(course, out, names, log):
    """The course's gradebook (CourseDirectory.db_url) with the results of `out` for `names`, as
    `nbgrader autograde` leaves it (export.to_nbgrader): the formgrader, `nbgrader
    generate_feedback` and `nbgrader export` carry on from there."""
    from . import export

    database = nbgrader_course.database(course.root)
    scores, _, _ = export.read_grades(course, out)
    export.to_nbgrader(course, out, database, scores, names)
    log(f"wrote {nbgrader_course.step_folder(course.root, 'autograded_directory')} and the gradebook "
        f"{database}, as nbgrader autograde does")


def in_shard(student_id, index, count):
    """Whether `student_id` belongs to share `index` (1-based) of `count`: stable everywhere."""
    digest = hashlib.sha256(student_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count == index - 1


def _grade_all(course, todo, out, key, limits, workers, log, autograded=None):
    bar = progress.Progress(len(todo), log)
    results = []
    if workers == 1 or len(todo) <= 1:
        for submission, fingerprint in todo:
            results.append(_grade_or_report(course, submission, fingerprint, out, key, limits, autograded))
            bar.update(results[-1])
    else:
        context = multiprocessing.get_context("fork")  # workers start as copies: nothing to import
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            futures = [pool.submit(_grade_or_report, course, s, f, out, key, limits, autograded) for s, f in todo]
            for future in as_completed(futures):
                results.append(future.result())
                bar.update(results[-1])
    bar.close()
    return results


def _grade_or_report(course, submission, fingerprint, out, key, limits, autograded=None):
    """grade_one, or a `crashed` result if the grader itself fails (the batch goes on); then its
    feedback rendered and the result with its pages written into `out` (and, for an nbgrader
    course graded in place, its autograded/ folder under `autograded`, the course's root)."""
    try:
        graded = grade_one(course, submission, fingerprint, key, limits)
    except Exception as error:
        graded = _not_graded(course, submission, "crashed", f"the grader failed on it ({error})")
    save(out, graded.result, *feedback.render(course, graded))
    if autograded and graded.notebooks and submission.path.is_dir():  # failing here is the disk's, not the student's
        nbgrader_course.write_autograded(autograded, nbgrader_course.load(autograded, submission.assignment),
                                         submission, graded.notebooks)
    return graded.result


# -- one submission ----------------------------------------------------------------

@dataclass
class Graded:
    """What grading one submission gives, as data: its Result, and what its feedback shows."""
    result: Result
    cells: list = None      # the graded notebook's cells (a course file's assignment) ...
    outputs: dict = None    # ... and the sandbox's output per cell
    notebooks: dict = None  # an nbgrader assignment's: {notebook: (its Result, cells, outputs)}
    reason: str = ""        # why it was not graded


def grade_one(course, submission, fingerprint, key, limits=Limits()):
    """Grade one submission of `course`: its Graded (nothing is written; `feedback.render` and
    `results.save` come after)."""
    if submission.problem:
        return _not_graded(course, submission, *submission.problem, fingerprint)
    if submission.path is None:
        return _not_graded(course, submission, "missing", "no notebook was handed in", fingerprint)
    if course.nbgrader:
        return _grade_nbgrader(course, submission, fingerprint, limits)
    path = notebooks(submission, [submission.assignment]).get(submission.assignment)
    problem = problem_of(path)
    if problem:
        return _not_graded(course, submission, *problem, fingerprint)
    try:
        notebook = read_notebook(path)
    except ValueError as error:
        return _not_graded(course, submission, "unreadable", str(error), fingerprint)

    spec = assignments_.load(course, submission.assignment)
    cells, problems = assignments_.fit(spec, notebook)
    code = assignments_.own_code(spec, cells)
    released = {cell.source for cell in spec.cells}
    flagged = flags(course, [cell.source for cell in notebook.cells
                     if cell.cell_type == "code" and cell.source not in released])
    sandbox = sandbox_for(course, submission.assignment, cells, limits)
    secret = _seed(key, fingerprint)
    try:
        try:
            outputs = {output["id"]: output for output in sandbox.run()}
        except SandboxStopped as stop:
            return _not_graded(course, submission, stop.status, stop.reason, fingerprint, problems, flagged, code)
        visible = {assignments_.grade_id(cell): outputs.get(str(i)) for i, cell in enumerate(cells)}
        earlier = _earlier_cells(spec, cells, outputs, sandbox.places)
        checks, restarts, started, cpu = [], 0, time.monotonic(), time.process_time()
        seconds = sandbox.seconds
        for test in spec.tests:
            if not sandbox.alive and restarts < RESTARTS and time.monotonic() < sandbox.deadline:
                # (past the deadline a fresh sandbox would only start, under load for seconds, to stop)
                sandbox, restarts = _restart(sandbox), restarts + 1
            sandbox.task = tasks.titles(course, submission.assignment).get(test.grade_id)  # for its messages
            checks.append(run_test(test, visible.get(test.grade_id), sandbox, secret, earlier.get(test.grade_id, [])))
        seconds = {**seconds, "checks": time.monotonic() - started, "checks CPU": time.process_time() - cpu}
    finally:
        sandbox.close()
    statuses = [status for status, _ in sandbox.events] + ["invalid-structure"] * bool(problems)
    status = min(statuses, key=STATUSES.index, default="graded")
    notes = problems + [reason for _, reason in sandbox.events]
    result = Result(submission.student_id, submission.assignment, status, checks, notes, fingerprint, flagged,
                    {phase: round(s, 4) for phase, s in seconds.items()},
                    submitted_at=submission.timestamp, code=code)
    return Graded(result, cells, outputs)


def _grade_nbgrader(course, submission, fingerprint, limits):
    """Grade one submission of an nbgrader course as `nbgrader autograde` does (nbgrader_course):
    every notebook of the assignment, its test cells run in its sandbox; one result, a page per
    notebook."""
    root = course.root
    spec = nbgrader_course.load(root, submission.assignment)
    paths = notebooks(submission, [notebook.name for notebook in spec.notebooks])
    checks, notes, statuses, flagged, code, pages, seconds = [], [], [], [], [], {}, {}
    for notebook in spec.notebooks:
        label = spec.label(notebook)
        problem = problem_of(paths.get(notebook.name), f"{notebook.name}.ipynb was not handed in")
        if problem is None:
            try:
                submitted = read_notebook(paths[notebook.name])
            except ValueError as error:
                problem = ("unreadable", str(error))
        if problem is None:
            language, kernel_note = nbgrader_course.kernel(notebook, submitted)
            if language != "python":
                problem = ("unsupported-kernel", f"its kernel runs {language}, and this engine grades Python "
                                                 "notebooks only: grade it with nbgrader")
        if problem:  # its cells score 0, as nbgrader scores a notebook not handed in
            status, reason = problem
            statuses.append(status)
            notes.append(f"{notebook.name}.ipynb: {reason}")
            checks += [Check(cell_id, 0.0, points, f"not graded: {reason}", label)
                       for cell_id, points in notebook.points.items()]
            continue
        cells, problems = nbgrader_course.sanitize(root, notebook, submitted)
        released = {cell.source for cell in notebook.cells}
        flagged += flags(course, [cell.source for cell in cells if cell.cell_type == "code" and cell.source not in released])
        code += [[nbgrader_course.nbgrader_meta(cell).get("grade_id"), cell.source] for cell in cells
                 if cell.cell_type == "code" and not nbgrader_course.is_locked(cell)]
        folder = submission.path if submission.path.is_dir() else None
        sandbox = Sandbox([(str(i), cell.source) for i, cell in enumerate(cells) if cell.cell_type == "code"],
                          limits, uid=BASE_UID + os.getpid() % UID_RANGE, timeouts=Timeouts(),
                          files=nbgrader_course.notebook_files(root, spec, folder), hidden=course.packages)
        ids = [nbgrader_course.nbgrader_meta(cell).get("grade_id") for cell in cells]
        sandbox.places = {str(i): f"the cell `{cell_id}`" if cell_id else f"cell {i + 1} of {notebook.name}.ipynb"
                          for i, cell_id in enumerate(ids)}
        try:
            outputs = {output["id"]: output for output in sandbox.run()}
        except SandboxStopped:
            outputs = {}  # recorded in its events: no test cell earns a point
        finally:
            sandbox.close()
        here = [status for status, _ in sandbox.events] + ["invalid-structure"] * bool(problems)
        happened = [kernel_note] * bool(kernel_note) + problems + [reason for _, reason in sandbox.events]
        statuses += here
        notes += [f"{notebook.name}.ipynb: {note}" for note in happened]
        seconds = {phase: seconds.get(phase, 0.0) + value for phase, value in sandbox.seconds.items()}
        found = [Check(cell_id, got, points, message, label, manual) for cell_id, got, points, message, manual
                 in nbgrader_course.score(root, notebook, cells, outputs)]
        checks += found
        page = Result(submission.student_id, f"{submission.assignment}/{notebook.name}.ipynb",
                      min(here, key=STATUSES.index, default="graded"), found, happened)
        pages[notebook.name] = (page, cells, outputs)
    if pages:  # a notebook handed in: the submission is not missing, only that notebook
        statuses = [status for status in statuses if status != "missing"]
    status = min(statuses, key=STATUSES.index, default="graded")
    result = Result(submission.student_id, submission.assignment, status, checks, notes, fingerprint, flagged,
                    {phase: round(s, 4) for phase, s in seconds.items()}, submitted_at=submission.timestamp,
                    code=code, notebooks=list(pages))
    return Graded(result, notebooks=pages)


def read_notebook(path):
    """The notebook at `path`, validated; ValueError with one sentence if it is not one."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES} bytes")
        notebook = nbformat.read(path, as_version=4)
        if notebook.nbformat_minor < 5 and any("id" in cell for cell in notebook.cells):
            # nbgrader's generate_assignment gives a 4.4 notebook's cells ids, which 4.5 brought in;
            # Jupyter and stock autograde read such a notebook as 4.5, and so do we.
            notebook.nbformat_minor = 5
        nbformat.validate(notebook)
    except Exception as error:  # invalid JSON, not a notebook, empty, unreadable
        raise ValueError(f"the file is not a valid notebook ({_first_line(error)})") from None
    return notebook


def _restart(sandbox):
    """A fresh sandbox for the remaining checks: the last one died or was stopped."""
    sandbox.close()
    fresh = Sandbox(submission=sandbox.submission)  # the same state: no new time, nor new calls of what ran out of it
    try:
        fresh.run()
    except SandboxStopped:
        pass  # recorded in its events; the remaining checks are not graded
    return fresh


def _earlier_cells(spec, cells, outputs, places):
    """{grade_id of a check cell: [(where, source, error, the student's own)] of the code cells that
    ran before it}, for `messages.caused_by`."""
    course = {assignments_.grade_id(c) for c in spec.cells} - spec.solutions - {None}
    ran, earlier = [], {}
    for index, cell in enumerate(cells):
        output = outputs.get(str(index)) if cell.cell_type == "code" else None
        if output is None:
            continue
        earlier.setdefault(assignments_.grade_id(cell), list(ran))
        ran.append((places.get(str(index), "a cell"), cell.source, output["error"],
                    assignments_.grade_id(cell) not in course))
    return earlier


def run_test(test, visible, sandbox, secret, earlier=()):
    """The Check of one check cell: its visible part ran in the sandbox, its hidden part runs here,
    on inputs drawn with the submission's `secret`. Where the visible part failed, its message
    stands, with the mistake the hidden part names when it names one (`_with_cause`); a name it
    lacks is said to be missing because of the student's cell that was to define it and raised,
    when that cell alone explains it (`caused_by`, `earlier` the cells that ran before)."""
    def failed(message, cause=None):
        if visible is not None and visible["error"] is not None:
            message = (caused_by(visible["error"], earlier)
                       or _with_cause(failure_message(visible["error"]), cause))
        return Check(test.grade_id, 0.0, test.points, message)

    if visible is None:
        return failed("not graded: the notebook stopped before this check ran")
    if not sandbox.alive:
        return failed("not graded: the notebook's process had stopped before this check ran")
    namespace = dict(sandbox.functions)
    try:
        with harness.secret(secret), harness.answering() as stood_in:
            exec(compile(test.hidden, f"<hidden checks of {test.grade_id}>", "exec"), namespace)
    except CheckFailed as failure:
        return failed(str(failure), failure.cause)
    except SandboxStopped as stop:
        return failed(f"not graded: {stop.reason}")
    except NameError as error:
        name = getattr(error, "name", None) or str(error)
        return failed(caused_by({"ename": "NameError", "evalue": f"name '{name}' is not defined"}, earlier)
                      or f"{name} is not defined in the notebook (was its cell deleted or renamed, "
                         "or did it fail to run?)")
    except Exception as error:  # the student's result broke a check: it is not right
        return failed(f"{type(error).__name__}: {_first_line(error)}")
    if visible["error"] is not None and stood_in:
        # The hidden checks, which include the visible check's cases, passed with the reference's
        # versions of the student's other functions standing in: the visible failure came from those
        # (whose own checks take their points), not from this task's code.
        return Check(test.grade_id, test.points, test.points,
                     f"Right when judged with a correct {' and '.join(sorted(stood_in))}; in the notebook, "
                     f"{failure_message(visible['error'])}")
    if visible["error"] is not None:
        return failed("")
    return Check(test.grade_id, test.points, test.points)


def _with_cause(message, cause):
    """The visible check's message, and the one mistake the hidden check found in the same function
    (named only when it alone explains the values; the hidden inputs are never shown). Not beside NaN
    or inf: the cause explains values the hidden check saw, not where the visible check's NaN came from."""
    if not cause or cause in message or re.search(r"\bNaN\b|\binf\b", message):
        return message
    return f"{message.rstrip('.')}. The hidden checks find why: {cause}."


def sandbox_for(course, name, cells, limits):
    """The sandbox that runs the fitted `cells` of assignment `name` of `course`: its code cells, by
    index, with the time limits derived from the reference's times (timing.py)."""
    code = [(str(i), cell.source) for i, cell in enumerate(cells) if cell.cell_type == "code"]
    timeouts = timing.timeouts(course, name, [(str(i), assignments_.grade_id(cell)) for i, cell in enumerate(cells)],
                               limits)
    sandbox = Sandbox(code, limits, uid=BASE_UID + os.getpid() % UID_RANGE, timeouts=timeouts, hidden=course.packages)
    sandbox.places = tasks.places(course, name, cells)  # its messages name the task, not a cell number
    sandbox.own_cells = assignments_.own_cells(assignments_.load(course, name), cells)  # errors' places
    return sandbox


def _not_graded(course, submission, status, reason, fingerprint="", notes=(), flagged=(), code=()):
    if course.nbgrader:
        spec = nbgrader_course.load(course.root, submission.assignment)
        checks = [Check(cell_id, 0.0, points, f"not graded: {reason}", spec.label(notebook))
                  for notebook in spec.notebooks for cell_id, points in notebook.points.items()]
    else:
        checks = [Check(t.grade_id, 0.0, t.points, f"not graded: {reason}")
                  for t in assignments_.load(course, submission.assignment).tests]
    result = Result(submission.student_id, submission.assignment, status, checks,
                    [*notes, reason], fingerprint, list(flagged), submitted_at=submission.timestamp,
                    code=list(code))
    return Graded(result, reason=reason)


# -- secrets and fingerprints ----------------------------------------------------------

def _secret_key(path):
    """The batch's secret key (created on first use): the checks' inputs derive from it."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
    return bytes.fromhex(path.read_text().strip())


def _seed(key, fingerprint):
    """The secret of the checks' inputs for one submission: new for every notebook handed in,
    so that inputs a notebook revealed (in an error message, say) are of no use to the next."""
    return int.from_bytes(hmac.new(key, fingerprint.encode(), hashlib.sha256).digest()[:8], "big")


# The engine's modules that decide a grade (not the reports, exports or command line: a
# change there regrades nothing).
GRADING_MODULES = ("assignment", "checking", "collect", "flags", "grade", "harness", "memory", "messages",
                   "protocol", "runner", "sandbox", "standins", "student", "timing")


def _engine_files(modules):
    """The files of the engine's `modules` (a package: all its modules)."""
    return [path for module in modules
            for path in (sorted((ENGINE / module).glob("*.py")) if (ENGINE / module).is_dir()
                         else [ENGINE / f"{module}.py"])]


def graded_files(course):
    """The files whose contents decide a grade of `course`: the grading code, the course's checks
    and references, its released and instructor notebooks and the reference's times."""
    if course.nbgrader:
        return [*_engine_files(GRADING_MODULES + ("nbgrader_course",)),
                course.file, *sorted(path for path in course.source.rglob("*") if path.is_file())]
    return [*_engine_files(GRADING_MODULES),
            *(path for package in (course.checks, *course.references) for path in course.package_files(package)),
            *sorted(course.exercises.glob("*.ipynb")), *sorted(course.source.rglob("*.ipynb")),
            *sorted(course.source.rglob("timing.json"))]


def _grader_version(course, limits):
    """A digest of everything that decides a grade: `graded_files` and the limits."""
    digest = hashlib.sha256(repr(limits).encode())
    for path in graded_files(course):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _fingerprint(submission, version):
    if submission.problem:  # never read: a link, not a file, too large
        content = repr(submission.problem).encode()
    elif submission.path and submission.path.is_dir():  # nbgrader's layout: its notebooks and files
        content = b"".join(path.name.encode() + b"\0" + (repr(problem_of(path)).encode() if problem_of(path)
                                                        else path.read_bytes())
                           for path in sorted(submission.path.glob("*.ipynb")))
        content += b"".join(relative.encode() + b"\0" + path.read_bytes()
                            for relative, path in _other_files(submission.path))
    else:
        content = submission.path.read_bytes() if submission.path else b"<missing>"
    return hashlib.sha256(version.encode() + hashlib.sha256(content).digest()).hexdigest()


def _other_files(folder):
    """[(relative path, path)] of the regular files under `folder` other than its notebooks and its
    timestamp.txt (links not followed), sorted."""
    found = []
    for here, _, files in os.walk(folder):
        for name in files:
            path = Path(here) / name
            own = path.parent == folder and (path.suffix == ".ipynb" or name == "timestamp.txt")
            if path.is_file() and not path.is_symlink() and not own:
                found.append((path.relative_to(folder).as_posix(), path))
    return sorted(found)


def _first_line(text):
    text = str(text).strip()
    return text.splitlines()[0][:300] if text else ""
