"""The runner's process, and the messages to and from it within the submission's time."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .. import protocol
from . import seccomp
from .bwrap import RUNNER, SITE_PACKAGES, runner_folder
from .bwrap import arguments as bwrap_arguments
from .shell import children, namespaces
from .state import SandboxStopped

NAMESPACES_SECONDS = 30.0  # at most, for bubblewrap to make the sandbox (as an ordinary user)

GRACE = 5.0  # seconds the grader waits beyond the runner's own alarm before killing it
BWRAP_ENVIRONMENT = {"PATH": "/usr/bin:/bin"}
REFUSED = seccomp.program()  # the notebook's seccomp filter (None: no filter on this machine)


def _file_of(data):
    """A file descriptor (inheritable, at the start) of a file in memory that holds `data`."""
    fd = os.memfd_create("bwrap", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class Process:
    """The runner of one sandbox, started by `start`; every wait ends by the submission's
    deadline. `events`: where its stops are recorded."""

    def __init__(self, submission, events, environment):
        self.submission, self.events, self.environment = submission, events, environment
        self.folder = self.popen = None
        self.namespaces = None  # what its shell commands enter, as an ordinary user (`shell.namespaces`)

    def start(self):
        runner = runner_folder()
        ours, theirs = socket.socketpair()
        python = str(Path(sys.prefix) / "bin" / "python")
        s = self.submission
        passed = [theirs.fileno()]
        if s.isolate:
            # run as a module, from its bytecode; without `site`, whose .pth files would import the
            # course's editable finder (our own code, unsandboxed, needs it): the packages' folders
            options, prefix = bwrap_arguments(runner, s.uid, s.limits, s.files, self.environment, s.hidden)
            if REFUSED:  # applied to the notebook's process
                passed.append(_file_of(REFUSED))
                options[:0] = ["--seccomp", str(passed[-1])]
            # read from a file, not the command line, which the notebook could read in /proc (the
            # machine's paths of the files bound in its folder)
            passed.append(_file_of("".join(f"{option}\0" for option in options).encode()))
            command = ["bwrap", "--args", str(passed[-1]), *prefix,
                       python, "-E", "-s", "-S", "-B", "-m", RUNNER, str(theirs.fileno()), *SITE_PACKAGES]
        else:
            command = [python, "-E", "-s", "-B", str(runner / RUNNER / "__main__.py"), str(theirs.fileno())]
            self.folder = Path(tempfile.mkdtemp(prefix="sandbox-"))  # its working folder
        self.popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, pass_fds=passed,
                                      cwd=self.folder or runner, start_new_session=True,
                                      # bubblewrap's first process keeps the environment it was given,
                                      # and the notebook can read it: nothing of the grader's
                                      env=BWRAP_ENVIRONMENT if s.isolate else {**os.environ, **self.environment})
        for fd in passed[1:]:
            os.close(fd)
        theirs.close()
        self.socket = ours
        self.reader = ours.makefile("rb", protocol.STREAM_BUFFER)
        self.writer = ours.makefile("wb", protocol.STREAM_BUFFER)
        self.started = time.monotonic()
        if s.deadline is None:
            s.deadline = self.started + s.limits.submission_seconds
        self.output_exceeded = False
        self.monitor = threading.Thread(target=self._drain_output, daemon=True)
        self.monitor.start()
        if s.isolate and os.geteuid() != 0:  # before the notebook runs (it waits for "run")
            self.namespaces = namespaces(self.popen, min(s.deadline, self.started + NAMESPACES_SECONDS))

    @property
    def alive(self):
        return self.popen is not None and self.popen.poll() is None

    def close(self):
        if self.popen is not None:
            self._kill()
            self.monitor.join(timeout=5)
            for stream in (self.reader, self.writer, self.socket):
                with contextlib.suppress(OSError):
                    stream.close()
            if self.folder:
                shutil.rmtree(self.folder, ignore_errors=True)
            for fd in self.namespaces if isinstance(self.namespaces, tuple) else ():
                os.close(fd)
            self.popen = self.namespaces = None

    def _kill(self):
        # bubblewrap's first process, the init of the sandbox's PID namespace (in a session of
        # its own): all the notebook's processes end with it, whatever their parent-death signal
        for child in children(self.popen.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()

    def _drain_output(self):
        """Read what the notebook writes to its own stdout/stderr, killing it past the cap."""
        total = 0
        for chunk in iter(lambda: self.popen.stdout.read1(65536), b""):
            total += len(chunk)
            if total > self.submission.limits.output_chars and not self.output_exceeded:
                self.output_exceeded = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.popen.pid, signal.SIGKILL)

    def send(self, op, blobs=(), **fields):
        """Send the message `op` (`protocol.GRADER`)."""
        if self._unasked():
            self.stopped("crashed", "the notebook's process sent messages it was not asked for "
                                    "(forged answers?)")
        # a notebook that stops reading cannot hold the grader past the deadline
        self.socket.settimeout(max(self.submission.deadline - time.monotonic(), 0.001))
        try:
            protocol.write(self.writer, op, protocol.GRADER, blobs, **fields)
        except (TimeoutError, socket.timeout):
            self.out_of_time()
        except OSError:
            self.stopped()

    def _unasked(self):
        """Whether a message is waiting that the grader has not asked for yet."""
        self.socket.settimeout(0)
        try:
            return bool(self.reader.peek(1))
        except (BlockingIOError, OSError):
            return False

    def receive(self, ops, seconds, doing):
        """The next message, one of `ops` (`protocol.RUNNER`), waiting at most `seconds` (and
        never past the deadline)."""
        remaining = self.submission.deadline - time.monotonic()
        if remaining <= 0:
            self.out_of_time()
        self.socket.settimeout(min(seconds + GRACE, remaining))
        try:
            message = protocol.read(self.reader, ops, protocol.RUNNER)
        except (TimeoutError, socket.timeout):
            if seconds + GRACE < remaining:
                self.stopped("timeout", f"{doing} ran longer than {seconds:g} s and could not be interrupted",
                             fault=f"this cell ran longer than {seconds:g} s and could not be interrupted")
            self.out_of_time()
        except ConnectionError:
            self.stopped(doing=doing)  # the other end is gone: the process died
        except (protocol.WireError, OSError) as error:
            self.stopped("crashed", f"the notebook's process sent a malformed message ({error})")
        if message is None:
            self.stopped(doing=doing)
        return message

    def out_of_time(self):
        self.stopped("timeout", f"the submission used up its {self.submission.limits.submission_seconds:g} s")

    def stopped(self, status=None, reason=None, fault=None, doing=None):
        """Kill the process, record why, raise SandboxStopped. Without `status`: the process died
        (while it ran `doing`). `fault`: when the code it ran stopped it (it could not be
        interrupted, or the process died), that, in words for the output of the cell it ran."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=0 if status else 2)  # its own exit status, if it ended
        code = self.popen.returncode
        self._kill()
        self.monitor.join(timeout=5)
        if self.output_exceeded:
            status, fault = "resource-limit", None
            reason = f"the notebook printed more than {self.submission.limits.output_chars} characters"
        elif status is None:
            status, reason = "crashed", (f"the notebook's process died while it ran{f' {doing}' if doing else ''} "
                                         f"(exit status {code}: os._exit, a crash or out of memory)")
            fault = f"the notebook's process died in this cell (exit status {code})"
        self.events.append((status, reason))
        raise SandboxStopped(status, reason, fault)
