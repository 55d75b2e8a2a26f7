# Check helpers: a failed check says in one sentence what is wrong.
# (This cell is the same in every exercise; `python -m autograder release` writes
# it from the engine's checking.py, standins.py and recorded.py. Run it; leave it as it is.)
import dis
import linecache
import os
import sys
import types

import numpy as np

RTOL, ATOL = 1e-6, 1e-9  # the one tolerance of every check: float64 code that is right agrees closer


class CheckFailed(AssertionError):
    """A failed check. Jupyter shows its one-sentence message, not a traceback.

    `cause` is the mistake the message names (None when it names none).
    """

    def __init__(self, message, cause=None):
        super().__init__(message)
        self.cause = cause

    def _render_traceback_(self):
        return [f"\x1b[1;31mCheck failed:\x1b[0m {self}"]


def check(condition, message):
    """Raise CheckFailed(message) unless condition is true."""
    if not condition:
        raise CheckFailed(message)


def check_shape(actual, shape, name):
    """Check that `actual` is a NumPy array of the given shape."""
    check(
        isinstance(actual, np.ndarray),
        f"{name} should be a NumPy array, but it is a {type(actual).__name__}.",
    )
    check(
        actual.shape == tuple(shape),
        f"{name} has shape {actual.shape}, but it should have shape {tuple(shape)}.",
    )


def close(actual, expected, tolerance=(RTOL, ATOL)):
    """Whether `actual` has the shape and (within RTOL, ATOL) the values of `expected`: equal
    only where both are finite or both the same infinity (NaN equals nothing)."""
    try:
        actual, expected = np.asarray(actual), np.asarray(expected)
        rtol, atol = tolerance
        return actual.shape == expected.shape and bool(np.allclose(actual, expected, rtol=rtol, atol=atol))
    except (TypeError, ValueError):  # not numbers
        return False


def shown(actual, expected):
    """"expected …, got …": small arrays in full; large ones as the largest difference and
    the first index where they differ."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if expected.size <= 12:
        return f"expected {_text(expected)}, got {_text(actual)}"
    actual, expected = actual.astype(float), expected.astype(float)
    differs = ~np.isclose(actual, expected, rtol=RTOL, atol=ATOL)
    first = tuple(int(i) for i in np.argwhere(differs)[0])
    return (f"the largest difference is {np.nanmax(np.abs(actual - expected)):.3g} (shape "
            f"{expected.shape}); at index {first} expected {expected[first]:.4g}, got {actual[first]:.4g}")


def _text(array):
    text = np.array2string(array, separator=", ", formatter={"float_kind": lambda v: f"{v:.4g}"})
    return " ".join(text.split())


def named_cause(actual, expected, mistakes, same=close):
    """The mistake of `mistakes`, pairs (what that mistake alone gives, what is wrong), whose value
    `actual` equals (by `same`) and `expected` does not, when exactly one is; else None. The one
    rule of every check: a cause is named only when it alone explains the values (two would
    be a guess). `expected` None: the values were already found wrong."""
    causes = {mistake for wrong, mistake in mistakes
              if same(actual, wrong) and (expected is None or not same(wrong, expected))}
    return causes.pop() if len(causes) == 1 else None


def check_close(actual, expected, name, hint="", mistakes=(), facts=None, same=close, tolerance=(RTOL, ATOL)):
    """Check that `actual` has the shape, kind and values of `expected`.

    On a difference the message names a mistake of `mistakes`, pairs (what that
    mistake alone gives, what is wrong), or a function returning them, only when
    `actual` equals (by `same`) what it alone gives; otherwise it says what
    `facts(actual)` finds broken (it raises CheckFailed), then it shows the
    expected values and `actual`, and `hint` (what the right value is; it must
    name no cause).
    """
    expected = np.asarray(expected)
    if expected.ndim == 0 and isinstance(actual, (int, float, np.number)) and not isinstance(actual, bool):
        actual = np.asarray(actual)  # a number, where one number is expected
    check_shape(actual, expected.shape, name)
    if expected.dtype == bool:
        check(actual.dtype == bool, f"{name} should be a boolean array, not {actual.dtype}.")
        if np.array_equal(actual, expected):
            return
    elif close(actual, expected, tolerance):
        return
    mistake = named_cause(actual, expected, mistakes() if callable(mistakes) else mistakes, same)
    if mistake is not None:
        raise CheckFailed(f"{name}: {mistake}.", cause=mistake)
    if facts is not None:
        facts(actual)
    check(expected.dtype == bool or np.all(np.isfinite(actual)) or not np.all(np.isfinite(expected)),
          f"{name} contains NaN or inf.")
    raise CheckFailed(f"{name}: {shown(actual, expected)}" + (f" ({hint})." if hint else "."))


def arguments_of(frame):
    """The arguments the function of `frame` was called with: arrays by shape and dtype, numbers,
    short strings and functions by value; those it rebinds are left out (its frame no longer
    holds what it was given). Only exact types are described: no class of the notebook's is asked
    anything."""
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    rebound = {instruction.argval for instruction in dis.get_instructions(code)
               if instruction.opname in ("STORE_FAST", "DELETE_FAST", "STORE_DEREF", "DELETE_DEREF")}
    described = []
    for name in (name for name in names if name not in rebound):
        value = frame.f_locals.get(name)
        if type(value) is np.ndarray:
            described.append(f"{name}: array {value.shape} {value.dtype}")
        elif value is None or type(value) in (bool, int, float) or (type(value) is str and len(value) <= 40):
            described.append(f"{name}={value!r}")
        elif type(value) in (dict, list, tuple):
            described.append(f"{name}: {type(value).__name__} of {len(value)}")
        elif type(value) in (types.FunctionType, types.BuiltinFunctionType, np.ufunc):
            described.append(f"{name}={value.__name__}")
    return ", ".join(described)


def student_frames(traceback, is_student):
    """(innermost, called) of a traceback: the innermost (frame, line) for which
    `is_student(frame)`, and the frame of the first function of the student's that code not
    theirs called; each None when there is none. The one walker of tracebacks: here in a
    notebook (their functions are theirs, any cell calls them), and in the grader's sandbox
    (their cells are theirs, the course's cells call them)."""
    frames = []
    while traceback is not None:
        frames.append((traceback.tb_frame, traceback.tb_lineno))
        traceback = traceback.tb_next
    theirs = [is_student(frame) for frame, _ in frames]
    innermost = next((frames[i] for i in reversed(range(len(frames))) if theirs[i]), None)
    called = next((frames[i][0] for i in range(1, len(frames))
                   if theirs[i] and not theirs[i - 1] and frames[i][0].f_code.co_name != "<module>"), None)
    return innermost, called


def _where(traceback):
    """"raised in f(its inputs), at line n of g: code" for an exception that a function of this
    notebook raised when a cell called it (in Jupyter: its cells are files of no folder), or ''."""
    def in_a_function(frame):
        return not os.path.exists(frame.f_code.co_filename) and frame.f_code.co_name != "<module>"

    innermost, called = student_frames(traceback, in_a_function)
    if called is None:  # no function of the notebook's called
        return ""
    frame, line = innermost
    code = linecache.getline(frame.f_code.co_filename, line).strip()
    return (f"raised in {called.f_code.co_name}({arguments_of(called)}), at line {line} of "
            f"{frame.f_code.co_name}: {code}")


def _explain(shell, kind, error, traceback, tb_offset=None):
    """Jupyter's traceback, then one line: which call of a function of the notebook failed, on
    what, and the line that raised (a failed check's sentence is enough on its own)."""
    shell.showtraceback((kind, error, traceback), tb_offset=tb_offset)
    where = "" if isinstance(error, CheckFailed) else _where(traceback)
    if where:
        print(f"{kind.__name__} {where}")


if "ipykernel" in sys.modules and "get_ipython" in globals():  # a Jupyter cell (the grader says it itself)
    get_ipython().set_custom_exc((Exception,), _explain)  # noqa: F821 (Jupyter's)
