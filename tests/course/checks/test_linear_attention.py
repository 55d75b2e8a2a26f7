"""What the linear-attention checks do beyond the contract of test_hidden_checks.py."""

import inspect
import textwrap

import pytest

from autograder.checks import linear_attention as checks
from autograder.samples.implementations import linear_attention as students


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
def test_a_task_is_judged_with_the_students_own_feature_map(task):
    """A right function keeps its points beside a wrong elu_feature_map (judged with the student's own)
    and beside an unfinished one (called with feature_map=np.exp, judged with np.exp)."""
    for wrong in ("relu", "float64", "unimplemented"):
        getattr(checks, f"check_{task}")(notebook(ELUS[wrong])[task])
