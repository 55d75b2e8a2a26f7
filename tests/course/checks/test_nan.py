"""NaN never earns a point: an answer that is all NaN, all inf or half NaN fails the hidden
checks of every graded function of every exercise, whatever is right beside it."""

import math

import numpy as np
import pytest

from autograder.engine.checking import CheckFailed
from tests.course.checks.test_hidden_checks import TASKS, modules


def _poisoned(value, how):
    """`value` with every number replaced as `how` says: "nan", "inf" or "half-nan" (the first
    half of each array's entries NaN, the rest kept)."""
    if isinstance(value, dict):
        return {key: _poisoned(item, how) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_poisoned(item, how) for item in value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float, np.number)):
        return {"nan": math.nan, "inf": math.inf, "half-nan": math.nan}[how]
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
        poisoned = value.astype(float)
        flat = poisoned.reshape(-1)
        if how == "half-nan":
            flat[:math.ceil(flat.size / 2)] = np.nan
        else:
            flat[:] = np.nan if how == "nan" else np.inf
        return poisoned
    return value


def _poisoning(function, how, notebook=None):
    """`function` giving poisoned answers, defined in `notebook` (its __globals__: where the checks
    find the student's other functions), by default a namespace of its own."""
    namespace = {"_poisoned": _poisoned, "_function": function, "_how": how} if notebook is None else notebook
    namespace.update(_poisoned=_poisoned, **{f"_function_{function.__name__}": function}, _how=how)
    exec(f"def {function.__name__}(*args, **kwargs):\n"
         f"    return _poisoned(_function_{function.__name__}(*args, **kwargs), _how)\n", namespace)
    return namespace[function.__name__]


@pytest.mark.parametrize("everything", [False, True], ids=["alone", "with-every-task"])
@pytest.mark.parametrize("how", ["nan", "inf", "half-nan"])
@pytest.mark.parametrize("slug, task", TASKS)
def test_a_nan_or_inf_answer_earns_nothing(slug, task, how, everything):
    """Alone: beside nothing. With every task: the notebook's other functions poisoned too, so
    that a check's variant (the reference with the student's own earlier functions) is NaN as well."""
    checks, _, students = modules(slug)
    notebook = {}
    poisoned = {name: _poisoning(function, how, notebook) for name, function in students.CORRECT.items()}
    wrong = poisoned[task] if everything else _poisoning(students.CORRECT[task], how)
    for check in students.CHECKS_OF_TASK[task]:
        with pytest.raises(CheckFailed):
            getattr(checks, check)(wrong)
