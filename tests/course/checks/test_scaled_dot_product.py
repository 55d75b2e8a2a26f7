"""What the scaled dot-product checks do beyond the contract of test_hidden_checks.py."""

from autograder.checks import scaled_dot_product as checks
from solutions import scaled_dot_product as reference


def test_a_correct_function_that_warns_and_prints_to_stderr_still_passes():
    def noisy_softmax(x, axis=-1):
        import sys
        import warnings
        warnings.warn("a harmless warning", RuntimeWarning)
        print("debugging output", file=sys.stderr)
        return reference.softmax(x, axis)
    checks.check_softmax(noisy_softmax)
