"""A task judged on its own in the notebook: the earlier tasks it calls answer from a record.

Grading judges a function with correct versions of the other graded functions it uses standing in
(`standins`). The visible checks do the same with a third source of answers: the calls that a
correct function makes to the others on the visible checks' inputs, recorded when the notebook is
released (`recording`) and stamped into its "recorded answers" cell as `RECORDED_ANSWERS`,
{checked function: [(called function, {parameter: argument}, answer), ...]}. Nothing of the
reference's code reaches the notebook: only those inputs and answers.

In a check cell, ``with on_its_own("f"):`` swaps (`standins.swap`, the grader's one mechanism)
every graded function that a correct `f` calls: in the block, a call with recorded arguments
(within the checks' tolerance; made by the student's `f`, or by the cell to build what `f` should
give from those functions) gets the recorded answer; any other call goes to the student's own
function. After the block:

- it passed, and the student's own version of a function that answered differs from the record
  (or is unfinished): one line says so, the task itself passes;
- it failed after a call the record does not hold went to the student's own function: when that
  function is unfinished or wrong on the recorded inputs, the task cannot be judged yet: one line
  says so ("Not checked yet: ... Fix E first.") and the cell goes on (at grading, and under plain
  nbgrader, its hidden checks judge it with correct neighbours); else the failure stands, and one
  line says which of the student's own functions it was judged with.

This file is copied into every notebook's helper cell (after checking.py and standins.py, whose
names it uses there), so it imports nothing but the standard library and NumPy.
"""

import contextlib
import copy as copying
import inspect

import numpy as np

from .checking import RTOL, ATOL
from .standins import own_copy, swap, swappable, undoing


PASSED_BESIDE = "Passed, checked with a correct "  # the line of a task that passed beside a wrong neighbour
NOT_CHECKED = "Not checked yet: "  # the line of a task that cannot be judged in the notebook yet


def same_argument(given, recorded):
    """Whether an argument the student's function passed is the recorded one (arrays within the
    checks' tolerance; containers item by item)."""
    if isinstance(recorded, np.ndarray) or isinstance(recorded, np.generic):
        try:
            given = np.asarray(given)
        except Exception:
            return False
        recorded = np.asarray(recorded)
        if given.shape != recorded.shape or (given.dtype == bool) != (recorded.dtype == bool):
            return False
        if recorded.dtype == bool or recorded.dtype.kind in "iu":
            return bool(np.array_equal(given, recorded))
        try:
            return bool(np.allclose(given, recorded, rtol=RTOL, atol=ATOL, equal_nan=True))
        except TypeError:
            return False
    if isinstance(recorded, dict):
        return (isinstance(given, dict) and given.keys() == recorded.keys()
                and all(same_argument(given[key], recorded[key]) for key in recorded))
    if isinstance(recorded, (list, tuple)):
        return (isinstance(given, (list, tuple)) and len(given) == len(recorded)
                and all(same_argument(g, r) for g, r in zip(given, recorded)))
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and not isinstance(given, (bool, str)):
        try:
            return bool(np.isclose(float(given), recorded, rtol=RTOL, atol=ATOL, equal_nan=True))
        except (TypeError, ValueError):
            return False
    return type(given) is type(recorded) and given == recorded


def arguments(function, args, kwargs, defaults=True):
    """{parameter: argument} of ``function(*args, **kwargs)`` (with its defaults, if `defaults`);
    None when the arguments do not bind to its parameters."""
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    if defaults:
        bound.apply_defaults()
    return dict(bound.arguments)


def given_to(function, recorded, args, kwargs):
    """{parameter: argument} of a call of the student's `function`, named as in the `recorded`
    call: by `function`'s own parameters when they are named so; else the arguments in the order
    of the recorded ones, those left out taken as the recorded (defaults); None when they do not fit,
    or when the call passes an argument the recorded call has not (a parameter of the student's own)."""
    passed = arguments(function, args, kwargs, defaults=False)
    if passed is not None and passed.keys() <= recorded.keys():
        bound = arguments(function, args, kwargs)
        if recorded.keys() <= bound.keys():
            return bound
    names = list(recorded)
    if len(args) > len(names) or any(name not in recorded for name in kwargs):
        return None
    given = dict(zip(names, args))
    if given.keys() & kwargs.keys():
        return None
    return {**recorded, **given, **kwargs}


def calls_of(name, record):
    """{called function: [({parameter: argument}, answer)]} of the calls a correct `name` makes in
    `record` (an empty list for a function whose calls were too large to record)."""
    calls = {}
    for called, recorded, answer in record.get(name, ()):
        calls.setdefault(called, [])
        if recorded is not None:  # None: a call too large to record, answered by the student's own
            calls[called].append((recorded, answer))
    return calls


@contextlib.contextmanager
def answering(name, record):
    """Swap (`standins.swap`) the notebook's functions that a correct `name` calls for answerers of
    its recorded calls; yield (answered, forwarded): {called: the recorded calls it answered} and
    {called: "is not finished" or "answered"} of the calls that went to the student's own."""
    namespace = globals()
    # a function not defined (yet: its cell may come later) stands in for nothing: where it is
    # called, it fails as it would
    calls = {called: found for called, found in calls_of(name, record).items() if callable(namespace.get(called))}
    answered, forwarded = {}, {}
    owns = {called: own_copy(namespace[called]) if swappable(namespace[called]) else namespace[called]
            for called in calls}
    if not calls or name not in namespace:
        yield answered, forwarded
        return

    def answer_for(called):
        def answer(*args, **kwargs):
            own = owns[called]
            for recorded, value in calls[called]:
                given = given_to(own, recorded, args, kwargs)
                if given is not None and all(same_argument(given[key], argument)
                                             for key, argument in recorded.items()):
                    answered.setdefault(called, []).append((recorded, value))
                    return copying.deepcopy(value)
            try:
                result = own(*args, **kwargs)
            except NotImplementedError as error:
                forwarded[_raised_in(error, called, record)] = "is not finished"
                raise
            forwarded.setdefault(called, "answered")
            return result
        return answer

    undo = undoing([swap(namespace, called, answer_for(called), namespace[name]) for called in calls])
    try:
        yield answered, forwarded
    finally:
        undo()


def own_verdict(called, calls, where, record):
    """(whose, what): what is wrong with the student's `called` (or the function of theirs it uses
    that is not finished) on the recorded `calls` ({parameter: argument}, answer), its own recorded
    calls answering; None when it gives the recorded answers (`where`: which calls, in words)."""
    function = globals()[called]
    for recorded, answer in calls:
        with answering(called, record) as (_, forwarded):
            try:
                value = function(**copying.deepcopy(recorded))
            except NotImplementedError as error:
                return _raised_in(error, called, record), "is not finished"
            except Exception as error:
                return called, f"raises {type(error).__name__} {where}"
        if not same_argument(value, answer):
            own = f" (with your own {' and '.join(sorted(forwarded))})" if forwarded else ""
            return called, f"gives other values than a correct one {where}{own}"
    return None


@contextlib.contextmanager
def on_its_own(name, record=None):
    """Run the checks of the `with` block with the graded functions that a correct `name` calls
    answering from the record (`record`: {name: calls}, default the notebook's RECORDED_ANSWERS)."""
    record = globals().get("RECORDED_ANSWERS", {}) if record is None else record
    failure = None
    with answering(name, record) as (answered, forwarded):
        try:
            yield
        except Exception as error:
            failure = error
    if failure is not None:
        wrong = [(called, verdict) for called, verdict in forwarded.items() if verdict == "is not finished"]
        if forwarded and not wrong:  # the student's own, judged on the calls recorded for any function
            wrong = [found for called in sorted(forwarded) for found in
                     [own_verdict(called, [(r, a) for calls in record.values() for c, r, a in calls
                                           if c == called and r is not None], "on the recorded inputs", record)]
                     if found]
        if wrong:
            called, verdict = wrong[0]
            print(f"{NOT_CHECKED}{name} uses your {called} on inputs that are not recorded here, and your "
                  f"{called} {verdict}. Fix {called} first.")
            return
        if forwarded and not isinstance(failure, NotImplementedError):
            them = "it" if len(forwarded) == 1 else "them"
            print(f"(Judged with your own {' and '.join(sorted(forwarded))}: {name} uses {them} on inputs "
                  f"that are not recorded here.)")
        raise failure
    verdicts = {called: own_verdict(called, calls, f"on the inputs {name} gives it", record)
                for called, calls in answered.items()}
    notes = [f"your {whose} {verdict}" for whose, verdict in filter(None, verdicts.values())]
    if notes:
        print(f"{PASSED_BESIDE}{' and '.join(verdicts)}: {'; '.join(dict.fromkeys(notes))} "
              "(its own check says more).")


def _raised_in(error, called, record):
    """The graded function (one that `record` names) innermost in `error`'s traceback: the one of the
    student's that is not finished; else `called`."""
    graded = set(record) | {function for calls in record.values() for function, _, _ in calls}
    frames, traceback = [], error.__traceback__
    while traceback is not None:
        frames.append(traceback.tb_frame.f_code.co_name)
        traceback = traceback.tb_next
    return next((name for name in reversed(frames) if name in graded), called)


def literal(value, arrays=None):
    """Python source that evaluates, in a notebook with NumPy as np, to `value` (arrays, NumPy and
    Python numbers, strings, None, and tuples, lists and dicts of them); TypeError for anything
    else (a random generator, a function: such a call is not recorded). `arrays`: a dict that
    collects the arrays of more than a few numbers, each once ({source: index}), written
    ``RECORDED_ARRAYS[index]``."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"an array of {value.dtype}")
        text = _nested(value.tolist()) if value.size else "[]"
        default = np.array(value.tolist() if value.size else []).dtype
        dtype = "" if value.size and default == value.dtype else f", dtype=np.{value.dtype}"
        source = f"np.array({text}{dtype})" if value.size or value.shape == (0,) else f"np.zeros({value.shape}{dtype})"
        if arrays is None or value.size <= 4:
            return source
        return f"RECORDED_ARRAYS[{arrays.setdefault(source, len(arrays))}]"
    if isinstance(value, np.generic):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"a NumPy {value.dtype}")
        return f"np.{value.dtype}({_nested(value.item())})"
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return _nested(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(literal(item, arrays) for item in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(literal(item, arrays) for item in value) + "]"
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return "{" + ", ".join(f"{key!r}: {literal(item, arrays)}" for key, item in value.items()) + "}"
    raise TypeError(f"a {type(value).__name__}")


def _nested(value):
    """The source of nested lists of Python numbers, floats exact (NaN and infinities by np's names)."""
    if isinstance(value, list):
        return "[" + ", ".join(_nested(item) for item in value) + "]"
    if isinstance(value, float) and not np.isfinite(value):
        return "np.nan" if np.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)
