"""The shell broker: a shell command of a cell (`!cmd`, `%%bash`), run by the grader.

The notebook cannot start a process: the grader runs its command in a process and network
namespace of its own, entered into the notebook's folders (its mount namespace), as the same
user, with the limits of `Limits.shell_processes` processes, the notebook's memory shared among
them, and what remains of the cell's time; all its processes end with it. The grader answers
only while a cell runs: never while a check calls a function. As an ordinary user, the command
enters the user namespaces bubblewrap made (`namespaces`, opened before the notebook ran), and
where bubblewrap makes none (installed setuid), it is refused, saying why.
"""

import contextlib
import fcntl
import os
import pty
import re
import resource
import selectors
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path


def answer(process, request, seconds, cell_seconds):
    """The fields of the answer to the runner's request to run a shell command: the command
    runs for at most `seconds` (what remains of the cell's wall-clock time)."""
    argv, stdin, cwd, env = request["argv"], request["stdin"], request["cwd"], request["env"]
    if not (isinstance(argv, list) and argv and len(argv) <= 10_000
            and all(isinstance(part, str) and "\0" not in part for part in argv)
            and (stdin is None or isinstance(stdin, str)) and isinstance(cwd, str) and cwd.startswith("/")):
        return {"refused": "a malformed shell command"}
    env = {name: value for name, value in list(env.items())[:1000]
           if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)) and isinstance(value, str) and "\0" not in value}
    limits = process.submission.limits
    fds = ()
    if process.submission.isolate:
        try:
            command = _command(process, argv, cwd, env, max(seconds, 0.0), cell_seconds)
        except Unavailable as error:
            return {"refused": str(error)}
        if command is None:
            return {"refused": "the notebook's sandbox has ended"}
        command, fds = command
        environment, folder = {"PATH": "/usr/bin:/bin"}, None  # nothing of the notebook's in root's tools
    else:  # our own code (isolate=False): its folder and environment
        command, environment, folder = argv, {**os.environ, **env}, process.folder
    out, err, status, timed_out = run(command, stdin, request["merged"], environment, folder,
                                      max(seconds, 0.0), limits.output_chars, fds)
    return {"stdout": out, "stderr": err, "status": status, "timed_out": timed_out}


def _command(process, argv, cwd, env, seconds, cell_seconds):
    """(command line, the fds it inherits) that runs `argv` as the notebook's user, in the
    notebook's folders (the mount namespace of the sandbox's first process), in namespaces of its
    own; None if the sandbox has ended. Unavailable if it cannot run on this machine."""
    limits, uid = process.submission.limits, process.submission.uid
    processes, memory = limits.shell_processes, limits.memory_bytes // limits.shell_processes
    cpu = max(1, int(min(seconds, cell_seconds)) + 1)
    # RLIMIT_NPROC counts the user's processes. As root: the notebook's runner and that of a
    # sandbox for memory checks (one user for both). As an ordinary user: only those of the user
    # namespace it counts in (kernel 5.14 on), the sandbox's, where bubblewrap's first process
    # and the runner are: +3 gives the command as many as root's while no memory check runs.
    prlimit = ["prlimit", f"--as={memory}", f"--fsize={limits.file_bytes}", "--core=0", f"--cpu={cpu}",
               f"--nproc={processes + (2 if os.geteuid() == 0 else 3)}", "--"]
    # the command's own: where it runs, its environment (the notebook's, never root tools')
    inner = ["/usr/bin/env", "-i", *(f"{name}={value}" for name, value in env.items()),
             "/bin/sh", "-c", 'cd -- "$0" && exec "$@"', cwd, *argv]
    unshare = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--ipc", "--uts", "--"]
    if os.geteuid() == 0:  # bubblewrap's first process is root's: the notebook cannot move it
        first = next(iter(children(process.popen.pid)), None)
        if first is None:
            return None
        return ["nsenter", f"--target={first}", "--mount", "--", *unshare, *prlimit,
                "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs", "--", *inner], ()
    if isinstance(process.namespaces, Unavailable):
        raise process.namespaces
    if process.namespaces is None or not process.alive:
        return None
    owner, mount, own = process.namespaces
    # bubblewrap's two user namespaces: the outer one owns the sandbox's mounts (there the tools
    # are root, able to make a pid namespace and mount its /proc), the sandbox's processes are in
    # the inner one, where the command runs as the notebook's user. The outer ones are opened by
    # the first nsenter from our /proc, the inner one is inherited (the command keeps it: the user
    # namespace it is in, of no use without capabilities). No capabilities to drop: entering the
    # inner one as a user other than its root, the command has none after exec (its bounding set,
    # full again there, grants nothing under no_new_privs).
    me = os.getpid()
    return ["nsenter", f"--user=/proc/{me}/fd/{owner}", f"--mount=/proc/{me}/fd/{mount}", "--preserve-credentials",
            "--", *unshare, "nsenter", f"--user=/proc/self/fd/{own}", "--preserve-credentials", "--",
            *prlimit, "setpriv", "--no-new-privs", "--", *inner], (own,)


class Unavailable(Exception):
    """This machine cannot run a cell's shell command (no user namespaces for an ordinary user)."""


NS_GET_USERNS = 0xB701  # ioctl_ns(2): the user namespace that owns a namespace
# bubblewrap's first process only waits for the runner; as an ordinary user it is the user's, and
# a notebook could run code in it (ptrace) beyond the runner's limits: it gets next to nothing
# (no process: the runner and it already count 2)
FIRST_LIMITS = {resource.RLIMIT_AS: 64 * 1024 ** 2, resource.RLIMIT_NPROC: 1, resource.RLIMIT_CPU: 2,
                resource.RLIMIT_FSIZE: 0, resource.RLIMIT_CORE: 0}


def namespaces(popen, deadline):
    """As an ordinary user, (fds of) the namespaces that the shell commands of the sandbox of
    bubblewrap's `popen` enter: the user namespace that owns its mount namespace, that mount
    namespace and the user namespace of its processes, those of bubblewrap's first process once
    it has started the runner (every mount made), waiting for it until `deadline` (monotonic);
    opened before the notebook runs, as that process is the user's and a notebook could make it
    move to namespaces of its own (ptrace); that process gets FIRST_LIMITS. None if the sandbox
    ended first; Unavailable if it is made without user namespaces of its own (bubblewrap
    installed setuid): its mounts are then not ours to enter."""
    first = None
    while time.monotonic() < deadline and popen.poll() is None:
        first = first or next(iter(children(popen.pid)), None)
        if first is not None and children(first):
            break
        time.sleep(0.001)
    else:
        return None
    fds = []
    try:
        for limit, value in FIRST_LIMITS.items():  # hard limits: raising them takes a capability
            resource.prlimit(first, limit, (value, value))
        fds.append(os.open(f"/proc/{first}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC))
        try:
            fds.insert(0, fcntl.ioctl(fds[0], NS_GET_USERNS))
        except PermissionError:  # owned by a user namespace above ours
            fds.insert(0, None)
        fds.append(os.open(f"/proc/{first}/ns/user", os.O_RDONLY | os.O_CLOEXEC))
        ours = os.stat("/proc/self/ns/user")
        if fds[0] is None or (os.fstat(fds[0]).st_dev, os.fstat(fds[0]).st_ino) == (ours.st_dev, ours.st_ino):
            raise Unavailable(
                "shell commands (!cmd, %%bash) run in the sandbox's namespaces, which an ordinary user enters "
                "only if bubblewrap made them in user namespaces of its own: this machine's bubblewrap does not "
                "(it is installed setuid); grade as root, or install bubblewrap without the setuid bit")
    except (Unavailable, OSError) as error:
        for fd in fds:
            if fd is not None:
                os.close(fd)
        return error if isinstance(error, Unavailable) else None
    return tuple(fds)


def children(pid):
    """The pids of the children of the process `pid` (none once it has ended)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def run(command, stdin, merged, environment, folder, seconds, max_chars, pass_fds=()):
    """(stdout, stderr, exit status, timed out) of `command` (given `pass_fds`), stopped (its
    process group killed) after `seconds` or `max_chars` characters. `merged`: stdout and stderr
    are one terminal (as a kernel's `!cmd`, whose lines end in \\r\\n), else two pipes, `stdin`
    written to the command."""
    if merged:
        reader, terminal = pty.openpty()
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # pexpect's size
        streams = {"stdin": terminal, "stdout": terminal, "stderr": terminal}
    else:
        streams = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    try:
        process = subprocess.Popen(command, env=environment, cwd=folder, start_new_session=True,
                                   pass_fds=pass_fds, **streams)
    except OSError as error:
        if merged:
            os.close(reader), os.close(terminal)
        return "", f"{error}\n", 127, False
    selector = selectors.DefaultSelector()
    if merged:
        os.close(terminal)
        selector.register(reader, selectors.EVENT_READ, "stdout")
    else:
        for name in ("stdout", "stderr"):
            selector.register(getattr(process, name).fileno(), selectors.EVENT_READ, name)
        threading.Thread(target=_feed, args=(process.stdin, (stdin or "").encode()), daemon=True).start()
    texts, timed_out = _read(selector, time.monotonic() + seconds, max_chars)
    # the first process of its PID namespace (unshare's child), whose end ends all of them: by its
    # pid, as it may have left the group (setsid) and lost its parent-death signal (setpriv)
    # (unshare reaps it and ends, else it would be left to the machine's init to reap)
    for pid in children(process.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
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


def _read(selector, ends, max_chars):
    """({stream's name: chunks read}, timed out) until the streams end, `ends` or `max_chars`."""
    texts, total = {}, 0
    while selector.get_map():
        remaining = ends - time.monotonic()
        if remaining <= 0 or total > max_chars:
            return texts, remaining <= 0
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
    return texts, False


def _feed(stream, data):
    with contextlib.suppress(OSError):
        stream.write(data)
        stream.close()
