"""`python -m autograder release`: the student notebooks, generated.

nbgrader's generate_assignment removes the solutions and hidden tests from
each instructor notebook (<source>/<slug>/<slug>.ipynb of the course file) and
clears outputs; this module adds the "generated" note and writes the result to
<exercises>/<slug>.ipynb. A test regenerates them and fails when they differ.
The note is for course authors, so it is in the notebook's metadata
(`autograder.generated`), which Jupyter does not show: a student's notebook
opens on the students' introduction.

Before that, three kinds of cell of the instructor notebooks are stamped from
their one source: the check helpers from the engine's checking.py, the
closing "Done" cell from the course file's `done_cell`, and every locked
"given" cell (functions the exercise hands to the student) from the course's
reference packages: a cell whose metadata holds
``"course": {"given": ["<reference package>.<module>:<name>", ...]}`` gets the
source of those definitions, under a header saying so.
"""

import ast
import importlib
import re
import tempfile
import textwrap
from pathlib import Path

import nbformat

from .assignment import Assignment, hidden_points_sentence, tests_of
from . import recording
from .course import ENGINE, assignments, make_course_dir, nbgrader
from .flags import without_magics

HELPERS_CELL = "check_helpers"  # grade_id of the helper cell in every source notebook
# its text: these engine modules, in order, their imports of each other dropped
HELPER_MODULES = (ENGINE / "checking.py", ENGINE / "standins.py", ENGINE / "recorded.py")
DONE_CELL = "done"              # grade_id of the closing cell (the course file's done_cell)


class ReleaseError(RuntimeError):
    pass


def release(course, exercises_dir=None, names=None):
    """Regenerate the student notebooks of `names` (default: all) of `course` into `exercises_dir`
    (default: the course's exercises)."""
    names = assignments(course) if names is None else list(names)
    for name in names:
        sync_check_helpers(course.notebook(name))
        if course.done_cell:
            sync_done_cell(course, course.notebook(name))
        stamp_given_cells(course, course.notebook(name))
        recording.stamp(course, name, course.notebook(name), HELPERS_CELL)
    exercises_dir = Path(exercises_dir or course.exercises)
    exercises_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        folder = make_course_dir(course, tmp, names)
        for name in names:
            result = nbgrader(course, folder, "generate_assignment", name, "--force", "--no-db")
            if result.returncode != 0:
                raise ReleaseError(f"nbgrader generate_assignment {name} failed:\n{result.stderr}")
            notebook = nbformat.read(folder / "release" / name / f"{name}.ipynb", as_version=4)
            notebook.metadata["autograder"] = {"generated": _generated_note(course, name)}
            nbformat.write(notebook, exercises_dir / f"{name}.ipynb")
    return [exercises_dir / f"{name}.ipynb" for name in names]


# The helper cell's names that the check cells use; the rest stays inside the cell's function.
NOTEBOOK_NAMES = ("CheckFailed", "check", "check_shape", "check_close", "on_its_own")


def check_helpers():
    """The helper cell's text: the modules of HELPER_MODULES, one after the other (their imports of
    each other dropped), inside one function whose locals they are, so that no name of the
    notebook's (a student's function named `close` or `swap`) changes what they do; the function
    gives the notebook NOTEBOOK_NAMES."""
    stamped = "|".join(re.escape(path.stem) for path in HELPER_MODULES)
    texts = [re.sub(rf"^from \.({stamped}) import .*\n", "", path.read_text(), flags=re.MULTILINE).strip("\n")
             for path in HELPER_MODULES]
    lines = texts[0].splitlines()
    header = "\n".join(line for line in lines[:next(i for i, l in enumerate(lines) if not l.startswith("#"))])
    body = "\n\n\n".join([texts[0][len(header):].strip("\n"), *texts[1:]])
    return (f"{header}\nimport numpy as np\n\n\n"
            "def _check_helpers():\n"
            '    """The helpers, in a namespace of their own (what a cell of yours names changes nothing here)."""\n'
            f"{textwrap.indent(body, '    ')}\n"
            f"    return {{name: value for name, value in locals().items() if name in {NOTEBOOK_NAMES!r}}}\n\n\n"
            "globals().update(_check_helpers())")


def sync_check_helpers(path):
    """Make the helper cell of the notebook at `path` the engine's `check_helpers()`.

    Returns True when the notebook had to be rewritten.
    """
    return _sync_cell(path, HELPERS_CELL, check_helpers())


def sync_done_cell(course, path):
    """Make the closing cell of the notebook at `path` the course's done cell, for its name.

    Returns True when the notebook had to be rewritten.
    """
    checks = Assignment(Path(path).stem, (), tests_of(nbformat.read(path, as_version=4)), frozenset())
    hidden = hidden_points_sentence(checks.hidden_points, checks.max_score)
    text = course.done_cell.read_text().rstrip("\n").replace("{notebook}", Path(path).name) \
        .replace("{hidden_points}", hidden)
    return _sync_cell(path, DONE_CELL, text, last=True)


def _sync_cell(path, grade_id, text, last=False):
    """Give the one cell `grade_id` of the notebook at `path` (the last one, if `last`) `text`."""
    notebook = nbformat.read(path, as_version=4)
    cells = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    if len(cells) != 1 or (last and notebook.cells[-1] is not cells[0]):
        raise ReleaseError(f"{path} needs exactly one cell with grade_id {grade_id!r}"
                           + (", the last one" if last else ""))
    if cells[0].source == text:
        return False
    cells[0].source = text
    nbformat.write(notebook, path)
    return True


def stamp_given_cells(course, path):
    """Write into every given cell of the notebook at `path` the definitions it lists.

    Returns True when the notebook had to be rewritten. Raises ReleaseError
    when a listed name does not exist, when a stamped definition uses
    another definition of the references that no locked cell of the notebook
    provides (list it too), so that a given cell can never fail with a
    NameError, and when a stamped definition is, or uses, a function that the
    students write in that notebook (a given cell must neither replace their
    work nor depend on it).
    """
    notebook = nbformat.read(path, as_version=4)
    given = [(cell, cell.metadata["course"]["given"]) for cell in notebook.cells
             if "given" in cell.metadata.get("course", {})]
    stamped = {spec.partition(":")[2] for _, specs in given for spec in specs}
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    students = _names_defined(c.source for c in code if c.metadata.get("nbgrader", {}).get("solution"))
    defined = stamped | (_names_defined(c.source for c in code) - students)
    if stamped & students:
        raise ReleaseError(f"{path}: the given cells define {sorted(stamped & students)}, which the "
                           "students implement in this notebook: a given cell must not replace them")
    changed = False
    for cell, specs in given:
        source, needed = given_source(course, specs)
        if needed & students:
            raise ReleaseError(f"{path}: the given cell {specs} uses {sorted(needed & students)}, which "
                               "the students implement in this notebook: give it the course's own")
        if needed - defined:
            raise ReleaseError(f"{path}: the given cell {specs} uses {sorted(needed - defined)}, "
                               "which no cell of the notebook defines: add them to its list")
        if cell.source != source:
            cell.source, changed = source, True
    if changed:
        nbformat.write(notebook, path)
    return changed


def given_source(course, specs):
    """(source, needed): the definitions `specs` ("module:name") with their modules' imports.

    `needed` holds the names of the course's references that those
    definitions use: the other top-level definitions of their modules, and
    what those modules import from the references.
    """
    imports, definitions, needed, modules = [], [], set(), []
    references = tuple(course.references)

    def is_reference(module):
        return any(module == r or module.startswith(r + ".") for r in references)

    for spec in specs:
        module_name, _, name = spec.partition(":")
        module_file = Path(importlib.import_module(module_name).__file__)
        module_source = module_file.read_text()
        tree = ast.parse(module_source)
        nodes = {target: node for node in tree.body for target in _defined_by(node)}
        if name not in nodes:
            raise ReleaseError(f"{module_name} has no top-level definition {name!r}")
        node = nodes[name]
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        definitions.append("\n".join(module_source.splitlines()[start - 1:node.end_lineno]))
        from_references = {alias.asname or alias.name for n in tree.body if isinstance(n, ast.ImportFrom)
                          and (n.level or is_reference(n.module or "")) for alias in n.names}
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        needed |= used & (set(nodes) | from_references)
        if module_file not in modules:
            modules.append(module_file)
            imports += [ast.get_source_segment(module_source, n) for n in tree.body
                        if isinstance(n, ast.Import) or (isinstance(n, ast.ImportFrom) and not n.level
                                                         and not is_reference(n.module))]
    files = ", ".join(_relative(course, path) for path in modules)
    header = (f"# Given: generated from {files} by `python -m autograder release`.\n"
              "# These functions are correct: run this cell, read it, call them; do not change it.")
    unique_imports = "\n".join(dict.fromkeys(imports))
    return f"{header}\n{unique_imports}\n\n\n" + "\n\n\n".join(definitions), needed


def _defined_by(node):
    """The top-level names a statement of a module defines."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return []


def _names_defined(sources):
    """The names that the code cells `sources` define at top level (read with their IPython
    magics and shell commands removed, as `flags` reads them)."""
    names = set()
    for source in sources:
        try:
            tree = ast.parse(without_magics(source))
        except SyntaxError:
            continue
        names.update(name for node in tree.body for name in _defined_by(node))
    return names


def _relative(course, path):
    """`path` as the course's authors know it: relative to the course's folder."""
    path = Path(path).resolve()
    return path.relative_to(course.root).as_posix() if course.root in path.parents else path.name


def _generated_note(course, name):
    """What course authors must know of a student notebook (not shown to students)."""
    source = _relative(course, course.notebook(name))
    return (f"This student notebook is generated from {source} by `python -m autograder release`: "
            "course authors edit that source, not this file.")
