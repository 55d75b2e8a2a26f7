"""The hidden checks accept any correct implementation and reject the usual mistakes."""

import pytest

from autograder.checks import scaled_dot_product as checks
from autograder.checks.checking import CheckFailed
from solutions import scaled_dot_product as reference
from tests.autograder.implementations import scaled_dot_product as students

CHECKS_OF_TASK = {
    "softmax": ["check_softmax"],
    "scaled_dot_product_attention": ["check_attention", "check_attention_masks"],
    "causal_mask": ["check_causal_mask"],
    "padding_mask": ["check_padding_mask"],
}


@pytest.mark.parametrize("task", CHECKS_OF_TASK)
@pytest.mark.parametrize("author", ["reference", "student"])
def test_correct_implementation_passes(task, author):
    function = getattr(reference, task) if author == "reference" else students.CORRECT[task]
    for check in CHECKS_OF_TASK[task]:
        getattr(checks, check)(function)


@pytest.mark.parametrize("mistake", students.MISTAKES)
def test_mistake_is_rejected_with_its_reason(mistake):
    task, wrong, check, words = students.MISTAKES[mistake]
    with pytest.raises(CheckFailed) as failure:
        getattr(checks, check)(wrong)
    assert words in str(failure.value)


@pytest.mark.parametrize("task", CHECKS_OF_TASK)
def test_unimplemented_task_fails_with_a_plain_sentence(task):
    def stub(*args, **kwargs):
        raise NotImplementedError()
    stub.__name__ = task
    for check in CHECKS_OF_TASK[task]:
        with pytest.raises(CheckFailed, match="not implemented yet"):
            getattr(checks, check)(stub)


def test_a_correct_function_that_warns_still_passes():
    def noisy_softmax(x, axis=-1):
        import sys
        import warnings
        warnings.warn("a harmless warning", RuntimeWarning)
        print("debugging output", file=sys.stderr)
        return reference.softmax(x, axis)
    checks.check_softmax(noisy_softmax)
