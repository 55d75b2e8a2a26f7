"""A change a student's function makes to its arguments in the sandbox is made to the grader's copy.

The checks see such a change (and fail the function for it) only if the
grader's arguments end up as the sandbox's did, including when an array was
replaced by one of another shape, as a key/value cache step that extends the
cache it was given does.
"""

import copy

import numpy as np

from autograder.engine.sandbox import _copy_changes
from autograder.engine.harness import _unchanged


def cache():
    return [{"k": np.zeros((1, 2, 3, 4)), "v": np.zeros((1, 2, 3, 4)), "src_mask": None}]


def test_values_changed_in_place_are_copied():
    before, after = cache(), cache()
    after[0]["k"][0, 0, 0, 0] = 1.0
    snapshot = copy.deepcopy(before)
    _copy_changes(before, after)
    assert before[0]["k"][0, 0, 0, 0] == 1.0 and not _unchanged(before, snapshot)


def test_values_replaced_by_other_shapes_or_kinds_are_replaced():
    before, after = cache(), cache()
    after[0]["k"] = np.zeros((1, 2, 4, 4))     # one position longer
    after[0]["src_mask"] = np.ones((1, 5), dtype=bool)
    after[0]["extra"] = [1, 2]
    snapshot = copy.deepcopy(before)
    _copy_changes(before, after)
    assert before[0]["k"].shape == (1, 2, 4, 4) and before[0]["src_mask"].shape == (1, 5)
    assert before[0]["extra"] == [1, 2] and not _unchanged(before, snapshot)


def test_lists_grow_and_unchanged_arguments_stay_unchanged():
    before, after = cache(), cache() + cache()
    _copy_changes(before, after)
    assert len(before) == 2
    same, again = cache(), cache()
    snapshot = copy.deepcopy(same)
    _copy_changes(same, again)
    assert _unchanged(same, snapshot)
