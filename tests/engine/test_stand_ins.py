"""A function is judged with correct neighbours: ``harness.call(..., stand_ins=...)``.

While the check's call runs, every other graded function the called one reaches (by its global
name, through a helper that looks the name up, or as a default argument) answers with the
reference's value for its arguments. In the sandbox the reference never enters the student's
process: the stand-ins ask the grader, which answers only during the call it waits on. Outside
it (plain functions) the names are swapped in the function's namespace. Either way the namespace
and the defaults are as before afterwards.
"""

import numpy as np
import pytest

from autograder.engine import harness
from autograder.engine.checking import CheckFailed
from autograder.engine.sandbox import Sandbox, SandboxStopped

UID = 100_000 + 99_002  # a sandbox user no grading process uses

NOTEBOOK = '''
import numpy as np

def softmax(x, axis=-1):          # wrong: no exp
    return x / x.sum(axis=axis, keepdims=True)

def masked(scores):               # an ungraded helper that looks softmax up by name
    return softmax(scores)

def attention(scores, values):    # right, beside a wrong softmax
    return masked(scores) @ values

def mapped(x, feature_map=softmax):  # a graded function as a default argument
    return feature_map(x) * 2

def kept(x):                      # keeps the stand-in it was given (behind its softmax's code), for later
    global STASH
    STASH = next((c for c in softmax.__code__.co_consts if callable(c)), softmax)
    return softmax(x)

def later(x):
    return STASH(x)

def with_a_function(x):           # calls softmax with something that is not plain data
    return softmax(lambda: x)

def where_is_softmax():
    return softmax.__name__, softmax(np.array([0.0, 0.0]))

_alias = softmax                  # the same function under another name, and in a partial
import functools
_partial = functools.partial(softmax, axis=-1)

def through_alias_and_partial(x):
    return _alias(x) + _partial(x)

def with_its_own_parameter(x):    # calls softmax with a parameter that the reference may not have
    return softmax(x, axis=-1)

def raises_what_it_was_answered(x):
    raise ValueError(f"the answer was {softmax(x)}")

def secret_sum(x):                # prints the reference's answer: it stays in the sandbox
    print(softmax(x))
    return np.zeros(1)

def answers_its_answer(x):        # gives a stand-in what another answered: it goes back by reference
    return softmax(softmax(x))

def changes_what_it_sends(x, state):  # changes an argument and an answer in place before sending them
    x *= 2
    first = softmax(x)
    x /= 2
    answered = softmax(x)
    answered *= 4
    return first, softmax(answered), softmax(state["x"])
'''


def softmax(x, axis=-1):
    """The reference."""
    exps = np.exp(x - x.max(axis=axis, keepdims=True))
    return exps / exps.sum(axis=axis, keepdims=True)


SCORES = np.array([[0.0, np.log(3.0)]])
VALUES = np.array([[4.0], [0.0]])


@pytest.fixture(scope="module")
def functions():
    with Sandbox([("0", NOTEBOOK)], uid=UID) as sandbox:
        sandbox.own_cells = ["0"]  # the student's: an error's place is a line of it
        sandbox.run()
        yield sandbox.functions


def plain():
    namespace = {}
    exec(NOTEBOOK, namespace)
    return namespace


def test_a_right_function_beside_a_wrong_neighbour_gets_the_reference_values(functions):
    wrong = functions["attention"](SCORES, VALUES)
    right = harness.call(functions["attention"], SCORES, VALUES, on="x", stand_ins=(softmax,))
    assert np.allclose(right, [[1.0]]) and not np.allclose(wrong, right)
    # the namespace is restored: the student's own softmax again
    assert np.allclose(functions["attention"](SCORES, VALUES), wrong)


def test_defaults_are_stood_in_for_and_restored(functions):
    x = np.array([0.0, np.log(3.0)])
    assert np.allclose(harness.call(functions["mapped"], x, on="x", stand_ins=(softmax,)), [0.5, 1.5])
    assert np.allclose(functions["mapped"](x), 2 * x / x.sum())


def test_the_called_function_is_never_stood_in_for(functions):
    x = np.array([1.0, 3.0])
    assert np.allclose(harness.call(functions["softmax"], x, on="x", stand_ins=(softmax,)), [0.25, 0.75])


def test_a_kept_stand_in_answers_nothing_later(functions):
    x = np.array([0.0, np.log(3.0)])
    assert np.allclose(harness.call(functions["kept"], x, on="x", stand_ins=(softmax,)), [0.25, 0.75])
    with pytest.raises(CheckFailed, match="answered only during the check's call"):
        harness.call(functions["later"], x, on="x", stand_ins=())
    # nor when another call stands in for other names
    with pytest.raises(CheckFailed, match="answered only during"):
        harness.call(functions["later"], x, on="x", stand_ins={"other": softmax})


def test_an_argument_that_is_not_plain_data_fails_naming_the_function(functions):
    with pytest.raises(CheckFailed, match=r"with_a_function raised TypeError \(softmax was given a function"):
        harness.call(functions["with_a_function"], np.zeros(2), on="x", stand_ins=(softmax,))


def test_the_stand_in_is_by_name_and_its_errors_are_the_references(functions):
    name, value = harness.call(functions["where_is_softmax"], on="x", stand_ins=(softmax,))
    assert name == "softmax" and np.allclose(value, [0.5, 0.5])
    with pytest.raises(CheckFailed, match="raised ValueError"):  # the reference's own error
        harness.call(functions["attention"], SCORES, np.zeros((3, 1)), on="x", stand_ins=(softmax,))


def test_plain_functions_swap_their_namespace_and_defaults_and_restore_them():
    namespace = plain()
    own = namespace["softmax"]
    assert np.allclose(harness.call(namespace["attention"], SCORES, VALUES, on="x", stand_ins=(softmax,)),
                       [[1.0]])
    x = np.array([0.0, np.log(3.0)])
    assert np.allclose(harness.call(namespace["mapped"], x, on="x", stand_ins={"softmax": softmax}), [0.5, 1.5])
    assert namespace["softmax"] is own and namespace["mapped"].__defaults__ == (own,)
    with pytest.raises(CheckFailed):  # restored after a failure too
        harness.call(namespace["attention"], SCORES, np.zeros((3, 1)), on="x", stand_ins=(softmax,))
    assert namespace["softmax"] is own


def test_the_sandbox_still_serves_calls_after_stand_ins(functions):
    out = harness.call(functions["secret_sum"], SCORES, on="x", stand_ins=(softmax,))
    assert np.allclose(out, 0.0)
    wrong = SCORES / SCORES.sum(axis=-1, keepdims=True) @ VALUES
    assert np.allclose(functions["attention"](SCORES, VALUES), wrong)


class _Alive:
    alive, functions = True, {}


@pytest.mark.parametrize("hidden, score", [("harness.answered('softmax')", 3.0),
                                           ("harness.answered('softmax'); raise CheckFailed('attention: wrong.')", 0.0),
                                           ("pass", 0.0)])
def test_under_grading_the_hidden_checks_decide_when_the_reference_stood_in(hidden, score):
    """A visible failure costs nothing when the hidden checks (which include the visible cases) pass
    with the reference standing in for a function the task used; else it costs the points."""
    from autograder.engine.assignment import Test
    from autograder.engine.hidden import run_test

    visible = {"error": {"ename": "CheckFailed", "evalue": "weights: expected [[0.25, 0.75]], got [[1, 1]].",
                         "mro": ["CheckFailed"], "function": None}}
    test = Test("test_attention", 3.0, "from autograder.engine import harness\n"
                                       f"from autograder.engine.checking import CheckFailed\n{hidden}")
    result = run_test(test, visible, _Alive(), None)
    assert result.score == score
    assert ("Judged with a correct softmax" in result.message) == bool(score)


def test_the_checks_note_which_stand_ins_answered(functions):
    with harness.answering() as names:
        harness.call(functions["mapped"], np.zeros(2), on="x", stand_ins=(softmax,))
    assert names == {"softmax"}
    namespace = plain()
    with harness.answering() as names:
        harness.call(namespace["attention"], SCORES, VALUES, on="x", stand_ins=(softmax,))
        harness.call(namespace["attention"], SCORES, VALUES, on="x", stand_ins={"unused": softmax})
    assert names == {"softmax"}


def test_the_time_the_grader_takes_to_answer_is_not_the_students():
    """The call's clock limit (twice its CPU limit) stops while a stand-in waits for the grader."""
    import time

    from autograder.engine.sandbox import Timeouts

    def slow_softmax(x, axis=-1):
        time.sleep(1.2)  # longer than the call's wall-clock limit of 2 × 0.5 s
        return softmax(x, axis)
    with Sandbox([("0", NOTEBOOK)], uid=UID, timeouts=Timeouts(call=0.5)) as sandbox:
        sandbox.run()
        out = harness.call(sandbox.functions["attention"], SCORES, VALUES, on="x",
                           stand_ins={"softmax": slow_softmax})
    assert np.allclose(out, [[1.0]])


def test_aliases_and_partials_of_a_neighbour_answer_as_the_reference(functions):
    """The student's function itself answers (its code is swapped), whatever name holds it."""
    x = np.array([0.0, np.log(3.0)])
    assert np.allclose(harness.call(functions["through_alias_and_partial"], x, on="x", stand_ins=(softmax,)),
                       [0.5, 1.5])
    assert np.allclose(functions["through_alias_and_partial"](x), 2 * x / x.sum())  # restored


def test_arguments_the_reference_does_not_take_go_to_the_students_own(functions):
    x = np.array([1.0, 3.0])

    def softmax(x):  # a reference without the student's parameter
        raise AssertionError("not called")
    with harness.answering() as names:
        out = harness.call(functions["with_its_own_parameter"], x, on="x", stand_ins=(softmax,))
    assert np.allclose(out, [0.25, 0.75]) and not names  # the student's own softmax: x / x.sum()


def test_an_exception_after_an_answer_shows_its_type_and_line_not_its_message(functions):
    with pytest.raises(CheckFailed) as failure:
        harness.call(functions["raises_what_it_was_answered"], np.array([0.0, 0.0]), on="x", stand_ins=(softmax,))
    message = str(failure.value)
    assert "raised ValueError (its message is not shown" in message and "at line" in message and "0.5" not in message


def test_the_reference_answers_within_the_memory_limit(functions):
    def softmax(x, axis=-1):  # a reference asked for something huge
        return np.ones(10 ** 12)
    with pytest.raises(CheckFailed, match=r"MemoryError \(the correct softmax needs more than"):
        harness.call(functions["attention"], SCORES, VALUES, on="x", stand_ins=(softmax,))
    assert np.allclose(harness.call(functions["attention"], SCORES, VALUES, on="x", stand_ins=(globals()["softmax"],)),
                       [[1.0]])  # the grader and the sandbox go on


def test_the_reference_answers_within_the_submissions_time():
    import time

    def slow_softmax(x, axis=-1):
        while True:
            time.sleep(0.01)
    with Sandbox([("0", NOTEBOOK)], uid=UID) as sandbox:
        sandbox.run()
        sandbox.deadline = time.monotonic() + 1.0
        started = time.monotonic()
        with pytest.raises(SandboxStopped, match="the submission used up"):  # not the grader's time
            harness.call(sandbox.functions["attention"], SCORES, VALUES, on="x", stand_ins={"softmax": slow_softmax})
        assert time.monotonic() - started < 5


def test_plain_functions_answer_by_identity_and_take_their_own_arguments_to_the_students():
    namespace = plain()
    own = namespace["softmax"]
    x = np.array([0.0, np.log(3.0)])
    assert np.allclose(harness.call(namespace["through_alias_and_partial"], x, on="x", stand_ins=(softmax,)),
                       [0.5, 1.5])
    assert namespace["softmax"] is own and np.allclose(own(x), x / x.sum())  # restored

    def narrow(x):  # a reference without the student's parameter
        raise AssertionError("not called")
    narrow.__name__ = "softmax"
    assert np.allclose(harness.call(namespace["with_its_own_parameter"], x, on="x", stand_ins=(narrow,)),
                       x / x.sum())


def test_arrays_the_grader_sent_go_back_to_it_by_reference_only_when_unchanged(functions, monkeypatch):
    from autograder.engine.sandbox.answers import Call
    referenced = []
    sent_array = Call.array
    monkeypatch.setattr(Call, "array", lambda call, index: referenced.append(index) or sent_array(call, index))
    x = np.array([0.0, np.log(3.0)])
    twice = harness.call(functions["answers_its_answer"], x, on="x", stand_ins=(softmax,))
    # x, the first answer, then x again, as an argument after the call
    assert np.allclose(twice, softmax(softmax(x))) and referenced == [0, 1, 0]
    referenced.clear()
    first, fourfold, state = harness.call(functions["changes_what_it_sends"], x, {"x": x.copy()}, on="x",
                                          stand_ins=(softmax,))
    assert np.allclose(first, softmax(2 * x)) and np.allclose(fourfold, softmax(4 * softmax(x)))
    # by reference: x once changed back (the same bytes again) and the dict's x, to the stand-ins and
    # after the call; by value: the doubled x and the changed answer
    assert np.allclose(state, softmax(x)) and referenced == [0, 1, 0, 1]
