"""What the linear-attention checks do beyond the contract of test_hidden_checks.py."""

import inspect
import textwrap

import numpy as np
import pytest

from autograder.checks import linear_attention as checks
from autograder.engine.checking import CheckFailed
from autograder.samples.implementations import linear_attention as students
from solutions import linear_attention as reference
from solutions.efficient_attention import peak_memory
from tests.course.checks.test_double_mistakes import run_check_cell, student_namespace


def notebook(elu_source):
    """The student's functions as a notebook defines them: each default feature_map is their own elu."""
    namespace = {}
    exec("import numpy as np\n" + elu_source, namespace)
    for name in ("linear_attention", "linear_attention_step", "chunked_linear_attention"):
        exec(textwrap.dedent(inspect.getsource(students.CORRECT[name])), namespace)
    return namespace


ELUS = {"unimplemented": "def elu_feature_map(X):\n    raise NotImplementedError()\n",
        "relu": "def elu_feature_map(X):\n    return np.maximum(X, 0)\n",
        "float64": "def elu_feature_map(X):\n    X = np.asarray(X, dtype=np.float64)\n"
                   "    return np.where(X > 0, X + 1, np.exp(np.minimum(X, 0)))\n"}


@pytest.mark.parametrize("task", ["linear_attention", "linear_attention_step", "chunked_linear_attention"])
def test_a_task_is_judged_with_the_reference_feature_map_standing_in(task):
    """A right function keeps its points beside a wrong or unfinished elu_feature_map: the reference's
    stands in for it (issue 36)."""
    for wrong in ("relu", "float64", "unimplemented"):
        getattr(checks, f"check_{task}")(notebook(ELUS[wrong])[task])


@pytest.mark.parametrize("task", ["linear_attention", "chunked_linear_attention"])
def test_the_visible_memory_budget_is_about_twice_what_the_reference_holds(task):
    """What the cells say: three times the size of the inputs, "about twice what the reference holds"."""
    cell = student_namespace("linear_attention", {})[1][f"test_{task}"]
    assert "for T, d in ((4096, 8), (2048, 64)):" in cell and "allowed = 3 * (Q.nbytes + K.nbytes + V.nbytes)" in cell
    rng = np.random.default_rng(0)
    for T, d in ((4096, 8), (2048, 64)):
        Q, K, V = (rng.normal(size=(T, d)) for _ in range(3))
        for kwargs in ([{"causal": False}, {"causal": True}] if task == "linear_attention" else [{"chunk_size": 64}]):
            _, peak = peak_memory(getattr(reference, task), Q, K, V, **kwargs)
            assert 1.8 * peak < 3 * (Q.nbytes + K.nbytes + V.nbytes) < 2.5 * peak, (T, d, kwargs, peak)


@pytest.mark.parametrize("task", ["linear_attention", "linear_attention_step", "chunked_linear_attention"])
def test_a_function_that_ignores_its_feature_map_is_rejected_beside_a_right_elu(task):
    """Issue 36: with the student's elu_feature_map right, only another feature map shows it."""
    wrong = getattr(students, {"linear_attention": "linear_attention_ignores_feature_map",
                               "linear_attention_step": "step_ignores_feature_map",
                               "chunked_linear_attention": "chunked_ignores_feature_map"}[task])
    with pytest.raises(CheckFailed, match="feature_map is ignored"):
        getattr(checks, f"check_{task}")(wrong)
    _, message = run_check_cell("linear_attention", {task: wrong}, f"test_{task}")
    assert message and "feature_map is ignored" in message
