"""Checks as case tables: a task's check reads as its specification.

A course's checks module declares its exercise once, the graded functions in the order of the
tasks (each task's function is judged with the reference's versions of the tasks before it, and
of those its reference reaches, standing in for the student's: `harness.call`), then, per task,
what is right and what is known to be wrong, as data:

    exercise = Exercise(reference)                      # the module of the reference solutions
    softmax = exercise.task("softmax", hint="...", mistakes=[Mistake("...", lambda x, axis: ...)])
    attention = exercise.task("scaled_dot_product_attention", outputs=[
        Output("weights", hint="...", mistakes=[...], facts=[...]),
        Output("output", expected=lambda got, Q, K, V, mask: got["weights"] @ V)])

    def check_softmax(function):                        # the hidden test cell calls this
        rng = seeded(SEED)
        softmax.check(function, [case("a vector of 6 scores", rng.normal(size=6), axis=-1), ...])

The engine does the bookkeeping once, for every case: it calls the student's function with the
stand-ins (time, memory, inputs unchanged: `harness`), checks that a tuple has its outputs in
their order, then each output's type and shape, and compares it with the reference's. A value that
differs is explained by the one known mistake whose value it equals, when exactly one of the
task's mistakes that apply to the case gives it and the reference does not (`named_cause`: two
would be a guess); otherwise by the first fact it breaks (a property of every right value: finite,
masked weights 0, ...); otherwise the message shows the expected values and the student's, with
the hint (what is right; it names no cause).

A mistake, a fact and an `expected` receive the case's arguments by name, bound to the
reference's signature with its defaults (a mistake's lambda names the reference's parameters).
"""

import contextlib
import dataclasses
import inspect
import io
import warnings

import numpy as np

from .checking import ATOL, RTOL, CheckFailed, check, check_shape, close, named_cause, shown
from .harness import OutOfMemory, Unfinished, call, call_in_memory, standing_in


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A known mistake: `gives(**arguments)` is what the reference with that one step changed
    returns (of a function that returns a tuple: the whole tuple, or the value of the output the
    mistake is listed under); `message` says what is wrong and what is right (or a function of the
    arguments that gives it). `when(**arguments)`: the cases it applies to (default: all)."""
    message: str
    gives: object
    when: object = None

    def applies(self, arguments):
        return self.when is None or bool(self.when(**arguments))


@dataclasses.dataclass(frozen=True)
class Fact:
    """A property of every right value: `holds(actual, **arguments)` is False when `actual`
    breaks it, and `message` (formatted with `name`, the value's name in messages, and the
    arguments) says what it breaks. `first`: checked before the values are compared, so a value
    within the tolerance still keeps it (a type, a dtype, exact zeros)."""
    message: str
    holds: object
    first: bool = False

    def explain(self, actual, name, arguments):
        try:
            holds = bool(self.holds(actual, **arguments))
        except (TypeError, ValueError, IndexError):
            holds = False
        if not holds:
            raise CheckFailed(self.message.format(name=name, **arguments))


@dataclasses.dataclass(frozen=True)
class Output:
    """One output of a function that returns a tuple (or its only output: name None).
    `expected(got, **arguments)`, when given, is its right value computed from the student's
    other outputs `got` (a dict by name), so one mistake is not counted twice."""
    name: str = None
    hint: str = ""
    mistakes: tuple = ()
    facts: tuple = ()
    expected: object = None


@dataclasses.dataclass
class Case:
    """One input of a check: `description` names it in messages. `memory_bytes`: the call must
    fit in that much memory, measured outside the student's process (`harness.call_in_memory`);
    `memory_why`: what the message says when it does not. `tolerance`: (rtol, atol) of the
    comparison with the reference's values, where not RTOL, ATOL (float32 inputs). `invalid`: the
    function must raise ValueError on these arguments, for this reason. `raising_why`, `simpler`:
    see `on_raise`."""
    description: str
    args: tuple
    kwargs: dict
    memory_bytes: int = None
    memory_why: str = None
    tolerance: tuple = (RTOL, ATOL)
    invalid: str = None
    raising_why: str = None
    simpler: "Case" = None

    def within(self, memory_bytes, why=None):
        """The call must fit in `memory_bytes`; `why`: the end of the message when it does not
        ("{function} did not run within {limit} MiB on {description}: {why}")."""
        self.memory_bytes, self.memory_why = memory_bytes, why
        return self

    def tolerating(self, rtol=RTOL, atol=ATOL):
        """Values within (rtol, atol) of the reference's are right (float32's rounding)."""
        self.tolerance = (rtol, atol)
        return self

    def on_raise(self, why, simpler=None):
        """When the function raises on this case, the failure ends with ": {why}"; with `simpler`
        (this case without an argument), only when it does not fail there, as ", but not
        {simpler.description}: {why}"."""
        self.raising_why, self.simpler = why, simpler
        return self

    def rejected(self, reason):
        """The function must raise ValueError on this case: `reason` says why."""
        self.invalid = reason
        return self


def changed(variant, **change):
    """What a mistake gives: `variant` (the reference with its steps as options) called with the case's
    arguments by name and `change` (the options of the mistake)."""
    return lambda **arguments: variant(**{**arguments, **change})


def case(description, *args, **kwargs):
    """The case `description`: the function called with `args` and `kwargs`."""
    return Case(description, args, kwargs)


class Exercise:
    """The graded functions of one exercise, in the order of its tasks (their declaration)."""

    def __init__(self, reference, stand_ins=None):
        self.reference = reference
        self.tasks = []
        self.stand_ins = stand_ins

    @property
    def graded(self):
        """The stand-ins of every call: the reference's graded functions in task order, or those
        the exercise names (`stand_ins`, e.g. none where a memory rule must count every step)."""
        return tuple(task.reference for task in self.tasks) if self.stand_ins is None else tuple(self.stand_ins)

    def task(self, name, *, outputs=None, hint="", mistakes=(), facts=(), order=None, graded=True, read=None):
        """Declare the task whose function is `name` (the reference's of that name). `outputs`:
        a function that returns a tuple, its outputs in order; else one output with `hint`,
        `mistakes` and `facts`. `order`: the names of the outputs in the order they are judged
        (default: as returned). `graded` False: a function the checks call that is no task.
        `read(result, description)`: the outputs, in order, of what the function returns (the
        student's and the reference's), raising CheckFailed when it has not their form (default:
        the result itself); a mistake then gives the outputs."""
        task = Task(self, name, outputs, hint, mistakes, facts, order, read)
        if graded:
            self.tasks.append(task)
        return task


class Task:
    """A task: its function, its outputs, and what is known to be wrong with them."""

    def __init__(self, exercise, name, outputs, hint, mistakes, facts, order, read=None):
        self.exercise = exercise
        self.read = read
        self.name = name
        self.reference = getattr(exercise.reference, name)
        self.tuple = outputs is not None
        self.outputs = tuple(outputs) if self.tuple else (Output(None, hint, tuple(mistakes), tuple(facts)),)
        names = [output.name for output in self.outputs]
        self.order = [names.index(output) for output in order] if order else range(len(names))

    def check(self, function, cases):
        """Judge `function` on every case of `cases`, in order; the first failure raises."""
        for each in cases:
            self.judge(function, each)

    def arguments(self, each):
        """The case's arguments by name, with the reference's defaults."""
        bound = inspect.signature(self.reference).bind(*each.args, **each.kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def run(self, function, each):
        """The student's result on `each` (the stand-ins answering for the other tasks)."""
        if each.memory_bytes is None:
            return call(function, *each.args, on=each.description, stand_ins=self.exercise.graded, **each.kwargs)
        try:
            return call_in_memory(function, *each.args, on=each.description, limit_bytes=each.memory_bytes,
                                  stand_ins=self.exercise.graded, **each.kwargs)
        except OutOfMemory as failure:
            if each.memory_why is None:
                raise
            raise CheckFailed(f"{getattr(function, '__name__', self.name)} did not run within "
                              f"{each.memory_bytes / 2 ** 20:.0f} MiB on {each.description}: "
                              f"{each.memory_why}") from failure

    def rejects(self, function, each):
        """Check that `function` raises ValueError on the case `each` (the stand-ins answering for the
        other tasks), whatever it prints."""
        name = f"{self.name} on {each.description}"
        with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stderr(io.StringIO()), \
                standing_in(function, self.exercise.graded) as run:
            warnings.simplefilter("ignore")
            try:
                run(*each.args, **each.kwargs)
            except ValueError:
                return
            except NotImplementedError:
                raise CheckFailed(f"{getattr(function, '__name__', self.name)} is not implemented yet (it raises "
                                  "NotImplementedError).") from None
            except Exception as error:  # any failure of student code is a failed check
                raise CheckFailed(f"{name} raised {type(error).__name__} ({error}), but it should raise "
                                  f"ValueError: {each.invalid}.") from None
        raise CheckFailed(f"{name} should raise ValueError: {each.invalid}.")

    def judge(self, function, each):
        """Judge `function` on the case `each`: raise CheckFailed with one sentence, or return
        the student's outputs by name. A case `rejected` only checks that it raises ValueError."""
        if each.invalid is not None:
            return self.rejects(function, each)
        try:
            actual = self.run(function, each)
        except Unfinished:
            raise
        except CheckFailed as failure:
            if each.raising_why is None or failure.__context__ is None:  # not an exception the function raised
                raise
            if each.simpler is None:
                raise CheckFailed(f"{str(failure).rstrip('.')}: {each.raising_why}.") from None
            try:
                self.run(function, each.simpler)
            except CheckFailed:
                raise failure from None
            raise CheckFailed(f"{str(failure).rstrip('.')}, but not {each.simpler.description}: "
                              f"{each.raising_why}.") from None
        expected = self.reference(*each.args, **each.kwargs)
        if self.read is not None:
            actual, expected = self.read(actual, each.description), self.read(expected, each.description)
        arguments = self.arguments(each)
        if not self.tuple:
            actual, expected = (actual,), (expected,)
        else:
            self._check_tuple(actual, expected, each.description)
        got = {output.name: value for output, value in zip(self.outputs, actual)}
        for index in self.order:
            output = self.outputs[index]
            wanted = expected[index] if output.expected is None else output.expected(got, **arguments)
            self._judge_output(output, index, actual[index], wanted, arguments, each)
        return got

    def _name(self, output, description):
        return f"{self.name} on {description}" if output.name is None else f"the {output.name} on {description}"

    def _check_tuple(self, actual, expected, description):
        names = ", ".join(output.name for output in self.outputs)
        check(isinstance(actual, tuple) and len(actual) == len(expected),
              f"{self.name} should return a tuple ({names}), but on {description} it returned a "
              f"{type(actual).__name__}" + (f" of length {len(actual)}." if isinstance(actual, tuple) else "."))
        shapes = [np.shape(value) for value in expected]
        if len(set(map(tuple, shapes))) == len(shapes) and sorted(map(np.shape, actual)) == sorted(shapes) \
                and [np.shape(value) for value in actual] != shapes:
            check(False, f"{self.name} should return ({names}) in this order.")

    def _judge_output(self, output, index, actual, wanted, arguments, each):
        name = self._name(output, each.description)
        wanted = np.asarray(wanted)
        if wanted.ndim == 0 and isinstance(actual, (int, float, np.number)) and not isinstance(actual, bool):
            actual = np.asarray(actual)  # a number, where one number is expected
        if isinstance(actual, np.ndarray) and actual.shape != wanted.shape:  # named when a mistake has its shape
            self._name_cause(output, index, actual, None, arguments, name)
        check_shape(actual, wanted.shape, name)
        for fact in output.facts:
            if fact.first:
                fact.explain(actual, name, arguments)
        if wanted.dtype == bool:
            check(actual.dtype == bool, f"{name} should be a boolean array, not {actual.dtype}.")
            if np.array_equal(actual, wanted):
                return
        elif _within(actual, wanted, *each.tolerance):
            return
        self._name_cause(output, index, actual, wanted, arguments, name)
        for fact in output.facts:
            fact.explain(actual, name, arguments)
        check(wanted.dtype == bool or np.all(np.isfinite(actual)) or not np.all(np.isfinite(wanted)),
              f"{name} contains NaN or inf.")
        raise CheckFailed(f"{name}: {shown(actual, wanted)}" + (f" ({output.hint})." if output.hint else "."))

    def _name_cause(self, output, index, actual, wanted, arguments, name):
        """Raise the failure that names the one mistake that gives `actual` (and not `wanted`), if one."""
        cause = named_cause(actual, wanted, self._mistakes(output, index, arguments), same=_same)
        if cause is not None:
            raise CheckFailed(f"{name}: {cause}.", cause=cause)

    def _mistakes(self, output, index, arguments):
        """(value, message) of each mistake of `output` that applies to the case."""
        found = []
        for mistake in output.mistakes:
            if not mistake.applies(arguments):
                continue
            try:
                value = mistake.gives(**arguments)
            except (ArithmeticError, ValueError, TypeError, IndexError, KeyError):
                continue  # this mistake cannot give a value on this case
            if self.tuple and isinstance(value, tuple):
                value = value[index]
            found.append((value, mistake.message(**arguments) if callable(mistake.message) else mistake.message))
        return found


def _within(actual, wanted, rtol, atol):
    """`close`, at the tolerance (rtol, atol)."""
    if (rtol, atol) == (RTOL, ATOL):
        return close(actual, wanted)
    try:
        return actual.shape == wanted.shape and bool(np.allclose(actual, wanted, rtol=rtol, atol=atol))
    except (TypeError, ValueError):
        return False


def _same(actual, value):
    """Whether `actual` is what a mistake gives, `value`: `close`, NaN and inf at the same places
    included (to name a mistake that gives NaN; never to grant a point), equal for booleans."""
    try:
        actual, value = np.asarray(actual), np.asarray(value)
        if value.dtype == bool:
            return actual.shape == value.shape and np.array_equal(actual, value)
        return close(actual, value) or (actual.shape == value.shape and not np.all(np.isfinite(value))
                                        and bool(np.allclose(actual, value, rtol=RTOL, atol=ATOL, equal_nan=True)))
    except (TypeError, ValueError):
        return False
