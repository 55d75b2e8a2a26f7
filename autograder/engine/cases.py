"""Checks as case tables: a task's check reads as its specification.

A course's checks module declares its exercise once, the graded functions in the order of the
tasks (each task's function is judged with the reference's versions of the tasks before it, and
of those its reference reaches, standing in for the student's: `harness.call`), then, per task,
what is right and what is known to be wrong, as data:

    exercise = Exercise(reference)                      # the module of the reference solutions
    softmax = exercise.task("softmax", hint="...", mistakes=[Mistake("...", lambda x, axis: ...)])
    pooled = exercise.task("weighted_mean", outputs=[     # a function that returns a tuple
        Output("weights", hint="...", mistakes=[...], facts=[...]),
        Output("mean", expected=lambda got, X, scores: got["weights"] @ X)])

    def check_softmax(function):                        # the hidden test cell calls this
        rng = seeded(SEED)
        softmax.check(function, [case("a vector of 6 scores", rng.normal(size=6), axis=-1), ...])

The engine does the bookkeeping once, for every case: it calls the student's function with the
stand-ins (time, memory, inputs unchanged: `harness`), checks that a tuple has its outputs in
their order, then each output's type and shape, and compares it with the reference's
(`checking.check_close`). A value that differs is explained by the one known mistake whose value
it equals, when exactly one of the task's mistakes that apply to the case gives it and the
reference does not (`named_cause`: two would be a guess), of whatever shape; otherwise by the
first fact it breaks (a property of every right value: finite, masked weights 0, ...); otherwise
the message shows the expected values and the student's, with the hint (what is right; it names
no cause).

A mistake, a fact and an `expected` receive the case's arguments by name, bound to the
reference's signature with its defaults (a mistake's lambda names the reference's parameters).

Where a task needs more, it says so in its declaration, not in code around it:
- an output's `requires` (facts checked before its type and shape: token ids are integers),
  `where` (the positions judged: a padded encoder's outputs at real tokens), `any_shape` (its facts
  too come before the shape check: a decoding loop may stop early), `leaves` (a dict or list of
  arrays, each judged as an output of its own: gradients of parameters), `judge` (the comparison of
  a value that is no array: a cache);
- a task's `read` (what the function returns, read into its outputs, or refused in one sentence)
  and its own `stand_ins`; `Task.check(..., prefer_named=True)`: every case is tried, and a failure
  that names a mistake is shown before one that does not;
- a case's memory limit (`within`), tolerance (`tolerating`, float32), required ValueError
  (`rejected`), the reason shown when it raises (`on_raise`), and own copies of its arguments for
  each call (`copying`: a random generator both draw from).
"""

import copy
import dataclasses
import inspect

import numpy as np

from .checking import ATOL, RTOL, CheckFailed, check, check_close, close, named_cause
from .harness import OutOfMemory, Unfinished, call, call_in_memory


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A known mistake: `gives(**arguments)` is what the reference with that one step changed
    returns (of a function that returns a tuple: the whole tuple, or the value of the output the
    mistake is listed under); `message` says what is wrong and what is right (or a function of the
    arguments that gives it). `when(**arguments)`: the cases it applies to (default: all)."""
    message: object
    gives: object
    when: object = None

    def applies(self, arguments):
        return self.when is None or bool(self.when(**arguments))

    def text(self, arguments):
        return self.message(**arguments) if callable(self.message) else self.message


@dataclasses.dataclass(frozen=True)
class Fact:
    """A property of every right value: `holds(actual, **arguments)` is False when `actual`
    breaks it, and `message` (formatted with `name`, the value's name in messages, and the
    arguments) says what it breaks. `first`: checked once the shape is right, before the values
    are compared, so that a value within the tolerance still keeps it (a dtype, exact zeros)."""
    message: str
    holds: object
    first: bool = False

    def explain(self, actual, name, arguments):
        try:
            holds = bool(self.holds(actual, **arguments))
        except (TypeError, ValueError, IndexError, KeyError, AttributeError):
            holds = False
        if not holds:
            raise CheckFailed(self.message.format(name=name, **arguments))


@dataclasses.dataclass(frozen=True)
class Output:
    """One output of a function that returns a tuple (or its only output: name None).
    `expected(got, **arguments)`, when given, is its right value computed from the student's
    other outputs `got` (a dict by name), so one mistake is not counted twice.
    `requires`: facts checked first, before the type and shape. `where(**arguments)`: the positions
    judged, a boolean array that broadcasts to the value; elsewhere any value is right. `any_shape`:
    the facts too are checked before the shape (a mistake may give another). `leaves`: the value is
    a dict or list (nested) of arrays: its keys and lengths must be the reference's, and each array
    is judged as an output named by its path (`grads['W_q']`), a mistake's value taken at the same
    path. `judge(actual, wanted, name, **arguments)`: judges a value that is no array, instead of
    the comparison (raises CheckFailed)."""
    name: str = None
    hint: str = ""
    mistakes: tuple = ()
    facts: tuple = ()
    expected: object = None
    requires: tuple = ()
    where: object = None
    any_shape: bool = False
    leaves: bool = False
    judge: object = None


@dataclasses.dataclass
class Case:
    """One input of a check: `description` names it in messages; see the methods for the rest."""
    description: str
    args: tuple
    kwargs: dict
    memory_bytes: int = None
    memory_why: str = None
    tolerance: tuple = (RTOL, ATOL)
    invalid: str = None
    raising_why: str = None
    simpler: "Case" = None
    copied: bool = False

    def within(self, memory_bytes, why=None):
        """The call must fit in `memory_bytes`, measured outside the student's process
        (`harness.call_in_memory`); `why`: the end of the message when it does not."""
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

    def copying(self):
        """The student's function and the reference each get their own deep copy of the arguments
        (a random generator: both draw the same numbers); mistakes, facts and `expected` get them
        as they were (copy a generator there before drawing from it)."""
        self.copied = True
        return self

    def fresh(self):
        """This case, with arguments of its own when it is `copied`."""
        return dataclasses.replace(self, args=copy.deepcopy(self.args), kwargs=copy.deepcopy(self.kwargs)) \
            if self.copied else self


def case(description, *args, **kwargs):
    """The case `description`: the function called with `args` and `kwargs`."""
    return Case(description, args, kwargs)


def given(**kwargs):
    """The keyword arguments of `kwargs` that are not None: those a case passes
    (`case(..., **given(mask=mask))`), the others left to the function's defaults."""
    return {key: value for key, value in kwargs.items() if value is not None}


def changed(variant, **change):
    """What a mistake gives: `variant` (the reference with its steps as options) called with the case's
    arguments by name and `change` (the options of the mistake)."""
    return lambda **arguments: variant(**{**arguments, **change})


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

    def task(self, name, *, outputs=None, order=None, graded=True, read=None, stand_ins=None, **output):
        """Declare the task whose function is `name` (the reference's of that name). `outputs`:
        a function that returns a tuple, its outputs in order; else one output with the fields of
        `Output` given here (`hint`, `mistakes`, `facts`, ...). `order`: the names of the outputs in
        the order they are judged (default: as returned). `graded` False: a function the checks
        call that is no task. `read(result, description)`: the outputs, in order, of what the
        function returns (the student's and the reference's), raising CheckFailed when it has not
        their form (default: the result itself). `stand_ins`: those of this task's calls, where
        they are not the exercise's."""
        task = Task(self, name, tuple(outputs) if outputs is not None else None, order, read, stand_ins, output)
        if graded:
            self.tasks.append(task)
        return task


class Task:
    """A task: its function, its outputs, and what is known to be wrong with them."""

    def __init__(self, exercise, name, outputs, order, read, stand_ins, output):
        self.exercise, self.name, self.read, self.stand_ins = exercise, name, read, stand_ins
        self.reference = getattr(exercise.reference, name)
        self.tuple = outputs is not None
        self.outputs = outputs if self.tuple else (Output(None, **output),)
        names = [output.name for output in self.outputs]
        self.order = [names.index(output) for output in order] if order else range(len(names))

    @property
    def calling_stand_ins(self):
        return self.exercise.graded if self.stand_ins is None else tuple(self.stand_ins)

    def check(self, function, cases, prefer_named=False):
        """Judge `function` on every case of `cases`, in order; the first failure raises. `prefer_named`:
        every case is judged, and the first failure that names a mistake raises, else the first."""
        failures = []
        for each in cases:
            try:
                self.judge(function, each)
            except CheckFailed as failure:
                if not prefer_named or failure.cause is not None or isinstance(failure, Unfinished):
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
        if each.memory_bytes is None:
            return call(function, *each.args, on=each.description, stand_ins=self.calling_stand_ins, **each.kwargs)
        try:
            return call_in_memory(function, *each.args, on=each.description, limit_bytes=each.memory_bytes,
                                  stand_ins=self.calling_stand_ins, **each.kwargs)
        except OutOfMemory as failure:
            if each.memory_why is None:
                raise
            raise CheckFailed(f"{getattr(function, '__name__', self.name)} did not run within "
                              f"{each.memory_bytes / 2 ** 20:.0f} MiB on {each.description}: "
                              f"{each.memory_why}") from failure

    def rejects(self, function, each):
        """Check that `function` raises ValueError on the case `each` (the stand-ins answering for the
        other tasks), whatever it prints."""
        try:
            call(function, *each.args, on=each.description, stand_ins=self.calling_stand_ins, **each.kwargs)
        except Unfinished:
            raise
        except CheckFailed as failure:
            if isinstance(failure.__context__, ValueError):  # what the function raised
                return
            raise CheckFailed(f"{str(failure).rstrip('.')}, but it should raise ValueError: {each.invalid}.") from None
        raise CheckFailed(f"{self.name} on {each.description} should raise ValueError: {each.invalid}.")

    def judge(self, function, each):
        """Judge `function` on the case `each`: raise CheckFailed with one sentence, or return
        the student's outputs by name. A case `rejected` only checks that it raises ValueError."""
        if each.invalid is not None:
            return self.rejects(function, each)
        actual = self._run_explained(function, each)
        fresh = each.fresh()
        expected = self.reference(*fresh.args, **fresh.kwargs)
        if self.read is not None:
            actual, expected = self.read(actual, each.description), self.read(expected, each.description)
        arguments = self.arguments(each)
        if not self.tuple:
            actual, expected = (actual,), (expected,)
        else:
            actual = tuple(actual) if isinstance(actual, list) else actual
            self._check_tuple(actual, expected, each.description)
        got = {output.name: value for output, value in zip(self.outputs, actual)}
        for index in self.order:
            output = self.outputs[index]
            wanted = expected[index] if output.expected is None else output.expected(got, **arguments)
            judge = self._judge_leaves if output.leaves else self._judge_output
            judge(output, index, actual[index], wanted, arguments, each)
        return got

    def _run_explained(self, function, each):
        """`run`, a failure that the function raised ending with the case's `raising_why`."""
        try:
            return self.run(function, each.fresh())
        except Unfinished:
            raise
        except CheckFailed as failure:
            if each.raising_why is None or failure.__context__ is None:  # not an exception the function raised
                raise
            if each.simpler is None:
                raise CheckFailed(f"{str(failure).rstrip('.')}: {each.raising_why}.") from None
            try:
                self.run(function, each.simpler.fresh())
            except CheckFailed:
                raise failure from None
            raise CheckFailed(f"{str(failure).rstrip('.')}, but not {each.simpler.description}: "
                              f"{each.raising_why}.") from None

    def _name(self, output, description, path=()):
        at = "".join(f"[{key!r}]" for key in path)
        return f"{self.name}{at} on {description}" if output.name is None else f"the {output.name}{at} on {description}"

    def _check_tuple(self, actual, expected, description):
        names = ", ".join(output.name for output in self.outputs)
        check(isinstance(actual, tuple) and len(actual) == len(expected),
              f"{self.name} should return a tuple ({names}), but on {description} it returned a "
              f"{type(actual).__name__}" + (f" of length {len(actual)}." if isinstance(actual, tuple) else "."))
        shapes, returned = [np.shape(value) for value in expected], [_shape(value) for value in actual]
        if len(set(shapes)) == len(shapes) and sorted(returned, key=str) == sorted(shapes, key=str) \
                and returned != shapes:
            check(False, f"{self.name} should return ({names}) in this order.")

    def _judge_leaves(self, output, index, actual, wanted, arguments, each, path=()):
        """Judge the dict or list `actual` against `wanted`, key by key, down to its arrays."""
        if not isinstance(wanted, (dict, list, tuple)):
            return self._judge_output(output, index, actual, wanted, arguments, each, path)
        where = self._name(output, each.description, path)
        if isinstance(wanted, dict):
            check(isinstance(actual, dict) and set(actual) == set(wanted),
                  f"{where} should be a dict with the keys {sorted(wanted)}.")
        else:
            check(isinstance(actual, (list, tuple)) and len(actual) == len(wanted),
                  f"{where} should be a list of {len(wanted)}.")
        for key in (wanted if isinstance(wanted, dict) else range(len(wanted))):
            self._judge_leaves(output, index, actual[key], wanted[key], arguments, each, (*path, key))

    def _judge_output(self, output, index, actual, wanted, arguments, each, path=()):
        name = self._name(output, each.description, path)
        for fact in output.requires:
            fact.explain(actual, name, arguments)
        if output.judge is not None:
            return output.judge(actual, wanted, name, **arguments)
        judged = None
        if output.where is not None and isinstance(actual, np.ndarray) and actual.shape == np.shape(wanted):
            judged = np.broadcast_to(output.where(**arguments), actual.shape)
            actual = np.where(judged, actual, wanted)  # elsewhere any value is right: the reference's stands there

        def mistakes():
            found = self._mistakes(output, index, arguments, path)
            return [(value if judged is None or np.shape(value) != judged.shape else np.where(judged, value, wanted),
                     message) for value, message in found]

        def facts(actual):
            for fact in output.facts:
                fact.explain(actual, name, arguments)
        if np.ndim(wanted) == 0 and isinstance(actual, (int, float, np.number)) and not isinstance(actual, bool):
            actual = np.asarray(actual)  # a number, where one number is expected
        if isinstance(actual, np.ndarray) and actual.shape != np.shape(wanted):  # a mistake may change the shape
            cause = named_cause(actual, None, mistakes(), same=_same)
            if cause is not None:
                raise CheckFailed(f"{name}: {cause}.", cause=cause)
            if output.any_shape:
                facts(actual)
        elif isinstance(actual, np.ndarray):
            for fact in output.facts:
                if fact.first:
                    fact.explain(actual, name, arguments)
        check_close(actual, wanted, name, output.hint, mistakes, facts, same=_same, tolerance=each.tolerance)

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
            found.append((value, mistake.text(arguments)))
        return found


def _shape(value):
    try:
        return np.shape(value)
    except ValueError:  # a ragged list
        return None


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


def weight_facts(keys="keys", row="a query"):
    """The facts of the weights of every masked softmax over `keys`, whatever its scores: finite, 0
    where the case's `mask` argument (None: none; broadcast to the weights) is False, all 0 for `row`
    whose `keys` are all masked (along the case's `axis` argument, default the last), summing to 1
    along that axis for every other."""
    def allowed(actual, mask=None, **_):
        return np.ones(np.shape(actual), dtype=bool) if mask is None else np.broadcast_to(mask, np.shape(actual))

    def empty(actual, axis=-1, **arguments):
        kept = allowed(actual, **arguments)
        return np.broadcast_to(~kept.any(axis=axis, keepdims=True), kept.shape)

    return [Fact(f"{{name}} contain NaN or inf: {row} whose {keys} are all masked must get all-zero weights.",
                 lambda actual, **arguments: np.all(np.isfinite(actual)) or not empty(actual, **arguments).any()),
            Fact("{name} contain NaN or inf: the softmax of finite scores, even of about 1e4, is finite.",
                 lambda actual, **arguments: np.all(np.isfinite(actual))),
            Fact(f"{{name}}: {row} whose {keys} are all masked must get all-zero weights.",
                 lambda actual, **arguments: np.allclose(actual[empty(actual, **arguments)], 0.0)),
            Fact(f"{{name}}: masked {keys} must get weight 0.",
                 lambda actual, **arguments: np.allclose(actual[~allowed(actual, **arguments)], 0.0)),
            Fact(f"{{name}} do not sum to 1: the weights of {row} must sum to 1 over the {keys} it keeps.",
                 lambda actual, axis=-1, **arguments: np.allclose(
                     np.sum(actual, axis=axis, keepdims=True)[~empty(actual, axis=axis, **arguments).any(
                         axis=axis, keepdims=True)], 1.0))]


def mask_mistakes(softmax, inputs, keys="keys", row="a query", ignored=None):
    """The known mistakes of the weights `softmax(scores, mask, axis)` of the case's `inputs(**arguments)`,
    (scores, mask, axis), on the cases with a mask: the mask applied after the softmax, ignored
    (`ignored`: that mistake's message, if not the default), a row whose keys are all masked made uniform."""
    def weights(change):
        return lambda **arguments: change(*inputs(**arguments))

    def masked(**arguments):
        return inputs(**arguments)[1] is not None

    return [Mistake("the mask is applied to the weights after the softmax: apply it to the scores, before the softmax",
                    weights(lambda scores, mask, axis: np.where(mask, softmax(scores, None, axis), 0.0)), when=masked),
            Mistake(ignored or f"the mask is ignored: masked {keys} must get weight 0",
                    weights(lambda scores, mask, axis: softmax(scores, None, axis)), when=masked),
            Mistake(f"{row} whose {keys} are all masked gets a uniform distribution: it must get all-zero weights",
                    weights(lambda scores, mask, axis: softmax(np.where(mask, scores, -1e9), None, axis)), when=masked)]
