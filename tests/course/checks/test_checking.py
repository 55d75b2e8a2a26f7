"""The check helpers stamped into every notebook (autograder/engine/checking.py)."""

import numpy as np
import pytest

from autograder.engine.checking import ATOL, RTOL, CheckFailed, check_close, close


def failure(*args, **kwargs):
    with pytest.raises(CheckFailed) as raised:
        check_close(*args, **kwargs)
    return raised.value


def test_one_tolerance():
    assert close(1.0 + RTOL / 2, 1.0) and not close(1.0 + 3 * RTOL, 1.0)
    assert close(ATOL / 2, 0.0) and not close(3 * ATOL, 0.0)
    assert not close(np.zeros(2), np.zeros(3)) and not close("a", 1.0)


def test_a_small_array_is_shown_in_full_beside_the_expected_one():
    message = str(failure(np.array([[0.5, 0.0]]), [[0.25, -0.25]], "the gradient", "w ⊙ (g − Σ g ⊙ w)"))
    assert message == ("the gradient: expected [[0.25, -0.25]], got [[0.5, 0]] (w ⊙ (g − Σ g ⊙ w)).")


def test_a_large_array_is_shown_as_its_largest_difference_and_first_differing_index():
    expected = np.zeros((4, 5))
    actual = expected.copy()
    actual[1, 2], actual[3, 4] = 0.5, -2.0
    message = str(failure(actual, expected, "H"))
    assert "shape (4, 5)" in message and "largest difference is 2" in message
    assert "at index (1, 2) expected 0, got 0.5" in message


def test_a_mistake_is_named_only_when_it_alone_gives_the_values():
    right, wrong = [0.25, -0.25], [0.5, 0.0]
    named = failure(np.array(wrong), right, "g", mistakes=[(wrong, "the term − Σ g ⊙ w is missing")])
    assert named.cause == "the term − Σ g ⊙ w is missing" and str(named) == "g: the term − Σ g ⊙ w is missing."
    other = failure(np.array([0.125, 0.0]), right, "g", mistakes=[(wrong, "the term − Σ g ⊙ w is missing")])
    assert other.cause is None and "missing" not in str(other) and "got [0.125, 0]" in str(other)
    # two mistakes that give the same values: naming either would be a guess
    both = failure(np.array(wrong), right, "g", mistakes=[(wrong, "one cause"), (wrong, "another cause")])
    assert both.cause is None and "cause" not in str(both)


def test_a_number_is_compared_where_one_number_is_expected():
    check_close(0.5, 0.5, "the loss")
    assert "expected 0.2877, got 0.1438" in str(failure(0.1438, 0.2877, "the loss"))
