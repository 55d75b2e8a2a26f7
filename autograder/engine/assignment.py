"""An assignment as released, and a student's notebook fitted back onto it.

The released notebook (`<exercises>/<name>.ipynb` of the course file) fixes which cells are the
student's (solution cells, by nbgrader `grade_id`) and which are the course's
(locked cells and check cells). Grading runs the student's solution cells and
own extra cells, in the student's order, with the course's cells as released:
a check cell edited, deleted or duplicated by the student is put back as it
was, and the notebook is marked `invalid-structure`. The hidden part of each
check cell comes from the instructor's source notebook and never reaches the
student's process.

A hidden block whose first line is `# resource rule` holds a resource rule: a check of what a
function may use (memory, time) measured outside the student's process, on sizes the task
states. `grade` runs it with the other hidden checks, on inputs drawn from its secret;
`validate` runs it too, on the same sizes with the inputs of no secret, in the same second
sandbox, with the same limit and the same message (so the rule is never a surprise).
"""

import functools
import re
from dataclasses import dataclass

import nbformat
from nbformat.v4 import new_code_cell


HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n(.*?)^[ \t]*### END HIDDEN TESTS",
                    re.MULTILINE | re.DOTALL)

RESOURCE_RULE = "# resource rule"  # the first line of a hidden block that `validate` runs too


@dataclass(frozen=True)
class Test:
    grade_id: str
    points: float
    hidden: str  # the hidden checks' code, run by the grader, never in the notebook
    rules: str = ""  # the resource rules among them, which `validate` runs too


@dataclass(frozen=True)
class Assignment:
    name: str
    cells: tuple       # the released notebook's cells
    tests: tuple       # Test, in notebook order
    solutions: frozenset  # grade_ids of the student's cells

    @property
    def max_score(self):
        return sum(test.points for test in self.tests)

    @property
    def hidden_points(self):
        """The points of the check cells with hidden checks: those decided only at grading."""
        return sum(test.points for test in self.tests if test.hidden.strip())


def hidden_points_sentence(hidden, total):
    """What the visible checks cannot tell, for students: how many points hidden checks decide."""
    if not hidden:
        return f"No hidden checks: the visible checks decide all {total:g} points."
    tasks = f"every task ({total:g} points)" if hidden == total else \
        f"the tasks worth {hidden:g} of the {total:g} points"
    return (f"At grading, hidden checks also run on {tasks}, with other inputs: a task whose "
            "visible checks pass can still lose its points there.")


def grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def tests_of(source):
    """The Test of every check cell of the instructor notebook `source`, in order."""
    tests = []
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and cell.cell_type == "code":
            blocks = [block.strip("\n") for block in HIDDEN.findall(cell.source)]
            rules = "\n".join(block for block in blocks if block.lstrip().startswith(RESOURCE_RULE))
            tests.append(Test(meta["grade_id"], float(meta["points"]), "\n".join(blocks), rules))
    return tuple(tests)


@functools.cache
def load(course, name):
    """The assignment `name` of `course`, from its released notebook and its instructor source."""
    released = nbformat.read(course.exercises / f"{name}.ipynb", as_version=4)
    tests = tests_of(nbformat.read(course.notebook(name), as_version=4))
    solutions = frozenset(grade_id(c) for c in released.cells
                          if c.metadata.get("nbgrader", {}).get("solution"))
    return Assignment(name, tuple(released.cells), tests, solutions)


def fit(assignment, notebook):
    """(cells to grade, problems): the student's notebook with the course's cells as released.

    Problems are sentences for the instructor and the student; when there
    are any, the submission's status is `invalid-structure`, and what can
    be graded still is.
    """
    released = {grade_id(c): c for c in assignment.cells if grade_id(c)}
    seen, problems, cells = set(), [], []
    for cell in notebook.cells:
        cell_id = grade_id(cell)
        if cell_id in released:
            if cell_id in seen:
                problems.append(f"the cell `{cell_id}` appears more than once: only the first was graded")
                continue
            seen.add(cell_id)
            if cell_id in assignment.solutions:
                cells.append(_copy(cell))
                continue
            if cell.cell_type == "code" and cell.source.strip() != released[cell_id].source.strip():
                problems.append(f"the cell `{cell_id}` was edited: it ran as released")
            cells.append(released[cell_id])
        elif cell_id is not None and cell.metadata.get("nbgrader", {}).get("grade"):
            problems.append(f"a graded cell was renamed to `{cell_id}`: it ran as an ordinary cell")
            cells.append(new_code_cell(cell.source) if cell.cell_type == "code" else cell)
        elif cell.cell_type in ("code", "markdown"):
            cells.append(_copy(cell))  # the student's own cell
    # Cells of the course that are missing are put back after the cell released before them.
    for index, cell in enumerate(assignment.cells):
        cell_id = grade_id(cell)
        if cell_id is None or cell_id in seen:
            continue
        if cell_id in assignment.solutions:
            problems.append(f"the answer cell `{cell_id}` was deleted or renamed")
            continue
        if cell.metadata.get("nbgrader", {}).get("grade"):
            problems.append(f"the check cell `{cell_id}` was deleted: it was put back")
        before = {grade_id(c) for c in assignment.cells[:index]} - {None}
        position = max((i + 1 for i, c in enumerate(cells) if grade_id(c) in before), default=0)
        cells.insert(position, cell)
        seen.add(cell_id)
    return cells, problems


def own_code(assignment, cells):
    """[[grade_id or None, source]] of the code cells in the fitted `cells` that are the
    student's: their answer cells and the cells they added (not the course's cells)."""
    return [[grade_id(cells[int(i)]), cells[int(i)].source] for i in own_cells(assignment, cells)]


def own_cells(assignment, cells):
    """The ids (indices in the fitted `cells`) of the code cells that are the student's: their
    answer cells and the cells they added (not the course's cells)."""
    course = {grade_id(c) for c in assignment.cells} - assignment.solutions - {None}
    return [str(i) for i, cell in enumerate(cells) if cell.cell_type == "code" and grade_id(cell) not in course]


def _copy(cell):
    """The student's cell with only what grading needs (no outputs, no stray metadata)."""
    copy = nbformat.from_dict({"cell_type": cell.cell_type, "source": cell.source,
                               "metadata": {"nbgrader": dict(cell.metadata.get("nbgrader", {}))}})
    if cell.cell_type == "code":
        copy.outputs, copy.execution_count = [], None
    return copy
