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
    assert cells[3][0] == "1 mine too 3 InteractiveShell\n"
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
