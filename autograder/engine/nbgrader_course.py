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
import re
from dataclasses import dataclass
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
    """(traitlets Config of the course's nbgrader_config.py, nbgrader's CourseDirectory)."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    try:
        config = PyFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()
    except Exception as error:  # the instructor's Python: any error
        raise NbgraderCourseError(f"cannot read {Path(root) / CONFIG_FILE}: {error}") from None
    config.CourseDirectory.root = str(root)
    return config, CourseDirectory(config=config)


def source_folder(root):
    return Path(root) / configuration(root)[1].source_directory


def assignment_names(root):
    """The assignments: the folders of source/ that hold a notebook, alphabetically."""
    folder = source_folder(root)
    if not folder.is_dir():
        raise NbgraderCourseError(f"{root} has no {folder.name}/ folder of assignments")
    return sorted(path.name for path in folder.iterdir()
                  if path.is_dir() and not _ignored(root, path.name) and any(path.glob("*.ipynb")))


def _ignored(root, name):
    return any(fnmatch.fnmatch(name, pattern) for pattern in configuration(root)[1].ignore)


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
