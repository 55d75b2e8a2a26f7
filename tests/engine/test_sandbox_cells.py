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
