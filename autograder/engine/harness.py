"""Calling a student's function from a hidden check, and judging what it gave.

Whatever the function does wrong (raises, warns, prints to stderr, modifies
its input), the check ends in one `CheckFailed` sentence, never in a traceback
that would show hidden test code in the feedback.

Feedback never guesses: every value a check judges goes through ``compare``,
the one loop "compare with the reference, try the student's variant, then the
known mistakes". A known mistake is a pair (what the reference gives with that
one step changed, what is wrong); it is named only when it alone reproduces the
student's value; otherwise the message shows the expected and the actual values
and a hint that says what is right, never why it is wrong. Properties (shapes,
NaN, masked weights: ``check_weights``) are stated as facts.
"""

import contextlib
import contextvars
import copy
import io
import warnings

import numpy as np

from .checking import CheckFailed, check, check_close, close

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


def compare(actual, expected, name, mistakes=(), variant=None, hint=""):
    """The loop of every hidden check: compare with the reference, try the student's variant,
    then the known mistakes.

    ``actual`` is right when it equals ``expected`` (the reference's value). Otherwise it
    still passes when it equals ``variant()``, the reference computed with the student's
    own earlier functions (those lose their points in their own checks). Otherwise the
    check fails: with the mistake of ``mistakes`` (pairs (what that mistake alone gives,
    what is wrong), or a function returning them) whose value ``actual`` equals, when
    exactly one does; else with the expected values and ``actual``, and ``hint`` (a string,
    or a function returning one), which says what is right and names no cause.
    Returns True when ``actual`` equals ``expected``, False when only the variant.
    """
    if close(actual, expected):
        return True
    if is_variant(actual, variant):
        return False
    check_close(actual, expected, name, hint() if callable(hint) else hint,
                mistakes() if callable(mistakes) else mistakes)
    return True  # equal after all (booleans compared exactly)


def is_variant(actual, variant):
    """Whether ``actual`` equals ``variant()`` (NaN where it has NaN): what the reference gives
    with the student's own earlier functions. False when ``variant`` is None or fails."""
    own = None if variant is None else quietly(variant)
    if own is None:
        return False
    try:
        actual, own = np.asarray(actual, dtype=float), np.asarray(own, dtype=float)
    except (TypeError, ValueError):
        return False
    return actual.shape == own.shape and np.array_equal(np.isnan(actual), np.isnan(own)) \
        and close(np.nan_to_num(actual), np.nan_to_num(own))


def diagnose(actual, mistakes, where):
    """Fail naming the mistake of ``mistakes`` (pairs (what it alone gives, what is wrong))
    that gives ``actual``, when exactly one does; do nothing otherwise."""
    causes = {mistake for wrong, mistake in mistakes if close(actual, wrong)}
    if len(causes) == 1:
        cause = causes.pop()
        raise CheckFailed(f"{where}{cause}.", cause=cause)


def check_weights(weights, allowed, name, keys="keys", row="a query", axis=-1):
    """What every softmax over ``keys`` (along ``axis``) gives, whatever its scores: finite
    weights, 0 where ``allowed`` (the mask broadcast to the weights' shape) is False, all 0
    for ``row`` with no allowed key. Facts, not causes: shared by the checks,
    which try the known mistakes before and compare the values after."""
    empty = np.broadcast_to(~allowed.any(axis=axis, keepdims=True), allowed.shape)
    check(np.all(np.isfinite(weights)),
          f"{name} contain NaN or inf: "
          + (f"{row} whose {keys} are all masked must get all-zero weights."
             if empty.any() else "the softmax of finite scores, even of about 1e4, is finite."))
    check(np.allclose(weights[empty], 0.0),
          f"{name}: {row} whose {keys} are all masked must get all-zero weights; "
          f"the largest is {np.max(np.abs(weights[empty]), initial=0):.3g}.")
    check(np.allclose(weights[~allowed], 0.0),
          f"{name}: masked {keys} must get weight 0, but some get up to "
          f"{np.max(np.abs(weights[~allowed]), initial=0):.3g}.")


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
