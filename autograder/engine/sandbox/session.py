"""A session: one sandbox's notebook run, then its functions called from the grader."""

import builtins
import re
import time

from .. import protocol
from ..student import Student, copy_changes, rebuilt
from .answers import Call
from .bwrap import MALLOC
from .process import Process
from .shell import answer as shell_answer
from .state import Limits, NotCalledAgain, SandboxStopped, Submission, Timeouts

def _shared(name):
    """An attribute of the sandbox that is its submission's (`Submission`), shared by its sandboxes."""
    return property(lambda self: getattr(self.submission, name),
                    lambda self, value: setattr(self.submission, name, value),
                    doc=f"The submission's {name} (`Submission`), shared by all its sandboxes.")


class Sandbox:
    """One submission's notebook, running in its sandbox; `run()` then `call()`s."""

    def __init__(self, cells=None, limits=Limits(), uid=61000, isolate=True, timeouts=Timeouts(), files=(),
                 memory_above_baseline=None, hidden=(), submission=None):
        """`submission`: the submission's state (`Submission`), shared with its other sandboxes;
        without it, a new one of the other arguments. `isolate=False` runs the same runner without
        bubblewrap: only for our own code (measuring the reference, or what the sandbox costs).
        `files`: (path, relative path) of files the notebook reads, bound read-only in its folder.
        `memory_above_baseline` (bytes): the runner caps its address space at its own size before
        the notebook's first cell plus this many bytes (see `in_memory`); such a sandbox records
        no events: its cells' errors and limits are not the submission's. `hidden`: the course's
        packages, hidden from the notebook should they be installed as copies."""
        self.submission = submission or Submission(list(cells), limits, uid, isolate, timeouts, tuple(files),
                                                   tuple(hidden))
        self.memory_above_baseline = memory_above_baseline
        self.events = self.submission.events if memory_above_baseline is None else []
        self.memory_sandboxes = {}  # limit in bytes -> Sandbox: the memory checks' (in_memory)
        self.seconds = {}       # where its time went: start, imports, cells (the clock's), the runner's CPU
                                # time up to its calls and that of the calls (as the runner reports them)
        self.functions = {}     # name -> StudentFunction, once the notebook has run
        self.process = Process(self.submission, self.events, MALLOC if memory_above_baseline is not None else {})
        # cell id -> why it is not run (`run`): the submission's; a sandbox for memory checks, whose
        # cells' errors are not the submission's, starts from them and keeps its own
        self.skipped = self.submission.skipped if memory_above_baseline is None else dict(self.submission.skipped)
        self._waiting = None    # the cell whose result the grader waits for

    cells, limits, uid, isolate, timeouts = map(_shared, ("cells", "limits", "uid", "isolate", "timeouts"))
    files, hidden, places, own_cells, task = map(_shared, ("files", "hidden", "places", "own_cells", "task"))
    deadline, stopped, stopped_within, call_seconds = map(_shared, ("deadline", "stopped", "stopped_within",
                                                                    "call_seconds"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def alive(self):
        return self.process.alive

    def close(self):
        for sandbox in self.memory_sandboxes.values():
            sandbox.close()
        self.memory_sandboxes = {}
        self.process.close()

    # -- the notebook ----------------------------------------------------------

    def run(self):
        """Run the notebook's cells; return [{id, stdout, stderr, error, result, outputs, seconds,
        cpu_seconds}] in order.

        A cell that kills the notebook's process or cannot be interrupted costs only what depends
        on it: the notebook runs again from its start, in a fresh process, without that cell, whose
        result is an error saying why (`skipped`); each such cell once, and only while the
        submission has time left. The results are those of the last run."""
        while True:
            try:
                return self._run()
            except SandboxStopped as stop:
                cell_id, self._waiting = self._waiting, None
                if (stop.fault is None or cell_id is None or cell_id in self.skipped
                        or time.monotonic() >= self.deadline):
                    raise
                self.skipped[cell_id] = stop.fault
                if self.events and self.events[-1] == (stop.status, stop.reason):
                    self.events[-1] = (stop.status, f"{stop.reason}; the notebook ran again without that cell")
                self.process.close()
                self.process = Process(self.submission, self.events, self.process.environment)

    def _run(self):
        """One run of the notebook's cells, but the skipped ones, in a new process: their results."""
        s, process = self.submission, self.process
        process.start()
        seconds = {cell_id: s.timeouts.cells.get(cell_id, s.limits.cell_seconds) for cell_id, _ in s.cells}
        limits = {"memory_bytes": s.limits.memory_bytes, "processes": s.limits.processes,
                  "file_bytes": s.limits.file_bytes, "output_chars": s.limits.output_chars,
                  "wall_factor": s.limits.wall_factor, "memory_above_baseline": self.memory_above_baseline}
        process.send("run", cells=[cell for cell in s.cells if cell[0] not in self.skipped],
                     cell_timeout=s.limits.cell_seconds, cell_timeouts=seconds,
                     stopping_cells=sorted(s.timeouts.stopping_cells), stopped=s.stopped, places=s.places,
                     own_cells=s.own_cells, limits=limits)
        results = [self._skipped(cell_id) if cell_id in self.skipped else self._cell(cell_id, seconds[cell_id])
                   for cell_id, _ in s.cells]
        ran, _ = process.receive(("ran",), s.limits.cell_seconds, "the notebook")
        # the runner's clock is ours (CLOCK_MONOTONIC); its figures are only reported, never trusted
        self.seconds = {"start": max(ran["started"] - process.started, 0.0),
                        "imports": max(ran["imported"] - ran["started"], 0.0),
                        "cells": sum(result["seconds"] for result in results),
                        "notebook CPU": ran["cpu_seconds"], "calls CPU": 0.0}
        # never a built-in's name: the hidden checks' code must not call the student's `len`
        self.functions = {name: StudentFunction(self, name) for name in ran["functions"]
                          if not hasattr(builtins, name)}
        return results

    def _skipped(self, cell_id):
        """The result of a cell not run: it killed the notebook's process or could not be interrupted."""
        error = {"ename": "CellNotRun", "evalue": f"{self.skipped[cell_id]}; the notebook ran again without it",
                 "mro": ["CellNotRun", "Exception", "BaseException", "object"]}
        return {"id": cell_id, "stdout": "", "stderr": "", "error": error, "result": None,
                "outputs": _outputs([], error), "seconds": 0.0, "cpu_seconds": 0.0}

    def _cell(self, cell_id, seconds):
        """The result of the cell `cell_id` (limited to `seconds`), its shell commands run."""
        s, process = self.submission, self.process
        where = s.places.get(cell_id, f"the cell {cell_id}")
        ends = time.monotonic() + seconds * s.limits.wall_factor
        self._waiting = cell_id  # a stop until its result is this cell's doing (`run`)
        message, _ = process.receive(("cell", "shell"), seconds * s.limits.wall_factor, where)
        while message["op"] == "shell":  # the cell's shell commands, in its time
            process.send("shell", **shell_answer(process, message, min(ends, s.deadline) - time.monotonic(), seconds))
            message, _ = process.receive(("cell", "shell"), max(ends - time.monotonic(), 0.0), where)
        self._waiting = None
        if message["id"] != cell_id:
            process.stopped("crashed", "the notebook's process sent an unexpected message")
        error = message["error"]
        self._note(error, where, seconds)
        if (error and error["ename"] == "CellTimeout" and error["function"]
                and cell_id in s.timeouts.stopping_cells):
            if error["function"] not in s.stopped and error["within"] not in (None, error["function"]):
                s.stopped_within[error["function"]] = error["within"]
            s.stop_calling(error["function"], where, seconds)
        return {"id": cell_id, "stdout": message["stdout"], "stderr": message["stderr"], "error": error,
                "result": message["result"], "outputs": _outputs(message["outputs"], error),
                "seconds": message["seconds"], "cpu_seconds": message["cpu_seconds"]}

    def in_memory(self, limit_bytes):
        """The sandbox in which this submission's functions run within `limit_bytes` of memory
        beyond the baseline: a fresh one of the same submission, whose runner caps its own address
        space (a hard limit, which its user cannot raise) at its size after its imports plus
        `limit_bytes`, before any cell runs. The cap is absolute: memory the notebook holds counts,
        and freeing inside a call what a cell reserved gains nothing. The notebook runs there again
        (its cells' errors and limits are not this submission's: they are not recorded); started at
        the first memory check, kept for the others. Functions stopped for time stay stopped."""
        sandbox = self.memory_sandboxes.get(limit_bytes)
        if sandbox is None or not sandbox.alive:
            if sandbox is not None:
                sandbox.close()
            sandbox = Sandbox(submission=self.submission, memory_above_baseline=limit_bytes)
            self.memory_sandboxes[limit_bytes] = sandbox
            sandbox.run()  # SandboxStopped if it dies there
        return sandbox

    def _note(self, error, where, seconds, function=None):
        """Record a limit that the student's code hit, as the submission's status, saying where
        (`where`: the cell's or check's task) and in which function."""
        if error is None:
            return
        function = error["function"] or function
        if error["ename"] == "CellTimeout":
            self.events.append(("timeout", (
                f"{function} ran longer than its time limit of {seconds:g} s in {where}" if function else
                f"{where} ran longer than its time limit of {seconds:g} s (outside any function)")
                + " and was stopped"))
        elif error["ename"] in ("OutputLimitExceeded", "MemoryError"):
            what = "printed too much" if error["ename"] == "OutputLimitExceeded" else "ran out of memory"
            self.events.append(("resource-limit", f"{function} {what} in {where}" if function else
                                f"{where} {what}"))

    # -- the checks' calls -------------------------------------------------------

    def call(self, name, args, kwargs, stand_ins=None):
        """The student's `name(*args, **kwargs)`, run in the sandbox.

        Changes the function made to its arguments are made to `args` and `kwargs` too, as if it
        had run here, so that checks can notice them. A function that ran out of time once raises
        TimeoutError at once, unless it was stopped in a cell while it ran another function of the
        notebook that stands in now (a neighbour that never returns costs the function that calls
        it nothing): it runs again, until it runs out of time in a call. `stand_ins` ({name:
        function of ours}): while it runs, the notebook's functions of those names answer with our
        function's value for their arguments, computed here (`answers`).
        """
        s = self.submission
        stand_ins = dict(stand_ins or {})
        revive = name in s.stopped and s.stopped_within.get(name) in stand_ins
        if name in s.stopped and not revive:
            raise (NotCalledAgain if name in s.died else TimeoutError)(s.stopped[name])
        seconds = s.timeouts.calls.get(name, s.timeouts.call or s.limits.call_seconds)
        call = Call(s, name, seconds, stand_ins)
        tree, call.sent = protocol.encode([args, kwargs])
        self.process.send("call", call.sent, name=name, timeout=seconds, stand_ins=sorted(stand_ins),
                          revive=revive, arguments=tree)
        message, blobs = self._returned(call)
        s.call_seconds[name] = max(s.call_seconds.get(name, 0.0), message["cpu_seconds"])
        if "calls CPU" in self.seconds:
            self.seconds["calls CPU"] += message["cpu_seconds"]
        if message["op"] == "raised":
            raise self._raised(name, message["error"], seconds)
        try:
            value = protocol.decode(message["value"], blobs)
            args_after, kwargs_after = protocol.decode(message["arguments"], blobs, call.array)
        except (protocol.WireError, ValueError, TypeError) as error:
            self.process.stopped("crashed", f"{name} returned something that is not plain data ({error})")
        copy_changes(args, args_after)
        copy_changes(kwargs, kwargs_after)
        return value

    def _returned(self, call):
        """The runner's last message of `call` ("returned" or "raised"), its stand-ins answered."""
        s, process = self.submission, self.process
        try:
            while True:
                message, blobs = process.receive(("returned", "raised", "stand-in", "shell"),
                                                 call.wait, f"{call.name} in {s.checking()}")
                if message["op"] == "stand-in":
                    try:
                        op, fields, out_blobs = call.answer(message, blobs)
                    except ValueError as error:
                        process.stopped("crashed", f"the notebook's process sent a malformed request ({error})")
                    process.send(op, out_blobs, **fields)
                elif message["op"] == "shell":
                    process.send("shell", refused="a shell command runs only in the notebook's cells, "
                                                  "not when a check calls a function")
                else:
                    return message, blobs
        except SandboxStopped as stop:
            if stop.status == "timeout":  # it could not be interrupted
                s.stop_calling(call.name, s.checking(), call.seconds)
                s.stopped_within.pop(call.name, None)  # ran out of time in a call: never again
            elif stop.status == "crashed":  # it killed the process: never again (`sandboxes.revived`)
                s.stopped.setdefault(call.name, f"{call.name} killed the notebook's process in {s.checking()} "
                                                "and is not called again")
                s.died.add(call.name)
            raise

    def _raised(self, name, error, seconds):
        """The exception a call that raised `error` raises here."""
        s = self.submission
        error = error or protocol.plain_error({})
        self._note(error, s.checking(), seconds, function=name)
        if error["ename"] == "CellTimeout":
            s.stop_calling(name, s.checking(), seconds)
            s.stopped_within.pop(name, None)  # ran out of time in a call: never again
            return TimeoutError(s.stopped[name])
        return rebuilt(error)


class StudentFunction(Student):
    """A student's function, seen from the grader: calling it runs it in the sandbox."""

    def __init__(self, sandbox, name):
        self._sandbox, self.__name__ = sandbox, name

    def call(self, args, kwargs, answers=None):
        return self._sandbox.call(self.__name__, args, kwargs, answers)

    def in_memory(self, limit_bytes):
        """This function in the submission's sandbox for memory checks (`Sandbox.in_memory`):
        calling it may use at most `limit_bytes` beyond that process's baseline. SandboxStopped
        when that sandbox cannot run the notebook."""
        return StudentFunction(self._sandbox.in_memory(limit_bytes), self.__name__)

    @property
    def __globals__(self):
        """The notebook's functions, by name (what the student's function sees)."""
        return self._sandbox.functions

    def __repr__(self):
        return f"<the student's {self.__name__}>"


OUTPUT_TYPES = ("stream", "display_data", "execute_result")


def _outputs(outputs, error):
    """The cell's outputs as nbformat's, from the runner's list (untrusted: plain data only, of
    the kinds a kernel sends), and its error last."""
    plain = []
    for output in outputs:
        kind = output.get("output_type") if isinstance(output, dict) else None
        if kind == "stream" and output.get("name") in ("stdout", "stderr") and isinstance(output.get("text"), str):
            plain.append({"output_type": kind, "name": output["name"], "text": output["text"]})
        elif kind in OUTPUT_TYPES[1:] and isinstance(output.get("data"), dict):
            data = {mime: value for mime, value in output["data"].items()
                    if isinstance(mime, str) and re.fullmatch(r"[\w.+-]+/[\w.+-]+", mime)
                    and (isinstance(value, (str, dict, list)))}
            metadata = output.get("metadata") if isinstance(output.get("metadata"), dict) else {}
            plain.append({"output_type": kind, "data": data, "metadata": metadata})
    if error is not None:
        plain.append({"output_type": "error", "ename": error["ename"], "evalue": error["evalue"],
                      "traceback": [f"{error['ename']}: {error['evalue']}"]})
    return plain
