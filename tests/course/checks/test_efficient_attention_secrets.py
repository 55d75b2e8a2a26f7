"""Every secret holds every case the efficient-attention checks promise: a backward that is
wrong only for the queries that see no key, or only where a masked score is far above the
others, fails on every secret."""

import numpy as np
import pytest

from autograder.engine import harness
from autograder.engine.checking import CheckFailed
from autograder.checks.efficient_attention import check_flash_attention_backward
from autograder.samples.implementations.efficient_attention import CORRECT, flash_backward_exp_before_mask

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
