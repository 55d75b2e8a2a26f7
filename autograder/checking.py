# Check helpers: a failed check says in one sentence what is wrong.
# (This cell is the same in every exercise; `python -m autograder release`
# copies it from autograder/checking.py. Run it; leave it as it is.)
import numpy as np


class CheckFailed(AssertionError):
    """A failed check. Jupyter shows its one-sentence message, not a traceback."""

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


def check_close(actual, expected, name, hint="its values are wrong"):
    """Check that `actual` has the shape, kind and values of `expected`."""
    expected = np.asarray(expected)
    check_shape(actual, expected.shape, name)
    if expected.dtype == bool:
        check(actual.dtype == bool, f"{name} should be a boolean array, not {actual.dtype}.")
        check(np.array_equal(actual, expected), f"{name}: {hint}.")
    else:
        check(np.allclose(actual, expected, rtol=1e-6, atol=1e-9), f"{name}: {hint}.")
