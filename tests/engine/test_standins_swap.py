"""One swap of stand-ins, the same in process and in the sandbox (`standins`), and the
grader's guards around it: undone in reverse order, unbound arguments to the student's own,
a budget of its own for the reference's answers (one BLAS thread; a batch's workers share the
cores), and names a runner never sends refused.
"""

import time
import types

import numpy as np
import pytest

from autograder.engine import blas, grade, harness, protocol, standins
from autograder.engine.checking import CheckFailed
from autograder.engine.sandbox import Limits, Sandbox, SandboxStopped

UID = 100_000 + 99_005  # a sandbox user no grading process uses

NOTEBOOK = '''
import numpy as np

def softmax(x, axis=-1):          # wrong: no exp
    return x / x.sum(axis=axis, keepdims=True)

normalize = softmax               # the same function under a second graded name

def attention(scores, values):    # right, beside a wrong softmax
    return normalize(scores) @ values

def _make(scale):
    def scaled(x, axis=-1, temperature=1.0):  # a closure (it cannot be swapped by identity), with a
        return x / (scale * temperature * x.sum(axis=axis, keepdims=True))  # parameter of its own
    scaled.__name__ = "scaled"
    return scaled

scaled = _make(1.0)

def tempered(scores, values):     # calls its neighbour with an argument the correct one does not take
    return scaled(scores, temperature=1.0) @ values
'''


def softmax(x, axis=-1):
    """The reference."""
    exps = np.exp(x - x.max(axis=axis, keepdims=True))
    return exps / exps.sum(axis=axis, keepdims=True)


def normalize(x, axis=-1):
    """The reference of the second name."""
    return softmax(x, axis)


def scaled(x, axis=-1):
    """A reference without the student's `temperature`."""
    return softmax(x, axis)


X = np.array([1.0, 3.0])
SCORES = np.array([[0.0, np.log(3.0)]])
VALUES = np.array([[4.0], [0.0]])


def plain():
    namespace = {}
    exec(NOTEBOOK, namespace)
    return namespace


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox([("0", NOTEBOOK)], uid=UID, limits=Limits(call_seconds=0.5)) as sandbox:
        sandbox.run()
        yield sandbox


def test_a_function_bound_to_two_graded_names_is_restored_whole_in_process():
    namespace = plain()
    own = namespace["softmax"].__code__
    assert np.allclose(harness.call(namespace["attention"], SCORES, VALUES, on="x", stand_ins=(softmax, normalize)),
                       [[1.0]])
    assert namespace["softmax"].__code__ is own  # undone in reverse order: its own code, not a trampoline's
    assert np.allclose(namespace["normalize"](X), [0.25, 0.75])  # the student's again, not the reference


def test_a_function_bound_to_two_graded_names_is_restored_whole_in_the_sandbox(sandbox):
    assert np.allclose(harness.call(sandbox.functions["attention"], SCORES, VALUES, on="x",
                                    stand_ins=(softmax, normalize)), [[1.0]])
    assert np.allclose(sandbox.functions["softmax"](X), [0.25, 0.75])  # not a dead stand-in
    assert np.allclose(sandbox.functions["normalize"](X), [0.25, 0.75])


def test_unbound_arguments_of_a_neighbour_that_cannot_be_swapped_go_to_the_students_own_in_both():
    namespace = plain()
    with Sandbox([("0", NOTEBOOK)], uid=UID) as sandbox:
        sandbox.run()
        inside = harness.call(sandbox.functions["tempered"], SCORES, VALUES, on="x", stand_ins=(scaled,))
    outside = harness.call(namespace["tempered"], SCORES, VALUES, on="x", stand_ins=(scaled,))
    assert np.allclose(inside, [[0.0]]) and np.allclose(outside, [[0.0]])  # the student's own scaled, both
    assert namespace["scaled"].__name__ == "scaled" and namespace["scaled"](X, temperature=2.0)[0] == 0.125


def test_swaps_are_undone_in_reverse_order():
    def twice(x):
        return 2 * x
    namespace = {"twice": twice, "again": twice}
    undo = standins.swapped(namespace, None, {"twice": lambda x: 3 * x, "again": lambda x: 4 * x})
    assert twice(1) == 4  # the last swap answers
    undo()
    assert twice(1) == 2 and namespace == {"twice": twice, "again": twice}


def test_a_reference_that_catches_exceptions_cannot_outlast_its_answers_budget(sandbox):
    """Its answers get the longest a call may take (0.5 s of CPU, 1 s of clock here), not the
    submission's remaining time; the timeout is raised again until the reference stops."""
    def stubborn(x, axis=-1):
        ends = time.monotonic() + 4
        while time.monotonic() < ends:
            try:
                time.sleep(0.01)
            except Exception:  # noqa: BLE001 (what a reference might do)
                pass
        return softmax(x, axis)
    stubborn.__name__ = "softmax"
    started = time.monotonic()
    with pytest.raises(CheckFailed, match=r"TimeoutError \(the correct softmax took longer than the time left"):
        harness.call(sandbox.functions["attention"], SCORES, VALUES, on="x", stand_ins=(stubborn,))
    assert time.monotonic() - started < 3
    assert np.allclose(harness.call(sandbox.functions["attention"], SCORES, VALUES, on="x", stand_ins=(softmax,)),
                       [[1.0]])  # the grader and the sandbox go on


def test_names_the_runner_never_sends_are_refused():
    with pytest.raises(protocol.WireError, match="__builtins__"):
        protocol.parse({"op": "ran", "functions": ["softmax", "__builtins__"]}, ("ran",), protocol.RUNNER)
    with pytest.raises(protocol.WireError):
        protocol.parse({"op": "stand-in", "name": "_secret", "arguments": None}, ("stand-in",), protocol.RUNNER)
    ran = protocol.parse({"op": "ran", "functions": ["softmax", "a b", 3]}, ("ran",), protocol.RUNNER)
    assert ran["functions"] == ["softmax"]  # what is no identifier is left out, as before


FORGED = '''
import os
import sys

wire = sys.modules.get("protocol") or sys.modules["wire"]  # the runner's own module
channel = os.fdopen(os.dup(int(sys.argv[1])), "wb")
wire.send(channel, {"op": "cell", "id": "0", "stdout": "", "stderr": "", "error": None, "seconds": 0.0})
wire.send(channel, {"op": "ran", "functions": ["__builtins__", "softmax"]})
'''


def test_a_forged_message_naming_builtins_stops_the_sandbox():
    """`__builtins__` among the functions would replace the hidden checks' builtins."""
    with Sandbox([("0", FORGED)], uid=UID) as sandbox:
        with pytest.raises(SandboxStopped, match="malformed message"):
            sandbox.run()
        assert "__builtins__" not in sandbox.functions


def test_the_reference_answers_a_stand_in_with_one_blas_thread(sandbox):
    """As the student's code has one in its sandbox: an answer takes no more of the machine."""
    seen = []

    def counting(x, axis=-1):
        seen.append(blas.threads())
        return softmax(x, axis)
    counting.__name__ = "softmax"
    harness.call(sandbox.functions["attention"], SCORES, VALUES, on="x", stand_ins=(counting,))
    assert seen == [1]


def _blas_threads_of_a_worker(course, submission, fingerprint, out, key, limits, autograded=None):
    return types.SimpleNamespace(student_id=submission, assignment="a", status=str(blas.threads()), score=0,
                                 max_score=0, grader_errors=[])


def test_each_worker_of_a_batch_gets_its_share_of_the_cores(monkeypatch):
    """Two workers on a machine of C cores: C // 2 BLAS threads each (never 2 × C threads)."""
    monkeypatch.setattr(grade, "_grade_or_report", _blas_threads_of_a_worker)  # the forked workers' too
    results = grade._grade_all(None, [("alice", None), ("bob", None)], None, None, Limits(), 2, lambda line: None)
    assert [result.status for result in results] == [str(blas.share(2))] * 2
