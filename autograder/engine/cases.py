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
A mistake may give a value of another shape than the right one (states stacked along the wrong
axis, BOS left in the tokens): the student's value of that shape is named by it, before the shape
check. A task's `screen` says what the table cannot (token ids as floats); `weight_facts` and
`mask_mistakes` are the facts and the known mistakes of every masked softmax's weights; `given`,
a case's optional keyword arguments.
"""

import dataclasses
import inspect

import numpy as np

from .checking import ATOL, RTOL, CheckFailed, check, check_close, close, named_cause
from .harness import call, call_in_memory


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
    other outputs `got` (a dict by name), so one mistake is not counted twice."""
    name: str = None
    hint: str = ""
    mistakes: tuple = ()
    facts: tuple = ()
    expected: object = None


@dataclasses.dataclass
class Case:
    """One input of a check: `description` names it in messages. `memory_bytes`: the call must
    fit in that much memory, measured outside the student's process (`harness.call_in_memory`)."""
    description: str
    args: tuple
    kwargs: dict
    memory_bytes: int = None

    def within(self, memory_bytes):
        self.memory_bytes = memory_bytes
        return self


def case(description, *args, **kwargs):
    """The case `description`: the function called with `args` and `kwargs`."""
    return Case(description, args, kwargs)


def given(**kwargs):
    """The keyword arguments of `kwargs` that are not None: those a case passes (`case(..., **given(mask=mask))`),
    the others left to the function's defaults."""
    return {key: value for key, value in kwargs.items() if value is not None}


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

    def task(self, name, *, outputs=None, hint="", mistakes=(), facts=(), order=None, graded=True, screen=None):
        """Declare the task whose function is `name` (the reference's of that name). `outputs`:
        a function that returns a tuple, its outputs in order; else one output with `hint`,
        `mistakes` and `facts`. `order`: the names of the outputs in the order they are judged
        (default: as returned). `graded` False: a function the checks call that is no task.
        `screen(result, on, **arguments)`: plain Python run first on what the function returned
        (`on`: the case's description), raising CheckFailed for what the table cannot say
        (token ids as floats, scores instead of ids); default: none."""
        task = Task(self, name, outputs, hint, mistakes, facts, order, screen)
        if graded:
            self.tasks.append(task)
        return task


class Task:
    """A task: its function, its outputs, and what is known to be wrong with them."""

    def __init__(self, exercise, name, outputs, hint, mistakes, facts, order, screen=None):
        self.exercise = exercise
        self.screen = screen
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
        calling = call if each.memory_bytes is None else call_in_memory
        limit = {} if each.memory_bytes is None else {"limit_bytes": each.memory_bytes}
        return calling(function, *each.args, on=each.description, stand_ins=self.exercise.graded,
                       **limit, **each.kwargs)

    def judge(self, function, each):
        """Judge `function` on the case `each`: raise CheckFailed with one sentence, or return
        the student's outputs by name."""
        actual = self.run(function, each)
        expected = self.reference(*each.args, **each.kwargs)
        arguments = self.arguments(each)
        if self.screen is not None:
            self.screen(actual, each.description, **arguments)
        if not self.tuple:
            actual, expected = (actual,), (expected,)
        else:
            self._check_tuple(actual, expected, each.description)
        got = {output.name: value for output, value in zip(self.outputs, actual)}
        for index in self.order:
            output = self.outputs[index]
            wanted = expected[index] if output.expected is None else output.expected(got, **arguments)
            self._judge_output(output, index, actual[index], wanted, arguments, each.description)
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

    def _judge_output(self, output, index, actual, wanted, arguments, description):
        name = self._name(output, description)
        if isinstance(actual, np.ndarray) and actual.shape != np.shape(wanted):  # a mistake may change the shape
            cause = named_cause(actual, None, self._mistakes(output, index, arguments), same=_same)
            if cause is not None:
                raise CheckFailed(f"{name}: {cause}.", cause=cause)

        def facts(actual):
            for fact in output.facts:
                fact.explain(actual, name, arguments)
        check_close(actual, wanted, name, output.hint, lambda: self._mistakes(output, index, arguments),
                    facts, same=_same)

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


def weight_facts(keys="keys", row="a query"):
    """The facts of the weights of every masked softmax over `keys`, whatever its scores: finite, 0
    where the case's `mask` argument (None: none; broadcast to the weights) is False, all 0 for `row`
    whose `keys` are all masked (along the case's `axis` argument, default the last)."""
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
                 lambda actual, **arguments: np.allclose(actual[~allowed(actual, **arguments)], 0.0))]


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
