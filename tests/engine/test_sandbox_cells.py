"""The sandbox runs a notebook's cells as IPython does, without importing IPython unless the
notebook needs it, and without `site` (whose .pth files would import the course's finder)."""

import os
import sys
import time
from pathlib import Path

import pytest

from autograder.engine.sandbox import Limits, Sandbox
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
        "!ls /sandbox | grep -c sandbox_runner; tail -n +3 /proc/net/dev | cut -d: -f1",
        f"!ls -A {ROOT}; ls {ROOT / 'autograder' / 'checks'} {ROOT / 'solutions'} 2>&1 | grep -c 'No such file'",
        "!python -c 'import sys; print(sys.prefix == \"%s\")'" % sys.prefix,
        "import os\nprint(os.system('echo from os.system; exit 3') >> 8)",
    ])
    assert cells[1] == (f"from python\r\n{UID}\r\n", "", None)
    assert cells[2][0] == "from the shell\n\n"
    assert cells[3][0].split() == ["1", "lo"]  # the notebook's files; no network but loopback
    assert cells[4][0] == f"{Path(sys.prefix).name}\r\n2\r\n"  # the environment, nothing of the course
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
