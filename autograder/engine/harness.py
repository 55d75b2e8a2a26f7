"""Calling a student's function from a hidden check, and judging what it gave.

Whatever the function does wrong (raises, warns, prints to stderr, modifies
its input), the check ends in one `CheckFailed` sentence, never in a traceback
that would show hidden test code in the feedback.

What the function gave is judged by the checks' case tables (``cases``), whose
every value goes through ``checking.check_close``.

Memory is measured where the student's code cannot reach it: ``call_in_memory``
runs a function under a hard cap on its process's address space, set before the
student's code runs there, and fails the check when the call does not fit.
Nothing the notebook measures or redefines (``tracemalloc``, a given
``peak_memory``, NumPy) changes what it decides.
"""

import contextlib
import contextvars
import copy
import io
import warnings

import numpy as np

from . import standins
from .checking import CheckFailed
from .standins import answered, answering  # noqa: F401 (the checks' and the grader's)
from .student import Stopped, as_student

# The grader passes a secret number per submission to the checks it runs
# (`with secret(number): ...`), so that their inputs cannot be known, or
# computed, in advance. Without one (a check run in a notebook, by plain
# nbgrader or in the tests) the inputs are reproducible.
_SECRET = contextvars.ContextVar("secret", default=None)


@contextlib.contextmanager
def secret(number):
    """Run the checks of the `with` block on inputs drawn with the secret `number` (None: none)."""
    token = _SECRET.set(number)
    try:
        yield
    finally:
        _SECRET.reset(token)


def current_secret():
    """The secret of the checks running now, or None."""
    return _SECRET.get()


def seeded(seed):
    """The random generator of a check's inputs: ``seed`` mixed with the grader's secret."""
    number = _SECRET.get()
    return np.random.default_rng(seed if number is None else [seed, number])


class Unfinished(CheckFailed):
    """The function raised NotImplementedError: it is as released, or it calls an earlier task that is.

    Nothing tells the two apart, so a check never leaves such a case to the earlier task's check: a
    function as released, beside an unfinished earlier one, would earn points.
    """


def call(function, *args, on, stand_ins=(), **kwargs):
    """Return ``function(*args, **kwargs)``; ``on`` describes the input for messages.

    Warnings and stderr are silenced while it runs: nbgrader scores a cell
    zero when anything reaches stderr, and a correct function that warns
    deserves its points. Arguments, parameter dicts included, must come back
    unchanged.

    ``stand_ins``: the reference's versions of the graded functions (by their ``__name__``), in
    the order of the tasks. When the checked function's own is among them, only those before it
    and those that its reference reaches stand in (`_reached`: by name, through an ungraded helper,
    as a default argument; never the function itself, nor a later task that uses it); otherwise
    all of them. While it runs,
    the student's functions of those names answer with the reference's value for the arguments they
    are given, however the function reaches them (by name, through a helper, as a
    default argument), so that a task is judged on its own. See `standing_in`.
    """
    name = getattr(function, "__name__", "your function")
    snapshot = copy.deepcopy((args, kwargs))
    with warnings.catch_warnings(), np.errstate(all="ignore"), \
            contextlib.redirect_stderr(io.StringIO()), standing_in(function, stand_ins) as run:
        warnings.simplefilter("ignore")
        try:
            result = run(*args, **kwargs)
        except NotImplementedError:
            raise Unfinished(f"{name} raises NotImplementedError: it is not implemented yet, or a function "
                             "of yours that it calls is not (finish that one first).") from None
        except MemoryError as error:
            if _MEMORY.get():
                raise _OutOfMemory() from None
            detail = f" ({error})" if str(error) else ""  # a stand-in's: the reference over its limit
            raise CheckFailed(f"{name} raised MemoryError{detail} on {on}.") from None
        except Exception as error:  # any failure of student code is a failed check
            raise CheckFailed(
                f"{name} raised {type(error).__name__} ({error}) on {on}."
            ) from None
    if not _unchanged((args, kwargs), snapshot):
        raise CheckFailed(f"{name} modified its input on {on}: compute new arrays instead "
                          "of changing its arguments (or their parameters) in place.")
    return result


@contextlib.contextmanager
def standing_in(function, stand_ins):
    """Yield what calls ``function`` with the student's functions named as those of ``stand_ins``
    (the reference's: functions, or a dict name -> function) answering as them: only those that
    the reference of ``function`` reaches when it is among them (`standins.chosen`), never
    ``function`` itself. Wherever the function runs (`student.Student`): in the grader's
    sandbox, the reference never enters the student's process (stand-ins there send their
    arguments, plain data, to the grader, which answers only for the names of the call it is
    waiting on); in this process, the swap happens in its namespace and defaults, then is undone.
    """
    if not isinstance(stand_ins, dict):
        stand_ins = {stand_in.__name__: stand_in for stand_in in stand_ins}
    answers = standins.chosen(function, stand_ins)
    if not answers:
        yield function
        return
    student = as_student(function)
    yield lambda *args, **kwargs: student.call(args, kwargs, answers)


def call_in_memory(function, *args, on, limit_bytes, stand_ins=(), **kwargs):
    """``call(function, *args, on=on, stand_ins=stand_ins, **kwargs)`` where the call has at most ``limit_bytes`` of
    memory beyond its process's baseline; ``CheckFailed`` naming the function, the input and
    the limit when it does not fit (MemoryError, or its process dies).

    Where the function runs decides how, and the student's code can change neither:

    - a sandbox proxy (``sandbox.StudentFunction``, under ``grade``) runs in a second sandbox
      of the same submission (``Sandbox.in_memory``: same cells, time limits and deadline),
      whose runner sets its hard address-space limit (RLIMIT_AS, which the student's user has
      no capability to raise) at its own size after its imports plus ``limit_bytes``, before
      the notebook's first cell. The cap is absolute for that process: whatever the notebook
      holds counts, memory it reserved earlier and frees inside the call gains nothing, and
      the call's inputs, decoded there, count too. That sandbox runs the notebook again when
      a memory check first asks, and serves every memory check of the submission (one per
      ``limit_bytes``);
    - a plain function (plain nbgrader kernels, the tests) runs in a forked child that sets
      the same hard limit, at its size after the fork plus ``limit_bytes``, and sends the
      result back through a pipe as plain data (``student.Forked``); its inputs were in memory before
      the fork and do not count.

    So choose ``limit_bytes`` to hold the call's inputs (twice: as received and as arrays)
    and what a right answer allocates, with a margin, and far less than the array the check
    forbids; and check the values returned too (a function may catch MemoryError and return
    anything). Linux only (it reads /proc/self/status); the cost is one more run of the
    notebook per submission, or one fork per call.
    """
    name = getattr(function, "__name__", "your function")
    limit = f"{limit_bytes / 2 ** 20:.0f} MiB"
    failed = OutOfMemory(f"{name} did not fit in {limit} of memory on {on}: it needs more memory "
                         "at once than the task allows.")
    try:
        bounded = as_student(function).in_memory(limit_bytes)
        with _memory_error_as(failed):
            return call(bounded, *args, on=on, stand_ins=stand_ins, **kwargs)
    except Stopped as stop:
        raise OutOfMemory(f"{name} could not be run within {limit} of memory on {on} "
                          f"({stop.reason}).") from None


class OutOfMemory(CheckFailed):
    """``call_in_memory``'s failure when the call does not fit: a check may catch it to say why
    in its own words."""


class _OutOfMemory(BaseException):
    """A MemoryError of the student's function, carried past ``call``'s own handling."""


@contextlib.contextmanager
def _memory_error_as(failed):
    """Turn a MemoryError of the function called inside (which ``call`` sees as _OutOfMemory)
    into ``failed``."""
    token = _MEMORY.set(True)
    try:
        yield
    except _OutOfMemory:
        raise failed from None
    finally:
        _MEMORY.reset(token)


_MEMORY = contextvars.ContextVar("memory", default=False)  # inside call_in_memory: MemoryError fails it


def _unchanged(value, snapshot):
    """Whether `value` still equals its deep copy `snapshot` (arrays, dicts, lists, tuples)."""
    if isinstance(value, np.ndarray):
        return (isinstance(snapshot, np.ndarray) and value.shape == snapshot.shape
                and np.array_equal(value, snapshot, equal_nan=value.dtype.kind in "fc"))
    if isinstance(value, dict):
        return (isinstance(snapshot, dict) and value.keys() == snapshot.keys()
                and all(_unchanged(value[key], snapshot[key]) for key in value))
    if isinstance(value, (list, tuple)):
        return (type(value) is type(snapshot) and len(value) == len(snapshot)
                and all(_unchanged(a, b) for a, b in zip(value, snapshot)))
    return True  # numbers, strings, None: immutable
