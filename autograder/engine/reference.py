"""The reference code that each assignment grades: where it is and what of it is the answer.

An assignment grades the functions that its instructor notebook's solution
cells define (`def name(...)` in a cell with nbgrader's `solution: true`). Their
reference is the function of that name in the course's reference packages
(the course file's `references`): the module the solution cell imports it
from, else the module named after the assignment, else the first module that
defines it. The private helpers (`_name`) of the same module that a graded
function calls, directly or through another such helper, are part of the
answer too, unless the notebook gives them (a given cell lists them).

The book (its class edition hides these bodies), `student-copy` and
`similarity` read the answer from here.
"""

import ast
import collections
import functools
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .course import assignments

HEADING = re.compile(r"^#{2,4}\s+(?P<title>.+?)\s*$", re.MULTILINE)
SHORT = 20  # a stripped line shorter than this is common to any code (`return x`, `B, T = X.shape`)


@dataclass(frozen=True)
class Graded:
    assignment: str
    task: str       # the heading of the task that asks for it ("1. A score (1 point)")
    module: str     # the module that defines it
    name: str
    file: Path      # the module's file
    start: int      # first line of the definition (1-based, its decorators included)
    body: int       # first line of the body: after the signature and the docstring
    end: int        # last line

    def source(self):
        return "\n".join(self.file.read_text(encoding="utf-8").splitlines()[self.start - 1:self.end])

    def body_lines(self):
        return self.file.read_text(encoding="utf-8").splitlines()[self.body - 1:self.end]


def body_start(node):
    """The first line of `node`'s body after its docstring (or of its body, without one)."""
    first = node.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
        and isinstance(first.value.value, str)
    return first.end_lineno + 1 if docstring else first.lineno


def _solution_functions(course, name):
    """[(task heading, function name, modules the cell imports it from)] of the solution cells of
    the instructor notebook of `name`, in order."""
    found, task = [], ""
    for cell in nbformat.read(course.notebook(name), as_version=4).cells:
        if cell.cell_type == "markdown":
            headings = HEADING.findall(cell.source)
            task = headings[0] if headings else task
            continue
        if not cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        imports = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
        found += [(task, node.name, imports) for node in tree.body if isinstance(node, ast.FunctionDef)]
    return found


def _given_specs(course, name):
    """The "module:name" that the given cells of the instructor notebook of `name` list."""
    return {spec for cell in nbformat.read(course.notebook(name), as_version=4).cells
            for spec in cell.metadata.get("course", {}).get("given", [])}


def _is_reference(course, module):
    return any(module == r or module.startswith(r + ".") for r in course.references)


def _reference_function(course, assignment, function, imports):
    """The reference function object named `function`, or None."""
    candidates = [m for m in imports if _is_reference(course, m)] + [f"{r}.{assignment}" for r in course.references]
    for package in course.references:
        candidates += [package + "." + path.stem for path in course.package_files(package)
                       if path.stem != "__init__"]
    for module in dict.fromkeys(candidates):
        try:
            found = getattr(importlib.import_module(module), function, None)
        except ImportError:
            continue
        if inspect.isfunction(found):
            return found
    return None


@functools.cache
def _module_functions(path):
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    return {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


@functools.cache
def graded(course, name):
    """The Graded functions of assignment `name` of `course`: its answers, then their private helpers (none
    for a course without reference packages, such as an nbgrader course)."""
    if not course.references:
        return ()
    given, found, seen = {spec.partition(':')[2] for spec in _given_specs(course, name)}, [], set()
    pending = []
    for task, function, imports in _solution_functions(course, name):
        reference = _reference_function(course, name, function, imports)
        if reference is not None:
            pending.append((task, reference.__module__, reference.__name__, Path(inspect.getsourcefile(reference)).resolve()))
    while pending:
        task, module, function, path = pending.pop(0)
        if (path, function) in seen:
            continue
        seen.add((path, function))
        functions = _module_functions(path)
        node = functions[function]
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        found.append(Graded(name, task, module, function, path, start, body_start(node), node.end_lineno))
        called = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        pending += [(task, module, helper, path) for helper in sorted(called)
                    if helper.startswith("_") and helper in functions and helper not in given]
    return tuple(found)


def given(course, name):
    """The Graded functions of other assignments that the given cells of `name` hold, bodies
    and all: the exercise hands them to the student, correct."""
    specs = _given_specs(course, name)
    return [f for other in assignments(course) if other != name for f in graded(course, other) if f"{f.module}:{f.name}" in specs]


def all_graded(course):
    """The Graded functions of every assignment, in the order of the toc."""
    return [function for name in assignments(course) for function in graded(course, name)]


def distinctive_lines(course, functions=None):
    """{Graded: [line]}: the stripped lines of each graded body that tell it apart: not short, not
    a comment, in no other graded body and nowhere else in the reference packages."""
    functions = all_graded(course) if functions is None else functions
    inside = {}
    for function in functions:
        inside.setdefault(function.file, set()).update(range(function.body, function.end + 1))
    elsewhere = set()
    for package in course.references:
        for path in map(Path.resolve, course.package_files(package)):
            lines = path.read_text(encoding="utf-8").splitlines()
            elsewhere.update(line.strip() for number, line in enumerate(lines, 1)
                             if number not in inside.get(path, ()))
    candidates = {function: {line.strip() for line in function.body_lines()
                             if len(line.strip()) >= SHORT and not line.strip().startswith("#")} - elsewhere
                  for function in functions}
    counts = collections.Counter(line for lines in candidates.values() for line in lines)
    return {function: sorted(line for line in lines if counts[line] == 1) for function, lines in candidates.items()}


def leaked(text, lines):
    """[(Graded, [its lines in text])] of the bodies of `lines` ({Graded: [line]}) that `text`
    holds: two of their distinctive lines, or the only one. One line alone is not a leak (a
    call such as `output = layer(X, params)` is how the code is used)."""
    found = []
    for function, distinctive in lines.items():
        present = [line for line in distinctive if line in text]
        if present and len(present) >= min(2, len(distinctive)):
            found.append((function, present))
    return found
