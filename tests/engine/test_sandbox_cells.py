"""The sandbox runs a notebook's cells as IPython does, without importing IPython unless the
notebook needs it, and without `site` (whose .pth files would import the course's finder)."""

from autograder.engine.sandbox import Sandbox

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
