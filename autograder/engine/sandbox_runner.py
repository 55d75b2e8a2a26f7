"""Runs inside the sandbox: executes a student's notebook, then calls its functions.

Started by `sandbox.py` as ``python -E -s -S -m sandbox_runner FD
SITE_PACKAGES...`` in a folder holding only this file, `wire.py` and their
bytecode (in the sandbox without `site`, whose .pth files would import the
course's editable finder: the packages' folders are given instead). It talks
to the grader over the socket FD with `wire` messages:

  grader -> {"op": "run", "cells": [[id, source], ...], "cell_timeout": s,
             "cell_timeouts": {id: s}, "stopping_cells": [id, ...], "stopped": {function: reason},
             "places": {id: where the cell is, in words}, "limits": {...}}
  runner -> {"op": "cell", "id": id, "stdout": text, "stderr": text,
             "error": {"ename", "evalue", "mro", "function"} or null,
             "result": repr of the value the cell displayed (its last expression) or null,
             "seconds": s, "cpu_seconds": s}  (one per cell)
  runner -> {"op": "ran", "functions": [names of the callables the notebook defined],
             "started": t, "imported": t}  (time.monotonic() when it started and had imported)
  grader -> {"op": "call", "name": n, "timeout": s, "stand_ins": [names],
             "arguments": [args, kwargs]} (wire value)
  while it runs, for each call of a stand-in (below):
    runner -> {"op": "stand-in", "name": e, "arguments": [args, kwargs]}
    grader -> {"op": "answer", "value": value}, {"op": "raised", "error": {...}}
              or {"op": "unbound", "error": {...}}
  runner -> {"op": "returned", "cpu_seconds": s} + [result, args, kwargs after the call]
            or {"op": "raised", "error": {...}, "cpu_seconds": s}

Stand-ins: while the called function runs, the notebook's function of each
name of "stand_ins" (the graded functions its reference reaches) answers as a
stand-in that sends its arguments to the grader and returns the grader's
answer: the reference's value, computed there (the reference never enters
this process). A plain function answers by identity (`trampoline`: every
alias, partial or default holding it), anything else by name. So a function
is judged with correct neighbours, whatever the student's are. Arguments the
reference's parameters do not take ("unbound") go to the student's own
function. All is restored after the call; a stand-in kept by the notebook
answers nothing afterwards, and the grader answers only for the names of the
call it is waiting on. When the call raises after stand-ins answered, only
the exception's type and line are reported (its message may hold answers).

limits["memory_above_baseline"], when not null, makes this a sandbox for
memory checks: before the first cell, the runner reserves BLAS's work buffer,
reads its own address space (VmSize) and sets its hard RLIMIT_AS to that plus
those bytes (at most limits["memory_bytes"]), which the student's code cannot
raise.

Time limits are on CPU time, which measures the work whatever else the
machine runs (the reference's times are CPU times too), and on wall-clock
time at limits["wall_factor"] times as much, which stops code that waits
(a sleep) rather than works.

A cell or call that runs out of time raises CellTimeout naming the outermost
function of the notebook that was running (the one the cell or check
called); after a call, or a cell of "stopping_cells" (the course's cells, not
the student's own), that function is then replaced, in the notebook's namespace, by one
that raises TimeoutError at once, so that later cells do not wait for it
again (functions that call it by name fail at once too). The grader passes
the functions stopped so far ("stopped") to a restarted runner.

Cells run as IPython runs them (each statement in turn, the value of a
last expression displayed, every exception caught and reported), but
without IPython, whose import and shell cost more than NumPy's import: the
shell is created, around the same namespace, only for a notebook that needs
it, at its first cell that is not plain Python (a magic, `!`, a prompt) or
its first call of `get_ipython()`; from then on every cell runs in it, with
its transformers and hooks.

Everything it sends is untrusted by the grader, which only ever reads plain
data from it: the student's code runs in this same process and could forge
any of these messages, so none of them can grant a point by itself.
"""

import __future__
import ast
import builtins
import io
import os
import resource
import signal
import socket
import sys
import time
import traceback
import types
import warnings

STARTED = time.monotonic()  # the interpreter is up: what follows is imports

sys.path += sys.argv[2:]  # the packages' folders (NumPy...), when started without `site`
import trampoline  # noqa: E402
import wire  # noqa: E402 (numpy)

OUTPUT_KEPT = 20_000  # characters of a cell's output kept for the feedback


MAIN = types.ModuleType("__main__")  # the notebook's module, as in IPython
NOTEBOOK = MAIN.__dict__  # the notebook's namespace
SHELL = None  # IPython's shell around NOTEBOOK, once the notebook needs it
FUTURE = [0]  # compiler flags of the __future__ imports of the cells run so far
FUTURE_FLAGS = sum(getattr(__future__, name).compiler_flag for name in __future__.all_feature_names)


class CellTimeout(BaseException):
    """Raised in the student's code when a cell or a call runs out of time.

    args: (the notebook's function that was running, or None; the limit in seconds)."""


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


LIMIT = [0.0]  # CPU seconds of the cell or call running now
SHOWN = [None]  # repr of the value the running cell displayed (nbgrader's partial credit reads it)


def display(value):
    """sys.displayhook: print a last expression's value, as Python does, and keep its repr."""
    if value is None:
        return
    builtins._ = value
    SHOWN[0] = repr(value)
    sys.stdout.write(SHOWN[0] + "\n")


def on_alarm(signum, frame):
    raise CellTimeout(running_function(frame), LIMIT[0])


def running_function(frame):
    """The name of the outermost function of the notebook on the stack of `frame`, or None."""
    codes = {value.__code__: name for name, value in NOTEBOOK.items()
             if isinstance(value, types.FunctionType)}
    name = None
    while frame is not None:
        name = codes.get(frame.f_code, name)
        frame = frame.f_back
    return name


def stop_calling(name, reason):
    """Replace the notebook's function `name` by one that raises TimeoutError(reason) at once."""
    def stopped(*args, **kwargs):
        raise TimeoutError(reason)
    stopped.__name__ = stopped.__qualname__ = name
    NOTEBOOK[name] = stopped
    return stopped


def get_ipython():
    """IPython's shell of the notebook, created on first use (with its hidden names, the
    notebook's own names kept)."""
    global SHELL
    if SHELL is None:
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config
        config = Config()
        config.HistoryManager.hist_file = ":memory:"  # no file, no thread (processes are limited)
        own = {name: value for name, value in NOTEBOOK.items() if value is not get_ipython}
        SHELL = InteractiveShell.instance(config=config, colors="NoColor", user_module=MAIN)
        SHELL.showtraceback = lambda *args, **kwargs: None
        SHELL.showsyntaxerror = lambda *args, **kwargs: None
        NOTEBOOK.update(own)
    return SHELL


def compiled(source):
    """The code objects of a cell, as IPython runs it: all but a last expression as
    statements, that one displayed. SyntaxError if it is not plain Python."""
    tree = compile(source, "<cell>", "exec", ast.PyCF_ONLY_AST | FUTURE[0], dont_inherit=True)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    codes = [compile(tree, "<cell>", "exec", FUTURE[0], dont_inherit=True)]
    if last is not None:
        codes.append(compile(ast.Interactive([last]), "<cell>", "single", FUTURE[0], dont_inherit=True))
    FUTURE[0] |= codes[0].co_flags & FUTURE_FLAGS
    return codes


def run_cell(source):
    """Run a cell in the notebook; return the exception it raised, or None."""
    if SHELL is None:
        try:
            codes = compiled(source)
        except (SyntaxError, ValueError):  # IPython's syntax, or IPython's report of the error
            codes = None
        if codes is not None:
            try:
                for code in codes:
                    exec(code, NOTEBOOK)
            except BaseException as error:  # as IPython: everything, a timeout too
                return error
            return None
    result = get_ipython().run_cell(source, store_history=False)
    if result.result is not None:
        try:
            SHOWN[0] = repr(result.result)
        except BaseException:  # a hostile __repr__: IPython showed nothing either
            pass
    return result.error_before_exec or result.error_in_exec


def describe(error):
    """The error as plain data: its type's name, its message, its classes' names."""
    try:
        evalue = str(error)
    except BaseException:  # a hostile __str__
        evalue = ""
    if isinstance(error, CellTimeout):
        function, seconds = (list(error.args) + [None, 0.0])[:2]
        what = function or "the cell"
        return {"ename": "CellTimeout", "evalue": f"{what} ran longer than its limit of {seconds:g} s",
                "mro": ["CellTimeout"], "function": function}
    if isinstance(error, OutputLimitExceeded):
        return {"ename": "OutputLimitExceeded", "evalue": "", "mro": ["OutputLimitExceeded"]}
    return {"ename": type(error).__name__, "evalue": evalue[:2000],
            "mro": [cls.__name__ for cls in type(error).__mro__]}


class StandIns:
    """The stand-ins of the call running now: its names, and the channel to the grader."""

    def __init__(self, reader, writer):
        self.reader, self.writer, self.names = reader, writer, frozenset()
        self.answered = set()  # the names whose stand-ins answered (gave values) during the call

    def make(self, name, own=None):
        """The stand-in for the notebook's function `name`: the grader's answer for its arguments,
        while a call that names it runs; `own` (the student's function, or None) for arguments
        that do not bind to the correct function's parameters (renamed or added by the student)."""
        def stand_in(*args, **kwargs):
            if name not in self.names:
                raise RuntimeError(f"{name}: this stand-in for the correct {name} answered only "
                                   "during the check's call")
            tree, blobs = wire.encode([args, kwargs])
            kind = wire.unsupported(tree)
            if kind is not None:
                raise TypeError(f"{name} was given a {kind}, which is not plain data (numbers, arrays, "
                                f"lists, dicts): your function is judged with a correct {name}, which "
                                "runs in the grader and can only be given plain data")
            # the round trip is not interrupted by a time limit (it would leave half an answer
            # unread): the alarm that fell in it is raised after; and the clock's limit stops while
            # the grader computes (its time is not the student's; the CPU limit counts this process)
            masked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})
            wall, _ = signal.setitimer(signal.ITIMER_REAL, 0)
            try:
                wire.send(self.writer, {"op": "stand-in", "name": name, "arguments": tree}, blobs)
                header, blobs = wire.receive(self.reader)
            finally:
                if wall > 0:
                    signal.setitimer(signal.ITIMER_REAL, wall)
                signal.pthread_sigmask(signal.SIG_SETMASK, masked)
            if header.get("op") == "unbound" and own is not None:
                return own(*args, **kwargs)
            if header.get("op") == "answer":
                self.answered.add(name)
                return wire.decode(header["value"], blobs)
            error = header.get("error") or {}
            kind = getattr(builtins, str(error.get("ename")), None)
            kind = kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError
            raise kind(str(error.get("evalue", "")))
        stand_in.__name__ = stand_in.__qualname__ = name
        return stand_in

    def swap(self, function, names):
        """Make the notebook's functions of `names` answer as their stand-ins, however the student
        reaches them: a plain function (no free variables) by identity, its code replaced by a
        trampoline to the stand-in (so aliases, partials and defaults that hold it answer too);
        anything else by name in the notebook and in `function`'s defaults. Return what undoes it."""
        undos, originals, replaced = [], {}, {}
        for name in names:
            value = NOTEBOOK.get(name, MISSING)
            if trampoline.swappable(value) and value is not function:  # never the called function
                undos.append(trampoline.swap(value, self.make(name, trampoline.copy(value))))
            else:
                originals[name] = value
                stand_in = self.make(name, value if callable(value) else None)
                if value is not MISSING:
                    replaced[id(value)] = stand_in
                NOTEBOOK[name] = stand_in
        defaults = getattr(function, "__defaults__", None)
        kwdefaults = getattr(function, "__kwdefaults__", None)
        try:
            if defaults and replaced:
                function.__defaults__ = tuple(replaced.get(id(value), value) for value in defaults)
            if kwdefaults and replaced:
                function.__kwdefaults__ = {key: replaced.get(id(value), value) for key, value in kwdefaults.items()}
        except (AttributeError, TypeError):  # not a plain function: its defaults stay
            pass
        self.names = frozenset(names)

        def restore():
            self.names = frozenset()
            for undo in undos:
                undo()
            for name, value in originals.items():
                if value is MISSING:
                    NOTEBOOK.pop(name, None)
                else:
                    NOTEBOOK[name] = value
            with_defaults = {"__defaults__": defaults, "__kwdefaults__": kwdefaults}
            for attribute, value in with_defaults.items():
                if value is not None and replaced:
                    try:
                        setattr(function, attribute, value)
                    except (AttributeError, TypeError):
                        pass
        return restore


MISSING = object()


def _where(error):
    """Where in the notebook `error` was raised: the line of the innermost cell frame."""
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == "<cell>"]
    return f"at line {lines[-1]} of its cell" if lines else "outside the notebook's code"


def baseline_memory():
    """This process's address space (VmSize, bytes) once NumPy is ready: BLAS's work buffer,
    which its first product reserves (32 MiB), is made here, before the notebook runs."""
    import numpy
    square = numpy.ones((300, 300))
    square @ square.T
    del square
    with open("/proc/self/status") as status:
        size = next(line for line in status if line.startswith("VmSize:"))
    return int(size.split()[1]) * 1024


def main(fd):
    channel = socket.socket(fileno=fd)
    reader, writer = channel.makefile("rb", wire.STREAM_BUFFER), channel.makefile("wb", wire.STREAM_BUFFER)
    request, _ = wire.receive(reader)
    limits = request["limits"]
    budget = [limits["output_chars"]]

    NOTEBOOK.update(__builtins__=builtins, __builtin__=builtins, get_ipython=get_ipython)
    sys.modules["__main__"] = MAIN
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")  # as IPython
    imported = time.monotonic()
    stopped = {}  # function name -> its stand-in that raises TimeoutError
    builtins.input = no_input
    sys.displayhook = display
    signal.signal(signal.SIGALRM, on_alarm)  # wall-clock time
    signal.signal(signal.SIGPROF, on_alarm)  # CPU time
    given = set(NOTEBOOK)

    def with_limits(run, timeout):
        """run() with the output captured and an alarm after `timeout` CPU seconds (or
        wall_factor times as many seconds of the clock)."""
        out, err = CappedOutput(budget), CappedOutput(budget)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        LIMIT[0] = timeout
        signal.setitimer(signal.ITIMER_PROF, timeout)
        signal.setitimer(signal.ITIMER_REAL, timeout * limits["wall_factor"])
        try:
            return run(), out, err
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            sys.stdout, sys.stderr = saved

    # From here on, the student's code runs: set the limits it cannot raise.
    memory = limits["memory_bytes"]
    if limits.get("memory_above_baseline") is not None:  # a sandbox for memory checks
        memory = min(memory, baseline_memory() + int(limits["memory_above_baseline"]))
    for limit, value in ((resource.RLIMIT_AS, memory),
                         (resource.RLIMIT_NPROC, limits["processes"]),
                         (resource.RLIMIT_FSIZE, limits["file_bytes"]),
                         (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))

    def note_timeout(error, where):
        function = error.args[0] if isinstance(error, CellTimeout) and error.args else None
        if function and function not in stopped:
            stopped[function] = stop_calling(
                function, f"{function} ran longer than its limit of {error.args[1]:g} s {where} "
                          "and is not called again")

    for name, reason in request.get("stopped", {}).items():
        stopped[name] = stop_calling(name, reason)
    timeouts = request.get("cell_timeouts", {})
    stopping_cells = set(request.get("stopping_cells", []))
    places = request.get("places", {})
    for cell_id, source in request["cells"]:
        started, cpu = time.monotonic(), time.process_time()
        SHOWN[0] = None
        try:
            error, out, err = with_limits(lambda: run_cell(source),
                                          timeouts.get(cell_id, request["cell_timeout"]))
        except BaseException as raised:  # a timeout between the shell's own handlers
            out = err = CappedOutput([0])
            error = raised
        if cell_id in stopping_cells:
            note_timeout(error, f"in {places.get(cell_id, 'a cell')}")
        for name, stand_in in stopped.items():  # a cell that defines it again does not revive it
            NOTEBOOK[name] = stand_in
        wire.send(writer, {"op": "cell", "id": cell_id, "stdout": out.text(), "stderr": err.text(),
                           "error": describe(error) if error is not None else None,
                           "result": SHOWN[0] if isinstance(SHOWN[0], str) else None,
                           "seconds": time.monotonic() - started, "cpu_seconds": time.process_time() - cpu})
    given |= set(SHELL.user_ns_hidden) if SHELL else set()
    functions = sorted(name for name, value in NOTEBOOK.items()
                       if callable(value) and not name.startswith("_") and name not in given
                       and not isinstance(value, type(os)))
    wire.send(writer, {"op": "ran", "functions": functions, "started": STARTED, "imported": imported})

    stand_ins = StandIns(reader, writer)
    while True:
        message = wire.receive(reader)
        if message is None:
            return
        request, blobs = message
        op = request.get("op")
        if op == "call":
            args, kwargs = wire.decode(request["arguments"], blobs)
            del message, blobs  # the arrays are decoded: their bytes would only take memory
            function = NOTEBOOK.get(request["name"])
            names = [name for name in request.get("stand_ins") or () if isinstance(name, str)]
            stand_ins.answered = set()
            restore = stand_ins.swap(function, names) if names else None
            cpu = time.process_time()
            try:
                try:
                    value, _, _ = with_limits(lambda: function(*args, **kwargs), request["timeout"])
                finally:
                    if restore:
                        restore()
            except BaseException as error:  # the student's function failed: report, go on
                if isinstance(error, CellTimeout):  # blame the function the check called
                    error = CellTimeout(request["name"], request["timeout"])
                note_timeout(error, "in a check")
                described = describe(error)
                if stand_ins.answered and not isinstance(error, CellTimeout):
                    # its message may carry what the stand-ins answered (the reference's values)
                    described["evalue"] = (f"{_where(error)}; its message is not shown, as the correct "
                                           f"{' and '.join(sorted(stand_ins.answered))} answered in the call")
                wire.send(writer, {"op": "raised", "error": described,
                                   "cpu_seconds": time.process_time() - cpu})
                del args, kwargs, error
                continue
            cpu = time.process_time() - cpu
            tree, out_blobs = wire.encode([value, args, kwargs])
            del value, args, kwargs  # nothing of a call outlives it (memory checks count it all)
            wire.send(writer, {"op": "returned", "value": tree, "cpu_seconds": cpu}, out_blobs)
            del tree, out_blobs


if __name__ == "__main__":
    main(int(sys.argv[1]))
