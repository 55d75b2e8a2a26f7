"""Calling a student's function from a hidden check.

Whatever the function does wrong (raises, warns, prints to stderr, modifies
its input), the check ends in one `CheckFailed` sentence, never in a traceback
that would show hidden test code in the feedback.
"""

import contextlib
import contextvars
import copy
import io
import warnings

import numpy as np

from .checking import CheckFailed

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


def call(function, *args, on, **kwargs):
    """Return ``function(*args, **kwargs)``; ``on`` describes the input for messages.

    Warnings and stderr are silenced while it runs: nbgrader scores a cell
    zero when anything reaches stderr, and a correct function that warns
    deserves its points. Arguments, parameter dicts included, must come back
    unchanged.
    """
    name = getattr(function, "__name__", "your function")
    snapshot = copy.deepcopy((args, kwargs))
    with warnings.catch_warnings(), np.errstate(all="ignore"), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            result = function(*args, **kwargs)
        except NotImplementedError:
            raise CheckFailed(f"{name} is not implemented yet (it raises NotImplementedError).") from None
        except Exception as error:  # any failure of student code is a failed check
            raise CheckFailed(
                f"{name} raised {type(error).__name__} ({error}) on {on}."
            ) from None
    if not _unchanged((args, kwargs), snapshot):
        raise CheckFailed(f"{name} modified its input on {on}: compute new arrays instead "
                          "of changing its arguments (or their parameters) in place.")
    return result


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


def quietly(compute):
    """``compute()``, or None when it raises; warnings and printing silenced.

    For probing a student's function (did their earlier task work?), not for
    grading it: use ``call`` for that.
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"), \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            return compute()
        except Exception:  # a broken probe just means "not working"
            return None


def students_own(function, name):
    """The student's function ``name`` defined beside ``function`` (in the notebook), or None."""
    earlier = getattr(function, "__globals__", {}).get(name)
    return earlier if callable(earlier) and earlier is not function else None


def broken_earlier(function, names, works):
    """The first of ``names`` whose student's version, beside ``function``, is wrong, or None.

    ``works(name, student_function)`` is the chapter's probe of an earlier task.
    """
    for name in names:
        earlier = students_own(function, name)
        if earlier is not None and not works(name, earlier):
            return name
    return None


def blame(function, names, works):
    """" (your x is wrong ... fix x first)" naming a broken earlier task, or ""."""
    name = broken_earlier(function, names, works)
    own = getattr(function, "__name__", "your function")
    return "" if name is None else f" (your {name} is wrong and {own} may be using it: fix {name} first)"
