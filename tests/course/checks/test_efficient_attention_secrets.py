"""Every secret holds every case the efficient-attention checks promise: a backward that is
wrong only for the queries that see no key (alone in their block, or beside queries that see
keys), or only where a masked score is far above the others, fails on every secret. A right
backward written otherwise is told nothing, and the visible memory budgets keep their margin
over the reference."""

import numpy as np
import pytest

from autograder.engine import harness
from autograder.engine.checking import CheckFailed
from autograder.checks.efficient_attention import check_flash_attention_backward, check_flash_attention_backward_memory
from autograder.samples.implementations.efficient_attention import (ALSO_CORRECT, CORRECT, flash_backward_exp_before_mask,
                                                                    flash_backward_nan_beside_seen_queries)
from solutions import efficient_attention as reference
from solutions.efficient_attention import peak_memory
from tests.course.checks.test_double_mistakes import run_check_cell, student_namespace

SLUG = "efficient_attention"

SECRETS = range(20)


def _unseen_rows(value):
    def backward(Q, K, V, output, logsumexp, grad_output, block_size=64, causal=False):
        grad_Q, grad_K, grad_V = CORRECT["flash_attention_backward"](Q, K, V, output, logsumexp, grad_output,
                                                                     block_size, causal)
        unseen = np.isneginf(logsumexp)  # the queries that see no key
        return np.where(unseen[..., None], value, grad_Q), grad_K, grad_V
    backward.__name__ = "flash_attention_backward"
    return backward


@pytest.mark.parametrize("wrong", [_unseen_rows(np.nan), _unseen_rows(1e-12), flash_backward_exp_before_mask],
                         ids=["nan-for-unseen-queries", "almost-zero-for-unseen-queries", "exp-before-mask"])
def test_a_backward_wrong_only_in_a_promised_case_fails_on_every_secret(wrong):
    for secret in SECRETS:
        with harness.secret(secret), pytest.raises(CheckFailed):
            check_flash_attention_backward(wrong)


def test_a_backward_with_nan_for_an_unseen_query_beside_seen_ones_fails_on_every_secret():
    # the fixed case's unseen queries fill exactly one block, which such code skips: a case puts one beside a seen one
    for secret in SECRETS:
        with harness.secret(secret), pytest.raises(CheckFailed, match="contains NaN or inf"):
            check_flash_attention_backward(flash_backward_nan_beside_seen_queries)


@pytest.mark.parametrize("backward", ALSO_CORRECT["flash_attention_backward"], ids=lambda f: f.__name__)
def test_another_right_backward_passes_every_check_and_is_told_nothing(backward):
    # its visible check cell, as the notebook runs it: no failure, nothing printed
    _, message = run_check_cell(SLUG, {"flash_attention_backward": backward}, "test_flash_attention_backward")
    assert message is None
    check_flash_attention_backward(backward)
    check_flash_attention_backward_memory(backward)


VISIBLE_MEMORY = {  # the visible memory case of each check cell: (T_q, T_k, d, block_size), and its budget
    "flash_attention": ((256, 32768, 1, 128), 4 * 2 ** 20),
    "flash_attention_backward": ((256, 32768, 1, 128), 4 * 2 ** 20)}


@pytest.mark.parametrize("task", VISIBLE_MEMORY)
def test_the_visible_memory_budget_is_over_three_times_what_the_reference_holds(task):
    """What the cells say: the budget is "over three times what the reference holds here, its outputs included"."""
    (T_q, T_k, d, block_size), budget = VISIBLE_MEMORY[task]
    cell = student_namespace(SLUG, {})[1][f"test_{task}"]
    assert f"T_q={T_q}, T_k={T_k}, d={d}, block_size={block_size}" in cell and f"peak <= {budget // 2 ** 20} * 2 ** 20" in cell
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(T_q, d)), rng.normal(size=(T_k, d)), rng.normal(size=(T_k, d))
    args = (Q, K, V) if task == "flash_attention" else (Q, K, V, np.zeros((T_q, d)), np.zeros(T_q), rng.normal(size=(T_q, d)))
    _, peak = peak_memory(getattr(reference, task), *args, block_size=block_size)
    assert 3 * peak < budget
