"""`python -m autograder grade SUBMISSIONS --out OUT [--workers N] [--shard I/N]`.

Every point is decided outside the student's process. One pipeline grades each submission,
whatever the kind of its course (`kinds`: a course file's, or an nbgrader course's):

1. read: each notebook of the assignment, refused with a status if it cannot be (`kinds`);
2. fit: onto the released assignment (`assignment.fit`, or nbgrader's sanitising steps):
   cells as released, structure problems noted;
3. run: its cells in a bubblewrap sandbox (`sandboxes`, `sandbox.Sandbox`): the student's
   code, and the visible checks, whose results only ever take points away;
4. check: the hidden checks run here, in the grader, on inputs drawn from a secret seed
   (`hidden`); they call the student's functions through proxies that send plain data to the
   sandbox and get plain data back, and compare with the reference (the course's checks
   package, named in its course file); an nbgrader notebook's test cells are scored from what
   they did;
5. judge: one Result of the submission, with the status of the worst that happened
   (`results.STATUSES`: a grader's own failure is `grader error`, never the student's);
6. save: its feedback rendered (`feedback`) and written with the result (`results.save`).

Submissions are graded in parallel by worker processes. Each finished
submission is written at once, atomically, to OUT/results/<student>/<assignment>.json
and its feedback page, so an interrupted run loses nothing and a re-run
grades only what is new or changed (same notebook, same grader: same result; the
grader's version is a digest of every file of the engine and of the course's graded
material). grades.csv, details.csv and summary.html are rebuilt from OUT/results at the
end of every run and by `merge` (`reports`).
"""

import hashlib
import hmac
import multiprocessing
import os
import secrets
import sys
import tempfile
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from . import blas, deadlines, feedback, kinds, progress
from .collect import FLAT, LMS_PATTERN, NBGRADER, Submission, collect, notebooks, problem_of, refused_rows, unpack
from .course import ENGINE, assignments, source_files
from .reports import write_reports
from .results import GRADER_ERROR, Graded, Result, earlier_result, result_path, save, write_atomic
from .sandbox import Limits, check_available

MISSING = ("missing", "no notebook was handed in")
GRADER_FAILED = ("the grader failed on it, which is not your fault: your instructor has its report "
                 "and will grade it")


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
    course's gradebook (`kinds.Nbgrader`).
    """
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    check_available()
    kind = kinds.kind(course)
    for warning in kind.warnings():
        log(warning)
    out = Path(out)
    (out / "results").mkdir(parents=True, exist_ok=True)  # even for a shard with no students
    key = _secret_key(Path(secret) if secret else out / "secret.key")
    deadlines.save(out, deadline)
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        refused = []
        folder, autograded = kind.batch_folder(unpack(Path(submissions), Path(tmp) / "unpacked", log, refused))
        found = collect(folder, set(assignments(course)), log, lms_pattern or LMS_PATTERN, submitted=kind.submitted)
        found += refused_rows(refused, set(assignments(course)), found)
        if not found:
            raise ValueError(f"no submission of {', '.join(assignments(course))} in {submissions}: "
                             f"expected {FLAT.pattern} or {NBGRADER.pattern} (or an LMS export, see "
                             "--lms-pattern)")
        names = [name for name in assignments(course) if any(s.assignment == name for s in found)]
        kind.prepare(names)
        todo, results = _todo(kind, found, names, shard, out, _grader_version(course, limits), autograded)
        if results:
            log(f"{len(results)} submissions already graded by this grader in {out}: kept")
        results += _grade_all(course, todo, out, key, limits, workers or os.cpu_count() or 1, log, autograded)
    write_reports(course, out)
    os.sync()  # the results and pages that `save` wrote without a sync each, on the disk at once
    kind.finish(out, names, shard, autograded, log, {(s.student_id, s.assignment) for s, _ in todo})
    return results


def _todo(kind, found, names, shard, out, version, autograded):
    """([(submission, fingerprint)] to grade, [Result] kept from an earlier run) of the batch: every
    student of the shard, every assignment of `names` (missing where not `found`)."""
    students = sorted({s.student_id for s in found})
    if shard:
        students = [s for s in students if in_shard(s, *shard)]
    by_key = {(s.student_id, s.assignment): s for s in found}
    todo, kept = [], []
    for student in students:
        for name in names:
            submission = by_key.get((student, name)) or Submission(student, name, None)
            fingerprint = _fingerprint(submission, version)
            earlier = earlier_result(out, submission, fingerprint)
            if earlier and not kind.keeps(autograded, submission):
                earlier = None
            if earlier and earlier.submitted_at != submission.timestamp:  # same notebook, new time
                earlier.submitted_at = submission.timestamp
                write_atomic(result_path(out, student, name), earlier.to_json())
            if earlier:
                kept.append(earlier)
            else:
                todo.append((submission, fingerprint))
    return todo, kept


def in_shard(student_id, index, count):
    """Whether `student_id` belongs to share `index` (1-based) of `count`: stable everywhere."""
    digest = hashlib.sha256(student_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count == index - 1


def _grade_all(course, todo, out, key, limits, workers, log, autograded=None):
    bar = progress.Progress(len(todo), log)
    results = []

    def done(result):
        results.append(result)
        for error in result.grader_errors:  # the instructor's side of a `grader error`
            log(f"the grader failed on {result.student_id} {result.assignment}: {error}")
        bar.update(result)

    if workers == 1 or len(todo) <= 1:
        for submission, fingerprint in todo:
            done(_grade_or_report(course, submission, fingerprint, out, key, limits, autograded))
    else:
        context = multiprocessing.get_context("fork")  # workers start as copies: nothing to import
        # each worker's BLAS gets its share of the cores
        with ProcessPoolExecutor(workers, mp_context=context, initializer=blas.limited,
                                 initargs=(blas.share(workers),)) as pool:
            futures = [pool.submit(_grade_or_report, course, s, f, out, key, limits, autograded) for s, f in todo]
            for future in as_completed(futures):
                done(future.result())
    bar.close()
    return results


def _grade_or_report(course, submission, fingerprint, out, key, limits, autograded=None):
    """grade_one, or a `grader error` result if the grader itself fails (the batch goes on: the
    student is told it was not their fault, the traceback is kept for the instructor); then its
    feedback rendered and the result with its pages written into `out` (and what the course's kind
    writes beside it: an nbgrader course graded in place, its autograded/ folder)."""
    kind = kinds.kind(course)
    try:
        graded = grade_one(course, submission, fingerprint, key, limits)
        kind.write_beside(autograded, submission, graded)
    except Exception as error:
        graded = _grader_failed(kind, submission, fingerprint, error)
    save(out, graded.result, *feedback.render(course, graded))
    return graded.result


def _grader_failed(kind, submission, fingerprint, error):
    """The Graded of a submission the grader failed on: status `grader error`, the traceback kept."""
    trace = "".join(traceback.format_exception(error))
    try:
        graded = kind.assignment(submission.assignment).not_graded(submission, GRADER_ERROR, GRADER_FAILED,
                                                                   fingerprint)
    except Exception:  # not even its checks could be listed
        graded = Graded(Result(submission.student_id, submission.assignment, GRADER_ERROR, [],
                                     [GRADER_FAILED], fingerprint, submitted_at=submission.timestamp),
                        reason=GRADER_FAILED)
    graded.result.errors.append(trace)
    return graded


# -- one submission: read → fit → run → check → judge ------------------------------------

def grade_one(course, submission, fingerprint, key, limits=Limits()):
    """Grade one submission of `course`: its Graded (nothing is written; `feedback.render` and
    `results.save` come after). Each notebook of its assignment is read, fitted, run and checked
    (`kinds.run_notebook`), and the assignment's kind judges them together."""
    assignment = kinds.kind(course).assignment(submission.assignment)
    if submission.problem or submission.path is None:
        return assignment.not_graded(submission, *(submission.problem or MISSING), fingerprint)
    secret = _seed(key, fingerprint)
    paths = notebooks(submission, [unit.name for unit in assignment.units])
    runs = [kinds.run_notebook(assignment, unit, paths.get(unit.name), submission, secret, limits)
            for unit in assignment.units]
    return assignment.judge(submission, fingerprint, runs)


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


def graded_files(course, engine=None):
    """The files whose contents decide a grade of `course`, no hand-kept list: every file of the
    engine package `engine` (its caches aside) and the course's graded material
    (`kinds.CourseFile.graded_material`: settings, checks, references, notebooks, the reference's times)."""
    return [*source_files(engine or ENGINE), *kinds.kind(course).graded_material()]


def _grader_version(course, limits, engine=None):
    """A digest of everything that decides a grade: `graded_files` and the limits. Each file counts
    by its place in the engine or the course, so that a copy elsewhere has the same version."""
    engine = Path(engine or ENGINE)
    digest = hashlib.sha256(repr(limits).encode())
    for path in source_files(engine):
        digest.update(path.relative_to(engine.parent).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for path in kinds.kind(course).graded_material():
        place = path.relative_to(course.root).as_posix() if path.is_relative_to(course.root) else path.name
        digest.update(place.encode() + b"\0" + path.read_bytes() + b"\0")
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
