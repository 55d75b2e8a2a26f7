"""Calling a student's function from a hidden check.

Whatever the function does wrong (raises, warns, prints to stderr, modifies
its input), the check ends in one `CheckFailed` sentence, never in a traceback
that would show hidden test code in the feedback.
"""

import contextlib
import io
import warnings

import numpy as np

from .checking import CheckFailed


def call(function, *args, on, **kwargs):
    """Return ``function(*args, **kwargs)``; ``on`` describes the input for messages.

    Warnings and stderr are silenced while it runs: nbgrader scores a cell
    zero when anything reaches stderr, and a correct function that warns
    deserves its points.
    """
    name = getattr(function, "__name__", "your function")
    snapshots = [np.array(a, copy=True) if isinstance(a, np.ndarray) else None for a in args]
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
    for argument, snapshot in zip(args, snapshots):
        if snapshot is not None and not np.array_equal(argument, snapshot, equal_nan=True):
            raise CheckFailed(f"{name} modified its input on {on}: compute new arrays instead.")
    return result
