"""A change a student's function makes to its arguments in the sandbox is made to the grader's copy.

The checks see such a change (and fail the function for it) only if the
grader's arguments end up as the sandbox's did, including when an array was
replaced by one of another shape, as a key/value cache step that extends the
cache it was given does.
"""

import copy

import numpy as np

from autograder.engine.student import copy_changes as _copy_changes
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


def test_arguments_come_back_by_reference_when_unchanged_and_changes_are_copied(monkeypatch):
    from autograder.engine.sandbox import Sandbox, answers

    notebook = ("def keeps(state):\n    return state['a'].sum()\n\n"
                "def moves(state):\n    b = state.pop('b')\n    state['b'] = b * 0 + 5\n    state['a'] = b\n")
    with Sandbox([("0", notebook)], uid=100_000 + 99_004) as sandbox:
        sandbox.run()
        state = {"a": np.zeros(3), "b": np.ones(3)}
        a, b = state["a"], state["b"]
        referenced = []
        sent_array = answers.Call.array
        monkeypatch.setattr(answers.Call, "array", lambda call, index: referenced.append(index) or sent_array(call, index))
        assert sandbox.functions["keeps"](state) == 0.0
        assert referenced == [0, 1] and state == {"a": a, "b": b}  # no array travelled back
        referenced.clear()
        sandbox.functions["moves"](state)  # b, unchanged, by reference in a's place (after b's)
        assert referenced == [1] and state["a"] is a and state["b"] is b
        assert np.array_equal(a, np.ones(3)) and np.array_equal(b, [5.0, 5.0, 5.0])
