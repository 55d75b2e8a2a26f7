"""An nbgrader course (a folder with `nbgrader_config.py` and `source/`), graded as
`nbgrader autograde` (0.9) grades it.

What nbgrader does, and where this module does the same:

- `generate_assignment` turns each source notebook into the released one and
  records in its gradebook the source of every graded, answer and locked cell
  (`released`: nbgrader's own preprocessors, with the course's configuration:
  header and footer, code stubs, test delimiters);
- `autograde` sanitises the submitted notebook (`sanitize`: outputs cleared,
  duplicated ids dropped but the last, cells put back to their recorded type
  and points, locked cells, the test cells among them, put back to their
  recorded source: hidden tests included), runs every code cell in order in
  the student's kernel, and scores each grade cell (`score`: nbgrader's
  `determine_grade`): a test cell earns its points when it runs without an
  error and writes nothing to stderr, or the number it displays (partial
  credit); an answer cell that is also a grade cell (a manually graded
  answer) and a task are left for a person (0 autograded points, "needs manual
  grading"), except an answer left as released, which scores 0.

The tests run in the sandbox, beside the student's code, as nbgrader runs them
in the student's kernel: a notebook can tamper with them at run time (redefine
`assert`-free helpers, patch the modules they import). That is nbgrader's
trust, not this course's, whose checks run in the grader's process.
"""

import copy
import fnmatch
import functools
import os
import platform
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import nbformat

CONFIG_FILE = "nbgrader_config.py"
MANUAL = "needs manual grading"


class NbgraderCourseError(ValueError):
    """The folder is not an nbgrader course this engine can grade."""


def is_course(folder):
    folder = Path(folder)
    return (folder / CONFIG_FILE).is_file()


@functools.cache
def configuration(root):
    """(traitlets Config of the course's nbgrader_config.py, nbgrader's CourseDirectory).

    `CourseDirectory.root` is the folder given, whatever the file says (a
    configuration copied from a hub names the hub's folder): every command
    reads the course here, and every nbgrader it runs gets the same root
    (course.nbgrader). Folders are nbgrader's (`format_path`), so its
    `directory_structure` must be the default `{nbgrader_step}/{student_id}/{assignment_id}`."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    try:
        config = PyFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()
        config.CourseDirectory.root = str(Path(root).resolve())
        directory = CourseDirectory(config=config)
    except Exception as error:  # the instructor's Python, or a value nbgrader refuses: any error
        raise NbgraderCourseError(f"cannot read {Path(root) / CONFIG_FILE}: {error}") from None
    default = CourseDirectory.directory_structure.default_value
    if Path(directory.directory_structure) != Path(default):
        raise NbgraderCourseError(f"{Path(root) / CONFIG_FILE}: CourseDirectory.directory_structure = "
                                  f"{directory.directory_structure!r} is not supported (only nbgrader's "
                                  f"default {default!r})")
    return config, directory


# where nbgrader's Execute finds its timeout: its own section and those of the classes it
# inherits it from, the subclass's last (and winning), as traitlets reads them
TIMEOUT_SECTIONS = ("NotebookClient", "ExecutePreprocessor", "Execute")


def cell_seconds(root):
    """The limit of every cell (seconds) that the course's nbgrader_config.py sets as nbgrader's
    autograde reads it (`Execute.timeout`, or `ExecutePreprocessor.timeout` or
    `NotebookClient.timeout`), or None where it sets none, or no limit (None, 0 or less)."""
    config, seconds = configuration(root)[0], None
    for section in TIMEOUT_SECTIONS:
        if section in config and "timeout" in config[section]:
            seconds = config[section]["timeout"]
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
        raise NbgraderCourseError(f"{Path(root) / CONFIG_FILE}: the cells' timeout {seconds!r} is not a number "
                                  "of seconds")
    return seconds if seconds is not None and seconds > 0 else None


def cell_limits(root, limits):
    """`limits` (the engine's) with the course's limit of a cell (`cell_seconds`) where it sets one
    and the command line fixed none (`--cell-timeout`, which wins, as nbgrader's own command line
    wins over its configuration file)."""
    seconds = cell_seconds(root)
    if seconds is None or limits.fixed_cells:
        return limits
    return replace(limits, cell_seconds=float(seconds))


def course_directory(root):
    """nbgrader's CourseDirectory of the course at `root` (its root: `root`)."""
    return configuration(root)[1]


def step_folder(root, step):
    """The folder of an nbgrader step (`source_directory`, `submitted_directory`, ...) of the course
    at `root`, as nbgrader's CourseDirectory.format_path places it."""
    directory = course_directory(root)
    return Path(directory.format_path(getattr(directory, step), ".", ".")).resolve()


def source_folder(root):
    return step_folder(root, "source_directory")


def submitted_folder(root):
    """The course's folder of submissions (CourseDirectory.submitted_directory): ValueError if it
    has none, since no other folder of a course holds submissions."""
    folder = step_folder(root, "submitted_directory")
    if not folder.is_dir():
        raise NbgraderCourseError(
            f"{root} is an nbgrader course, whose submissions are in {folder} "
            f"(CourseDirectory.submitted_directory = {course_directory(root).submitted_directory!r}), "
            "which does not exist: collect them there (nbgrader collect), or give the folder that holds them")
    return folder


def batch_folder(root, folder):
    """(the folder of submissions that `folder`, given to `grade`, stands for; whether it is the
    course's own submitted_directory, where autograde's output belongs).

    The course's folder stands for its submitted_directory (an error if it has
    none: the course's other folders, source/ and release/, never hold
    students); a folder that holds a folder by that name (relative to it, as
    in the course), for that folder; any other folder, for itself."""
    folder, root = Path(folder).resolve(), Path(root).resolve()
    submitted = step_folder(root, "submitted_directory")
    if folder == root:
        return submitted_folder(root), True
    if folder == submitted:
        return folder, True
    relative = folder / course_directory(root).submitted_directory
    if relative.is_dir() and not relative.is_symlink():
        return relative, False
    directory = course_directory(root)
    source = directory.source_directory
    if (folder / CONFIG_FILE).is_file() or any((folder / source / name).is_dir() for name in assignment_names(root)):
        raise NbgraderCourseError(f"{folder} is (a copy of) an nbgrader course folder, with no "
                                  f"{directory.submitted_directory}/ of submissions: its {source}/ and "
                                  f"{directory.release_directory}/ are not students")
    return folder, False


def database(root):
    """The path of the course's gradebook (CourseDirectory.db_url, default <root>/gradebook.db)."""
    url = course_directory(root).db_url
    if not url.startswith("sqlite:///"):
        raise NbgraderCourseError(f"CourseDirectory.db_url = {url!r}: only an SQLite gradebook "
                                  "(sqlite:///PATH) is supported")
    return Path(url.removeprefix("sqlite:///"))


def assignment_names(root):
    """The assignments: the folders of source/ that hold a notebook, alphabetically."""
    folder = source_folder(root)
    if not folder.is_dir():
        raise NbgraderCourseError(f"{root} has no {folder.name}/ folder of assignments")
    return sorted(path.name for path in folder.iterdir()
                  if path.is_dir() and not _ignored(root, path.name) and any(path.glob("*.ipynb")))


def _ignored(root, name):
    """Whether a file or folder name matches CourseDirectory.ignore (nbgrader's is_ignored)."""
    return any(fnmatch.fnmatch(name, pattern) for pattern in course_directory(root).ignore)


# -- an assignment as generate_assignment records it ---------------------------------

@dataclass(frozen=True)
class Notebook:
    name: str
    cells: tuple          # the released notebook's cells
    recorded: dict        # grade_id -> the cell as the gradebook records it (hidden tests included)
    graded: tuple         # grade_ids of the grade cells and tasks, in order
    points: dict          # grade_id -> points
    kernelspec: dict = None  # the source's, which nbgrader's autograde puts back (OverwriteKernelspec)
    language: str = ""       # the source's language_info.name (written by the kernel that ran it)

    @property
    def max_score(self):
        return sum(self.points.values())


@dataclass(frozen=True)
class Assignment:
    name: str
    notebooks: tuple      # Notebook, by name
    files: tuple          # (path, relative path) of the files beside the notebooks

    @property
    def max_score(self):
        return sum(notebook.max_score for notebook in self.notebooks)

    def label(self, notebook):
        """The notebook's name as its checks carry it (details.csv: `<notebook>/<grade_id>`), or ''
        for an assignment of one notebook named after it."""
        return "" if len(self.notebooks) == 1 and notebook.name == self.name else notebook.name


def nbgrader_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def is_grade(cell):
    return bool(nbgrader_meta(cell).get("grade"))


def is_solution(cell):
    return bool(nbgrader_meta(cell).get("solution"))


def is_locked(cell):
    """As nbgrader.utils.is_locked: a grade cell that is not an answer is always locked."""
    if is_solution(cell):
        return False
    return is_grade(cell) or bool(nbgrader_meta(cell).get("locked"))


def is_task(cell):
    return bool(nbgrader_meta(cell).get("task"))


@functools.cache
def load(root, name):
    """The assignment `name` of the nbgrader course at `root`, as generate_assignment makes it."""
    folder = source_folder(root) / name
    notebooks = tuple(released(root, path) for path in sorted(folder.glob("*.ipynb")))
    files = tuple((path, path.relative_to(folder).as_posix()) for path in sorted(folder.rglob("*"))
                  if path.is_file() and path.suffix != ".ipynb"
                  and not any(_ignored(root, part) for part in path.relative_to(folder).parts))
    return Assignment(name, notebooks, files)


def header_footer(root):
    """The course's header and footer notebooks (IncludeHeaderFooter.header/footer, relative to root)
    that exist, as paths."""
    config = configuration(root)[0]
    paths = [Path(root) / config.IncludeHeaderFooter.get(side) for side in ("header", "footer")
             if config.IncludeHeaderFooter.get(side)]
    return [path for path in paths if path.is_file()]


def released(root, path):
    """The Notebook of the source notebook at `path`: nbgrader's generate_assignment steps."""
    from nbgrader import preprocessors as steps

    config, _ = configuration(root)
    config = copy.deepcopy(config)
    for side in ("header", "footer"):  # relative to the course's folder
        value = config.IncludeHeaderFooter.get(side)
        if value:
            config.IncludeHeaderFooter[side] = str(Path(root) / value)
    notebook = nbformat.read(path, as_version=4)
    if any(c.cell_type == "code" and "AUTOTEST" in c.source for c in notebook.cells):
        raise NbgraderCourseError(f"{path}: nbgrader's automatic tests (AUTOTEST) are not supported; "
                                  "generate the assignment with nbgrader and write its tests in the source")
    resources = {}
    for step in (steps.IncludeHeaderFooter, steps.LockCells, steps.ClearSolutions, steps.ClearOutput,
                 steps.CheckCellMetadata, steps.ComputeChecksums):
        notebook, resources = step(config=config).preprocess(notebook, resources)
    recorded, graded, points = {}, [], {}
    for cell in notebook.cells:  # what SaveCells records
        meta = nbgrader_meta(cell)
        if is_grade(cell) or is_solution(cell) or is_locked(cell) or is_task(cell):
            recorded[meta["grade_id"]] = copy.deepcopy(cell)
        if is_grade(cell) or is_task(cell):
            graded.append(meta["grade_id"])
            points[meta["grade_id"]] = float(meta["points"])
    for step in (steps.ClearHiddenTests, steps.ClearMarkScheme, steps.ComputeChecksums, steps.CheckCellMetadata):
        notebook, resources = step(config=config).preprocess(notebook, resources)
    return Notebook(path.stem, tuple(notebook.cells), recorded, tuple(graded), points,
                    dict(notebook.metadata.get("kernelspec") or {}),
                    str(notebook.metadata.get("language_info", {}).get("name", "")))


# -- the kernel ----------------------------------------------------------------------

# Kernels of other languages, by the start of their kernelspec's name (IRkernel, IJulia,
# xeus-cling, bash_kernel, IJavascript, Octave, Almond, evcxr, gophernotes, IHaskell...):
# what a notebook that names no language is taken to need.
OTHER_KERNELS = ("ir", "julia", "xcpp", "bash", "javascript", "ijavascript", "octave", "matlab", "scala",
                 "almond", "java", "kotlin", "ruby", "rust", "evcxr", "gophernotes", "go", "haskell", "sas",
                 "wolfram", "sos", "sqlite", "xr", "xeus-r", "c", "cpp", "csharp", ".net", "powershell")


def kernel(spec, submitted):
    """(language, note) of the kernel a notebook asks for: nbgrader runs the source's kernelspec
    (else the submitted notebook's). The engine runs Python: `language` is "python" where the
    kernelspec's language (or the source's language_info) is Python, or it names none and its
    name is not another language's kernel (a venv's kernel); `note` says when the kernel is not
    `python3` but Python was run for it. Another language: (that language, None)."""
    kernelspec = spec.kernelspec or dict(submitted.metadata.get("kernelspec") or {})
    name = str(kernelspec.get("name") or "python3")
    language = str(kernelspec.get("language") or spec.language or "").lower()
    if not language:
        known = re.match(r"[a-z.#+-]+", name.lower())
        other = known and known.group(0).rstrip("-") in OTHER_KERNELS and "python" not in name.lower()
        language = name.lower() if other else "python"
    if language != "python":
        return language, None
    if name == "python3":
        return "python", None
    return "python", f"it asks for the kernel `{name}`: graded with this engine's Python, in its sandbox"


# -- autograde ---------------------------------------------------------------------

def add_missing_cells(root):
    """nbgrader's OverwriteCells.add_missing_cells of the course (False by default)."""
    from nbgrader.preprocessors import OverwriteCells
    return OverwriteCells(config=configuration(root)[0]).add_missing_cells


def ignore_pattern(root):
    """The stderr pattern that nbgrader's IgnorePattern removes, if the course enables it."""
    from nbgrader.preprocessors import IgnorePattern
    step = IgnorePattern(config=configuration(root)[0])
    return step.pattern if step.enabled and step.pattern else None


def sanitize(root, spec, notebook):
    """(cells to run, problems): the submitted notebook as nbgrader's sanitising steps leave it."""
    from nbgrader.utils import compute_checksum

    cells, problems = [copy.deepcopy(cell) for cell in notebook.cells], []
    for cell in cells:  # ClearOutput
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    seen = set()
    for cell in reversed(cells):  # DeduplicateIds: the last of several keeps the id
        if is_grade(cell) or is_solution(cell) or is_locked(cell):
            cell_id = nbgrader_meta(cell).get("grade_id")
            if cell_id in seen:
                problems.append(f"the cell `{cell_id}` appears more than once: only the last was graded")
                cell.metadata.nbgrader = {}
            seen.add(cell_id)
    released = {nbgrader_meta(cell).get("grade_id"): cell for cell in spec.cells}
    for index, cell in enumerate(cells):  # OverwriteCells
        cell_id = nbgrader_meta(cell).get("grade_id")
        if cell_id is None:
            continue
        source = spec.recorded.get(cell_id)
        if source is None:
            del cell.metadata.nbgrader["grade_id"]
            continue
        if cell.cell_type != source.cell_type:
            problems.append(f"the cell `{cell_id}` was changed to {cell.cell_type}: it was put back")
            cell = cells[index] = _retype(cell, source.cell_type)
        cell.metadata.nbgrader["locked"] = is_locked(source)
        # what the cell is (graded, an answer, a task), as released: nbgrader puts back only
        # `locked`, and a hand-graded answer without its `solution` flag would be scored as a test
        for flag in ("grade", "solution", "task"):
            if flag in nbgrader_meta(source) or flag in cell.metadata.nbgrader:
                cell.metadata.nbgrader[flag] = bool(nbgrader_meta(source).get(flag, False))
        if is_grade(cell):
            cell.metadata.nbgrader["points"] = spec.points.get(cell_id, nbgrader_meta(cell).get("points"))
        cell.metadata.nbgrader["checksum"] = nbgrader_meta(source)["checksum"]
        if is_locked(source) and compute_checksum(cell) != nbgrader_meta(source)["checksum"]:
            if cell.source.strip() != released[cell_id].source.strip():
                problems.append(f"the locked cell `{cell_id}` was edited: it ran as the instructor wrote it")
            # nbgrader puts back the source, and stops ("Inconsistent checksums") if the student
            # also changed the cell's nbgrader metadata (its `grade` flag): we put back both
            cell.source, cell.metadata.nbgrader = source.source, copy.deepcopy(nbgrader_meta(source))
    present = {nbgrader_meta(cell).get("grade_id") for cell in cells}
    for cell_id in spec.graded:
        if cell_id not in present:
            problems.append(f"the graded cell `{cell_id}` was deleted" +
                            (": it was put back" if add_missing_cells(root) else
                             ": it is left for manual grading, as nbgrader leaves it"))
    if add_missing_cells(root):
        cells = _put_back(spec, cells, present)
    return [_retype(cell, cell.cell_type) for cell in cells], problems


def _retype(cell, cell_type):
    """A clean copy of `cell` as a `cell_type` cell (nbformat rejects stray fields)."""
    fields = {"cell_type": cell_type, "source": cell.source, "metadata": cell.metadata}
    if cell_type == "code":
        fields.update(outputs=[], execution_count=None)
    return nbformat.from_dict(fields)


def _put_back(spec, cells, present):
    """nbgrader's add_missing_cells: a deleted grade cell after the cell recorded before it,
    a deleted task at the end."""
    order = list(spec.recorded)
    for cell_id in spec.graded:
        if cell_id in present:
            continue
        cell = copy.deepcopy(spec.recorded[cell_id])
        if is_task(cell):
            cells.append(cell)
            continue
        before = order[:order.index(cell_id)]
        ids = [nbgrader_meta(c).get("grade_id") for c in cells]
        position = max((ids.index(b) + 1 for b in before if b in ids), default=0)
        cells.insert(position, cell)
    return cells


def score(root, spec, cells, outputs):
    """[(grade_id, score, max_score, message, manual)] of the notebook's grade cells and tasks,
    in the order of the source: `outputs` are the sandbox's, by the cell's index in `cells`."""
    from nbgrader.utils import compute_checksum

    pattern = ignore_pattern(root)
    found, earlier = {}, []  # earlier: (where, source, error, the student's own) of the cells run so far
    for index, cell in enumerate(cells):
        cell_id = nbgrader_meta(cell).get("grade_id")
        output = outputs.get(str(index)) if cell.cell_type == "code" else None
        before = list(earlier)
        if output is not None:
            earlier.append((f"your cell `{cell_id}`" if cell_id else f"your cell {index + 1}", cell.source,
                            output["error"], not is_locked(cell)))
        if cell_id not in spec.points or cell_id in found:
            continue
        points = spec.points[cell_id]
        if is_task(cell) and not is_grade(cell):
            found[cell_id] = (0.0, MANUAL, True)
        elif is_solution(cell):
            untouched = compute_checksum(cell) == nbgrader_meta(cell).get("checksum")
            found[cell_id] = (0.0, "no answer", False) if untouched else (0.0, MANUAL, True)
        elif cell.cell_type != "code":
            found[cell_id] = (0.0, MANUAL, True)
        else:
            found[cell_id] = _test_score(output, points, pattern, before)
    rows = []
    for cell_id in spec.graded:
        # a deleted cell: nbgrader's gradebook leaves its grade to a person
        got, message, manual = found.get(cell_id, (0.0, f"{MANUAL} (the cell was deleted)", True))
        rows.append((cell_id, got, spec.points[cell_id], message, manual))
    return rows


def _test_score(output, points, pattern, earlier=()):
    """(score, message, False) of a test cell from what it did (nbgrader's determine_grade); a
    name it lacks is said to be missing because of the student's cell that was to define it and
    raised, when that cell alone explains it (`messages.caused_by`, `earlier` its cells)."""
    from .messages import caused_by, failure_message

    if output is None:
        return 0.0, "not run: the notebook stopped before this cell", False
    if output["error"] is not None:
        return 0.0, caused_by(output["error"], earlier) or failure_message(output["error"]), False
    stderr = output.get("stderr") or ""
    if pattern and re.search(pattern, stderr):
        stderr = ""
    if stderr:
        return 0.0, "the test wrote to stderr (nbgrader scores that 0): " + stderr.strip()[:300], False
    shown = output.get("result")
    if shown is None:
        return points, "", False
    try:
        partial = float(shown)
    except ValueError:
        return points, "", False
    if partial != partial:  # NaN: nbgrader gives full points, we give none (a NaN never earns a point)
        return 0.0, "the test cell displayed nan", False
    if partial < 0:  # as nbgrader: not a grade, full points
        return points, "", False
    if partial > points:
        return 0.0, f"the test cell gave {partial:g} points, more than its {points:g}", False
    return partial, "" if partial == points else f"partial credit: {partial:g} of {points:g}", False


# -- what autograde leaves behind: autograded/<student>/<assignment>/ --------------------

def submitted_files(root, folder):
    """(path, relative path) of the files handed in beside the notebooks of the folder `folder`
    (a student's <assignment>/), those nbgrader's exchange carries (its ignore_patterns with
    CourseDirectory.ignore, include and max_file_size): no notebook (autograde copies none), no link
    (not followed)."""
    from nbgrader.utils import ignore_patterns

    directory = course_directory(root)
    skip = ignore_patterns(exclude=directory.ignore, include=directory.include,
                           max_file_size=directory.max_file_size)
    folder, found = Path(folder), []
    for here, folders, files in os.walk(folder):
        ignored = set(skip(here, folders + files))
        folders[:] = sorted(name for name in folders
                            if name not in ignored and not os.path.islink(os.path.join(here, name)))
        for name in sorted(set(files) - ignored):
            path = Path(here) / name
            if path.suffix == ".ipynb" or path.is_symlink() or not path.is_file():
                continue
            found.append((path, path.relative_to(folder).as_posix()))
    return tuple(found)


def notebook_files(root, spec, folder):
    """The files a submission's notebooks find beside them, as autograde leaves them: the student's
    (`submitted_files`), then the source's over them."""
    files = dict((relative, path) for path, relative in submitted_files(root, folder)) if folder else {}
    files.update((relative, path) for path, relative in spec.files)
    return tuple((path, relative) for relative, path in sorted(files.items()))


def autograded_folder(root, student, assignment):
    directory = course_directory(root)
    return Path(directory.format_path(directory.autograded_directory, student, assignment))


def write_autograded(root, spec, submission, pages):
    """Write what `nbgrader autograde` writes into autograded/<student>/<assignment>/ (per
    CourseDirectory.autograded_directory): the files handed in and the source's files over them
    (`notebook_files`, timestamp.txt kept), and each notebook handed in with its cells as graded
    (sanitised) and their outputs. Built aside and put in place whole."""
    target = autograded_folder(root, submission.student_id, submission.assignment)
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        files = notebook_files(root, spec, submission.path)
        stamp = submission.path / "timestamp.txt"
        if stamp.is_file() and not stamp.is_symlink():
            files += ((stamp, stamp.name),)
        for path, relative in files:
            (building / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, building / relative)
        for name, (_, cells, outputs) in pages.items():
            submitted = nbformat.read(submission.path / f"{name}.ipynb", as_version=4)
            nbformat.write(executed(submitted, cells, outputs, ignore_pattern(root)), building / f"{name}.ipynb")
        if target.exists():
            shutil.rmtree(target)
        building.rename(target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def executed(submitted, cells, outputs, pattern=None):
    """The notebook `submitted` with the graded `cells` and their outputs (the sandbox's, by the
    cell's index), as a kernel leaves them (`_outputs`)."""
    notebook = nbformat.v4.new_notebook(metadata=copy.deepcopy(submitted.metadata))
    notebook.nbformat_minor = submitted.nbformat_minor
    # what the kernel says of itself, which nbgrader's executor writes over the submitted one's:
    # the sandbox runs this Python (its prefix's), as ipykernel's kernel would
    notebook.metadata["language_info"] = {
        "name": "python", "version": platform.python_version(), "mimetype": "text/x-python",
        "codemirror_mode": {"name": "ipython", "version": 3}, "pygments_lexer": "ipython3",
        "nbconvert_exporter": "python", "file_extension": ".py"}
    counts = {}  # cell id -> its execution count, as In[n] of a traceback names it
    for index, cell in enumerate(cells):
        cell = copy.deepcopy(cell)
        output = outputs.get(str(index)) if cell.cell_type == "code" else None
        if output is not None:
            count = counts[str(index)] = len(counts) + 1
            cell.execution_count, cell.outputs = count, _outputs(output, count, pattern)
            if output.get("error") and output["error"].get("frames"):
                for item in cell.outputs:
                    if item.output_type == "error":
                        item.traceback = error_traceback(output["error"], cells, counts)
        if notebook.nbformat_minor < 5:
            cell.pop("id", None)
        elif "id" not in cell:
            cell["id"] = f"cell-{index}"
        notebook.cells.append(cell)
    return notebook


def _outputs(output, count, pattern):
    """The cell's outputs as the sandbox gives them (nbformat's: streams, displays, the displayed
    value, the error), without the stderr streams IgnorePattern's `pattern` removes (as autograde
    does, stream by stream)."""
    kept = []
    for item in output.get("outputs") or []:
        ignored = item["output_type"] == "stream" and item["name"] == "stderr" and pattern
        if ignored and re.search(pattern, item["text"]):
            continue
        item = nbformat.from_dict(copy.deepcopy(item))
        if item.output_type == "execute_result":
            item.execution_count = count
        kept.append(item)
    return kept


# IPython's colours in a traceback (stock's tracebacks have them; the formgrader shows them)
RED, GREEN, CYAN, PLAIN = "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[39m"
CONTEXT = 3  # lines of a cell shown on either side of a frame's line (IPython shows up to as many)
SHOWN_CHARS = 300  # of a line of code, of a function's name


def error_traceback(error, cells, counts):
    """The lines of an error output's traceback, as IPython draws it for the kernel (and stock
    shows it, colours included, the code's syntax not coloured): each frame that ran a cell's
    code (the runner's `frames`), with the cell's lines around the one the frame ended on, then
    the error, then the grader's reason in one sentence (`messages.failure_message`) when it
    says more. The code is the graded cells' (the student's, and the test cells nbgrader keeps
    in the notebook); the error's text is the student's: plain text, its escape characters
    shown, not obeyed. At most 31 frames of 5 lines of 300 characters, and the error's text
    (2000)."""
    from .messages import failure_message

    ename = _inert(error["ename"]).replace("\n", " ")
    lines = [f"{RED}{'-' * 75}{PLAIN}", f"{RED}{ename}{PLAIN}{' ' * max(1, 42 - len(ename))}"
                                        "Traceback (most recent call last)"]
    for frame in error["frames"]:
        if frame is None:
            lines.append("[... frames left out ...]")
            continue
        cell_id, line, function = frame
        if cell_id not in counts:  # (its ids are the indexes of `cells`, as `executed` counts them)
            continue  # not a cell of this notebook that ran: nothing to show of it
        index = int(cell_id)
        entry = f"{CYAN}Cell{PLAIN}{CYAN} {PLAIN}{GREEN}In[{counts[cell_id]}]{PLAIN}{GREEN}, line {line}{PLAIN}"
        entry += f", in {_inert(function)[:SHOWN_CHARS]}\n" if function else "\n"  # one line (`protocol`)
        code = cells[index].source.splitlines()
        if 1 <= line <= len(code):
            for number in range(max(1, line - CONTEXT), min(line + CONTEXT, len(code)) + 1):
                mark = (f"{GREEN}{'-' * (5 - len(str(number)))}> {PLAIN}{GREEN}{number}{PLAIN}" if number == line
                        else f"{GREEN}{str(number).rjust(7)}{PLAIN}")
                entry += f"{mark} {_inert(code[number - 1].rstrip())[:SHOWN_CHARS]}\n"
        lines.append(entry)
    lines.append(f"{RED}{ename}{PLAIN}: {_inert(error['evalue'])}")
    reason = failure_message(error)
    if reason not in (error["ename"], f"{error['ename']}: {str(error['evalue']).strip()}"):
        lines.append(f"The grader: {_inert(reason)}")  # it says more: where, with what inputs
    return lines


def _inert(text):
    """`text` with its escape characters shown as a symbol: a terminal code in a traceback is
    the kernel's colours, never the student's."""
    return str(text).replace("\x1b", "\u241b")
