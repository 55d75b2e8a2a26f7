"""Every assignment's hidden checks accept any correct implementation and reject the usual mistakes.

The implementations live in autograder/samples/implementations/<slug>.py:
`CORRECT` (task -> a correct function written unlike the reference),
`MISTAKES` (name -> (task, wrong function, check, words of its message)) and
`CHECKS_OF_TASK` (task -> the check functions of autograder/checks/<slug>.py).
"""

import ast
import builtins
import dis
import importlib

import nbformat
import numpy as np
import pytest

from autograder.engine import course
from autograder.engine import harness
from autograder.engine.checking import CheckFailed
from autograder.samples.submissions import implementations
from tests.support import COURSE


def modules(slug):
    return (importlib.import_module(f"autograder.checks.{slug}"),
            importlib.import_module(f"solutions.{slug}"),
            implementations(slug))


TASKS = [(slug, task) for slug in course.assignments(COURSE) for task in modules(slug)[2].CHECKS_OF_TASK]
MISTAKES = [(slug, name) for slug in course.assignments(COURSE) for name in modules(slug)[2].MISTAKES]


def test_every_assignment_has_checks_and_implementations():
    assert course.assignments(COURSE)
    for slug in course.assignments(COURSE):
        checks, _, students = modules(slug)
        assert set(students.CORRECT) == set(students.CHECKS_OF_TASK)
        assert len(students.MISTAKES) >= 5
        for names in students.CHECKS_OF_TASK.values():
            assert all(callable(getattr(checks, name)) for name in names)


@pytest.fixture(params=[None, 1, 2 ** 63 - 25], ids=["no-secret", "secret-1", "secret-2"])
def secret(request):
    """The checks' inputs as in a notebook (no secret) and as the grader draws them (secrets)."""
    with harness.secret(request.param):
        yield request.param


def test_the_secret_changes_the_inputs_of_the_checks():
    draws = []
    for secret in (None, 1, 2):
        with harness.secret(secret):
            draws.append(harness.seeded(7).normal(size=3))
    assert not any(np.allclose(a, b) for i, a in enumerate(draws) for b in draws[i + 1:])


@pytest.mark.parametrize("author", ["reference", "student"])
@pytest.mark.parametrize("slug, task", TASKS)
def test_correct_implementation_passes(slug, task, author, secret):
    checks, reference, students = modules(slug)
    function = getattr(reference, task) if author == "reference" else students.CORRECT[task]
    for check in students.CHECKS_OF_TASK[task]:
        getattr(checks, check)(function)


@pytest.mark.parametrize("slug, mistake", MISTAKES)
def test_mistake_is_rejected_with_its_reason(slug, mistake, secret):
    checks, _, students = modules(slug)
    task, wrong, check, words = students.MISTAKES[mistake]
    assert check in students.CHECKS_OF_TASK[task]
    with pytest.raises(CheckFailed) as failure:
        getattr(checks, check)(wrong)
    assert words in str(failure.value)


@pytest.mark.parametrize("slug, task", TASKS)
def test_unimplemented_task_fails_with_a_plain_sentence(slug, task):
    checks, _, students = modules(slug)

    def stub(*args, **kwargs):
        raise NotImplementedError()
    stub.__name__ = task
    for check in students.CHECKS_OF_TASK[task]:
        with pytest.raises(CheckFailed, match="not implemented yet"):
            getattr(checks, check)(stub)


def _global_names(code):
    """The global names `code` and the functions nested in it read."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for constant in code.co_consts:
        if hasattr(constant, "co_names"):
            names |= _global_names(constant)
    return names


@pytest.mark.parametrize("slug", course.assignments(COURSE))
def test_implementations_need_only_what_their_notebook_defines(slug):
    """Pasted into a solution cell, as the end-to-end tests do, no such implementation meets a NameError.

    Those are the correct ones and the mistakes of GRADED_MISTAKES (other
    mistakes are only called here, in-process, and may share helpers).
    """
    _, _, students = modules(slug)
    notebook = nbformat.read(COURSE.exercises / f"{slug}.ipynb", as_version=4)
    defined = set(dir(builtins)) | set(students.CHECKS_OF_TASK)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            tree = ast.parse(cell.source)
            defined |= {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
            defined |= {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                        for target in node.targets if isinstance(target, ast.Name)}
            defined |= {alias.asname or alias.name.partition(".")[0] for node in ast.walk(tree)
                        if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    functions = list(students.CORRECT.items()) + [(name, students.MISTAKES[name][1])
                                                  for name in students.GRADED_MISTAKES]
    for name, function in functions:
        missing = _global_names(function.__code__) - defined
        assert not missing, f"{slug}: {name} uses {sorted(missing)}, which its notebook does not define"
