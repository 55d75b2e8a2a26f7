"""Runs inside the sandbox: executes a student's notebook, then calls its functions.

Started by `autograder.sandbox` as ``python -E -s sandbox_runner.py FD`` in a
folder holding only this file and `wire.py`. It talks to the grader over the
socket FD with `wire` messages:

  grader -> {"op": "run", "cells": [[id, source], ...], "cell_timeout": s, "limits": {...}}
  runner -> {"op": "cell", "id": id, "stdout": text, "stderr": text,
             "error": {"ename", "evalue", "mro"} or null, "seconds": s}  (one per cell)
  runner -> {"op": "ran", "functions": [names of the callables the notebook defined]}
  grader -> {"op": "call", "name": n, "timeout": s, "arguments": [args, kwargs]} (wire value)
  runner -> {"op": "returned"} + [result, args, kwargs after the call]
            or {"op": "raised", "error": {...}}

Everything it sends is untrusted by the grader, which only ever reads plain
data from it: the student's code runs in this same process and could forge
any of these messages, so none of them can grant a point by itself.
"""

import builtins
import io
import os
import resource
import signal
import socket
import sys
import time

import wire

OUTPUT_KEPT = 20_000  # characters of a cell's output kept for the feedback


class CellTimeout(BaseException):
    """Raised in the student's code when a cell or a call runs out of time."""


class OutputLimitExceeded(BaseException):
    """Raised in the student's code when it has printed more than its budget."""


class StdinNotImplementedError(RuntimeError):
    """input() while grading: nobody is there to answer (as in Jupyter without stdin)."""


def no_input(*args, **kwargs):
    raise StdinNotImplementedError(
        "input() was called, but the notebook runs without a keyboard while it is "
        "graded: remove the call to input()")


class CappedOutput(io.TextIOBase):
    """A text stream that keeps the first characters and counts them all."""

    def __init__(self, budget):
        self.budget, self.kept = budget, []
        self.kept_size = 0

    def write(self, text):
        text = str(text)
        self.budget[0] -= len(text)
        if self.kept_size < OUTPUT_KEPT:
            self.kept.append(text[:OUTPUT_KEPT - self.kept_size])
            self.kept_size += len(self.kept[-1])
        if self.budget[0] < 0:
            raise OutputLimitExceeded()
        return len(text)

    def text(self):
        return "".join(self.kept)

    def writable(self):
        return True


def on_alarm(signum, frame):
    raise CellTimeout()


def describe(error):
    """The error as plain data: its type's name, its message, its classes' names."""
    try:
        evalue = str(error)
    except BaseException:  # a hostile __str__
        evalue = ""
    if isinstance(error, CellTimeout):
        return {"ename": "CellTimeout", "evalue": "", "mro": ["CellTimeout"]}
    if isinstance(error, OutputLimitExceeded):
        return {"ename": "OutputLimitExceeded", "evalue": "", "mro": ["OutputLimitExceeded"]}
    return {"ename": type(error).__name__, "evalue": evalue[:2000],
            "mro": [cls.__name__ for cls in type(error).__mro__]}


def main(fd):
    channel = socket.socket(fileno=fd)
    reader, writer = channel.makefile("rb"), channel.makefile("wb")
    request, _ = wire.receive(reader)
    limits = request["limits"]
    budget = [limits["output_chars"]]

    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance(colors="NoColor")
    errors = []
    shell.showtraceback = lambda *args, **kwargs: None
    shell.showsyntaxerror = lambda *args, **kwargs: None
    builtins.input = no_input
    signal.signal(signal.SIGALRM, on_alarm)
    given = set(shell.user_ns)

    def with_limits(run, timeout):
        """run() with the output captured and an alarm after `timeout` seconds."""
        out, err = CappedOutput(budget), CappedOutput(budget)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            return run(), out, err
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout, sys.stderr = saved

    # From here on, the student's code runs: set the limits it cannot raise.
    for limit, value in ((resource.RLIMIT_AS, limits["memory_bytes"]),
                         (resource.RLIMIT_NPROC, limits["processes"]),
                         (resource.RLIMIT_FSIZE, limits["file_bytes"]),
                         (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))

    for cell_id, source in request["cells"]:
        started = time.monotonic()
        try:
            result, out, err = with_limits(
                lambda: shell.run_cell(source, store_history=False), request["cell_timeout"])
            error = result.error_before_exec or result.error_in_exec
        except BaseException as raised:  # a timeout between the shell's own handlers
            out = err = CappedOutput([0])
            error = raised
        wire.send(writer, {"op": "cell", "id": cell_id, "stdout": out.text(), "stderr": err.text(),
                           "error": describe(error) if error is not None else None,
                           "seconds": time.monotonic() - started})
    functions = sorted(name for name, value in shell.user_ns.items()
                       if callable(value) and not name.startswith("_") and name not in given
                       and not isinstance(value, type(os)))
    wire.send(writer, {"op": "ran", "functions": functions})

    while True:
        message = wire.receive(reader)
        if message is None:
            return
        request, blobs = message
        op = request.get("op")
        if op == "call":
            args, kwargs = wire.decode(request["arguments"], blobs)
            function = shell.user_ns.get(request["name"])
            try:
                value, _, _ = with_limits(lambda: function(*args, **kwargs), request["timeout"])
            except BaseException as error:  # the student's function failed: report, go on
                wire.send(writer, {"op": "raised", "error": describe(error)})
                continue
            tree, out_blobs = wire.encode([value, args, kwargs])
            wire.send(writer, {"op": "returned", "value": tree}, out_blobs)


if __name__ == "__main__":
    main(int(sys.argv[1]))
