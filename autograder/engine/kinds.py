"""The two kinds of course the engine grades, behind one interface: a course file's
(`CourseFile`, `CourseAssignment`: one notebook per assignment, hidden checks run in the
grader) and an nbgrader
course (`Nbgrader`, `NbgraderAssignment`: as `nbgrader autograde` grades it, every notebook of an assignment, its test
cells run in the sandbox).

`grade` drives one pipeline for both: read → fit → run → check → judge → save. Each step it
asks of the assignment's kind (`kind(course).assignment(name)`):

- `units`: the notebooks of the assignment (a course file's: one, the assignment itself);
- `read(unit, path)`: the submitted notebook and notes on it, or NotGradable (status, reason);
- `fit(unit, notebook)`: (cells to run, structure problems); `flagged` and `own_code` on them;
- `sandbox(unit, cells, limits, submission)`: where they run (`sandboxes`);
- `check(unit, run, secret)`: the Checks, from the run's outputs and its sandbox;
- `judge(submission, fingerprint, runs)`: the submission's Graded, from its notebooks' Runs;
- `not_graded(...)`: the Graded of a submission that nothing of could be graded.

And per batch, of the course (`kind(course)`): where its submissions are (`batch_folder`), what to
load before workers fork (`prepare`), and what `nbgrader autograde` leaves beside the results
(`keeps`, `write_beside`, `finish`), which a course file's kind does not write.
"""

import functools
import time
from dataclasses import dataclass, field

import nbformat

from . import assignment as assignments_
from . import export, nbgrader_course, sandboxes, tasks
from .collect import MAX_NOTEBOOK_BYTES, SUBMITTED, problem_of
from .course import source_files
from .flags import flags
from .hidden import earlier_cells, notebook_names, only_lost, run_test
from .results import GRADER, GRADER_ERROR, Check, Graded, Result, worst
from .sandbox import SandboxStopped


class NotGradable(Exception):
    """A notebook that cannot be graded: its (status, reason)."""

    def __init__(self, status, reason):
        super().__init__(status, reason)
        self.status, self.reason = status, reason


@dataclass
class Run:
    """One notebook of a submission through read → fit → run → check: what each step left."""
    name: str
    problem: tuple = None       # (status, reason) when it could not be read: nothing ran
    notes: list = field(default_factory=list)     # read's notes on it (an nbgrader kernel's)
    cells: list = None          # fit's cells to run ...
    problems: list = field(default_factory=list)  # ... and the structure problems it found
    flagged: list = field(default_factory=list)
    code: list = field(default_factory=list)
    outputs: dict = field(default_factory=dict)   # the sandbox's output per cell id
    stopped: tuple = None       # (status, reason) when the sandbox stopped before the checks
    checks: list = field(default_factory=list)
    events: list = field(default_factory=list)    # (status, reason) of what the sandbox ran into
    seconds: dict = field(default_factory=dict)
    sandbox: object = None      # while it runs


def run_notebook(kind, unit, path, submission, secret, limits):
    """One notebook through read → fit → run → check: its Run (`kind` decides each step)."""
    run = Run(unit.name)
    try:
        notebook, run.notes = kind.read(unit, path)
    except NotGradable as problem:
        run.problem = (problem.status, problem.reason)
        return run
    run.cells, run.problems = kind.fit(unit, notebook)
    run.flagged, run.code = kind.flagged(unit, notebook, run.cells), kind.own_code(unit, run.cells)
    run.sandbox = kind.sandbox(unit, run.cells, limits, submission)
    try:
        try:
            run.outputs = {output["id"]: output for output in run.sandbox.run()}
        except SandboxStopped as stop:
            run.stopped = (stop.status, stop.reason)
        run.seconds = dict(run.sandbox.seconds)
        if run.stopped is None or kind.scores_stopped:
            started, cpu = time.monotonic(), time.process_time()
            run.checks = kind.check(unit, run, secret)
            run.seconds.update({"checks": time.monotonic() - started, "checks CPU": time.process_time() - cpu})
    finally:
        run.sandbox.close()
    run.events, run.sandbox = list(run.sandbox.events), None
    return run


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
        raise ValueError(f"the file is not a valid notebook ({first_line(error)})") from None
    return notebook


def first_line(text):
    text = str(text).strip()
    return text.splitlines()[0][:300] if text else ""


def _read(path, missing):
    """The notebook at `path`, or NotGradable: not handed in (`missing`), unsafe or unreadable."""
    problem = problem_of(path, missing)
    if problem:
        raise NotGradable(*problem)
    try:
        return read_notebook(path)
    except ValueError as error:
        raise NotGradable("unreadable", str(error)) from None


def _flagged(course, released, cells):
    """What the code `cells` that are not as `released` do to the grading (`flags`)."""
    released = {cell.source for cell in released}
    return flags(course, [cell.source for cell in cells if cell.cell_type == "code" and cell.source not in released])


def _seconds(seconds):
    return {phase: round(s, 4) for phase, s in seconds.items()}


def _faults(checks):
    """The statuses and notes that the grader's own failures on `checks` add."""
    failed = [c.label for c in checks if c.fault == GRADER]
    if not failed:
        return [], []
    return [GRADER_ERROR], [f"the grader's own check failed on {', '.join(failed)}: not your fault (your "
                            "instructor has its report and will grade it)"]


# -- the assignments -------------------------------------------------------------------

class Assignment:
    """What both kinds of assignment share: a submission nothing of which could be graded."""

    def not_graded(self, submission, status, reason, fingerprint="", notes=(), flagged=(), code=()):
        """The Graded of a submission nothing of which was graded: every check 0, `reason` why."""
        checks = [check for unit in self.units for check in self.checks_of(unit, reason)]
        result = Result(submission.student_id, submission.assignment, status, checks, [*notes, reason],
                        fingerprint, list(flagged), submitted_at=submission.timestamp, code=list(code))
        return Graded(result, reason=reason)


class CourseAssignment(Assignment):
    """An assignment of a course file: one notebook, fitted onto the released one
    (`assignment.fit`), its check cells' hidden checks run here (`hidden.run_test`)."""

    scores_stopped = False  # a notebook whose sandbox stopped before its checks is not graded

    def __init__(self, course, name):
        self.course, self.name = course, name
        self.spec = assignments_.load(course, name)
        self.units = (self,)

    def checks_of(self, unit, reason):
        return [Check(t.grade_id, 0.0, t.points, f"not graded: {reason}") for t in self.spec.tests]

    def released_cells(self):
        """The cells of the released notebook."""
        return list(self.spec.cells)

    def read(self, unit, path):
        return _read(path, "no notebook was handed in"), []

    def fit(self, unit, notebook):
        return assignments_.fit(self.spec, notebook)

    def flagged(self, unit, notebook, cells):
        return _flagged(self.course, self.spec.cells, notebook.cells)

    def own_code(self, unit, cells):
        return assignments_.own_code(self.spec, cells)

    def sandbox(self, unit, cells, limits, submission):
        return sandboxes.sandbox_for(self.course, self.name, cells, limits)

    def check(self, unit, run, secret):
        """The Check of every check cell, its hidden checks run with the student's functions of the
        run's sandbox (started again, within limits, where it died: `sandboxes.revived`)."""
        visible = {assignments_.grade_id(cell): run.outputs.get(str(i)) for i, cell in enumerate(run.cells)}
        earlier = earlier_cells(self.spec.cells, self.spec.solutions, run.cells, run.outputs, run.sandbox.places)
        titles, names, checks, restarts = tasks.titles(self.course, self.name), self.names, [], 0
        for test in self.spec.tests:
            run.sandbox, restarts = sandboxes.revived(run.sandbox, restarts)
            sandboxes.on_task(run.sandbox, titles.get(test.grade_id))  # for its messages
            checks.append(run_test(test, visible.get(test.grade_id), run.sandbox, secret,
                                   earlier.get(test.grade_id, []), names))
        return only_lost(checks)

    @functools.cached_property
    def names(self):
        """The names the notebook is to define (its released cells')."""
        return notebook_names(self.spec.cells)

    def judge(self, submission, fingerprint, runs):
        (run,) = runs
        if run.problem:
            return self.not_graded(submission, *run.problem, fingerprint)
        if run.stopped:
            return self.not_graded(submission, *run.stopped, fingerprint, run.problems, run.flagged, run.code)
        faults, explained = _faults(run.checks)
        status = worst([status for status, _ in run.events] + ["invalid-structure"] * bool(run.problems) + faults)
        notes = run.problems + [reason for _, reason in run.events] + explained
        result = Result(submission.student_id, submission.assignment, status, run.checks, notes, fingerprint,
                        run.flagged, _seconds(run.seconds), submitted_at=submission.timestamp, code=run.code)
        return Graded(result, run.cells, run.outputs)


# -- an nbgrader assignment --------------------------------------------------------------

class NbgraderAssignment(Assignment):
    """An assignment of an nbgrader course, as `nbgrader autograde` grades it (`nbgrader_course`):
    every notebook, sanitised, its test cells run in its sandbox and scored from what they did."""

    scores_stopped = True  # its test cells score from what ran (nothing: 0), as nbgrader's

    def __init__(self, course, name):
        self.course, self.name, self.root = course, name, course.root
        self.spec = nbgrader_course.load(course.root, name)
        self.units = self.spec.notebooks

    def checks_of(self, unit, reason):
        return [Check(cell_id, 0.0, points, f"not graded: {reason}", self.spec.label(unit))
                for cell_id, points in unit.points.items()]

    def released_cells(self):
        """The cells of every notebook, as generate_assignment releases them."""
        return [cell for notebook in self.units for cell in notebook.cells]

    def read(self, unit, path):
        notebook = _read(path, f"{unit.name}.ipynb was not handed in")
        language, note = nbgrader_course.kernel(unit, notebook)
        if language != "python":
            raise NotGradable("unsupported-kernel", f"its kernel runs {language}, and this engine grades Python "
                                                    "notebooks only: grade it with nbgrader")
        return notebook, [note] * bool(note)

    def fit(self, unit, notebook):
        return nbgrader_course.sanitize(self.root, unit, notebook)

    def flagged(self, unit, notebook, cells):
        return _flagged(self.course, unit.cells, cells)

    def own_code(self, unit, cells):
        return [[nbgrader_course.nbgrader_meta(cell).get("grade_id"), cell.source] for cell in cells
                if cell.cell_type == "code" and not nbgrader_course.is_locked(cell)]

    def sandbox(self, unit, cells, limits, submission):
        folder = submission.path if submission.path.is_dir() else None
        ids = [nbgrader_course.nbgrader_meta(cell).get("grade_id") for cell in cells]
        places = {str(i): f"the cell `{cell_id}`" if cell_id else f"cell {i + 1} of {unit.name}.ipynb"
                  for i, cell_id in enumerate(ids)}
        return sandboxes.nbgrader_sandbox(cells, nbgrader_course.cell_limits(self.root, limits),
                                          nbgrader_course.notebook_files(self.root, self.spec, folder),
                                          self.course.packages, places)

    def check(self, unit, run, secret):
        return [Check(cell_id, got, points, message, self.spec.label(unit), manual)
                for cell_id, got, points, message, manual
                in nbgrader_course.score(self.root, unit, run.cells, run.outputs)]

    def judge(self, submission, fingerprint, runs):
        """One result of every notebook's checks, and a page per notebook handed in."""
        checks, notes, statuses, flagged, code, pages, seconds = [], [], [], [], [], {}, {}
        for unit, run in zip(self.units, runs):
            if run.problem:  # its cells score 0, as nbgrader scores a notebook not handed in
                statuses.append(run.problem[0])
                notes.append(f"{unit.name}.ipynb: {run.problem[1]}")
                checks += self.checks_of(unit, run.problem[1])
                continue
            here = [status for status, _ in run.events] + ["invalid-structure"] * bool(run.problems)
            happened = run.notes + run.problems + [reason for _, reason in run.events]
            statuses += here
            notes += [f"{unit.name}.ipynb: {note}" for note in happened]
            flagged, code, checks = flagged + run.flagged, code + run.code, checks + run.checks
            seconds = {phase: seconds.get(phase, 0.0) + value for phase, value in run.seconds.items()}
            page = Result(submission.student_id, f"{submission.assignment}/{unit.name}.ipynb", worst(here),
                          run.checks, happened)
            pages[unit.name] = (page, run.cells, run.outputs)
        if pages:  # a notebook handed in: the submission is not missing, only that notebook
            statuses = [status for status in statuses if status != "missing"]
        result = Result(submission.student_id, submission.assignment, worst(statuses), checks, notes, fingerprint,
                        flagged, _seconds(seconds), submitted_at=submission.timestamp, code=code,
                        notebooks=list(pages))
        return Graded(result, notebooks=pages)


# -- the kinds of course -------------------------------------------------------------------

class CourseFile:
    """A course file's course: its batch is a folder of submissions (or a course folder with a
    `submitted/` one), and nothing but the results is written."""

    submitted = SUBMITTED  # the folder of an nbgrader course's submissions that `collect` looks into
    assignment_kind = CourseAssignment

    def __init__(self, course):
        self.course = course

    def assignment(self, name):
        return self.assignment_kind(self.course, name)

    def warnings(self):
        """What an instructor should know before a batch is graded."""
        if not tasks.placeholder_base_url(self.course):
            return []
        return [f"warning: html.baseurl in {self.course.book_config.name} is still the template's "
                f"{tasks.base_url(self.course)}: the feedback links to the chapters lead nowhere until it is the "
                "published site's address (README: before publishing)"]

    def batch_folder(self, folder):
        """(the folder of submissions `folder` stands for, the course root where autograde's output
        belongs or None)."""
        return folder, None

    def prepare(self, names):
        """Load what grading `names` needs once, before the workers fork."""

    def keeps(self, autograded, submission):
        """Whether an earlier result of `submission` can be kept as it is."""
        return True

    def write_beside(self, autograded, submission, graded):
        """Write what grading `submission` leaves beside its result (nothing here)."""

    def finish(self, out, names, shard, autograded, log, regraded=()):
        """Write what a whole batch leaves beside its results (nothing here); `regraded`:
        {(student, assignment)} graded in this run (the others' results were kept)."""

    def graded_material(self):
        """The course's files that decide a grade: its settings, its checks and references, its
        released and instructor notebooks (and whatever is beside them: the reference's times)."""
        course = self.course
        settings = [path for path in (course.file, course.nbgrader_config, course.done_cell) if path]
        code = [path for package in (course.checks, *course.references) for path in course.package_files(package)]
        return [*settings, *code, *sorted(course.exercises.glob("*.ipynb")), *source_files(course.source)]


class Nbgrader(CourseFile):
    """An nbgrader course: its submissions are where its CourseDirectory says, and graded in place
    it gets what `nbgrader autograde` writes (autograded/ and the gradebook)."""

    submitted = None
    assignment_kind = NbgraderAssignment

    def warnings(self):
        return []

    def batch_folder(self, folder):
        folder, own = nbgrader_course.batch_folder(self.course.root, folder)
        return folder, self.course.root if own else None

    def prepare(self, names):
        for name in names:  # nbgrader's steps are imported once, before the workers fork
            nbgrader_course.load(self.course.root, name)

    def keeps(self, autograded, submission):
        # an autograded/ folder that is gone: grade it again to write it
        return not (autograded and submission.path) or nbgrader_course.autograded_folder(
            autograded, submission.student_id, submission.assignment).is_dir()

    def write_beside(self, autograded, submission, graded):
        if autograded and graded.notebooks and submission.path.is_dir():  # failing here is the disk's
            nbgrader_course.write_autograded(autograded, nbgrader_course.load(autograded, submission.assignment),
                                             submission, graded.notebooks)

    def finish(self, out, names, shard, autograded, log, regraded=()):
        """The course's gradebook (CourseDirectory.db_url) with the results of `out` for `names`, as
        `nbgrader autograde` leaves it (export.to_nbgrader): the formgrader, `nbgrader
        generate_feedback` and `nbgrader export` carry on from there. The submissions `regraded`
        in this run are recorded as autograde records those it grades; the others keep what the
        gradebook holds, hand grading included, as autograde skips them. Not for a shard: shards
        would replace each other's gradebook, which comes after `merge`."""
        root = self.course.root
        if not autograded:
            return
        database = nbgrader_course.database(root)
        if shard:
            log(f"wrote {nbgrader_course.step_folder(root, 'autograded_directory')}; once the shards are "
                f"merged, `export OUT --to nbgrader --output {database}` fills the course's gradebook")
            return
        scores, _, _ = export.read_grades(self.course, out)
        export.to_nbgrader(self.course, out, database, scores, names, set(regraded), autograded)
        log(f"wrote {nbgrader_course.step_folder(root, 'autograded_directory')} and the gradebook "
            f"{database}, as nbgrader autograde does")

    def graded_material(self):
        """Its settings (nbgrader_config.py) and everything in its source folder."""
        return [self.course.file, *source_files(self.course.source)]


def kind(course):
    """The kind of `course` (CourseFile or Nbgrader): how its batches are found and its assignments
    graded. The one place that asks which kind a course is."""
    return Nbgrader(course) if course.nbgrader else CourseFile(course)
