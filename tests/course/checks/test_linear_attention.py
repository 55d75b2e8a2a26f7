"""What the linear-attention checks do beyond the contract of test_hidden_checks.py."""

import numpy as np
import pytest

from autograder.checks import linear_attention as checks
from autograder.engine import harness
from autograder.engine.checking import CheckFailed
from autograder.samples.implementations import linear_attention as students
from solutions import linear_attention as reference
from solutions.efficient_attention import peak_memory
from tests.course.checks.test_double_mistakes import student_namespace


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


def visible_message(task, wrong):
    """The message of the task's visible check cell with ``wrong`` as the task's function (which may call
    the correct one of the implementations by name)."""
    namespace, cells = student_namespace("linear_attention", {})
    namespace[task] = wrong
    with pytest.raises(Exception) as failure:
        exec(cells[f"test_{task}"], namespace)
    assert type(failure.value).__name__ == "CheckFailed", repr(failure.value)  # the notebook's own class
    return str(failure.value)


IGNORED_ARGUMENT = {  # (task, argument) -> the wrong function that ignores it
    ("linear_attention", "feature_map"): students.linear_attention_ignores_feature_map,
    ("linear_attention_step", "feature_map"): students.step_ignores_feature_map,
    ("chunked_linear_attention", "feature_map"): students.chunked_ignores_feature_map,
    ("linear_attention", "eps"): students.linear_attention_ignores_eps,
    ("linear_attention_step", "eps"): students.step_ignores_eps,
    ("chunked_linear_attention", "eps"): students.chunked_ignores_eps}


@pytest.mark.parametrize("task, argument", IGNORED_ARGUMENT)
def test_a_function_that_ignores_an_argument_is_rejected_beside_a_right_elu(task, argument):
    """Issue 36: every argument of the API is exercised. With the student's elu_feature_map right, only
    another feature_map (or eps) shows it, on every secret; the visible check names it too."""
    wrong = IGNORED_ARGUMENT[task, argument]
    for secret in range(5):
        with harness.secret(secret), pytest.raises(CheckFailed, match=f"{argument} is ignored"):
            getattr(checks, f"check_{task}")(wrong)
    assert f"{argument} is ignored" in visible_message(task, wrong)


def test_the_hidden_check_holds_the_visible_checks_other_feature_map_without_causal():
    """Under grading a visible failure costs nothing once the hidden checks pass with the reference's
    elu_feature_map standing in: so the hidden checks hold the visible check's case, np.exp without
    causal, which a function that ignores its feature_map only there fails."""
    wrong = students.linear_attention_ignores_feature_map_unless_causal
    assert "feature_map is ignored" in visible_message("linear_attention", wrong)
    with pytest.raises(CheckFailed, match=r"feature_map=np.exp, eps=0.5: feature_map is ignored"):
        checks.check_linear_attention(wrong)
