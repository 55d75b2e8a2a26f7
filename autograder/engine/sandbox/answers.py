"""The grader's side of the stand-ins: the correct function's answer to a stand-in's request.

The reference answers here, in the grader's process (it never enters the student's), within a
budget of its own (the student's clock is paused while the grader answers): the answers of one
call together get at most the longest time any call may take (`Limits.call_seconds`, as
wall-clock time at `Limits.wall_factor`), never past the submission's deadline, each within
the notebook's memory limit, with one BLAS thread (`blas`). Over time, the reference is
interrupted by an exception it cannot catch (`_OverTime`, a BaseException raised again until it
has stopped), and the stand-in raises TimeoutError.
"""

import resource
import signal
import threading
import time
import warnings

import numpy as np

from .. import blas, memory, protocol, standins


class _OverTime(BaseException):
    """The answer ran out of its time: raised in the reference's code, again and again until it
    has stopped (a reference that catches it gains nothing)."""


REPEAT = 0.05  # seconds between two _OverTime, while the reference has not stopped


class Call:
    """One call of a student's function whose stand-ins ask: the correct functions (`stand_ins`:
    {name: function}), the arrays sent during the call (by index) and the answers' budget."""

    def __init__(self, submission, name, seconds, stand_ins):
        self.submission, self.name, self.stand_ins = submission, name, stand_ins
        limits = submission.limits
        self.seconds, self.wait = seconds, seconds * limits.wall_factor  # the call's limit; a message's wait
        self.budget = limits.call_seconds * limits.wall_factor  # the answers' time, in all
        self.sent = []

    def array(self, index):
        """A copy of the array of index `index` among those sent during the call (its arguments,
        then the stand-ins' answers), which the runner sent back unchanged by that index."""
        if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(self.sent)):
            raise protocol.WireError("a reference to an array that was not sent")
        return self.sent[index].copy()

    def answer(self, request, blobs):
        """(op, fields, blobs) of the reply to a stand-in's request: our function's value for its
        arguments, only for a name of the call; its error (type name, message) when it raises;
        "unbound" when the arguments do not bind to its parameters (the runner then calls the
        student's own). ValueError when the request is malformed."""
        name = request["name"]
        function = self.stand_ins.get(name)
        try:
            args, kwargs = protocol.decode(request["arguments"], blobs, self.array)
        except (protocol.WireError, ValueError, TypeError) as error:
            raise ValueError(error) from None
        if not isinstance(kwargs, dict) or not isinstance(args, (list, tuple)):
            raise ValueError("malformed arguments")
        if function is None:
            return self._error("raised", "RuntimeError", f"no stand-in for {name!r} now")
        if not standins.binds(function, args, kwargs):
            return self._error("unbound", "TypeError", f"the correct {name}'s parameters do not take these arguments")
        standins.answered(name)
        try:
            value = self._compute(function, args, kwargs, name)
        except Exception as error:  # what a correct function raises on these arguments
            return self._error("raised", type(error).__name__, str(error)[:2000])
        tree, out_blobs = protocol.encode(value)
        if sum(blob.nbytes for blob in out_blobs) > protocol.MAX_MESSAGE_BYTES // 2:
            return self._error("raised", "MemoryError", (
                f"the correct {name}'s value on these arguments is larger than a stand-in may send "
                f"({protocol.MAX_MESSAGE_BYTES // 2 // 1024 ** 2} MiB)"))
        self.sent += out_blobs
        return "answer", {"value": tree}, out_blobs

    @staticmethod
    def _error(op, ename, evalue):
        return op, {"error": {"ename": ename, "evalue": evalue}}, []

    def _compute(self, function, args, kwargs, name):
        """``function(*args, **kwargs)`` within the answers' budget (see the module's doc)."""
        seconds = min(self.budget, self.submission.deadline - time.monotonic())
        if seconds <= 0:
            raise TimeoutError(f"the correct {name} was not computed: the time for its answers is up")
        started = time.monotonic()
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"), blas.limited(1):
                warnings.simplefilter("ignore")
                return bounded(function, args, kwargs, seconds, self.submission.limits.memory_bytes, name)
        finally:
            self.budget -= time.monotonic() - started


def bounded(function, args, kwargs, seconds, memory_bytes, name):
    """``function(*args, **kwargs)`` (the reference answering a stand-in, in the grader) within
    `seconds` (SIGALRM, in the main thread) and `memory_bytes` more address space (RLIMIT_AS,
    lowered for the call): over either, TimeoutError or MemoryError naming `name`, which the
    stand-in raises in the student's call; the grader goes on. The alarm raises `_OverTime` only in
    the frames the function runs, never in this one's: its own cleanup always runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = memory.address_space() + memory_bytes
    cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    fired, armed = [], [True]

    def over_time(signum, frame):
        fired.append(True)
        if armed[0] and frame is not None and frame.f_code is not bounded.__code__:
            raise _OverTime()
    timed = threading.current_thread() is threading.main_thread()
    if timed:
        previous = signal.signal(signal.SIGALRM, over_time)
        signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    value = failed = None
    try:
        value = function(*args, **kwargs)
    except BaseException as error:  # over time, whatever it raised then, it did not answer
        if not fired and not isinstance(error, MemoryError):
            raise
        failed = MemoryError(f"the correct {name} needs more than {memory_bytes / 1024 ** 3:g} GiB "
                             "on these arguments")
    finally:
        armed[0] = False
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if fired:
        raise TimeoutError(f"the correct {name} took longer than the time left for its answers "
                           f"({seconds:.3g} s) on these arguments")
    if failed is not None:
        raise failed
    return value
