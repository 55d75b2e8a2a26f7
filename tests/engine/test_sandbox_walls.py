"""The sandbox's walls, attacked from a notebook's cells and their shell commands (`os.system`, `!cmd`).

Each test runs an attack through `Sandbox` and asserts that it fails. They run as whoever runs
pytest: as root (the grader then runs the notebook as an ordinary user of its own, in namespaces
root makes) or as an ordinary user (an instructor: bubblewrap then makes user namespaces, and the
notebook runs as the instructor's own uid). An attack that works today is marked `xfail(strict)`
for the user it works for, its reason saying "hole: ..." and whether a branch fixes it.
"""

import ast
import contextlib
import os
import platform
import secrets
import signal
import socket
import time
from pathlib import Path

import pytest

from autograder.engine.sandbox import Limits, Sandbox
from tests.support import ROOT

UID = 100_000 + 99_046  # a sandbox user no grading process uses (grade.BASE_UID + pid mod 100000)
AS_ROOT = os.geteuid() == 0
AS_USER = not AS_ROOT


def run(sources, limits=Limits(cell_seconds=10), **kwargs):
    """[(stdout, stderr, error name or None)] of each cell."""
    with Sandbox([(str(i), source) for i, source in enumerate(sources)], limits=limits, uid=UID,
                 **kwargs) as sandbox:
        return [(r["stdout"], r["stderr"], r["error"] and r["error"]["ename"]) for r in sandbox.run()]


def named(comm):
    """The pids of the processes (on this machine) whose name is `comm`."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                pids.append(int(pid))
    return pids


def kill_sandbox_of(pid):
    """Kill the process `pid` (one this test started) and, if it is an orphaned bubblewrap, its parent."""
    with contextlib.suppress(OSError):
        parent = int(next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                          if line.startswith("PPid:")))
        if Path(f"/proc/{parent}/comm").read_text().strip() == "bwrap":
            os.kill(parent, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def unique(prefix="wall"):
    return prefix + secrets.token_hex(4)  # at most 15 characters: a process's name


# Makes the process `pid` run system calls (x86-64): what a notebook would do to a process it may trace.
INJECT = r'''
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss "
        "fs_base gs_base ds es fs gs").split()]
def syscalls(pid, calls):
    """Make `pid` run each (number, args...) of `calls`; their results, or OSError."""
    if platform.machine() != "x86_64":
        raise OSError("not x86-64")
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace: " + os.strerror(ctypes.get_errno()))
    os.waitpid(pid, 0x40000000)  # __WALL
    saved = Regs()
    libc.ptrace(12, pid, None, ctypes.byref(saved))  # PTRACE_GETREGS
    if libc.ptrace(1, pid, ctypes.c_void_p(saved.rip - 2), None) & 0xffff != 0x050f:  # PEEKTEXT
        libc.ptrace(17, pid, None, None)
        raise OSError("not stopped after a syscall instruction")
    results = []
    for nr, *args in calls:
        regs = Regs.from_buffer_copy(saved)
        regs.rax, regs.orig_rax, regs.rip = nr, 2 ** 64 - 1, saved.rip - 2
        for name, value in zip(("rdi", "rsi", "rdx", "r10", "r8", "r9"), args):
            setattr(regs, name, value)
        libc.ptrace(13, pid, None, ctypes.byref(regs))  # PTRACE_SETREGS
        libc.ptrace(9, pid, None, None)  # PTRACE_SINGLESTEP: the syscall instruction
        os.waitpid(pid, 0x40000000)
        libc.ptrace(12, pid, None, ctypes.byref(regs))
        results.append(ctypes.c_longlong(regs.rax).value)
    libc.ptrace(13, pid, None, ctypes.byref(saved))
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return results
'''


# -- (a) writing outside /tmp and /sandbox ---------------------------------------------------

WRITE = '''
import os
def attempt(path):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as file:
            file.write("x")
        return True
    except OSError:
        return False
print(sorted(path for path in PATHS if attempt(path)))
'''


def test_the_notebook_writes_nothing_in_the_sandbox_s_root():
    import sys
    paths = ["/etc/ld.so.preload", "/etc/passwd", "/wall-file", "/usr/wall-file", "/root/wall-file",
             f"{sys.prefix}/wall-file", f"{os.path.dirname(sys.prefix)}/wall-file", "/sandbox/runner/wall-file",
             "/tmp/wall-file", "/sandbox/wall-file"]
    cells = run([f"PATHS = {paths!r}\n" + WRITE])
    # (Python's folder lies in the sandbox's /tmp, writable, when the machine's does: a clone in mktemp -d)
    written = [path for path in ast.literal_eval(cells[0][0])
               if path == "/tmp/wall-file" or not path.startswith("/tmp/")]
    assert written == ["/sandbox/wall-file", "/tmp/wall-file"]


def test_the_notebook_writes_nothing_in_dev():
    cells = run(["PATHS = ['/dev/wall-file', '/dev/shm/wall-file', '/dev/mqueue/wall-file', '/dev/wall/x']\n" + WRITE])
    assert cells[0][0] == "[]\n"


# -- (b) reaching or influencing what the grader starts -------------------------------------

def test_an_ld_so_preload_the_notebook_plants_loads_into_no_process():
    """The grader's tools that run a shell command (unshare, prlimit, setpriv) run in the
    sandbox's mount namespace; a /etc/ld.so.preload there would load into them (the ordinary
    user's case: they run with the grader's uid, in its process and network namespaces)."""
    cells = run([
        "import os\ntry:\n    os.makedirs('/etc', exist_ok=True)\n"
        "    open('/etc/ld.so.preload', 'w').write('/tmp/wall-preloaded.so\\n')\nexcept OSError:\n    pass",
        "import os\n_ = os.system('echo ran')",
    ])
    out, err, _ = cells[1]
    assert "ran" in out and "ld.so" not in out + err


def test_the_notebook_s_environment_reaches_none_of_the_grader_s_tools():
    """The notebook's variables (sent with a shell command) are its command's, not the tools':
    LD_DEBUG logs every program that gets them (LD_PRELOAD would load a library into it), PATH
    would have the tools run the notebook's programs."""
    token = secrets.token_hex(4)
    tools = ("nsenter", "unshare", "prlimit", "setpriv", "env")
    cells = run([
        "import os\nos.makedirs('/tmp/wallbin')\n"
        f"for tool in {tools!r}:\n"
        "    path = '/tmp/wallbin/' + tool\n"
        "    open(path, 'w').write('#!/bin/sh\\necho %s >> /tmp/wall-path-used\\n' % tool)\n"
        "    os.chmod(path, 0o755)\n"
        f"os.environ.update(LD_DEBUG='files', LD_DEBUG_OUTPUT='/tmp/wall-ld-{token}', "
        "PATH='/tmp/wallbin:' + os.environ['PATH'], LD_LIBRARY_PATH='/tmp/wallbin')",
        "import os\n_ = os.system('echo ran')",
        "import os\nlogs = [open('/tmp/' + name).read() for name in os.listdir('/tmp')\n"
        "        if name.startswith('wall-ld-')]\n"
        "print(len(logs) > 0, os.path.exists('/tmp/wall-path-used'))\n"
        f"print(sorted(tool for tool in {tools!r} for log in logs if 'needed by ' + tool in log "
        "or '/' + tool + ' [0]' in log))",
    ])
    on_host = list(Path("/tmp").glob(f"wall-ld-{token}*"))
    for path in on_host:
        path.unlink()
    assert "ran" in cells[1][0]
    assert cells[2][0] == "True False\n[]\n"  # the notebook's own commands were logged; no tool's
    assert not on_host


FAKE_TOOLS = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
open('/tmp/wall-fake', 'w').write('#!/bin/sh\\nid -u > /tmp/wall-diverted\\nexec /usr/bin/true\\n')
os.chmod('/tmp/wall-fake', 0o755)
def divert(pid=None):
    """Bind the fake over the tools in the mount namespace of this process (or of `pid`, entered)."""
    if pid is not None:
        for kind, flag in (("user", 0x10000000), ("mnt", 0x20000)):
            if libc.setns(os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY), flag) != 0:
                raise OSError(ctypes.get_errno(), "setns")
    for tool in ("unshare", "prlimit", "setpriv", "env", "nsenter"):
        if libc.mount(b"/tmp/wall-fake", f"/usr/bin/{tool}".encode(), None, 0x1000, None) != 0:  # MS_BIND
            raise OSError(ctypes.get_errno(), "mount")
'''


def test_namespaces_the_notebook_makes_for_itself_divert_no_tool_of_the_grader():
    """The notebook may make a user and mount namespace of its own and mount there what it likes
    (here: its own program over the grader's tools); a shell command must not run in them."""
    cells = run([
        FAKE_TOOLS + "try:\n    assert libc.unshare(0x10000000 | 0x20000) == 0  # CLONE_NEWUSER | CLONE_NEWNS\n"
        "    divert()\n    print('diverted')\nexcept (OSError, AssertionError) as error:\n    print(error)",
        "import os\n_ = os.system('echo ran')",
        "import os\nprint(os.path.exists('/tmp/wall-diverted'))",
    ])
    assert cells[2][0] == "False\n" and "ran" in cells[1][0]


def test_the_notebook_cannot_trace_the_sandbox_s_first_process():
    """The grader's shell commands enter the namespaces of the sandbox's first process
    (bubblewrap's pid 1): a notebook that could trace it could move it into namespaces of its own.
    (As an ordinary user it may signal it, of the same uid: which only ends its own sandbox.)"""
    cells = run([INJECT + "if libc.ptrace(16, 1, None, None) == 0:  # PTRACE_ATTACH\n    os.waitpid(1, 0x40000000)\n"
                          "    libc.ptrace(17, 1, None, None)\nelse:\n    print('refused')\n"])
    assert cells[0][0] == "refused\n"


def test_the_sandbox_s_first_process_moved_into_the_notebook_s_namespaces_diverts_no_tool_of_the_grader():
    """The notebook has bubblewrap's pid 1 (whose namespaces the grader enters for a shell
    command) make a user and mount namespace, enters them, and mounts its program over the
    grader's tools there: a grader that enters them runs the notebook's program as the grader,
    in the machine's process and network namespaces (it may signal any of the grader's processes)."""
    cells = run([
        INJECT + FAKE_TOOLS + "try:\n    print(syscalls(1, [(272, 0x10000000 | 0x20000)]))  # unshare\n"
        "    uid, gid = os.getuid(), os.getgid()\n    open('/proc/1/uid_map', 'w').write(f'{uid} {uid} 1')\n"
        "    open('/proc/1/setgroups', 'w').write('deny')\n    open('/proc/1/gid_map', 'w').write(f'{gid} {gid} 1')\n"
        "    divert(1)\n    print('diverted')\nexcept OSError as error:\n    print(error)",
        "import os\n_ = os.system('echo ran')",
        "import os\nprint(os.path.exists('/tmp/wall-diverted'))",
    ])
    assert "ran" in cells[1][0] and cells[2][0] == "False\n"


def test_the_notebook_reads_not_the_grader_s_environment(monkeypatch):
    secret = secrets.token_hex(8)
    monkeypatch.setenv("WALL_GRADER_SECRET", secret)
    cells = run(["import os\nfound = []\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n"
                 "    try:\n        found.append(open(f'/proc/{pid}/environ').read())\n    except OSError:\n"
                 "        pass\nprint(any('WALL_GRADER_SECRET' in text for text in found))"])
    assert cells[0][0] == "False\n"


# -- (c) limits ------------------------------------------------------------------------------

def test_the_notebook_starts_no_process_even_in_a_user_namespace_of_its_own():
    cells = run(["import ctypes, os, threading\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                 "print(libc.unshare(0x10000000) == 0)  # CLONE_NEWUSER: root there, its limits kept\n"
                 "try:\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n    print('forked')\n"
                 "except OSError:\n    print('no process')\n"
                 "try:\n    threading.Thread(target=lambda: None).start()\n    print('thread')\n"
                 "except RuntimeError:\n    print('no thread')"])
    assert cells[0][0].split("\n")[1:] == ["no process", "no thread", ""]


def test_the_notebook_holds_no_more_memory_than_its_limit():
    limit = 512 * 1024 ** 2
    cells = run(["import os\nheld, fds = 0, []\ntry:\n    while held < 3 * %d // 2:\n"
                 "        fd = os.memfd_create('wall')\n        for _ in range(16):\n"
                 "            os.write(fd, bytes(2 ** 20))\n        fds.append(fd)\n        held += 16 * 2 ** 20\n"
                 "except (OSError, MemoryError):\n    pass\nprint(held // 2 ** 20)\nfor fd in fds:\n    os.close(fd)"
                 % limit], Limits(cell_seconds=20, memory_bytes=limit))
    assert int(cells[0][0]) * 2 ** 20 <= limit


def test_the_notebook_holds_no_more_memory_than_its_limit_in_shared_memory():
    limit = 512 * 1024 ** 2
    cells = run(["import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                 "libc.shmat.restype = ctypes.c_void_p\nheld, piece = 0, 128 * 2 ** 20\n"
                 "while held < 3 * %d // 2:\n    segment = libc.shmget(0, piece, 0o1600)  # IPC_PRIVATE, IPC_CREAT\n"
                 "    address = libc.shmat(segment, None, 0) if segment >= 0 else None\n"
                 "    if address in (None, 2 ** 64 - 1):\n        break\n"
                 "    ctypes.memset(address, 1, piece)\n    libc.shmdt(ctypes.c_void_p(address))\n    held += piece\n"
                 "print(held // 2 ** 20)" % limit], Limits(cell_seconds=20, memory_bytes=limit))
    assert int(cells[0][0]) * 2 ** 20 <= limit


def test_a_shell_command_cannot_raise_its_limits_even_in_a_user_namespace_of_its_own():
    """Its processes (a fork bomb, in a user namespace of its own where it is root), its files'
    size, its hard limits: as the grader set them. As an ordinary user, the process limit must
    count the command's processes, not all of the instructor's."""
    fork = ("import os, time\nforked = 0\ntry:\n    while forked < 50:\n        if os.fork() == 0:\n"
            "            time.sleep(3)\n            os._exit(0)\n        forked += 1\nexcept OSError:\n    pass\n"
            "print(forked)")
    cells = run([
        f"import os\nopen('/tmp/fork.py', 'w').write({fork!r})",
        "import os\n_ = os.system('python /tmp/fork.py')",
        "import os\n_ = os.system('unshare -r python /tmp/fork.py || python /tmp/fork.py')",
        "import os\n_ = os.system('head -c 20000000 /dev/zero > /tmp/big; stat -c %s /tmp/big')",
        "import os\n_ = os.system(\"unshare -r python -c 'import resource as r; r.setrlimit(r.RLIMIT_NPROC, (99, 99))' "
        "2>/dev/null && echo raised; ulimit -H -f unlimited 2>/dev/null && echo raised; echo done\")",
    ], Limits(cell_seconds=10))
    processes = Limits().shell_processes
    assert 0 < int(cells[1][0]) < processes and 0 < int(cells[2][0]) < processes
    assert int(cells[3][0]) <= Limits().file_bytes
    assert cells[4][0] == "done\n"


# -- (d) the instructor's files, other students', the network ---------------------------------

def test_the_notebook_sees_neither_the_instructor_s_files_nor_another_notebook_s(tmp_path):
    (tmp_path / "grades.csv").write_text("secret")
    other = Sandbox([("0", "open('/sandbox/wall-answer.py', 'w').write('x')\n"
                           "open('/tmp/wall-answer', 'w').write('x')")], uid=UID + 1)
    try:
        other.run()  # still running beside this one
        paths = [str(tmp_path / "grades.csv"), str(ROOT / "course.toml"), str(ROOT / "autograder"),
                 str(ROOT / "solutions"), "/sandbox/wall-answer.py", "/tmp/wall-answer", "/home", "/etc/passwd",
                 "/root/.ssh", "/run", "/var"]
        cells = run([f"import os\nprint([path for path in {paths!r} if os.path.exists(path)])",
                     "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"])
    finally:
        other.close()
    assert cells[0][0] == "[]\n"
    assert len(ast.literal_eval(cells[1][0])) <= 2  # bubblewrap's pid 1 and the notebook: no other process


def test_the_notebook_learns_no_path_of_the_machine(tmp_path):
    folder = tmp_path / "instructor-course-source"
    folder.mkdir()
    (folder / "data.csv").write_text("1,2\n")
    cells = run(["import os\ntexts = []\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n"
                 "    for name in ('cmdline', 'environ'):\n        try:\n"
                 "            texts.append(open(f'/proc/{pid}/{name}').read())\n        except OSError:\n"
                 "            pass\nprint(open('data.csv').read().strip(),\n"
                 "      any('instructor-course-source' in text for text in texts))"],
                files=[(folder / "data.csv", "data.csv")])
    assert cells[0][0] == "1,2 False\n"


def _keyctl(*args):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(*args)


@contextlib.contextmanager
def _key(keyring):
    """A key "wall-secret" of a secret value in the grader's `keyring` (-3: its session keyring, after
    this process joins one of its own; -4: its user's keyring), removed after."""
    if keyring == -3 and _keyctl(250, 1, None) < 0:  # KEYCTL_JOIN_SESSION_KEYRING, a new one
        pytest.skip("no keyrings here (keyctl refused)")
    secret = secrets.token_hex(8).encode()
    key = _keyctl(248, b"user", b"wall-secret", secret, len(secret), keyring)  # add_key
    if key < 0:
        pytest.skip("no keyrings here (add_key refused)")
    try:
        yield secret.decode()
    finally:
        _keyctl(250, 21, key)  # KEYCTL_INVALIDATE (possessed), else
        _keyctl(250, 9, key, keyring)  # KEYCTL_UNLINK: gone with its last link


READ_KEY = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def read(keyring):
    key = libc.syscall(250, 10, keyring, b"user", b"wall-secret", 0)  # KEYCTL_SEARCH
    buffer = ctypes.create_string_buffer(64)
    return buffer.value.decode() if key > 0 and libc.syscall(250, 11, key, buffer, 64) > 0 else None  # KEYCTL_READ
found = [read(-3), read(-4)]  # the session keyring, the user's
try:  # keyrings it may view (/proc/keys), linked into its session keyring: possessed, so readable
    for line in open("/proc/keys"):
        if " keyring " in line:
            libc.syscall(250, 8, int(line.split()[0], 16), -3)  # KEYCTL_LINK
    found.append(read(-3))
except OSError:
    pass
print(SECRET in found)
'''


def test_the_notebook_reads_no_key_of_the_grader_s_session_keyring():
    with _key(-3) as secret:
        cells = run([f"SECRET = {secret!r}\n" + READ_KEY])
    assert cells[0][0] == "False\n"


def test_the_notebook_reads_no_key_of_the_grader_s_user_keyring():
    with _key(-4) as secret:
        cells = run([f"SECRET = {secret!r}\n" + READ_KEY])
    assert cells[0][0] == "False\n"


def _listening():
    """A TCP server on all of this machine's addresses, and an abstract unix socket; their addresses."""
    server = socket.create_server(("0.0.0.0", 0))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet: the address a route to the world would use
            address = probe.getsockname()[0]
        except OSError:
            address = "127.0.0.1"
    unix = socket.socket(socket.AF_UNIX)
    name = "\0" + unique()
    unix.bind(name)
    unix.listen()
    return server, unix, [("127.0.0.1", server.getsockname()[1]), (address, server.getsockname()[1])], name


REACH = '''
import socket
reached = []
for address in ADDRESSES:
    try:
        socket.create_connection(tuple(address), timeout=2).close()
        reached.append(address[0])
    except OSError:
        pass
try:
    with socket.socket(socket.AF_UNIX) as unix:
        unix.connect(NAME)
        reached.append('unix')
except OSError:
    pass
print(reached)
'''


def test_the_notebook_reaches_no_network_nor_a_socket_of_the_machine():
    server, unix, addresses, name = _listening()
    with server, unix:
        cells = run([f"ADDRESSES, NAME = {addresses!r}, {name!r}\n" + REACH])
    assert cells[0][0] == "[]\n"


def test_a_shell_command_reaches_no_network_nor_a_socket_of_the_machine():
    server, unix, addresses, name = _listening()
    with server, unix:
        script = f"ADDRESSES, NAME = {addresses!r}, {name!r}\n" + REACH
        cells = run([f"open('/tmp/reach.py', 'w').write({script!r})",
                     "import os\n_ = os.system('python /tmp/reach.py')"])
    assert cells[1][0] == "[]\n"


# -- (e) nothing outlives the sandbox --------------------------------------------------------

def test_no_process_of_the_notebook_outlives_its_sandbox():
    name = unique()
    cells = run([INJECT + "import atexit, signal, time\ntry:\n"
                 "    print(syscalls(1, [(157, 1, 0)]))  # prctl(PR_SET_PDEATHSIG, 0)\n"
                 "except OSError as error:\n    print(error)\n"
                 f"libc.prctl(1, 0, 0, 0, 0)\nlibc.prctl(15, {name.encode()!r}, 0, 0, 0)  # PR_SET_NAME\n"
                 "for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):\n"
                 "    signal.signal(number, signal.SIG_IGN)\n"
                 "atexit.register(time.sleep, 600)"])
    time.sleep(0.5)
    left = named(name)
    for pid in left:
        kill_sandbox_of(pid)
    assert cells[0][2] is None and not left


def test_no_process_of_a_shell_command_outlives_it():
    name = unique()
    started = time.monotonic()
    cells = run([
        f"import os\n_ = os.system('cp /usr/bin/sleep /tmp/{name}; echo > /tmp/wall-started; "
        f"exec setsid /tmp/{name} 600 < /dev/null > /dev/null 2>&1')",
        "import os\nprint(os.path.exists('/tmp/wall-started'))",
    ], Limits(cell_seconds=2, wall_factor=2))
    time.sleep(0.5)
    left = named(name)
    for pid in left:
        kill_sandbox_of(pid)
    assert cells[1][0] == "True\n" and time.monotonic() - started < 30
    assert not left
