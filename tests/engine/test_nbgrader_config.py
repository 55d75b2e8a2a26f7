"""An nbgrader course's own configuration, honoured wherever the engine reads the course, and the
engine as a drop-in for `nbgrader autograde` in nbgrader's workflow.

The course is nbgrader's quickstart course101 (plus the hidden test, data file and partial
credit of samples/nbgrader_quickstart.py) with its nbgrader_config.py as an instructor has
it when it was copied from a JupyterHub: `CourseDirectory.root` names the hub's folder, the
folders have other names (`source_directory`, `release_directory`, `submitted_directory`
under an exchange-like path, `autograded_directory`), the header notebook lives outside the
source folder, `ignore`, `include` and `max_file_size` filter the files handed in, the code
stub is the course's own, a deleted test cell is put back (`add_missing_cells`) and a
pattern of stderr is ignored (`IgnorePattern`).

Two copies of it are graded from the same submissions: one by stock `nbgrader autograde`
(given its folder as `--CourseDirectory.root`, as the engine runs every nbgrader), the other
by `python -m autograder grade COURSE`; then nbgrader's own tools
(`generate_feedback`, `export`, the formgrader's API) run on each, and what they show must
agree: every cell's score and manual-grading flag, the feedback's totals, the export.
"""

import csv
import re
import shutil
import sqlite3

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.engine import nbgrader_course
from autograder.samples import nbgrader_quickstart as quickstart
from autograder.samples.plain_nbgrader import run
from tests.engine.grading import grades, run_grader

HUB_ROOT = "/srv/nbgrader/course101"  # where the copied configuration says the course is
SETTINGS = f"""
# as copied from the hub's nbgrader_config.py
c.CourseDirectory.root = {HUB_ROOT!r}
c.CourseDirectory.course_id = "course101"
c.CourseDirectory.source_directory = "instructor"
c.CourseDirectory.release_directory = "to_students"
c.CourseDirectory.submitted_directory = "exchange/course101/submitted"
c.CourseDirectory.autograded_directory = "graded"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "scratch*"]
c.CourseDirectory.include = ["*.ipynb", "*.txt", "*.png", "*.py"]
c.CourseDirectory.max_file_size = 1
c.IncludeHeaderFooter.header = "templates/header.ipynb"
c.ClearSolutions.code_stub = {{"python": "# write your answer here\\nraise NotImplementedError()"}}
c.OverwriteCells.add_missing_cells = True
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = "^computing"
"""
SUBMITTED = "exchange/course101/submitted"
STUDENTS = (*quickstart.KINDS, "files")
# the files the student "files" hands in beside the notebooks, and whether the notebook sees them
HANDED_IN = {"own.txt": ("mine\n", True), "scratch.txt": ("ignored\n", False),
             "notes.md": ("not included\n", False), "big.txt": ("x" * 2000, False)}
LISTER = "import os\nprint('beside:', sorted(f for f in os.listdir('.') if not f.endswith('.ipynb')))"
PLOT = "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"


def make_course(folder):
    """course101 with the hub's configuration and its own folder names (see the module)."""
    course = quickstart.make_course(folder)
    (course / "source").rename(course / "instructor")
    (course / "templates").mkdir()
    (course / "instructor" / "header.ipynb").rename(course / "templates" / "header.ipynb")
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + SETTINGS)
    return course


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    """(stock's course folder, ours, our OUT) after both graded the same submissions."""
    folder = tmp_path_factory.mktemp("nbconfig")
    (folder / "made").mkdir()
    made = make_course(folder / "made")
    run(None, made, "generate_assignment", quickstart.ASSIGNMENT, "--force")
    released = {path.stem: nbformat.read(path, as_version=4)
                for path in sorted((made / "to_students" / quickstart.ASSIGNMENT).glob("*.ipynb"))}
    stock, ours = folder / "stock" / "course101", folder / "ours" / "course101"
    for copy in (stock, ours):
        shutil.copytree(made, copy)
        for kind in STUDENTS:
            notebooks = quickstart.submission(made, released, "right" if kind == "files" else kind)
            if kind == "files":
                for position, source in ((1, LISTER), (2, PLOT)):
                    cell = new_code_cell(source)
                    if notebooks["problem1"].nbformat_minor < 5:
                        del cell["id"]
                    notebooks["problem1"].cells.insert(position, cell)
            target = quickstart.write_submitted(copy / SUBMITTED, kind, notebooks,
                                                "2026-01-01 10:00:00.000000 UTC" if kind == "right" else None)
            if kind == "files":
                for name, (text, _) in HANDED_IN.items():
                    (target / name).write_text(text)
    run(None, stock, "autograde", quickstart.ASSIGNMENT, "--force")
    out = folder / "out"
    process = run_grader("--course", ours, "grade", ours, "--out", out)
    assert process.returncode == 0, process.stderr
    for course in (stock, ours):
        run(None, course, "generate_feedback", quickstart.ASSIGNMENT, "--force")
        run(None, course, "export", "--to=grades.csv")
    return stock, ours, out


def gradebook(course):
    """{student: {"<notebook>/<grade_id>": (score, needs manual grade)}} of the course's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "course101") as book:
        return {submission.student.id: {f"{notebook.name}/{grade.name}": (float(grade.score),
                                                                          bool(grade.needs_manual_grade))
                                        for notebook in submission.notebooks for grade in notebook.grades}
                for submission in book.assignment_submissions(quickstart.ASSIGNMENT)}


def test_every_students_cells_score_and_flags_equal_stock_autograde_s_in_the_gradebook(courses):
    stock, ours, _ = courses
    assert sorted(gradebook(ours)) == sorted(STUDENTS)
    assert gradebook(ours) == gradebook(stock)


def test_the_course_s_preprocessor_settings_made_a_difference_in_stock_s_grades(courses):
    # agreement would mean little if the settings changed nothing
    stock, _, _ = courses
    book = gradebook(stock)
    assert book["noisy"] == book["right"]  # IgnorePattern: its stderr is not a failure
    assert book["deleting"]["problem1/correct_squares"] == (1.0, False)  # add_missing_cells: put back
    stub = nbformat.read(stock / "to_students" / quickstart.ASSIGNMENT / "problem1.ipynb", as_version=4)
    assert any("write your answer here" in cell.source for cell in stub.cells)  # ClearSolutions.code_stub
    header = nbformat.read(stock / "templates" / "header.ipynb", as_version=4).cells[0].source
    assert stub.cells[0].source == header  # IncludeHeaderFooter.header


def test_the_gradebook_s_assignment_belongs_to_the_course_id(courses):
    _, ours, _ = courses
    rows = sqlite3.connect(ours / "gradebook.db").execute("SELECT name, course_id FROM assignment").fetchall()
    assert rows == [(quickstart.ASSIGNMENT, "course101")]


def test_the_autograded_folder_is_where_the_configuration_says_with_what_autograde_leaves(courses):
    stock, ours, _ = courses
    for course in (stock, ours):
        assert not (course / "autograded").exists()
        assert sorted(p.name for p in (course / "graded").iterdir()) == sorted(STUDENTS)
    for kind in STUDENTS:
        folder = ours / "graded" / kind / quickstart.ASSIGNMENT
        theirs = stock / "graded" / kind / quickstart.ASSIGNMENT
        assert {"problem1.ipynb", "problem2.ipynb", "jupyter.png", "data"} <= {p.name for p in folder.iterdir()}
        assert (folder / "data" / "numbers.txt").read_text() == "7\n"
        ran = nbformat.read(folder / "problem1.ipynb", as_version=4)
        stock_ran = nbformat.read(theirs / "problem1.ipynb", as_version=4)
        # the same cells, by grade id, in the same order, the header included
        ids = [nbgrader_course.nbgrader_meta(cell).get("grade_id") for cell in ran.cells]
        assert ids == [nbgrader_course.nbgrader_meta(cell).get("grade_id") for cell in stock_ran.cells], kind
    assert (ours / "graded" / "right" / quickstart.ASSIGNMENT / "timestamp.txt").is_file()


def test_the_executed_notebook_keeps_each_cell_s_outputs_as_the_kernel_left_them(courses):
    _, ours, _ = courses
    cells = {nbgrader_course.nbgrader_meta(cell).get("grade_id"): cell for cell in nbformat.read(
        ours / "graded" / "crashing" / quickstart.ASSIGNMENT / "problem1.ipynb", as_version=4).cells}
    assert [output.output_type for output in cells["squares"].outputs] == ["error"]
    assert cells["squares"].outputs[0].ename == "RuntimeError"
    for course in courses[:2]:  # a figure is kept as a kernel keeps it, under stock and under the engine
        plot = nbformat.read(course / "graded" / "files" / quickstart.ASSIGNMENT / "problem1.ipynb",
                             as_version=4).cells[2]
        assert [output.output_type for output in plot.outputs] == ["display_data"], course
        assert "image/png" in plot.outputs[0].data
    right = {nbgrader_course.nbgrader_meta(cell).get("grade_id"): cell for cell in nbformat.read(
        ours / "graded" / "right" / quickstart.ASSIGNMENT / "problem1.ipynb", as_version=4).cells}
    assert right["squares_partly"].outputs[0].data["text/plain"] == "1.5"


def test_files_handed_in_are_carried_as_the_exchange_carries_them(courses):
    # ignore (scratch*), include (no .md) and max_file_size (1 kB) decide what the notebook sees
    _, ours, _ = courses
    folder = ours / "graded" / "files" / quickstart.ASSIGNMENT
    seen = {name for name, (_, kept) in HANDED_IN.items() if kept}
    assert {name for name in HANDED_IN if (folder / name).exists()} == seen
    lister = nbformat.read(folder / "problem1.ipynb", as_version=4).cells[1]
    shown = lister.outputs[0].text
    assert "own.txt" in shown and "data" in shown and "jupyter.png" in shown
    assert not any(name in shown for name in HANDED_IN if name not in seen)


def _feedback_scores(course, student):
    """{notebook: (score, max)} as the feedback nbgrader generated shows them."""
    found = {}
    for path in sorted((course / "feedback" / student / quickstart.ASSIGNMENT).glob("*.html")):
        match = re.search(r"Score:\s*([0-9.]+)\s*/\s*([0-9.]+)", path.read_text())
        assert match, path
        found[path.stem] = (float(match[1]), float(match[2]))
    return found


@pytest.mark.parametrize("student", STUDENTS)
def test_nbgrader_generate_feedback_shows_stock_s_totals(courses, student):
    stock, ours, _ = courses
    assert _feedback_scores(ours, student) == _feedback_scores(stock, student)
    assert set(_feedback_scores(ours, student)) == {"problem1", "problem2"}


def _exported(course):
    with open(course / "grades.csv", newline="") as handle:
        return sorted(csv.DictReader(handle), key=lambda row: row["student_id"])


def test_nbgrader_export_gives_stock_s_table(courses):
    stock, ours, _ = courses
    assert _exported(ours) == _exported(stock)
    assert len(_exported(ours)) == len(STUDENTS)


def test_the_formgrader_lists_each_submission_as_stock_s(courses):
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    def listed(course):
        config = nbgrader_course.configuration(course)[0]
        api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
        keep = ("student", "autograded", "needs_manual_grade", "score", "max_score", "code_score", "written_score",
                "timestamp")
        listed = sorted(tuple(submission[k] for k in keep) for submission in api.get_submissions(quickstart.ASSIGNMENT))
        # each notebook's page of the formgrader: what needs a person, which tests failed
        keep = ("student", "needs_manual_grade", "failed_tests", "score", "max_score")
        for notebook in ("problem1", "problem2"):
            listed += sorted((notebook, *(row[k] for k in keep))
                             for row in api.get_notebook_submissions(quickstart.ASSIGNMENT, notebook))
        return listed

    stock, ours, _ = courses
    assert listed(ours) == listed(stock)
    assert all(row[1] for row in listed(ours)[:len(STUDENTS)])  # every submission shows as autograded


def test_our_own_report_agrees_with_the_gradebook(courses):
    _, ours, out = courses
    book = gradebook(ours)
    for (student, _), row in grades(out).items():
        assert float(row["score"]) == sum(score for score, _ in book[student].values())


def test_grading_the_course_again_keeps_what_did_not_change_and_writes_back_a_missing_folder(courses, tmp_path):
    _, ours, out = courses
    again, again_out = tmp_path / "course101", tmp_path / "out"
    shutil.copytree(ours, again)
    shutil.copytree(out, again_out)
    shutil.rmtree(again / "graded" / "wrong")
    (again / "gradebook.db").unlink()
    process = run_grader("--course", again, "grade", again, "--out", again_out)
    assert process.returncode == 0, process.stderr
    assert f"{len(STUDENTS) - 1} submissions already graded" in process.stderr
    assert (again / "graded" / "wrong" / quickstart.ASSIGNMENT / "problem1.ipynb").is_file()
    assert gradebook(again) == gradebook(ours)


# -- the folders of a course, and batches that hold nothing ----------------------------

def test_a_course_folder_without_submissions_is_an_error_not_two_students(tmp_path):
    course = quickstart.make_course(tmp_path)
    run(None, course, "generate_assignment", quickstart.ASSIGNMENT, "--force")
    process = run_grader("--course", course, "grade", course, "--out", tmp_path / "out")
    assert process.returncode == 2
    assert "submitted_directory" in process.stderr and "does not exist" in process.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()
    # a copy of the course without its configuration: source/ and release/ are no students either
    copy = tmp_path / "copy"
    shutil.copytree(course, copy, ignore=shutil.ignore_patterns(nbgrader_course.CONFIG_FILE))
    process = run_grader("--course", course, "grade", copy, "--out", tmp_path / "out")
    assert process.returncode == 2 and "are not students" in process.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_an_empty_batch_is_an_error(tmp_path):
    course = quickstart.make_course(tmp_path)
    (tmp_path / "empty").mkdir()
    process = run_grader("--course", course, "grade", tmp_path / "empty", "--out", tmp_path / "out")
    assert process.returncode == 2 and "no submission of ps1" in process.stderr


def test_export_to_nbgrader_overrides_the_copied_root_as_grade_does(courses, tmp_path):
    _, ours, out = courses
    database = tmp_path / "exported.db"
    process = run_grader("--course", ours, "export", out, "--to", "nbgrader", "--output", database)
    assert process.returncode == 0, process.stderr
    assert gradebook_at(database) == gradebook(ours)


def gradebook_at(path):
    folder = path.parent / "as-course"
    folder.mkdir(exist_ok=True)
    shutil.copy(path, folder / "gradebook.db")
    return gradebook(folder)


def test_an_export_that_fails_leaves_nothing_behind_and_an_existing_gradebook_as_it_was(courses, tmp_path):
    _, ours, out = courses
    broken = tmp_path / "broken"
    shutil.copytree(ours, broken, ignore=shutil.ignore_patterns("graded", "exchange", "feedback", "*.db"))
    (broken / "templates" / "header.ipynb").write_text("not a notebook")  # generate_assignment fails
    database = tmp_path / "new" / "gradebook.db"
    process = run_grader("--course", broken, "export", out, "--to", "nbgrader", "--output", database)
    assert process.returncode == 2 and "generate_assignment" in process.stderr
    assert list(database.parent.iterdir()) == []
    existing = tmp_path / "gradebook.db"
    shutil.copy(ours / "gradebook.db", existing)
    before = existing.read_bytes()
    process = run_grader("--course", broken, "export", out, "--to", "nbgrader", "--output", existing)
    assert process.returncode == 2
    assert existing.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        "gradebook.db"]


def test_a_directory_structure_other_than_nbgrader_s_default_is_refused(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.directory_structure = '{nbgrader_step}/{assignment_id}/{student_id}'\n")
    with pytest.raises(nbgrader_course.NbgraderCourseError, match="directory_structure"):
        nbgrader_course.configuration(tmp_path)


def test_the_readme_names_for_each_setting_read_a_test_that_exists():
    from tests.support import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("honours, wherever it reads the course:", 1)[1].split("\n\n", 2)[1]
    rows = [row for row in table.splitlines() if row.startswith("| `")]
    assert len(rows) >= 12
    tests = "".join(path.read_text() for path in (ROOT / "tests" / "engine").glob("test_nbgrader_*.py"))
    for row in rows:
        named = re.findall(r"`(test_\w+)`", row)
        assert named, row
        for name in named:
            assert f"def {name}(" in tests, name
