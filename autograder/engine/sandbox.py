"""A student's notebook in a bubblewrap sandbox, and its functions called from outside.

The notebook runs in `sandbox_runner.py`, in its own process started by
bubblewrap (Debian's `bwrap`) as an unprivileged user of its own, with only
/usr, the Python installation and its packages (read-only) around it, and
two small private in-memory folders (/sandbox, holding the runner read-only,
and /tmp): no instructor sources, no reference package, no grader outputs,
no other student's files, no network, its own process namespace, and limits
on time, memory, processes (none besides itself), file size and output.

A shell command of a cell (`!cmd`, `%%bash`: the runner's `run_command`) is
run by the grader, not by the notebook (which cannot start a process): in a
process and network namespace of its own, entered into the notebook's
folders (its mount namespace), as the same user, with the limits of
`Limits.shell_processes` processes, the notebook's memory shared among them,
and what remains of the cell's time; all its processes end with it. The
grader answers only while a cell runs: never while a check calls a function.

The grader keeps the hidden checks in its own process and calls the student's
functions through `StudentFunction` proxies: the inputs go to the sandbox as
plain data, the results come back as plain data (`wire`), and the comparison
with the reference, hence every point, is decided here. One thing can only
be observed where the code runs, and a notebook could hide it: whether a
function changed its arguments in place. Memory is decided by a limit the
notebook cannot raise: `Sandbox.in_memory` runs the notebook again in a
sandbox whose runner caps its own address space before the first cell
(`harness.call_in_memory`). The flags (`flags.py`) point at code
that tries.
"""

import atexit
import builtins
import contextlib
import fcntl
import functools
import importlib.util
import inspect
import keyword
import os
import pty
import py_compile
import re
import resource
import selectors
import shutil
import signal
import site
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from . import harness, wire
from .course import ENGINE_PACKAGE

HERE = Path(__file__).resolve().parent
RUNNER_FILES = (HERE / "sandbox_runner.py", HERE / "wire.py", HERE / "checking.py",
                HERE / "trampoline.py")
SITE_PACKAGES = [folder for folder in site.getsitepackages() if os.path.isdir(folder)]
GRACE = 5.0  # seconds the grader waits beyond the runner's own alarm before killing it
# In a sandbox for memory checks, glibc's malloc serves arrays of 128 KiB and more from their own
# mappings, returned when freed (fixing the threshold stops glibc from raising it, and keeping
# freed arrays, after a large free): what a call frees no longer counts against the cap. It
# costs page faults (NumPy code with large temporaries takes about twice as long), so only there.
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot start a sandbox on this machine."""


class SandboxStopped(BaseException):
    """The sandbox was stopped or died; a BaseException so that checks do not swallow it."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Limits:
    cell_seconds: float = 60.0          # CPU time of one notebook cell: at most (or exactly, if
                                        # fixed_cells)
    call_seconds: float = 30.0          # of one call of a student's function by a check: at most
                                        # (or exactly, if fixed_calls)
    wall_factor: float = 2.0            # a cell or call may wait (sleep) this many times its limit
    time_factor: float = 50.0           # below those, a cell or call gets this many times the
    min_seconds: float = 1.0            # reference's time on it, at least min_seconds (timing.py)
    fixed_cells: bool = False           # the instructor fixed every cell's limit
    fixed_calls: bool = False           # the instructor fixed every call's limit
    submission_seconds: float = 600.0   # everything the sandbox of one submission does
    memory_bytes: int = 2 * 1024 ** 3   # address space of the notebook's process
    processes: int = 1                  # processes and threads: the notebook alone (memory
                                        # is limited per process)
    output_chars: int = 1_000_000       # printed by the notebook in all
    file_bytes: int = 16 * 1024 ** 2    # largest file it may write
    disk_bytes: int = 64 * 1024 ** 2    # size of each of its two writable folders, /sandbox and /tmp
    shell_processes: int = 4            # processes of one shell command of a cell (`!cmd`), which
                                        # share the memory limit


@dataclass(frozen=True)
class Timeouts:
    """One submission's time limits (`timing.timeouts`); what is not listed gets `Limits`'."""
    cells: dict = field(default_factory=dict)   # cell id -> seconds
    calls: dict = field(default_factory=dict)   # function name -> seconds of one call
    call: float = None                          # seconds of a call of any other function
    # cells (the course's: checks, given code) where a function that runs out of time is not
    # called again; a student's own cell may try a function on a large input of its own
    stopping_cells: frozenset = frozenset()


def check_available():
    """Raise SandboxUnavailable with what to do, unless bubblewrap works here."""
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(
            "bubblewrap is not installed: grading runs each notebook in a bubblewrap sandbox "
            "(install the Debian package `bubblewrap`; `make test` installs it)")
    result = subprocess.run(_bwrap(runner_folder(), None, Limits()) + ["/bin/true"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SandboxUnavailable(f"bubblewrap cannot start a sandbox here: {result.stderr.strip()}")


_RUNNER = []  # the runner's folder of this process (and of the workers it forks), once made


def runner_folder():
    """A folder holding the runner files and their bytecode, made once per grading process
    (workers forked after `check_available` share it) and removed at its exit; every sandbox
    binds these files read-only, so that no sandbox compiles them again."""
    if not _RUNNER or not _RUNNER[0].is_dir():
        folder = Path(tempfile.mkdtemp(prefix="sandbox-runner-"))
        for file in RUNNER_FILES:
            shutil.copy(file, folder / file.name)
            py_compile.compile(folder / file.name, importlib.util.cache_from_source(folder / file.name),
                               doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _RUNNER[:] = [folder]
    return _RUNNER[0]


def _bwrap(folder, uid, limits, files=(), environment=None, hidden=()):
    """The bwrap command line that runs the runner files of `folder` (and their bytecode) with
    nothing else around but `files`: (path, relative path) bound read-only in the notebook's folder
    (and the variables of `environment`); the packages `hidden` (the course's) and the engine's are
    hidden should they be installed as copies."""
    prefix, venv = Path(sys.base_prefix), Path(sys.prefix)
    size = str(limits.disk_bytes)
    command = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
               "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
               "--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    for name in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{name}"):
            command += ["--symlink", os.readlink(f"/{name}"), f"/{name}"]
    for readable in (prefix, venv):
        # bwrap makes missing parent folders private (0700); the sandbox's user must pass them
        for parent in reversed(readable.parents[:-1]):
            command += ["--perms", "0755", "--dir", str(parent)]
        command += ["--ro-bind", str(readable), str(readable)]
    for package in (ENGINE_PACKAGE, *hidden):
        spec = importlib.util.find_spec(package)
        location = Path(spec.origin).parent if spec and spec.origin else None
        if location and venv in location.parents:
            command += ["--tmpfs", str(location)]
    if venv != prefix:  # packages of the base interpreter are not the course's
        command += ["--tmpfs", str(prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
                                   / "site-packages")]
    # The notebook's folder: memory of a fixed size (it cannot fill the disk), runner read-only.
    command += ["--perms", "1777", "--size", size, "--tmpfs", "/sandbox"]
    for file in RUNNER_FILES:
        command += ["--ro-bind", str(folder / file.name), f"/sandbox/{file.name}"]
    command += ["--ro-bind", str(folder / "__pycache__"), "/sandbox/__pycache__"]
    for path, relative in files:  # an nbgrader assignment's data and images, read-only
        for parent in reversed(PurePosixPath(relative).parents[:-1]):  # else made private (0700)
            command += ["--perms", "0755", "--dir", f"/sandbox/{parent}"]
        command += ["--ro-bind", str(path), f"/sandbox/{relative}"]
    command += ["--chdir", "/sandbox", "--clearenv",
                "--setenv", "HOME", "/tmp", "--setenv", "PATH", f"{venv / 'bin'}:/usr/bin:/bin",
                "--setenv", "OPENBLAS_NUM_THREADS", "1", "--setenv", "OMP_NUM_THREADS", "1",
                "--setenv", "MPLBACKEND", "module://matplotlib_inline.backend_inline", "--setenv", "MPLCONFIGDIR", "/tmp",
                *(part for name, value in (environment or {}).items() for part in ("--setenv", name, value))]
    if uid is None:
        return command
    if os.geteuid() == 0:
        # As root: share no user namespace, run the notebook as an ordinary user instead,
        # so that its process limit counts (root's would not).
        command.remove("--unshare-all")
        command[1:1] = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                        "--unshare-cgroup-try"]
        return command + ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                          "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    return command


class Sandbox:
    """One submission's notebook, running in its sandbox; `run()` then `call()`s."""

    def __init__(self, cells, limits=Limits(), uid=61000, isolate=True, timeouts=Timeouts(), files=(),
                 memory_above_baseline=None, hidden=()):
        """`isolate=False` runs the same runner without bubblewrap: only for our own code
        (measuring the reference, or what the sandbox costs). `files`: (path, relative path) of
        files the notebook reads, bound read-only in its folder. `memory_above_baseline` (bytes):
        the runner caps its address space at its own size before the notebook's first cell
        plus this many bytes (see `in_memory`). `hidden`: the course's packages, hidden from the
        notebook should they be installed as copies."""
        self.cells, self.limits, self.uid, self.isolate = cells, limits, uid, isolate
        self.files, self.hidden = tuple(files), tuple(hidden)
        self.timeouts, self.memory_above_baseline = timeouts, memory_above_baseline
        self.memory_sandboxes = {}  # limit in bytes -> Sandbox: the memory checks' (in_memory)
        self.events = []        # (status, reason) of every limit hit or crash
        self.stopped = {}       # function name -> why it is not called again (it ran out of time)
        self.stopped_within = {}  # function name -> the notebook's function it ran when it was stopped in
                                  # a cell (a call in which that one stands in runs it again: `call`)
        self.call_seconds = {}  # function name -> CPU time of its slowest call so far (runner's)
        self.seconds = {}       # where its time went: start, imports, cells (the clock's), the runner's CPU
                                # time up to its calls and that of the calls (as the runner reports them)
        self.functions = {}     # name -> StudentFunction, once the notebook has run
        self.places = {}        # cell id -> where it is, for messages (its task: students see no cell ids)
        self.own_cells = []     # ids of the student's own cells: an error's place is a line of theirs
        self.task = None        # the task whose hidden checks call the student's functions now
        self._sent_arrays = []  # the arrays sent during a call, by index (`_sent_array`)
        self.deadline = None    # time.monotonic() by which everything must be done
        self._process = None

    # -- life ------------------------------------------------------------------

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        runner = runner_folder()
        ours, theirs = socket.socketpair()
        python = str(Path(sys.prefix) / "bin" / "python")
        if self.isolate:
            # run as a module, from its bytecode; without `site`, whose .pth files would import the
            # course's editable finder (our own code, unsandboxed, needs it): the packages' folders
            command = _bwrap(runner, self.uid, self.limits, self.files, self._environment(), self.hidden) + [
                python, "-E", "-s", "-S", "-B", "-m", "sandbox_runner", str(theirs.fileno()), *SITE_PACKAGES]
            self._folder = None  # its folders are its own, in memory
        else:
            command = [python, "-E", "-s", "-B", str(runner / "sandbox_runner.py"), str(theirs.fileno())]
            self._folder = Path(tempfile.mkdtemp(prefix="sandbox-"))  # its working folder
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, pass_fds=[theirs.fileno()],
                                         cwd=self._folder or runner, start_new_session=True,
                                         env=None if self.isolate else {**os.environ, **self._environment()})
        theirs.close()
        self._socket = ours
        self._reader, self._writer = ours.makefile("rb", wire.STREAM_BUFFER), ours.makefile("wb", wire.STREAM_BUFFER)
        self._started = time.monotonic()
        if self.deadline is None:
            self.deadline = self._started + self.limits.submission_seconds
        self._output_exceeded = False
        self._monitor = threading.Thread(target=self._drain_output, daemon=True)
        self._monitor.start()

    def _environment(self):
        return MALLOC if self.memory_above_baseline is not None else {}

    @property
    def alive(self):
        return self._process is not None and self._process.poll() is None

    def close(self):
        for sandbox in self.memory_sandboxes.values():
            sandbox.close()
        self.memory_sandboxes = {}
        if self._process is not None:
            self._kill()
            self._monitor.join(timeout=5)
            for stream in (self._reader, self._writer, self._socket):
                with contextlib.suppress(OSError):
                    stream.close()
            if self._folder:
                shutil.rmtree(self._folder, ignore_errors=True)
            self._process = None

    def _kill(self):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()

    def _drain_output(self):
        """Read what the notebook writes to its own stdout/stderr, killing it past the cap."""
        total = 0
        for chunk in iter(lambda: self._process.stdout.read1(65536), b""):
            total += len(chunk)
            if total > self.limits.output_chars and not self._output_exceeded:
                self._output_exceeded = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._process.pid, signal.SIGKILL)

    # -- messages --------------------------------------------------------------

    def _send(self, header, value=None):
        if self._unasked():
            self._stopped("crashed", "the notebook's process sent messages it was not asked for "
                                     "(forged answers?)")
        tree, blobs = wire.encode(value)
        # a notebook that stops reading cannot hold the grader past the deadline
        self._socket.settimeout(max(self.deadline - time.monotonic(), 0.001))
        try:
            wire.send(self._writer, {**header, "arguments": tree}, blobs)
        except (TimeoutError, socket.timeout):
            self._out_of_time()
        except OSError:
            self._stopped()
        return blobs

    def _unasked(self):
        """Whether a message is waiting that the grader has not asked for yet."""
        self._socket.settimeout(0)
        try:
            return bool(self._reader.peek(1))
        except (BlockingIOError, OSError):
            return False

    def _receive(self, seconds, doing):
        """The next message, waiting at most `seconds` (and never past the deadline)."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self._out_of_time()
        self._socket.settimeout(min(seconds + GRACE, remaining))
        try:
            message = wire.receive(self._reader)
        except (TimeoutError, socket.timeout):
            if seconds + GRACE < remaining:
                self._stopped("timeout", f"{doing} ran longer than {seconds:g} s and could not be "
                                         "interrupted")
            self._out_of_time()
        except ConnectionError:
            self._stopped()  # the other end is gone: the process died
        except (wire.WireError, OSError) as error:
            self._stopped("crashed", f"the notebook's process sent a malformed message ({error})")
        if message is None:
            self._stopped()
        return message

    def _out_of_time(self):
        self._stopped("timeout", f"the submission used up its {self.limits.submission_seconds:g} s")

    def _stopped(self, status=None, reason=None):
        """Kill the sandbox, record why, raise SandboxStopped."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=0 if status else 2)  # its own exit status, if it ended
        code = self._process.returncode
        self._kill()
        self._monitor.join(timeout=5)
        if self._output_exceeded:
            status, reason = "resource-limit", f"the notebook printed more than {self.limits.output_chars} characters"
        elif status is None:
            status, reason = "crashed", ("the notebook's process died while it ran "
                                         f"(exit status {code}: os._exit, a crash or out of memory)")
        self.events.append((status, reason))
        raise SandboxStopped(status, reason)

    # -- the notebook ----------------------------------------------------------

    def run(self):
        """Run the notebook's cells; return [{id, stdout, stderr, error, seconds}] in order."""
        self.start()
        limits = {"memory_bytes": self.limits.memory_bytes, "processes": self.limits.processes,
                  "file_bytes": self.limits.file_bytes, "output_chars": self.limits.output_chars,
                  "wall_factor": self.limits.wall_factor, "memory_above_baseline": self.memory_above_baseline}
        seconds = {cell_id: self.timeouts.cells.get(cell_id, self.limits.cell_seconds)
                   for cell_id, _ in self.cells}
        self._send({"op": "run", "cells": self.cells, "cell_timeout": self.limits.cell_seconds,
                    "cell_timeouts": seconds, "stopping_cells": sorted(self.timeouts.stopping_cells),
                    "stopped": self.stopped, "places": self.places, "own_cells": self.own_cells,
                    "limits": limits})
        results = []
        for cell_id, _ in self.cells:
            where = self.places.get(cell_id, f"the cell {cell_id}")
            ends = time.monotonic() + seconds[cell_id] * self.limits.wall_factor
            header, _ = self._receive(seconds[cell_id] * self.limits.wall_factor, where)
            while header.get("op") == "shell":  # the cell's shell commands, in its time
                self._send(self._shell(header, min(ends, self.deadline) - time.monotonic(), seconds[cell_id]))
                header, _ = self._receive(max(ends - time.monotonic(), 0.0), where)
            if header.get("op") != "cell" or header.get("id") != cell_id:
                self._stopped("crashed", "the notebook's process sent an unexpected message")
            error = _plain_error(header.get("error"))
            self._note(error, where, seconds[cell_id])
            if (error and error["ename"] == "CellTimeout" and error["function"]
                    and cell_id in self.timeouts.stopping_cells):
                if error["function"] not in self.stopped and error["within"] not in (None, error["function"]):
                    self.stopped_within[error["function"]] = error["within"]
                self._stop_calling(error["function"], where, seconds[cell_id])
            results.append({"id": cell_id, "stdout": _text(header.get("stdout")),
                            "stderr": _text(header.get("stderr")), "error": error,
                            "result": _text(header["result"]) if isinstance(header.get("result"), str) else None,
                            "outputs": _outputs(header.get("outputs"), error),
                            "seconds": _number(header.get("seconds")),
                            "cpu_seconds": _number(header.get("cpu_seconds"))})
        header, _ = self._receive(self.limits.cell_seconds, "the notebook")
        names = header.get("functions") if header.get("op") == "ran" else None
        if not isinstance(names, list):
            self._stopped("crashed", "the notebook's process sent an unexpected message")
        # the runner's clock is ours (CLOCK_MONOTONIC); its figures are only reported, never trusted
        started, imported = _number(header.get("started")), _number(header.get("imported"))
        self.seconds = {"start": max(started - self._started, 0.0), "imports": max(imported - started, 0.0),
                        "cells": sum(result["seconds"] for result in results),
                        "notebook CPU": _number(header.get("cpu_seconds")), "calls CPU": 0.0}
        # never a built-in's name: the hidden checks' code must not call the student's `len`
        self.functions = {name: StudentFunction(self, name) for name in names
                          if isinstance(name, str) and name.isidentifier() and not hasattr(builtins, name)}
        return results

    def in_memory(self, limit_bytes):
        """The sandbox in which this submission's functions run within `limit_bytes` of memory
        beyond the baseline: a fresh one of the same notebook (same cells, time limits and
        deadline), whose runner caps its own address space (a hard limit, which its user
        cannot raise) at its size after its imports plus `limit_bytes`, before any cell
        runs. The cap is absolute: memory the notebook holds counts, and freeing inside a
        call what a cell reserved gains nothing. The notebook runs there again (its cells'
        errors and limits are not this submission's: they are not recorded); started at the
        first memory check, kept for the others. Functions stopped for time stay stopped."""
        sandbox = self.memory_sandboxes.get(limit_bytes)
        if sandbox is None or not sandbox.alive:
            if sandbox is not None:
                sandbox.close()
            sandbox = Sandbox(self.cells, self.limits, self.uid, self.isolate, self.timeouts, self.files,
                              memory_above_baseline=limit_bytes, hidden=self.hidden)
            sandbox.deadline, sandbox.places, sandbox.task = self.deadline, self.places, self.task
            sandbox.own_cells = self.own_cells
            sandbox.stopped, sandbox.call_seconds = self.stopped, self.call_seconds  # shared
            sandbox.stopped_within = self.stopped_within
            self.memory_sandboxes[limit_bytes] = sandbox
            sandbox.run()  # SandboxStopped if it dies there
        sandbox.task = self.task
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

    # -- shell commands ------------------------------------------------------------

    def _shell(self, request, seconds, cell_seconds):
        """The answer to the runner's request to run a shell command (see the module's doc):
        the command runs for at most `seconds` (what remains of the cell's wall-clock time)."""
        argv, stdin, cwd = request.get("argv"), request.get("stdin"), request.get("cwd")
        env = request.get("env") if isinstance(request.get("env"), dict) else {}
        if not (isinstance(argv, list) and argv and len(argv) <= 10_000
                and all(isinstance(part, str) and "\0" not in part for part in argv)
                and (stdin is None or isinstance(stdin, str)) and isinstance(cwd, str) and cwd.startswith("/")):
            return {"op": "shell", "refused": "a malformed shell command"}
        env = {name: value for name, value in list(env.items())[:1000]
               if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)) and isinstance(value, str) and "\0" not in value}
        if self.isolate:
            command = self._shell_command(argv, cwd, env, max(seconds, 0.0), cell_seconds)
            if command is None:
                return {"op": "shell", "refused": "the notebook's sandbox has ended"}
            environment, folder = {"PATH": "/usr/bin:/bin"}, None  # nothing of the notebook's in root's tools
        else:  # our own code (isolate=False): its folder and environment
            command, environment, folder = argv, {**os.environ, **env}, self._folder
        out, err, status, timed_out = _run(command, stdin, bool(request.get("merged")), environment, folder,
                                           max(seconds, 0.0), self.limits.output_chars)
        return {"op": "shell", "stdout": out, "stderr": err, "status": status, "timed_out": timed_out}

    def _shell_command(self, argv, cwd, env, seconds, cell_seconds):
        """The command line that runs `argv` as the notebook's user, in the notebook's folders
        (entering the mount namespace of the sandbox's first process), in namespaces of its own."""
        try:
            first = int(Path(f"/proc/{self._process.pid}/task/{self._process.pid}/children").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return None
        processes, memory = self.limits.shell_processes, self.limits.memory_bytes // self.limits.shell_processes
        cpu = max(1, int(min(seconds, cell_seconds)) + 1)
        limits = ["prlimit", f"--as={memory}", f"--fsize={self.limits.file_bytes}", "--core=0", f"--cpu={cpu}"]
        # the command's own: where it runs, its environment (the notebook's, never root tools')
        inner = ["/usr/bin/env", "-i", *(f"{name}={value}" for name, value in env.items()),
                 "/bin/sh", "-c", 'cd -- "$0" && exec "$@"', cwd, *argv]
        if os.geteuid() == 0:
            # the notebook's processes count too (RLIMIT_NPROC counts the user's): its runner and
            # that of a sandbox for memory checks
            return ["nsenter", f"--target={first}", "--mount", "--", "unshare", "--pid", "--fork",
                    "--kill-child", "--mount-proc", "--net", "--ipc", "--uts", "--", *limits,
                    f"--nproc={processes + 2}", "--", "setpriv", f"--reuid={self.uid}", f"--regid={self.uid}",
                    "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *inner]
        return ["nsenter", f"--target={first}", "--user", "--mount", "--preserve-credentials", "--", "unshare",
                "--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--ipc", "--uts", "--", *limits,
                f"--nproc={processes + 2}", "--", "setpriv", "--inh-caps=-all", "--bounding-set=-all",
                "--no-new-privs", "--", *inner]

    def _checking(self):
        return f"a check of task “{self.task}”" if self.task else "a check"

    def _stop_calling(self, name, where, seconds):
        """`name` ran out of time: it is not called again in this submission (nor its restarts)."""
        self.stopped.setdefault(name, f"{name} ran longer than its limit of {seconds:g} s in {where} "
                                      "and is not called again")

    def call(self, name, args, kwargs, stand_ins=None):
        """The student's `name(*args, **kwargs)`, run in the sandbox.

        Changes the function made to its arguments are made to `args` and
        `kwargs` too, as if it had run here, so that checks can notice them.
        A function that ran out of time once raises TimeoutError at once, unless it was stopped in
        a cell while it ran another function of the notebook that stands in now (a neighbour that
        never returns costs the function that calls it nothing): it runs again, until it runs out
        of time in a call.
        `stand_ins` ({name: function of ours}): while it runs, the notebook's
        functions of those names (looked up globally, or defaults of the
        function called) answer with our function's value for their arguments,
        computed here (the runner's stand-ins ask, `_answer` answers).
        """
        stand_ins = dict(stand_ins or {})
        revive = name in self.stopped and self.stopped_within.get(name) in stand_ins
        if name in self.stopped and not revive:
            raise TimeoutError(self.stopped[name])
        seconds = self.timeouts.calls.get(name, self.timeouts.call or self.limits.call_seconds)
        self._sent_arrays = self._send(
            {"op": "call", "name": name, "timeout": seconds, "stand_ins": sorted(stand_ins),
             "revive": revive}, [args, kwargs])
        try:
            return self._returned(name, args, kwargs, seconds, stand_ins)
        finally:
            self._sent_arrays = []

    def _returned(self, name, args, kwargs, seconds, stand_ins):
        """What the call of `name` that the grader sent returns (`call`), its stand-ins answered."""
        try:
            while True:
                header, blobs = self._receive(seconds * self.limits.wall_factor, f"{name} in {self._checking()}")
                if header.get("op") == "stand-in":
                    self._answer(header, blobs, stand_ins)
                elif header.get("op") == "shell":
                    self._send({"op": "shell", "refused": "a shell command runs only in the notebook's cells, "
                                                          "not when a check calls a function"})
                else:
                    break
        except SandboxStopped as stop:
            if stop.status == "timeout":  # it could not be interrupted
                self._stop_calling(name, self._checking(), seconds)
                self.stopped_within.pop(name, None)  # ran out of time in a call: never again
            raise
        self.call_seconds[name] = max(self.call_seconds.get(name, 0.0), _number(header.get("cpu_seconds")))
        if "calls CPU" in self.seconds:
            self.seconds["calls CPU"] += _number(header.get("cpu_seconds"))
        if header.get("op") == "raised":
            error = _plain_error(header.get("error"))
            self._note(error, self._checking(), seconds, function=name)
            if error["ename"] == "CellTimeout":
                self._stop_calling(name, self._checking(), seconds)
                self.stopped_within.pop(name, None)  # ran out of time in a call: never again
                raise TimeoutError(self.stopped[name])
            raise _exception(error, seconds)
        try:
            value = wire.decode(header.get("value"), blobs)
            args_after, kwargs_after = wire.decode(header.get("arguments"), blobs, self._sent_array)
        except (wire.WireError, ValueError, TypeError) as error:
            self._stopped("crashed", f"{name} returned something that is not plain data ({error})")
        _copy_changes(args, args_after)
        _copy_changes(kwargs, kwargs_after)
        return value

    def _answer(self, header, blobs, stand_ins):
        """Answer a stand-in's request: our function's value for its arguments, only for a name of
        the call we are waiting on; its error (type name, message) when it raises; "unbound" when
        the arguments do not bind to its parameters (the runner then calls the student's own).
        It runs within the submission's deadline and the notebook's memory limit (`_bounded`)."""
        name = header.get("name")
        function = stand_ins.get(name) if isinstance(name, str) else None
        try:
            args, kwargs = wire.decode(header.get("arguments"), blobs, self._sent_array)
            if not isinstance(kwargs, dict) or not isinstance(args, (list, tuple)):
                raise TypeError("malformed arguments")
        except (wire.WireError, ValueError, TypeError) as error:
            self._stopped("crashed", f"the notebook's process sent a malformed request ({error})")
        if function is None:
            reply = {"op": "raised", "error": {"ename": "RuntimeError", "evalue": f"no stand-in for {name!r} now"}}
        elif not _binds(function, args, kwargs):
            reply = {"op": "unbound", "error": {"ename": "TypeError", "evalue": (
                f"the correct {name}'s parameters do not take these arguments")}}
        else:
            harness.answered(name)
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"), \
                        _bounded(self.deadline - time.monotonic(), self.limits.memory_bytes, name):
                    warnings.simplefilter("ignore")
                    value = function(*args, **kwargs)
                reply = {"op": "answer", "value": value}
            except Exception as error:  # what a correct function raises on these arguments
                reply = {"op": "raised", "error": {"ename": type(error).__name__, "evalue": str(error)[:2000]}}
        tree, out_blobs = wire.encode(reply.pop("value", None))
        if sum(blob.nbytes for blob in out_blobs) > wire.MAX_MESSAGE_BYTES // 2:
            tree, out_blobs = None, []
            reply = {"op": "raised", "error": {"ename": "MemoryError", "evalue": (
                f"the correct {name}'s value on these arguments is larger than a stand-in may send "
                f"({wire.MAX_MESSAGE_BYTES // 2 // 1024 ** 2} MiB)")}}
        try:
            wire.send(self._writer, {**reply, "value": tree}, out_blobs)
        except OSError:
            self._stopped()
        self._sent_arrays += out_blobs

    def _sent_array(self, index):
        """A copy of the array of index `index` among those sent during the call (its arguments,
        then the stand-ins' answers), which the runner sent back unchanged by that index (to a
        stand-in, or as an argument after the call)."""
        if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(self._sent_arrays)):
            raise wire.WireError("a reference to an array that was not sent")
        return self._sent_arrays[index].copy()


def _binds(function, args, kwargs):
    try:
        _signature(function).bind(*args, **kwargs)
    except TypeError:
        return False
    except ValueError:  # no signature to read: let it try
        pass
    return True


@functools.lru_cache(maxsize=1024)
def _signature(function):
    """inspect.signature of one of our stand-ins (the reference's functions), read once."""
    return inspect.signature(function)


class _OverTime(Exception):
    pass


@contextlib.contextmanager
def _bounded(seconds, memory_bytes, name):
    """Run the block (the reference answering a stand-in, in the grader) within `seconds` (what is
    left of the submission's time: SIGALRM, in the main thread) and `memory_bytes` more address
    space (RLIMIT_AS, lowered for the block): over either, TimeoutError or MemoryError naming
    `name`, which the stand-in raises in the student's call; the grader goes on."""
    if seconds <= 0:
        raise TimeoutError(f"the correct {name} was not computed: the submission's time is up")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + memory_bytes
    cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    timed = threading.current_thread() is threading.main_thread()
    if timed:
        def over_time(signum, frame):
            raise _OverTime()
        previous = signal.signal(signal.SIGALRM, over_time)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    except _OverTime:
        raise TimeoutError(f"the correct {name} took longer than the submission's time left "
                           f"({seconds:.3g} s) on these arguments") from None
    except MemoryError:
        raise MemoryError(f"the correct {name} needs more than {memory_bytes / 1024 ** 3:g} GiB "
                          "on these arguments") from None
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _address_space():
    """This process's address space (VmSize), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class StudentFunction:
    """A student's function, seen from the grader: calling it runs it in the sandbox."""

    def __init__(self, sandbox, name):
        self._sandbox, self.__name__ = sandbox, name

    def __call__(self, *args, **kwargs):
        return self._sandbox.call(self.__name__, args, kwargs)

    def standing_in(self, stand_ins):
        """This function, called with the notebook's functions of `stand_ins` ({name: our
        function}) answering as ours (`Sandbox.call`)."""
        return lambda *args, **kwargs: self._sandbox.call(self.__name__, args, kwargs, stand_ins)

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


def _run(command, stdin, merged, environment, folder, seconds, max_chars):
    """(stdout, stderr, exit status, timed out) of `command`, stopped (its process group killed)
    after `seconds` or `max_chars` characters. `merged`: stdout and stderr are one terminal (as
    a kernel's `!cmd`, whose lines end in \\r\\n), else two pipes, `stdin` written to the command."""
    if merged:
        reader, terminal = pty.openpty()
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # pexpect's size
        streams = {"stdin": terminal, "stdout": terminal, "stderr": terminal}
    else:
        streams = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    try:
        process = subprocess.Popen(command, env=environment, cwd=folder, start_new_session=True, **streams)
    except OSError as error:
        if merged:
            os.close(reader), os.close(terminal)
        return "", f"{error}\n", 127, False
    texts = {}
    selector = selectors.DefaultSelector()
    if merged:
        os.close(terminal)
        selector.register(reader, selectors.EVENT_READ, "stdout")
    else:
        for name in ("stdout", "stderr"):
            selector.register(getattr(process, name).fileno(), selectors.EVENT_READ, name)
        threading.Thread(target=_feed, args=(process.stdin, (stdin or "").encode()), daemon=True).start()
    ends, total, timed_out = time.monotonic() + seconds, 0, False
    while selector.get_map():
        remaining = ends - time.monotonic()
        if remaining <= 0 or total > max_chars:
            timed_out = remaining <= 0
            break
        for key, _ in selector.select(remaining):
            try:
                chunk = os.read(key.fd, 65536)
            except OSError:  # a terminal whose last writer has gone
                chunk = b""
            if not chunk:
                selector.unregister(key.fd)
                continue
            texts.setdefault(key.data, []).append(chunk)
            total += len(chunk)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # its namespace's first process: all of them end
    process.wait()
    selector.close()
    if merged:
        os.close(reader)
    else:
        for stream in (process.stdout, process.stderr):
            stream.close()
    status = process.returncode
    status = -(status - 128) if status > 128 else status  # killed by a signal: IPython's -signal
    text = {name: b"".join(chunks).decode("utf-8", "replace")[:max_chars] for name, chunks in texts.items()}
    return text.get("stdout", ""), text.get("stderr", ""), status, timed_out


def _feed(stream, data):
    with contextlib.suppress(OSError):
        stream.write(data)
        stream.close()


OUTPUT_TYPES = ("stream", "display_data", "execute_result")


def _outputs(outputs, error):
    """The cell's outputs as nbformat's, from the runner's list (untrusted: plain data only, of
    the kinds a kernel sends), and its error last."""
    plain = []
    for output in outputs if isinstance(outputs, list) else []:
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


def _plain_error(error):
    if not isinstance(error, dict):
        return None
    mro = error.get("mro")
    function = error.get("function")
    within = error.get("within")
    return {"ename": _text(error.get("ename"), 100) or "Exception",
            "evalue": _text(error.get("evalue"), 2000),
            "function": function if isinstance(function, str) and function.isidentifier() else None,
            "within": within if isinstance(within, str) and within.isidentifier() else None,
            "place": _text(error.get("place"), 500) or None, "inputs": _text(error.get("inputs"), 500) or None,
            "mro": [m for m in mro if isinstance(m, str)][:50] if isinstance(mro, list) else []}


def _number(value):
    return float(value) if isinstance(value, (int, float)) and value >= 0 else 0.0


def _text(value, limit=20_000):
    return value[:limit] if isinstance(value, str) else ""


def _exception(error, seconds):
    """An exception like the one the student's function raised: same name, built-in base."""
    if error["ename"] == "OutputLimitExceeded":
        return RuntimeError("it printed more than the notebook's output limit")
    base = next((getattr(builtins, name) for name in error["mro"]
                 if isinstance(getattr(builtins, name, None), type)
                 and issubclass(getattr(builtins, name), Exception)), Exception)
    name, message = error["ename"], error["evalue"] + (f"; at {error['place']}" if error.get("place") else "")
    if name == base.__name__ or not name.isidentifier() or keyword.iskeyword(name):
        return base(message)
    return type(name, (base,), {})(message)


def _copy_changes(before, after):
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
                _copy_changes(before[key], value)
            else:
                before[key] = value
    elif isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)):
        if len(before) == len(after):
            for i, (old, new) in enumerate(zip(before, after)):
                if isinstance(before, list) and _replaced(old, new):
                    before[i] = new
                else:
                    _copy_changes(old, new)
        elif isinstance(before, list):
            before[:] = after


def _replaced(before, after):
    """Whether the function put another kind of value where `before` was (a longer array, ...)."""
    if isinstance(before, np.ndarray) and isinstance(after, np.ndarray):
        return before.shape != after.shape
    return type(before) is not type(after) and not (
        isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)))
