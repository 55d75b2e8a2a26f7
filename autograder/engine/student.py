"""Calling a student's function: one interface, whether it runs here or in a sandbox.

The checks (through `harness`) call a `Student`: ``call(args, kwargs, answers)`` runs the
function with the graded functions of `answers` ({name: correct function}) standing in
(`standins`), and ``in_memory(limit_bytes)`` gives the same function where a call has at most
`limit_bytes` of memory beyond its process's baseline. Two kinds implement it:

- `InProcess`, a plain function (plain nbgrader kernels, the tests): stand-ins are swapped in
  its namespace; a call in memory runs in a forked child (`Forked`) whose address space is
  capped, its outcome sent back as plain data (`protocol`);
- ``sandbox.StudentFunction``, under ``grade``: the function runs in the submission's sandbox.

Wherever it ran, a call that failed there comes back as an exception like the one raised
(`rebuilt`), and changes the function made to its arguments are made to the caller's
(`copy_changes`), so that a check sees the same outcome either way.
"""

import builtins
import inspect
import keyword
import os
import resource

import numpy as np

from . import memory, protocol, standins


class Stopped(BaseException):
    """The process running the student's function was stopped or died; a BaseException so that
    checks do not swallow it."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status, self.reason = status, reason


class Student:
    """A student's function as the checks call it."""

    __name__ = "your function"

    def call(self, args, kwargs, answers=None):
        """``function(*args, **kwargs)``, the student's functions of `answers` ({name: correct
        function}) answering as those (`standins`)."""
        raise NotImplementedError

    def in_memory(self, limit_bytes):
        """This function where a call may use at most `limit_bytes` beyond its process's
        baseline; Stopped when that cannot be."""
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self.call(args, kwargs)


def as_student(function):
    """`function` as a `Student` (a plain function: `InProcess`)."""
    return function if isinstance(function, Student) else InProcess(function)


class InProcess(Student):
    """A function of this process (plain nbgrader kernels, the tests)."""

    def __init__(self, function):
        self.function = self.__wrapped__ = function
        self.__name__ = getattr(function, "__name__", Student.__name__)

    @property
    def __globals__(self):
        return getattr(inspect.unwrap(self.function), "__globals__", None)

    def call(self, args, kwargs, answers=None):
        plain = inspect.unwrap(self.function)
        namespace = getattr(plain, "__globals__", None)
        if not answers or not isinstance(namespace, dict):
            return self.function(*args, **kwargs)
        undo = standins.swapped(namespace, plain, {name: standins.bound(name, f) for name, f in answers.items()},
                                {name: inspect.unwrap(f) for name, f in answers.items()})
        try:
            return self.function(*args, **kwargs)
        finally:
            undo()

    def in_memory(self, limit_bytes):
        return Forked(self, limit_bytes)


class Forked(InProcess):
    """A function of this process, each call in a forked child that sets a hard limit on its
    address space at its size after the fork plus `limit_bytes` (its inputs were in memory
    before the fork and do not count); MemoryError when it dies."""

    def __init__(self, student, limit_bytes):
        super().__init__(student.function)
        self.limit_bytes = limit_bytes

    def call(self, args, kwargs, answers=None):
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(reader)
            self._child(writer, args, kwargs, answers)
        os.close(writer)
        with os.fdopen(reader, "rb") as stream:
            try:
                received = protocol.receive(stream)
            except protocol.WireError:
                received = None
        os.waitpid(pid, 0)
        if received is None:  # it died, or ran out of memory while sending its answer
            raise MemoryError()
        header, blobs = received
        outcome = protocol.decode(header["value"], blobs)
        if outcome[0] == "raised":
            raise rebuilt(protocol.plain_error(outcome[1]))
        _, value, (args_after, kwargs_after) = outcome
        copy_changes(args, args_after)
        copy_changes(kwargs, kwargs_after)
        return value

    def _child(self, writer, args, kwargs, answers):
        status = 1
        try:
            size = memory.address_space(blas_ready=True)
            resource.setrlimit(resource.RLIMIT_AS, (size + self.limit_bytes, size + self.limit_bytes))
            try:
                outcome = ("returned", InProcess.call(self, args, kwargs, answers), [args, kwargs])
            except Exception as error:
                outcome = ("raised", {"ename": type(error).__name__, "evalue": str(error)[:2000],
                                      "mro": [kind.__name__ for kind in type(error).__mro__]})
            tree, blobs = protocol.encode(outcome)
            with os.fdopen(writer, "wb") as stream:
                protocol.send(stream, {"value": tree}, blobs)
            status = 0
        finally:
            os._exit(status)


def rebuilt(error):
    """An exception like the one a student's function raised elsewhere (`protocol.plain_error`):
    same name, built-in base."""
    if error["ename"] == "OutputLimitExceeded":
        return RuntimeError("it printed more than the notebook's output limit")
    base = next((getattr(builtins, name) for name in error["mro"]
                 if isinstance(getattr(builtins, name, None), type)
                 and issubclass(getattr(builtins, name), Exception)), Exception)
    name, message = error["ename"], error["evalue"] + (f"; at {error['place']}" if error.get("place") else "")
    if name == base.__name__ or not name.isidentifier() or keyword.iskeyword(name):
        return base(message)
    return type(name, (base,), {})(message)


def copy_changes(before, after):
    """Make `before` equal `after` in place where a function changed its arguments."""
    if isinstance(before, np.ndarray) and isinstance(after, np.ndarray):
        if before.shape == after.shape and not np.array_equal(before, after, equal_nan=True):
            if before.flags.writeable:
                np.copyto(before, after, casting="unsafe")
    elif isinstance(before, dict) and isinstance(after, dict):
        for key in list(before):
            if key not in after:
                del before[key]
        for key, value in after.items():
            if key in before and not _replaced(before[key], value):
                copy_changes(before[key], value)
            else:
                before[key] = value
    elif isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)):
        if len(before) == len(after):
            for i, (old, new) in enumerate(zip(before, after)):
                if isinstance(before, list) and _replaced(old, new):
                    before[i] = new
                else:
                    copy_changes(old, new)
        elif isinstance(before, list):
            before[:] = after


def _replaced(before, after):
    """Whether the function put another kind of value where `before` was (a longer array, ...)."""
    if isinstance(before, np.ndarray) and isinstance(after, np.ndarray):
        return before.shape != after.shape
    return type(before) is not type(after) and not (
        isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)))
