"""Runs inside the sandbox: executes a student's notebook, then calls its functions.

Started by `sandbox.py` as ``python -E -s -S -m sandbox_runner FD
SITE_PACKAGES...`` in a folder holding only this file, `wire.py` and their
bytecode (in the sandbox without `site`, whose .pth files would import the
course's editable finder: the packages' folders are given instead). It talks
to the grader over the socket FD with `wire` messages:

  grader -> {"op": "run", "cells": [[id, source], ...], "cell_timeout": s,
             "cell_timeouts": {id: s}, "stopping_cells": [id, ...], "stopped": {function: reason},
             "places": {id: where the cell is, in words}, "own_cells": [id, ...], "limits": {...}}
  runner -> {"op": "shell", "argv": [...], "stdin": text or null, "merged": bool, "cwd": path,
             "env": {name: value}}  (while a cell runs: a shell command, `run_command`)
  grader -> {"op": "shell", "stdout": text, "stderr": text, "status": n, "timed_out": bool}
            or {"op": "shell", "refused": why}
  runner -> {"op": "cell", "id": id, "stdout": text, "stderr": text,
             "error": {"ename", "evalue", "mro", "function", "place", "inputs"} or null,
             "result": repr of the value the cell displayed (its last expression) or null,
             "outputs": [nbformat outputs: stream, display_data, execute_result],
             "seconds": s, "cpu_seconds": s}  (one per cell)
  runner -> {"op": "ran", "functions": [names of the callables the notebook defined],
             "started": t, "imported": t, "cpu_seconds": s}  (time.monotonic() when it started
             and had imported; its CPU time so far)
  grader -> {"op": "call", "name": n, "timeout": s, "stand_ins": [names], "revive": bool,
             "arguments": [args, kwargs]} (wire value)
  while it runs, for each call of a stand-in (below):
    runner -> {"op": "stand-in", "name": e, "arguments": [args, kwargs]}
    grader -> {"op": "answer", "value": value}, {"op": "raised", "error": {...}}
              or {"op": "unbound", "error": {...}}
  runner -> {"op": "returned", "cpu_seconds": s, "value": result, "arguments": [args, kwargs]
             after the call, where an array the grader sent, unchanged, is its index}
            or {"op": "raised", "error": {...}, "cpu_seconds": s}

Stand-ins: while the called function runs, the notebook's function of each
name of "stand_ins" (the graded functions before it, and those its reference reaches) answers as a
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
the functions stopped so far ("stopped") to a restarted runner. The error
also names the innermost function of the notebook that was running
("within"): when that one stands in for a call of the stopped function, the
grader asks to run the stopped function once more ("revive": the function
kept in STOPPED runs, and its aliases answer as the stand-in), so that a
neighbour that never returns costs it nothing. A call's output has an
allowance of its own (it goes nowhere), so that what the notebook printed
before does not fail it.

Cells run as IPython runs them (each statement in turn, the value of a
last expression displayed, every exception caught and reported), but
without IPython, whose import and shell cost more than NumPy's import: the
shell is created, around the same namespace, only for a notebook that needs
it, at its first cell that is not plain Python (a magic, `!`, a prompt) or
its first call of `get_ipython()`, or its first figure; from then on every
cell runs in it, with its transformers and hooks. The shell is a kernel's
(`KernelShell`, as ipykernel's): figures are drawn inline (matplotlib's
backend is matplotlib-inline, as in Jupyter) and kept as display_data
outputs, `?` pages nothing into the outputs, input() and getpass() raise
StdinNotImplementedError, and shell escapes (`!cmd`, `%system`, `%%bash`,
`%%sh`, `%%script`) are run by the grader in a sandbox of their own that
sees this one's folders (`run_command`): this process cannot start one.

An exception is reported with its place: the line of the student's own code (a cell of
"own_cells") that raised it, by its place in words and its text ("place"), and, when a
course cell (a visible check) called the student's function, that call's inputs: the
shapes and dtypes of its arrays and its other arguments' values ("inputs"), those that the
function never rebinds (what its frame holds then is what it was given). The grader's
own calls get the place only: their inputs are the hidden checks'.

Everything it sends is untrusted by the grader, which only ever reads plain
data from it: the student's code runs in this same process and could forge
any of these messages, so none of them can grant a point by itself.
"""

import __future__
import ast
import builtins
import getpass
import io
import json
import os
import resource
import signal
import socket
import sys
import time
import tokenize
import traceback
import types
import warnings
import weakref
from _blake2 import blake2b  # hashlib's, without the import of OpenSSL's hashes

STARTED = time.monotonic()  # the interpreter is up: what follows is imports

sys.path += sys.argv[2:]  # the packages' folders (NumPy...), when started without `site`
import trampoline  # noqa: E402
import wire  # noqa: E402 (numpy)
from checking import arguments_of  # noqa: E402 (the check helpers', also a runner file)

OUTPUT_KEPT = 20_000  # characters of a cell's output kept for the feedback
DISPLAY_KEPT = [8_000_000]  # characters of displayed data (figures...) kept for the executed notebook
# `%matplotlib` backends that draw in the notebook page (a browser's): figures are drawn inline
NOTEBOOK_BACKENDS = ("notebook", "nbagg", "widget", "ipympl")


MAIN = types.ModuleType("__main__")  # the notebook's module, as in IPython
NOTEBOOK = MAIN.__dict__  # the notebook's namespace
SHELL = None  # IPython's shell around NOTEBOOK, once the notebook needs it
PLACES = {}  # cell id -> where it is, in words (the grader's "places")
OWN = {}  # the source of each of the student's own cells, by the file name its code is compiled with
FUTURE = [0]  # compiler flags of the __future__ imports of the cells run so far
FUTURE_FLAGS = sum(getattr(__future__, name).compiler_flag for name in __future__.all_feature_names)


class CellTimeout(BaseException):
    """Raised in the student's code when a cell or a call runs out of time.

    args: (the notebook's outermost function that was running, or None; the limit in seconds; its
    innermost one, which was running when time ran out, or None)."""


class OutputLimitExceeded(BaseException):
    """Raised in the student's code when it has printed more than its budget."""


class StdinNotImplementedError(RuntimeError):
    """input() while grading: nobody is there to answer (as in Jupyter without stdin)."""


def no_input(*args, **kwargs):
    raise StdinNotImplementedError(
        "input() was called, but the notebook runs without a keyboard while it is "
        "graded: remove the call to input()")


OUTPUTS = []  # the running cell's outputs, as nbformat's (stream, display_data, execute_result)


class CappedOutput(io.TextIOBase):
    """A text stream that keeps the first characters and counts them all; what it keeps
    is also the cell's stream output `name` (stdout or stderr)."""

    encoding = "utf-8"  # as a kernel's streams (IPython prints ± then, not +-)

    def __init__(self, budget, name="stdout"):
        self.budget, self.kept, self.name = budget, [], name
        self.kept_size = 0

    def write(self, text, stream=True):
        text = str(text)
        self.budget[0] -= len(text)
        if self.kept_size < OUTPUT_KEPT:
            kept = text[:OUTPUT_KEPT - self.kept_size]
            self.kept.append(kept)
            self.kept_size += len(kept)
            if stream and kept:
                if OUTPUTS and OUTPUTS[-1].get("name") == self.name:
                    OUTPUTS[-1]["text"] += kept
                else:
                    OUTPUTS.append({"output_type": "stream", "name": self.name, "text": kept})
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
    keep_display("execute_result", {"text/plain": SHOWN[0]})
    write_result(SHOWN[0])


def write_result(text):
    """The displayed value's text, in the cell's printed text (not as a stream output)."""
    if isinstance(sys.stdout, CappedOutput):
        sys.stdout.write(text + "\n", stream=False)
    else:
        sys.stdout.write(text + "\n")


def keep_display(kind, data, metadata=None):
    """Keep an execute_result or display_data output: its plain data (MIME type -> str, or JSON
    data), while the notebook's allowance for displayed data lasts (then its text only)."""
    plain = {}
    for mime, value in (data or {}).items():
        if isinstance(value, bytes):
            continue
        try:
            size = len(value) if isinstance(value, str) else len(json.dumps(value))
        except (TypeError, ValueError):
            continue
        if mime == "text/plain" and isinstance(value, str):
            value = value[:OUTPUT_KEPT]  # as printed text (a value's repr can be huge)
        elif size > DISPLAY_KEPT[0]:
            continue
        else:
            DISPLAY_KEPT[0] -= size
        plain[str(mime)] = value
    try:
        metadata = json.loads(json.dumps(metadata or {}))
    except (TypeError, ValueError):
        metadata = {}
    OUTPUTS.append({"output_type": kind, "data": plain, "metadata": metadata if isinstance(metadata, dict) else {}})


def on_alarm(signum, frame):
    outermost, innermost = running_functions(frame)
    raise CellTimeout(outermost, LIMIT[0], innermost)


def running_functions(frame):
    """The names of the outermost and the innermost functions of the notebook on the stack of
    `frame` (None, None when there is none); a function by its own name when the notebook gives it
    that name, rather than an alias's."""
    codes = {value.__code__: value.__name__ if NOTEBOOK.get(value.__name__) is value else name
             for name, value in NOTEBOOK.items() if isinstance(value, types.FunctionType)}
    outermost = innermost = None
    while frame is not None:
        outermost = codes.get(frame.f_code, outermost)
        innermost = innermost or outermost
        frame = frame.f_back
    return outermost, innermost


def stop_calling(name, reason):
    """Replace the notebook's function `name` by one that raises TimeoutError(reason) at once (the
    function itself is kept in STOPPED, for a call that the grader revives)."""
    def stopped(*args, **kwargs):
        raise TimeoutError(reason)
    stopped.__name__ = stopped.__qualname__ = name
    if name in NOTEBOOK:
        STOPPED[name] = NOTEBOOK[name]
    NOTEBOOK[name] = stopped
    return stopped


STOPPED = {}  # name -> the notebook's function that stop_calling replaced (its latest definition)


def get_ipython():
    """IPython's shell of the notebook, created on first use (with its hidden names, the
    notebook's own names kept)."""
    global SHELL
    if SHELL is None:
        from traitlets.config import Config
        config = Config()
        config.HistoryManager.hist_file = ":memory:"  # no file, no thread (processes are limited)
        own = {name: value for name, value in NOTEBOOK.items() if value is not get_ipython}
        SHELL = kernel_shell().instance(config=config, colors="NoColor", user_module=MAIN)
        SHELL.showtraceback = lambda *args, **kwargs: None
        SHELL.showsyntaxerror = lambda *args, **kwargs: None
        NOTEBOOK.update(own)
    return SHELL


def kernel_shell():
    """IPython's InteractiveShell as a Jupyter kernel's shell (ipykernel's ZMQInteractiveShell)
    behaves for a notebook run without a person: outputs kept as the kernel sends them, no
    pager, no GUI event loop, shell commands run by the grader (`run_command`)."""
    from IPython.core import magic_arguments, page
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.compilerop import CachingCompiler
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.magic import cell_magic, magics_class
    from IPython.core.magics.script import ScriptMagics, script_args
    from IPython.utils.process import arg_split
    from IPython.utils.text import LSString, SList

    class Compiler(CachingCompiler):
        def get_code_name(self, raw_code, transformed_code, number):
            # the cell's own name, as on the plain-Python path: an error's place is found by it
            return CELL[1] if raw_code == CELL[0] else super().get_code_name(raw_code, transformed_code, number)

    class Publisher(DisplayPublisher):
        def publish(self, data, metadata=None, *args, **kwargs):
            keep_display("display_data", data, metadata)

        def clear_output(self, wait=False):
            OUTPUTS.clear()

    class Hook(DisplayHook):
        def quiet(self):  # IPython reads the history, which is not kept
            return quiet(CELL[0])

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            keep_display("execute_result", format_dict, md_dict)
            write_result(format_dict.get("text/plain", ""))

        def finish_displayhook(self):
            self._is_active = False

    @magics_class
    class Scripts(ScriptMagics):
        @magic_arguments.magic_arguments()
        @script_args
        @cell_magic("script")
        def shebang(self, line, cell):
            """%%script PROGRAM (and %%bash, %%sh...): the cell is PROGRAM's input."""
            from subprocess import CalledProcessError
            args, argv = self.shebang.parser.parse_known_args(arg_split(line, posix=True))
            if args.bg or args.proc:
                raise UsageError("%%script --bg: background processes cannot run while the notebook "
                                 "is graded")
            if not cell.endswith("\n"):
                cell += "\n"
            out, err, status = run_command(argv, cell, merged=False)
            if status == 127 and "exec" in err and not out:
                print(f"Couldn't find program: {argv[0]!r}")
                return
            for name, text, stream in ((args.out, out, sys.stdout), (args.err, err, sys.stderr)):
                if name:
                    self.shell.user_ns[name] = text
                elif text:
                    stream.write(text)
            if args.raise_error and status != 0:
                raise CalledProcessError(status, cell)

    class KernelShell(InteractiveShell):
        compiler_class = Compiler
        displayhook_class = Hook
        display_pub_class = Publisher

        def init_environment(self):  # as ipykernel's: no pager, colours for a browser
            os.environ.update(TERM="xterm-color", CLICOLOR="1", FORCE_COLOR="1", CLICOLOR_FORCE="1",
                              PAGER="cat", GIT_PAGER="cat")

        def init_hooks(self):
            super().init_hooks()
            # ipykernel sends what `?` shows to the pager, never to the cell's outputs
            self.set_hook("show_in_pager", page.as_hook(lambda *args, **kwargs: None), 99)

        def init_magics(self):
            super().init_magics()
            self.register_magics(Scripts)

        def enable_matplotlib(self, gui=None):
            if gui in NOTEBOOK_BACKENDS:
                print(f"(%matplotlib {gui} needs a browser: while the notebook is graded, "
                      "its figures are drawn inline)")
                gui = "inline"
            return super().enable_matplotlib(gui)

        def enable_gui(self, gui=None):
            if gui not in (None, "inline"):
                raise UsageError(f"%matplotlib {gui} opens windows, which cannot be while the notebook "
                                 "is graded: use %matplotlib inline")
            self.active_eventloop = gui

        def system_piped(self, cmd):
            if cmd.rstrip().endswith("&"):
                raise OSError("Background processes not supported.")
            out, _, status = run_command(["/bin/sh", "-c", self.var_expand(cmd, depth=1)])
            sys.stdout.write(out)
            self.user_ns["_exit_code"] = status
            if self.system_raise_on_error and status != 0:
                from subprocess import CalledProcessError
                raise CalledProcessError(status, cmd)

        system = system_raw = system_piped

        def getoutput(self, cmd, split=True, depth=0):
            if cmd.rstrip().endswith("&"):
                raise OSError("Background processes not supported.")
            out, _, status = run_command(["/bin/sh", "-c", self.var_expand(cmd, depth=depth + 1)])
            out = out.replace("\r\n", "\n")
            if self.system_raise_on_error and status != 0:
                from subprocess import CalledProcessError
                raise CalledProcessError(status, cmd)
            return SList(out.splitlines()) if split else LSString(out)

    return KernelShell


class ShellOnFigures:
    """Creates the notebook's shell when matplotlib loads its inline backend (the notebook's
    first figure), as a kernel has one: the backend then draws each cell's figures at its end.
    (A finder of sys.meta_path needs only find_spec: importlib.abc's base, and its imports, not.)"""

    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib_inline.backend_inline" and SHELL is None:
            get_ipython()
        return None


CHANNEL = []  # the grader's socket (reader, writer), while the notebook's cells run


def run_command(argv, stdin=None, merged=True):
    """(stdout, stderr, exit status) of the command `argv` (its input: `stdin`; `merged`: its
    output and errors in one terminal, as a kernel's `!`), run by the grader in a sandbox of its
    own that shares this one's folders, limits and user, in this process's folder and
    environment. Only while a cell runs; within what remains of the cell's time."""
    if not CHANNEL:
        raise RuntimeError("shell commands run only in the notebook's cells, not when a check calls a "
                           "function")
    reader, writer = CHANNEL
    request = {"op": "shell", "argv": [str(part) for part in argv], "stdin": stdin, "merged": merged,
               "cwd": os.getcwd(), "env": dict(os.environ)}
    # the cell's alarms wait for the answer (the grader stops the command at the cell's limit)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})
    try:
        wire.send(writer, request)
        answer, _ = wire.receive(reader)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    if answer.get("refused"):
        raise RuntimeError(answer["refused"])
    if answer.get("timed_out"):
        outermost, innermost = running_functions(sys._getframe(1))
        raise CellTimeout(outermost, LIMIT[0], innermost)
    return answer["stdout"], answer["stderr"], answer["status"]


CELL = ["", "<cell>"]  # the source of the cell running now, and the name its code is compiled with


def quiet(source):
    """Whether the cell ends in a semicolon, which hides its last value (IPython's
    DisplayHook.semicolon_at_end_of_expression, without importing IPython)."""
    skipped = (tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # IPython's syntax
        return False
    last = next((token for token in reversed(tokens) if token[0] not in skipped), None)
    return last is not None and last[0] == tokenize.OP and last[1] == ";"


def compiled(source, filename="<cell>"):
    """The code objects of a cell, as IPython runs it: all but a last expression as
    statements, that one displayed. SyntaxError if it is not plain Python."""
    tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST | FUTURE[0], dont_inherit=True)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) and not quiet(source) else None
    codes = [compile(tree, filename, "exec", FUTURE[0], dont_inherit=True)]
    if last is not None:
        codes.append(compile(ast.Interactive([last]), filename, "single", FUTURE[0], dont_inherit=True))
    FUTURE[0] |= codes[0].co_flags & FUTURE_FLAGS
    return codes


def run_cell(source, filename="<cell>"):
    """Run a cell in the notebook (its code compiled as `filename`); return the exception it
    raised, or None."""
    CELL[:] = [source, filename]
    if SHELL is None:
        try:
            codes = compiled(source, filename)
        except (SyntaxError, ValueError):  # IPython's syntax, or IPython's report of the error
            codes = None
        if codes is not None:
            error = None
            try:
                for code in codes:
                    exec(code, NOTEBOOK)
            except BaseException as raised:  # as IPython: everything, a timeout too
                error = raised
            if SHELL is not None:  # created by this cell: its hooks (the figures drawn) at its end
                try:
                    SHELL.events.trigger("post_execute")
                except BaseException as raised:
                    error = error or raised
            return error
    result = get_ipython().run_cell(source, store_history=False)
    if result.result is not None:
        try:
            SHOWN[0] = repr(result.result)
        except BaseException:  # a hostile __repr__: IPython showed nothing either
            pass
    return result.error_before_exec or result.error_in_exec


def describe(error, inputs=True):
    """The error as plain data: its type's name, its message, its classes' names, and where in the
    student's code it was raised (`where`; with the inputs of their function's call unless not
    `inputs`)."""
    try:
        evalue = str(error)
    except BaseException:  # a hostile __str__
        evalue = ""
    if isinstance(error, CellTimeout):
        function, seconds, innermost = (list(error.args) + [None, 0.0, None])[:3]
        what = function or "the cell"
        return {"ename": "CellTimeout", "evalue": f"{what} ran longer than its limit of {seconds:g} s",
                "mro": ["CellTimeout"], "function": function, "within": innermost}
    if isinstance(error, OutputLimitExceeded):
        return {"ename": "OutputLimitExceeded", "evalue": "", "mro": ["OutputLimitExceeded"]}
    return {"ename": type(error).__name__, "evalue": evalue[:2000],
            "mro": [cls.__name__ for cls in type(error).__mro__], **where(error, inputs)}


def where(error, inputs=True):
    """{"place": the student's line that raised `error`, in words, "inputs": the call of
    their function by a course cell that led there} (each only when known)."""
    try:
        frames, tb = [], error.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        own = [(frame, line) for frame, line in frames if frame.f_code.co_filename in OWN]
        if not own:
            return {}
        frame, line = own[-1]  # the innermost line of theirs
        cell_id, source = OWN[frame.f_code.co_filename]
        code = (source.splitlines()[line - 1:line] or [""])[0].strip()
        function = frame.f_code.co_name
        found = {"place": (f"line {line} of {'their cell' if function == '<module>' else function} in "
                           f"{PLACES.get(cell_id, 'a cell of theirs')}: {code[:200]}")}
        called = next((frames[i][0] for i in range(1, len(frames))
                       if frames[i][0].f_code.co_filename in OWN and frames[i - 1][0].f_code.co_filename not in OWN
                       and frames[i][0].f_code.co_name != "<module>"), None)
        if inputs and called is not None:
            found["inputs"] = f"{called.f_code.co_name}({arguments_of(called)})"
        return found
    except Exception:  # a hostile traceback or argument: no place rather than none at all
        return {}


class StandIns:
    """The stand-ins of the call running now: its names, and the channel to the grader."""

    def __init__(self, reader, writer):
        self.reader, self.writer, self.names = reader, writer, frozenset()
        self.answered = set()  # the names whose stand-ins answered (gave values) during the call
        self.sent = {}   # id(array) -> (weak reference, index, shape, dtype, digest): the grader's arrays
        self.count = 0   # arrays the grader has sent during the call (its arguments, the answers)

    def begin(self, arrays, count):
        """A call starts, with the grader's `arrays` ({index: array}) among its `count` arguments."""
        self.sent, self.count = {}, 0
        self.remember(arrays, count)

    def remember(self, arrays, count):
        """Note the arrays ({index: array}) of a message of `count` arrays that the grader sent
        during the call: sent back unchanged, to a stand-in or as arguments after the call, they
        travel as their index (`refer`)."""
        for index, array in arrays.items():
            self.sent[id(array)] = (weakref.ref(array), self.count + index, array.shape, array.dtype.str,
                                    _digest(array))
        self.count += count

    def refer(self, array):
        """The index of `array` if it is an array the grader sent during the call, unchanged (the
        same object, shape, type and bytes): the grader has it, it need not travel back. Else None."""
        known = self.sent.get(id(array))
        if known is None:
            return None
        reference, index, shape, dtype, digest = known
        if (reference() is not array or array.shape != shape or array.dtype.str != dtype
                or not array.flags.c_contiguous or _digest(array) != digest):
            return None
        return index

    def make(self, name, own=None):
        """The stand-in for the notebook's function `name`: the grader's answer for its arguments,
        while a call that names it runs; `own` (the student's function, or None) for arguments
        that do not bind to the correct function's parameters (renamed or added by the student)."""
        def stand_in(*args, **kwargs):
            if name not in self.names:
                raise RuntimeError(f"{name}: this stand-in for the correct {name} answered only "
                                   "during the check's call")
            tree, blobs = wire.encode([args, kwargs], refer=self.refer)
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
            arrays = {}
            try:
                value = wire.decode(header["value"], blobs, arrays=arrays) if header.get("op") == "answer" else None
            finally:  # counted even when malformed: the indices stay the grader's
                self.remember(arrays, len(blobs))
            if header.get("op") == "unbound" and own is not None:
                return own(*args, **kwargs)
            if header.get("op") == "answer":
                self.answered.add(name)
                return value
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
            kept = STOPPED.get(name)  # a function stopped for time: its aliases answer too
            if kept is not None and kept is not value and kept is not function and trampoline.swappable(kept):
                undos.append(trampoline.swap(kept, self.make(name)))
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


def _digest(array):
    """A digest of the bytes of a C-ordered `array` (None for another): whether it changed."""
    if not array.flags.c_contiguous:
        return None
    return blake2b(array.reshape(-1).view("u1").data, digest_size=16).digest()


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


def system(command):
    """os.system: the command run as a kernel's `%%sh` runs it (this process cannot start one),
    its output the cell's (as ipykernel forwards a process's); its wait status."""
    out, err, status = run_command(["/bin/sh", "-c", os.fsdecode(command)], merged=False)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status << 8 if status >= 0 else -status


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
    builtins.input = getpass.getpass = no_input
    os.system = system
    sys.meta_path.insert(0, ShellOnFigures())
    sys.displayhook = display
    signal.signal(signal.SIGALRM, on_alarm)  # wall-clock time
    signal.signal(signal.SIGPROF, on_alarm)  # CPU time
    given = set(NOTEBOOK)

    def with_limits(run, timeout, allowance=budget):
        """run() with the output captured (at most `allowance`[0] characters, the notebook's by
        default) and an alarm after `timeout` CPU seconds (or wall_factor times as many seconds of
        the clock)."""
        out, err = CappedOutput(allowance, "stdout"), CappedOutput(allowance, "stderr")
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
    PLACES.update(places)
    own_cells = set(request.get("own_cells", []))
    CHANNEL[:] = [reader, writer]
    for cell_id, source in request["cells"]:
        started, cpu = time.monotonic(), time.process_time()
        SHOWN[0] = None
        OUTPUTS.clear()
        try:
            filename = f"<cell {cell_id}>"
            if cell_id in own_cells:
                OWN[filename] = (cell_id, source)
            error, out, err = with_limits(lambda: run_cell(source, filename),
                                          timeouts.get(cell_id, request["cell_timeout"]))
        except BaseException as raised:  # a timeout between the shell's own handlers
            out = err = CappedOutput([0])
            error = raised
        if cell_id in stopping_cells:
            note_timeout(error, f"in {places.get(cell_id, 'a cell')}")
        for name, stand_in in stopped.items():  # a cell that defines it again does not revive it
            if name in NOTEBOOK and NOTEBOOK[name] is not stand_in:
                STOPPED[name] = NOTEBOOK[name]
            NOTEBOOK[name] = stand_in
        wire.send(writer, {"op": "cell", "id": cell_id, "stdout": out.text(), "stderr": err.text(),
                           "error": describe(error) if error is not None else None,
                           "result": SHOWN[0] if isinstance(SHOWN[0], str) else None,
                           "outputs": list(OUTPUTS),
                           "seconds": time.monotonic() - started, "cpu_seconds": time.process_time() - cpu})
        del error  # its traceback's frames hold the cell's arrays, which the calls after it would pay for
    CHANNEL.clear()
    OUTPUTS.clear()
    given |= set(SHELL.user_ns_hidden) if SHELL else set()
    functions = sorted(name for name, value in NOTEBOOK.items()
                       if callable(value) and not name.startswith("_") and name not in given
                       and not isinstance(value, type(os)))
    wire.send(writer, {"op": "ran", "functions": functions, "started": STARTED, "imported": imported,
                       "cpu_seconds": time.process_time()})

    stand_ins = StandIns(reader, writer)
    while True:
        message = wire.receive(reader)
        if message is None:
            return
        request, blobs = message
        op = request.get("op")
        if op == "call":
            names = [name for name in request.get("stand_ins") or () if isinstance(name, str)]
            arrays = {}  # what stand-ins, and the arguments after the call, send back as references
            args, kwargs = wire.decode(request["arguments"], blobs, arrays=arrays)
            stand_ins.begin(arrays, len(blobs))
            del message, blobs, arrays  # the arrays are decoded: their bytes would only take memory
            function = NOTEBOOK.get(request["name"])
            revived = request.get("revive") and request["name"] in stopped and request["name"] in STOPPED
            if revived:  # it ran out of time inside a function that stands in now: it runs again, once
                function = NOTEBOOK[request["name"]] = STOPPED[request["name"]]
            stand_ins.answered = set()
            restore = stand_ins.swap(function, names) if names else None
            cpu = time.process_time()
            try:
                try:
                    # a call's output goes nowhere: it has an allowance of its own, which what a
                    # neighbour printed in the cells or in its own calls has not used up
                    value, _, _ = with_limits(lambda: function(*args, **kwargs), request["timeout"],
                                              [limits["output_chars"]])
                finally:
                    if restore:
                        restore()
                    if revived:
                        NOTEBOOK[request["name"]] = stopped[request["name"]]
            except BaseException as error:  # the student's function failed: report, go on
                if isinstance(error, CellTimeout):  # blame the function the check called
                    error = CellTimeout(request["name"], request["timeout"])
                note_timeout(error, "in a check")
                described = describe(error, inputs=False)
                if stand_ins.answered and not isinstance(error, CellTimeout):
                    # its message may carry what the stand-ins answered (the reference's values)
                    described["evalue"] = ("its message is not shown, as the correct "
                                           f"{' and '.join(sorted(stand_ins.answered))} answered in the call")
                wire.send(writer, {"op": "raised", "error": described,
                                   "cpu_seconds": time.process_time() - cpu})
                del args, kwargs, error
                continue
            cpu = time.process_time() - cpu
            tree, out_blobs = wire.encode(value)
            arguments, _ = wire.encode([args, kwargs], refer=stand_ins.refer, blobs=out_blobs)  # unchanged: by index
            del value, args, kwargs  # nothing of a call outlives it (memory checks count it all)
            wire.send(writer, {"op": "returned", "value": tree, "arguments": arguments, "cpu_seconds": cpu},
                      out_blobs)
            del tree, arguments, out_blobs


if __name__ == "__main__":
    main(int(sys.argv[1]))
