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

Where an output needs it: `requires`, facts checked before its type and shape (token ids are an
int array); `leaves`, an output that is a dict or list of arrays (parameters' gradients, a cache),
each array judged as an output of its own. A case may be `rejected` (the function must raise
ValueError), or `copied` (its arguments hold a random generator that each call consumes).
"""

import contextlib
import copy
import dataclasses
import inspect
import io
import warnings

import numpy as np

from .checking import ATOL, RTOL, CheckFailed, check, check_close, close
from .harness import call, call_in_memory, standing_in


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A known mistake: `gives(**arguments)` is what the reference with that one step changed
    returns (of a function that returns a tuple: the whole tuple, or the value of the output the
    mistake is listed under); `message` says what is wrong and what is right.
    `when(**arguments)`: the cases it applies to (default: all)."""
    message: str
    gives: object
    when: object = None

    def applies(self, arguments):
        return self.when is None or bool(self.when(**arguments))


@dataclasses.dataclass(frozen=True)
class Fact:
    """A property of every right value: `holds(actual, **arguments)` is False when `actual`
    breaks it, and `message` (formatted with `name`, the value's name in messages, and the
    arguments) says what it breaks."""
    message: str
    holds: object

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
    other outputs `got` (a dict by name), so one mistake is not counted twice.
    `requires`: facts checked first, before the type and shape (what a wrong shape means).
    `leaves`: the output is a dict or list (nested) of arrays: its keys and lengths must be the
    reference's, and each array is judged as an output named by its path (`grad_params['W_q']`),
    a mistake's value taken at the same path."""
    name: str = None
    hint: str = ""
    mistakes: tuple = ()
    facts: tuple = ()
    expected: object = None
    requires: tuple = ()
    leaves: bool = False


@dataclasses.dataclass
class Case:
    """One input of a check: `description` names it in messages. `memory_bytes`: the call must
    fit in that much memory, measured outside the student's process (`harness.call_in_memory`).
    `invalid`: the function must raise ValueError on it, for that reason. `copied`: the student's
    function and the reference each get their own deep copy of the arguments (a random generator:
    both draw the same numbers), and mistakes, facts and `expected` the arguments as they were
    (copy a generator there before drawing from it)."""
    description: str
    args: tuple
    kwargs: dict
    memory_bytes: int = None
    invalid: str = None
    copied: bool = False

    def within(self, memory_bytes):
        self.memory_bytes = memory_bytes
        return self

    def rejected(self, reason):
        """The function must raise ValueError on this case: `reason` says why."""
        self.invalid = reason
        return self

    def copying(self):
        """Each call gets its own deep copy of the arguments (see `copied`)."""
        self.copied = True
        return self

    def given(self):
        """This case, with arguments of its own when it is `copied`."""
        return dataclasses.replace(self, args=copy.deepcopy(self.args), kwargs=copy.deepcopy(self.kwargs)) \
            if self.copied else self


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

    def task(self, name, *, outputs=None, hint="", mistakes=(), facts=(), order=None, graded=True, **output):
        """Declare the task whose function is `name` (the reference's of that name). `outputs`:
        a function that returns a tuple, its outputs in order; else one output with `hint`,
        `mistakes`, `facts` and the other fields of `Output` (`output`: requires, leaves). `order`:
        the names of the outputs in the order they are judged (default: as returned). `graded`
        False: a function the checks call that is no task."""
        task = Task(self, name, outputs, hint, mistakes, facts, order, output)
        if graded:
            self.tasks.append(task)
        return task


class Task:
    """A task: its function, its outputs, and what is known to be wrong with them."""

    def __init__(self, exercise, name, outputs, hint, mistakes, facts, order, output=None):
        self.exercise = exercise
        self.name = name
        self.reference = getattr(exercise.reference, name)
        self.tuple = outputs is not None
        self.outputs = tuple(outputs) if self.tuple else (
            Output(None, hint, tuple(mistakes), tuple(facts), **(output or {})),)
        names = [output.name for output in self.outputs]
        self.order = [names.index(output) for output in order] if order else range(len(names))

    def check(self, function, cases, prefer_named=False):
        """Judge `function` on every case of `cases`, in order; the first failure raises. `prefer_named`:
        every case is judged, and the first failure that names a mistake raises, else the first."""
        failures = []
        for each in cases:
            try:
                self.judge(function, each)
            except CheckFailed as failure:
                if not prefer_named or failure.cause is not None:
                    raise
                failures.append(failure)
        if failures:
            raise failures[0]

    def arguments(self, each):
        """The case's arguments by name, with the reference's defaults."""
        bound = inspect.signature(self.reference).bind(*each.args, **each.kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def run(self, function, each):
        """The student's result on `each` (the stand-ins answering for the other tasks)."""
        calling = call if each.memory_bytes is None else call_in_memory
        limit = {} if each.memory_bytes is None else {"limit_bytes": each.memory_bytes}
        return calling(function, *each.args, on=each.description, stand_ins=self.exercise.graded,
                       **limit, **each.kwargs)

    def judge(self, function, each):
        """Judge `function` on the case `each`: raise CheckFailed with one sentence, or return
        the student's outputs by name. A case `rejected` only checks that it raises ValueError."""
        if each.invalid is not None:
            return self._rejects(function, each)
        actual = self.run(function, each.given())
        given = each.given()
        expected = self.reference(*given.args, **given.kwargs)
        arguments = self.arguments(each)
        if not self.tuple:
            actual, expected = (actual,), (expected,)
        else:
            self._check_tuple(actual, expected, each.description)
        got = {output.name: value for output, value in zip(self.outputs, actual)}
        for index in self.order:
            output = self.outputs[index]
            wanted = expected[index] if output.expected is None else output.expected(got, **arguments)
            judge = self._judge_leaves if output.leaves else self._judge_output
            judge(output, index, actual[index], wanted, arguments, each.description)
        return got

    def _rejects(self, function, each):
        """Check that `function` raises ValueError on `each` (the stand-ins answering, its output silenced)."""
        with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stderr(io.StringIO()), \
                standing_in(function, self.exercise.graded) as run:
            warnings.simplefilter("ignore")
            try:
                run(*each.args, **each.kwargs)
            except ValueError:
                return None
            except Exception as error:  # any failure of student code is a failed check
                raise CheckFailed(f"{self.name} should raise ValueError on {each.description}, not "
                                  f"{type(error).__name__}: {each.invalid}.") from None
        raise CheckFailed(f"{self.name} should raise ValueError on {each.description}: {each.invalid}.")

    def _judge_leaves(self, output, index, actual, wanted, arguments, description, path=()):
        """Judge the dict or list `actual` against `wanted`, key by key, down to its arrays."""
        if not isinstance(wanted, (dict, list, tuple)):
            return self._judge_output(output, index, actual, wanted, arguments, description, path)
        where = self._name(output, description, path)
        if isinstance(wanted, dict):
            check(isinstance(actual, dict) and set(actual) == set(wanted),
                  f"{where} should be a dict with the keys {sorted(wanted)}.")
        else:
            check(isinstance(actual, (list, tuple)) and len(actual) == len(wanted),
                  f"{where} should be a list of {len(wanted)}.")
        for key in (wanted if isinstance(wanted, dict) else range(len(wanted))):
            self._judge_leaves(output, index, actual[key], wanted[key], arguments, description, (*path, key))

    def _name(self, output, description, path=()):
        at = "".join(f"[{key!r}]" for key in path)
        return f"{self.name}{at} on {description}" if output.name is None else \
            f"the {output.name}{at} on {description}"

    def _check_tuple(self, actual, expected, description):
        names = ", ".join(output.name for output in self.outputs)
        check(isinstance(actual, tuple) and len(actual) == len(expected),
              f"{self.name} should return a tuple ({names}), but on {description} it returned a "
              f"{type(actual).__name__}" + (f" of length {len(actual)}." if isinstance(actual, tuple) else "."))
        shapes = [np.shape(value) for value in expected]
        if len(set(map(tuple, shapes))) == len(shapes) and sorted(map(np.shape, actual)) == sorted(shapes) \
                and [np.shape(value) for value in actual] != shapes:
            check(False, f"{self.name} should return ({names}) in this order.")

    def _judge_output(self, output, index, actual, wanted, arguments, description, path=()):
        name = self._name(output, description, path)
        for fact in output.requires:
            fact.explain(actual, name, arguments)

        def facts(actual):
            for fact in output.facts:
                fact.explain(actual, name, arguments)
        check_close(actual, wanted, name, output.hint, lambda: self._mistakes(output, index, arguments, path),
                    facts, same=_same)

    def _mistakes(self, output, index, arguments, path=()):
        """(value, message) of each mistake of `output` that applies to the case (at `path`, of
        `leaves`)."""
        found = []
        for mistake in output.mistakes:
            if not mistake.applies(arguments):
                continue
            try:
                value = mistake.gives(**arguments)
                if self.tuple and isinstance(value, tuple):
                    value = value[index]
                for key in path:
                    value = value[key]
            except (ArithmeticError, ValueError, TypeError, IndexError, KeyError):
                continue  # this mistake cannot give a value on this case
            found.append((value, mistake.message))
        return found


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
