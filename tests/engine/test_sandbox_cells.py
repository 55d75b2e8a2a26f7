"""The sandbox runs a notebook's cells as IPython does, without importing IPython unless the
notebook needs it, and without `site` (whose .pth files would import the course's finder)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.engine.sandbox import Limits, Sandbox, shell
from tests.engine import as_user
from tests.support import ROOT

UID = 100_000 + 99_001  # a sandbox user no grading process uses (grade.BASE_UID + pid mod 100000)


def run(sources):
    """[(stdout, error name or None)] of each cell, and the functions the notebook reported."""
    with Sandbox([(str(i), source) for i, source in enumerate(sources)], uid=UID) as sandbox:
        results = sandbox.run()
        return [(r["stdout"], r["error"] and r["error"]["ename"]) for r in results], sorted(sandbox.functions)


def test_plain_python_runs_without_ipython_or_site_as_ipython_would():
    cells, functions = run([
        "import sys\nprint('IPython' in sys.modules, sys.flags.no_site, __name__)",
        "x = 40\nx + 2",                            # a last expression is displayed
        "from __future__ import annotations\ndef f(a: Later) -> int:\n    return 1",
        "def g(a: AlsoLater):\n    return 2",     # the __future__ import holds in later cells
        "import pickle\nclass Point:\n    pass\nprint(len(pickle.dumps(Point())) > 0)",  # __main__ is the notebook
        "import sys\nsys.exit(3)",                  # caught, as IPython does; the notebook goes on
        "1 / 0",
        "print('IPython' in sys.modules)",
    ])
    assert cells == [("False 1 __main__\n", None), ("42\n", None), ("", None), ("", None), ("True\n", None),
                     ("", "SystemExit"), ("", "ZeroDivisionError"), ("False\n", None)]
    assert functions == ["Point", "f", "g"]


def test_a_cell_that_needs_ipython_gets_it_and_keeps_the_notebook():
    cells, functions = run([
        "def mine():\n    return 1\nIn = 'mine too'",
        "%time y = 2",                              # a magic: IPython from here on
        "    z = y + 1",                            # an indented cell, as IPython accepts it
        "print(mine(), In, z, type(get_ipython()).__name__)",
    ])
    assert [error for _, error in cells] == [None] * 4
    assert cells[3][0] == "1 mine too 3 KernelShell\n"  # a kernel's shell (kernel_shell)
    assert functions == ["mine"]  # not get_ipython, exit, quit, open: IPython's own names


def test_get_ipython_hooks_apply_to_the_cells_after():
    cells, functions = run([
        "def double(lines):\n    return [line.replace('1', '2') for line in lines]\n"
        "get_ipython().input_transformers_cleanup.append(double)",
        "print(1)",
    ])
    assert cells[1] == ("2\n", None)
    assert functions == ["double"]


def test_an_exception_says_the_students_line_and_the_inputs_of_the_call_that_raised():
    """A visible check (a course cell) calls the student's function, which raises: the error names
    the line of their cell that raised and the call's inputs (shapes and values), never a line of
    the course's cells; a call by the grader gets the line only (its inputs are the hidden checks')."""
    import numpy as np
    import pytest

    own = ("import numpy as np\n\ndef attend(Q, chunk_size, scale=None):\n    total = Q.sum(-1)\n"
           "    return Q + np.ones((chunk_size, chunk_size))")
    with Sandbox([("0", own), ("1", "Q = np.zeros((2, 10, 4))\nattend(Q, chunk_size=4)")], uid=UID) as sandbox:
        sandbox.places = {"0": "your answer cell of task “Attend”", "1": "the check cell of task “Attend”"}
        sandbox.own_cells = ["0"]
        error = sandbox.run()[1]["error"]
        assert error["ename"] == "ValueError"
        assert error["place"] == ("line 5 of attend in your answer cell of task “Attend”: "
                                  "return Q + np.ones((chunk_size, chunk_size))")
        assert error["inputs"] == "attend(Q: array (2, 10, 4) float64, chunk_size=4, scale=None)"
        with pytest.raises(ValueError, match=r"; at line 5 of attend in your answer cell") as raised:
            sandbox.functions["attend"](np.zeros((3, 3, 3)), 4)
        assert "array" not in str(raised.value)


def test_in_ipython_s_shell_too_an_exception_says_the_students_line_and_the_call_s_inputs():
    """A notebook that needs IPython (a magic) runs its cells in the kernel's shell: they are compiled
    under their own names there too, so the error's place is found as on the plain-Python path."""
    own = "def attend(Q, chunk_size):\n    total = Q.sum()\n    return Q + np.ones((chunk_size, chunk_size))"
    with Sandbox([("0", "%config InlineBackend.figure_format = 'png'\nimport numpy as np"), ("1", own),
                  ("2", "attend(np.zeros((2, 10, 4)), chunk_size=4)")], uid=UID) as sandbox:
        sandbox.places = {"1": "your answer cell of task “Attend”", "2": "the check cell of task “Attend”"}
        sandbox.own_cells = ["1"]
        error = sandbox.run()[2]["error"]
    assert error["ename"] == "ValueError"
    assert error["place"] == ("line 3 of attend in your answer cell of task “Attend”: "
                              "return Q + np.ones((chunk_size, chunk_size))")
    assert error["inputs"] == "attend(Q: array (2, 10, 4) float64, chunk_size=4)"


def test_in_jupyter_a_failed_call_of_the_notebooks_function_says_on_what_and_where():
    """The check helpers' handler of Jupyter's exceptions (cells are files of no folder there, their
    lines in linecache): the traceback, then which call failed, on what, and the line that raised."""
    import contextlib
    import io
    import linecache

    import numpy as np

    from autograder.engine import checking

    namespace = {"np": np}
    for name, source in (("<cell 1>", "def attend(Q, chunk_size):\n    return Q + np.ones((chunk_size, chunk_size))\n"),
                         ("<cell 2>", "attend(np.zeros((2, 10, 4)), chunk_size=4)\n")):
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        try:
            exec(compile(source, name, "exec"), namespace)
        except ValueError as error:
            caught = error
    shown = []

    class Shell:
        def showtraceback(self, exc_tuple, tb_offset=None):
            shown.append(exc_tuple[0])

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        checking._explain(Shell(), ValueError, caught, caught.__traceback__)
        checking._explain(Shell(), checking.CheckFailed, checking.CheckFailed("x"), None)
    assert shown == [ValueError, checking.CheckFailed]
    assert printed.getvalue() == ("ValueError raised in attend(Q: array (2, 10, 4) float64, chunk_size=4), at line 2 "
                                  "of attend: return Q + np.ones((chunk_size, chunk_size))\n")


# -- shell escapes ------------------------------------------------------------------------

def outputs(sources, limits=Limits(cell_seconds=5)):
    """[(stdout, stderr, error name or None)] of each cell."""
    with Sandbox([(str(i), source) for i, source in enumerate(sources)], limits=limits, uid=UID) as sandbox:
        return [(r["stdout"], r["stderr"], r["error"] and r["error"]["ename"]) for r in sandbox.run()]


def test_a_shell_command_runs_in_the_notebook_s_folders_as_its_user_without_network():
    cells = outputs([
        "%%writefile made_by_python.txt\nfrom python",
        "!cat made_by_python.txt; echo from the shell > made_by_shell.txt; id -u",
        "print(open('made_by_shell.txt').read())",
        "!ls /sandbox | grep -cx runner; tail -n +3 /proc/net/dev | cut -d: -f1",
        f"!ls -A {ROOT}; ls {ROOT / 'autograder' / 'checks'} {ROOT / 'solutions'} 2>&1 | grep -c 'No such file'",
        "!python -c 'import sys; print(sys.prefix == \"%s\")'" % sys.prefix,
        "import os\nprint(os.system('echo from os.system; exit 3') >> 8)",
    ])
    # as root, the sandbox's own user; as an ordinary user, the user (in a user namespace)
    assert cells[1] == (f"from python\r\n{UID if os.geteuid() == 0 else os.geteuid()}\r\n", "", None)
    assert cells[2][0] == "from the shell\n\n"
    assert cells[3][0].split() == ["1", "lo"]  # the notebook's files; no network but loopback
    listed = (f"{Path(sys.prefix).name}\r\n" if ROOT in Path(sys.prefix).parents  # a worktree's venv is elsewhere
              else f"ls: cannot access '{ROOT}': No such file or directory\r\n")
    assert cells[4][0] == f"{listed}2\r\n"  # the environment, nothing of the course
    assert cells[5][0] == "True\r\n"
    assert cells[6][0] == "from os.system\n3\n"  # the notebook's process starts none itself


def test_a_shell_command_is_stopped_with_its_cell_and_none_of_its_processes_outlives_it():
    started = time.monotonic()
    cells = outputs([
        "%%bash\ncp /usr/bin/sleep /tmp/shell-cheat-sleeper\n(setsid /tmp/shell-cheat-sleeper 600 &)\n"
        "nohup /tmp/shell-cheat-sleeper 600 > /dev/null 2>&1 &\necho started",
        "!sleep 600",
        "print('the next cell runs')",
    ], Limits(cell_seconds=2, wall_factor=2))
    assert cells[0] == ("started\n", "", None)
    assert cells[1][2] == "CellTimeout" and cells[2] == ("the next cell runs\n", "", None)
    assert time.monotonic() - started < 30
    assert not [pid for pid in filter(str.isdigit, os.listdir("/proc")) if (_name(pid) or "").startswith("shell-cheat")]


def _name(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def test_a_shell_command_has_few_processes_and_a_share_of_the_memory():
    cells = outputs([
        "%%bash\npython - <<'END'\nimport os, time\nforked = 0\ntry:\n    while forked < 50:\n"
        "        if os.fork() == 0:\n            time.sleep(3)\n            os._exit(0)\n        forked += 1\n"
        "except OSError:\n    pass\nprint(forked)\nEND",
        "!python -c 'bytearray(600 * 2 ** 20)' 2>&1 | tail -n 1",
    ], Limits(cell_seconds=10, memory_bytes=2 * 1024 ** 3))
    assert 0 < int(cells[0][0]) < Limits().shell_processes  # beside bash and python (and the notebook)
    assert cells[1][0] == "MemoryError\r\n"  # 512 MB each of 4 processes


def test_a_check_s_call_runs_no_shell_command():
    with Sandbox([("0", "def shell_out(x):\n    return get_ipython().getoutput('echo ' + str(x))")],
                 uid=UID) as sandbox:
        sandbox.run()
        with pytest.raises(RuntimeError, match="only in the notebook's cells"):
            sandbox.functions["shell_out"](1)


def test_the_sandbox_is_read_only_but_tmp_and_the_notebook_s_folder():
    # as an ordinary user, bubblewrap's / is a tmpfs of the user's: without `--remount-ro /`, a
    # notebook could write /etc/ld.so.preload, which the tools that run its shell commands read
    refused = ["os.makedirs('/etc')", "open('/etc/ld.so.preload', 'w')", "open('/x', 'w')", "open('/usr/x', 'w')",
               "open('/dev/x', 'w')", "open('/proc/sys/kernel/hostname', 'w')", "open('/proc/sysrq-trigger', 'w')"]
    allowed = ["open('/tmp/x', 'w')", "open('./x', 'w')", "open('/sandbox/y', 'w')"]
    code = ("import os\nfor attempt in %r:\n    try:\n        exec(attempt)\n        print('written', attempt)\n"
            "    except OSError:\n        pass" % (refused + allowed))
    cells = outputs([code, "!for f in /etc /x /usr/x /dev/x /proc/x; do mkdir $f 2>/dev/null && echo $f; done; "
                           "touch /tmp/y ./z && echo both"])
    assert cells[0] == ("".join(f"written {attempt}\n" for attempt in allowed), "", None)
    assert cells[1] == ("both\r\n", "", None)


# A notebook that moves bubblewrap's first process (as an ordinary user, the user's own: it may
# ptrace it, here on x86-64) to user and mount namespaces of its own; the grader's tools, root
# there, would run in its mounts (its /etc/ld.so.preload), in the host's pid and network
# namespaces.
MOVE_FIRST = r'''import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class Registers(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base "
        "ds es fs gs").split()]
moved = None
if libc.ptrace(16, 1, None, None) == 0:  # PTRACE_ATTACH bubblewrap's first process (pid 1 here)
    os.waitpid(1, 0)
    saved, registers = Registers(), Registers()
    libc.ptrace(12, 1, None, ctypes.byref(saved))
    ctypes.memmove(ctypes.byref(registers), ctypes.byref(saved), ctypes.sizeof(saved))
    with open("/proc/1/mem", "rb") as memory:
        for line in open("/proc/1/maps"):
            span, permissions = line.split()[:2]
            if "x" in permissions:
                start, end = (int(part, 16) for part in span.split("-"))
                memory.seek(start)
                found = memory.read(end - start).find(b"\x0f\x05")  # a syscall instruction
                if found >= 0:
                    break
    registers.rip, registers.rax, registers.orig_rax = start + found, 272, 2 ** 64 - 1  # unshare(2)
    registers.rdi = 0x10000000 | 0x00020000  # CLONE_NEWUSER | CLONE_NEWNS
    libc.ptrace(13, 1, None, ctypes.byref(registers))
    libc.ptrace(9, 1, None, None)  # PTRACE_SINGLESTEP
    os.waitpid(1, 0)
    libc.ptrace(12, 1, None, ctypes.byref(registers))
    moved = registers.rax == 0
    libc.ptrace(13, 1, None, ctypes.byref(saved))
    libc.ptrace(17, 1, None, None)
print(moved)
print(os.readlink("/proc/self/ns/user"))'''


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the notebook's ptrace is x86-64's")
def test_a_shell_command_enters_the_namespaces_of_the_sandbox_as_it_started():
    cells = outputs([MOVE_FIRST, "!readlink /proc/self/ns/user"])
    moved, runner = cells[0][0].split()
    assert moved == "None"  # ptrace is refused (the seccomp filter; as root, the process is root's too)
    assert cells[1] == (f"{runner}\r\n", "", None)


@pytest.mark.skipif(os.geteuid() == 0, reason="as root, bubblewrap's first process is root's: no ptrace")
def test_bubblewrap_s_first_process_has_next_to_nothing_that_a_notebook_could_use():
    # as an ordinary user, a notebook may run code in it (MOVE_FIRST): beyond the runner's limits
    cells = outputs(["print(open('/proc/1/limits').read())"])
    limits = {line[:26].strip(): line[26:].split()[:2] for line in cells[0][0].splitlines()[1:]}
    assert {name: limits[name] for name in ("Max address space", "Max processes", "Max cpu time",
                                            "Max file size")} == {
        "Max address space": [str(64 * 1024 ** 2)] * 2, "Max processes": ["1", "1"], "Max cpu time": ["2", "2"],
        "Max file size": ["0", "0"]}


def test_without_user_namespaces_of_its_own_a_shell_command_fails_saying_why():
    # a setuid bubblewrap makes the sandbox's namespaces in ours (here: processes of ours, a
    # first one with a child): an ordinary user may not enter its mounts
    popen = subprocess.Popen(["sh", "-c", "sh -c 'sleep 30 & wait' & wait"], start_new_session=True)
    try:
        found = shell.namespaces(popen, time.monotonic() + 10)
    finally:
        os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
    assert isinstance(found, shell.Unavailable) and "setuid" in str(found)


@pytest.mark.skipif(os.geteuid() != 0, reason="root makes the machine without user namespaces")
def test_an_ordinary_user_on_a_machine_without_user_namespaces_is_told_what_to_do():
    """(as_user: a user namespace of root's, whose limit of user namespaces is 0)"""
    check = [sys.executable, "-c", "from autograder.engine.sandbox import check_available; check_available()"]
    result = subprocess.run(as_user.without_user_namespaces(as_user.command(check)), capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 1
    said = result.stderr.strip().splitlines()[-1]
    assert "bubblewrap cannot start a sandbox here: bwrap: Creating new namespace failed" in said
    assert "needs unprivileged user namespaces" in said and "or grade as root" in said
