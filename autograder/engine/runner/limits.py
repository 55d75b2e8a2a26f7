"""Limits of the student's code: time (CPU and clock), output, memory, processes, files."""

import resource
import signal
import sys
import types

import memory
from runner.cells import CappedOutput


class CellTimeout(BaseException):
    """Raised in the student's code when a cell or a call runs out of time.

    args: (the notebook's outermost function that was running, or None; the limit in seconds; its
    innermost one, which was running when time ran out, or None)."""


def install(nb):
    """Time limits raise CellTimeout in the student's code: the clock's (SIGALRM) and CPU time's."""
    def on_alarm(signum, frame):
        outermost, innermost = running_functions(nb, frame)
        raise CellTimeout(outermost, nb.limit, innermost)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGPROF, on_alarm)


def timed_out(nb, frame):
    """The CellTimeout of the cell or call running at `frame` (a shell command ran out of time)."""
    outermost, innermost = running_functions(nb, frame)
    return CellTimeout(outermost, nb.limit, innermost)


def running_functions(nb, frame):
    """The names of the outermost and the innermost functions of the notebook on the stack of
    `frame` (None, None when there is none); a function by its own name when the notebook gives it
    that name, rather than an alias's."""
    codes = {value.__code__: value.__name__ if nb.namespace.get(value.__name__) is value else name
             for name, value in nb.namespace.items() if isinstance(value, types.FunctionType)}
    outermost = innermost = None
    while frame is not None:
        outermost = codes.get(frame.f_code, outermost)
        innermost = innermost or outermost
        frame = frame.f_back
    return outermost, innermost


def with_limits(nb, run, timeout, wall_factor, allowance):
    """(run(), its stdout, its stderr): its output captured (at most `allowance`[0] characters) and
    an alarm after `timeout` CPU seconds (or `wall_factor` times as many seconds of the clock)."""
    out, err = CappedOutput(nb, allowance, "stdout"), CappedOutput(nb, allowance, "stderr")
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    nb.limit = timeout
    signal.setitimer(signal.ITIMER_PROF, timeout)
    signal.setitimer(signal.ITIMER_REAL, timeout * wall_factor)
    try:
        return run(), out, err
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        sys.stdout, sys.stderr = saved


def restrict(limits):
    """Set the limits the student's code cannot raise (from here on, it runs)."""
    size = limits["memory_bytes"]
    if limits.get("memory_above_baseline") is not None:  # a sandbox for memory checks
        size = min(size, memory.address_space(blas_ready=True) + int(limits["memory_above_baseline"]))
    for limit, value in ((resource.RLIMIT_AS, size),
                         (resource.RLIMIT_NPROC, limits["processes"]),
                         (resource.RLIMIT_FSIZE, limits["file_bytes"]),
                         (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))


def stop_calling(nb, name, reason):
    """Replace the notebook's function `name` by one that raises TimeoutError(reason) at once (the
    function itself is kept in `nb.stopped`, for a call that the grader revives)."""
    def stopped(*args, **kwargs):
        raise TimeoutError(reason)
    stopped.__name__ = stopped.__qualname__ = name
    if name in nb.namespace:
        nb.stopped[name] = nb.namespace[name]
    nb.namespace[name] = nb.stoppers[name] = stopped


def note_timeout(nb, error, where):
    """After a cell of the course's or a call: the function that ran out of time is not called again."""
    function = error.args[0] if isinstance(error, CellTimeout) and error.args else None
    if function and function not in nb.stoppers:
        stop_calling(nb, function, f"{function} ran longer than its limit of {error.args[1]:g} s {where} "
                                   "and is not called again")


def keep_stopped(nb):
    """A cell that defines a stopped function again does not revive it."""
    for name, stopper in nb.stoppers.items():
        if name in nb.namespace and nb.namespace[name] is not stopper:
            nb.stopped[name] = nb.namespace[name]
        nb.namespace[name] = stopper
