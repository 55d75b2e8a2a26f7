"""What the linear-attention checks do beyond the contract of test_hidden_checks.py."""

import numpy as np
import pytest

from autograder.checks import linear_attention as checks
from autograder.engine import harness
from autograder.engine.checking import CheckFailed
from autograder.samples.implementations import linear_attention as students
from solutions import linear_attention as reference
from solutions.efficient_attention import peak_memory
from tests.course.checks.test_double_mistakes import run_check_cell, student_namespace


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


IGNORES_FEATURE_MAP = {"linear_attention": students.linear_attention_ignores_feature_map,
                       "linear_attention_step": students.step_ignores_feature_map,
                       "chunked_linear_attention": students.chunked_ignores_feature_map}


@pytest.mark.parametrize("task", IGNORES_FEATURE_MAP)
def test_a_function_that_ignores_its_feature_map_is_rejected_beside_a_right_elu(task):
    """Issue 36: with the student's elu_feature_map right, only another feature map shows it, on every
    secret; the visible check names it too."""
    wrong = IGNORES_FEATURE_MAP[task]
    for secret in range(5):
        with harness.secret(secret), pytest.raises(CheckFailed, match="feature_map is ignored"):
            getattr(checks, f"check_{task}")(wrong)
    _, message = run_check_cell("linear_attention", {task: wrong}, f"test_{task}")
    assert message and "feature_map is ignored" in message


def test_the_hidden_check_holds_the_visible_checks_other_feature_map_without_causal():
    """Under grading a visible failure costs nothing once the hidden checks pass with the reference's
    elu_feature_map standing in: so the hidden checks hold the visible check's case, np.exp without
    causal, which a function that ignores its feature_map only there fails."""
    wrong = students.linear_attention_ignores_feature_map_unless_causal
    _, message = run_check_cell("linear_attention", {"linear_attention": wrong}, "test_linear_attention")
    assert message and "feature_map is ignored" in message
    with pytest.raises(CheckFailed, match=r"feature_map=np.exp: feature_map is ignored"):
        checks.check_linear_attention(wrong)
