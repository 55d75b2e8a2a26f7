"""IPython's magics and shell escapes run in the engine's sandbox as in a Jupyter kernel under
stock `nbgrader autograde`: same scores, same outputs.

An nbgrader course of one notebook uses each built-in magic a course may use (%matplotlib
inline, %pylab, %config, %load_ext autoreload, %timeit, %time, %%capture, %env, %who,
%%writefile, %run, !cmd, x = !cmd, %%bash, %%sh, %system, ?, input(), %cd, %matplotlib qt),
with test cells that depend on them. Stock nbgrader grades two students (right, blank) in the
course's folder; the engine grades the same folder. Scores must be equal cell by cell; the
outputs of every code cell must be of the same kinds, with the same text where it is
deterministic (not %timeit's times) and a PNG wherever stock has one.
"""

import json
import shutil
import textwrap

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.engine import nbgrader_course
from autograder.engine.nbgrader_course import kernel
from autograder.engine.sandbox import Sandbox
from autograder.samples.plain_nbgrader import run
from tests.engine.grading import details, run_grader

NAME = "magics"
UID = 100_000 + 99_002  # a sandbox user no grading process uses


def _cell(source, grade_id=None, points=None, solution=False, locked=None):
    cell = new_code_cell(textwrap.dedent(source).strip("\n"))
    if grade_id:
        cell.metadata["nbgrader"] = {"grade": points is not None, "grade_id": grade_id,
                                     "locked": bool(locked if locked is not None else not solution),
                                     "schema_version": 3, "solution": solution,
                                     **({"points": points} if points is not None else {})}
    return cell


CELLS = [
    _cell("%matplotlib inline\nimport matplotlib.pyplot as plt\nimport numpy as np", "imports", locked=True),
    _cell("%who"),
    _cell("%config InlineBackend.figure_format = 'png'\n%load_ext autoreload\n%autoreload 2"),
    _cell("%%writefile helper.py\ndef double(x):\n    return 2 * x\n"),
    _cell("%run helper.py\ndouble(21)"),
    _cell("import helper\nhelper.double(2)"),
    _cell("%timeit -n1 -r1 sum(range(10))"),
    _cell("%time total = sum(range(10))\ntotal"),
    _cell("%%capture captured\nprint('hidden')"),
    _cell("captured.stdout"),
    _cell("%env GREETING=hello"),
    _cell("!echo $GREETING from the shell"),
    _cell("lines = !printf 'a\\nb\\n'\nlines"),
    _cell("%%bash\necho bash out\necho bash err >&2"),
    _cell("%%sh\necho sh out"),
    _cell("%system echo system"),
    _cell("len?"),
    _cell("fig, ax = plt.subplots()\nax.plot([1, 2, 3]);"),
    _cell("""
        def double_all(xs):
            ### BEGIN SOLUTION
            return [2 * x for x in xs]
            ### END SOLUTION
        """, "answer", solution=True),
    _cell("assert double(21) == 42 and helper.double(1) == 2", "test_run", 1),
    _cell("assert lines == ['a', 'b']", "test_getoutput", 1),
    _cell("assert captured.stdout == 'hidden\\n'", "test_capture", 1),
    _cell("plt.plot([0, 1])\nassert len(plt.get_fignums()) == 1", "test_figure_drawn", 1),
    _cell("assert plt.get_fignums() == [], 'figures are closed once drawn'", "test_figures_closed", 1),
    _cell("%%bash\necho a test that writes to stderr >&2", "test_stderr", 1),
    _cell("answer = input('your name? ')", "test_input", 1),
    _cell("import os\nassert os.environ['GREETING'] == 'hello'", "test_env", 1),
    _cell("!test -f helper.py\nassert _exit_code == 0", "test_shell_status", 1),
    _cell("assert double_all([1, 2]) == [2, 4]", "test_answer", 2),
    _cell("%pylab inline\nx = linspace(0, 1, 3)\nplot(x, x);"),
    _cell("assert list(x) == [0, 0.5, 1]", "test_pylab", 1),
    _cell("%matplotlib qt"),
    _cell("%cd /tmp\n%pwd"),
]
KERNELS = {"xpy": {"name": "xpython", "display_name": "Python 3.11 (XPython)", "language": "python"},
           "rstats": {"name": "ir", "display_name": "R", "language": "R"}}
KERNEL_TEST = "assert x == 1"
NONDETERMINISTIC = ("%timeit", "%time ")  # times: the same kinds of output, not the same text


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """(stock's {student: {grade_id: score}}, stock's executed notebooks, our details, course)."""
    course = tmp_path_factory.mktemp("kernel") / "course"
    (course / "source" / NAME).mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.course_id = {NAME!r}\n")
    source = new_notebook(cells=CELLS, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(source, course / "source" / NAME / f"{NAME}.ipynb")
    for name, kernelspec in KERNELS.items():  # graded by the engine only (stock: NoSuchKernel)
        (course / "source" / name).mkdir()
        nbformat.write(new_notebook(cells=[_cell("x = 1"), _cell(KERNEL_TEST, "test", 1)],
                                    metadata={"kernelspec": kernelspec}), course / "source" / name / f"{name}.ipynb")
    for name in (NAME, *KERNELS):
        run(None, course, "generate_assignment", name, "--force")
    for name in KERNELS:
        (course / "submitted" / "right" / name).mkdir(parents=True)
        shutil.copy(course / "release" / name / f"{name}.ipynb", course / "submitted" / "right" / name)
    released = nbformat.read(course / "release" / NAME / f"{NAME}.ipynb", as_version=4)
    for student in ("right", "blank"):
        notebook = released
        if student == "right":
            notebook = nbformat.read(course / "release" / NAME / f"{NAME}.ipynb", as_version=4)
            answer = next(c for c in notebook.cells if nbgrader_course.nbgrader_meta(c).get("grade_id") == "answer")
            answer.source = "def double_all(xs):\n    return [2 * x for x in xs]"
        folder = course / "submitted" / student / NAME
        folder.mkdir(parents=True)
        nbformat.write(notebook, folder / f"{NAME}.ipynb")
    run(None, course, "autograde", NAME, "--force")
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        stock = {student: {grade.name: float(grade.score)
                           for grade in gradebook.find_submission_notebook(NAME, NAME, student).grades}
                 for student in ("right", "blank")}
    executed = {student: nbformat.read(course / "autograded" / student / NAME / f"{NAME}.ipynb", as_version=4)
                for student in ("right", "blank")}
    out = course.parent / "out"
    process = run_grader("--course", course, "grade", course / "submitted", "--out", out)
    assert process.returncode == 0, process.stderr
    return stock, executed, details(out), course


@pytest.mark.parametrize("student", ["right", "blank"])
def test_every_test_cell_scores_as_under_stock_nbgrader(graded, student):
    stock, _, ours, _ = graded
    assert {check.split("/")[-1]: float(row["score"]) for check, row in ours[student, NAME].items()} == stock[student]


def test_the_magics_decide_points_both_ways(graded):
    stock = graded[0]["right"]
    assert stock["test_run"] == stock["test_getoutput"] == stock["test_figures_closed"] == stock["test_pylab"] == 1
    assert stock["test_stderr"] == stock["test_input"] == 0  # stderr scores 0; no stdin to answer
    assert graded[0]["blank"]["test_answer"] == 0 < stock["test_answer"]


def _merged(outputs):
    """Consecutive stream outputs of one stream as one (a kernel flushes them when it likes)."""
    merged = []
    for output in outputs:
        if merged and output["output_type"] == "stream" == merged[-1]["output_type"] \
                and output["name"] == merged[-1]["name"]:
            merged[-1] = {**merged[-1], "text": merged[-1]["text"] + output["text"]}
        else:
            merged.append(dict(output))
    return merged


def _kinds(output):
    if output["output_type"] == "stream":
        return ("stream", output["name"])
    if output["output_type"] == "error":
        return ("error", output["ename"])
    return (output["output_type"], tuple(sorted(output.get("data", {}))))


def _text(output):
    if output["output_type"] == "stream":
        return output["text"]
    if output["output_type"] == "error":
        return output["ename"]
    text = output.get("data", {}).get("text/plain", "")
    return "" if " at 0x" in text else text  # an object's address


def test_every_cell_has_the_outputs_a_kernel_gives(graded):
    _, executed, _, course = graded
    submitted = nbformat.read(course / "submitted" / "right" / NAME / f"{NAME}.ipynb", as_version=4)
    spec = nbgrader_course.load(course, NAME).notebooks[0]
    cells, _ = nbgrader_course.sanitize(course, spec, submitted)
    with Sandbox([(str(i), c.source) for i, c in enumerate(cells) if c.cell_type == "code"], uid=UID,
                 files=nbgrader_course.load(course, NAME).files) as sandbox:
        ours = {int(result["id"]): _merged(result["outputs"]) for result in sandbox.run()}
    theirs = [_merged(cell.outputs) for cell in executed["right"].cells]
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or cell.source.startswith("%cd"):
            continue
        where = f"cell {index}: {cell.source.splitlines()[0]}"
        assert [_kinds(o) for o in ours[index]] == [_kinds(o) for o in theirs[index]], where
        if not cell.source.startswith(NONDETERMINISTIC):
            assert [_text(o) for o in ours[index]] == [_text(o) for o in theirs[index]], where
    images = [i for i, outputs in ours.items() if any("image/png" in o.get("data", {}) for o in outputs)]
    assert len(images) == 3  # the plot's, the test's, %pylab's (and the kinds above match stock's)
    cd = next(i for i, c in enumerate(cells) if c.source.startswith("%cd"))
    assert [_text(o) for o in ours[cd]] == ["/tmp\n", "'/tmp'"]


def test_a_python_kernel_of_another_name_is_graded_with_python_and_the_notes_say_so(graded):
    _, _, ours, course = graded
    assert ours["right", "xpy"]["test"]["score"] == "1"
    notes = json.loads((course.parent / "out" / "results" / "right" / "xpy.json").read_text())["notes"]
    assert any("kernel `xpython`" in note and "graded with" in note for note in notes), notes
    notes = json.loads((course.parent / "out" / "results" / "right" / f"{NAME}.json").read_text())["notes"]
    assert not any("kernel" in note for note in notes)  # python3: nothing to say


def test_a_notebook_in_another_language_gets_a_status_and_the_batch_goes_on(graded):
    _, _, ours, course = graded
    row = ours["right", "rstats"]["test"]
    assert row["score"] == "0" and "kernel runs r" in row["message"] and "Python notebooks only" in row["message"]
    grades = (course.parent / "out" / "grades.csv").read_text()
    assert "right,rstats,0,1,unsupported-kernel" in grades and "right,magics," in grades


@pytest.mark.parametrize("kernelspec, language_info, language, noted", [
    ({"name": "python3", "language": "python"}, "python", "python", False),
    ({}, "", "python", False),                                          # none: nbgrader's default
    ({"name": "xpython", "language": "python"}, "", "python", True),
    ({"name": "my-course-venv", "display_name": "venv"}, "", "python", True),  # a venv's, no language
    ({"name": "my-course-venv"}, "python", "python", True),
    ({"name": "ir", "language": "R"}, "", "r", False),
    ({"name": "julia-1.9", "display_name": "Julia 1.9.0"}, "", "julia-1.9", False),
    ({"name": "julia-1.9"}, "julia", "julia", False),
    ({"name": "bash"}, "", "bash", False),
])
def test_the_kernel_s_language_decides(kernelspec, language_info, language, noted):
    spec = nbgrader_course.Notebook("n", (), {}, (), {}, kernelspec, language_info)
    found, note = kernel(spec, new_notebook())
    assert found == language and bool(note) == noted


def test_the_feedback_page_shows_the_figures(graded):
    course = graded[3]
    pages = "".join(path.read_text() for path in (course.parent / "out" / "feedback" / "right").rglob("*.html"))
    assert pages.count("<img alt='a figure of the cell' src='data:image/png;base64,iVBOR") == 3
