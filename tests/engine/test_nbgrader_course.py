"""An nbgrader course is a course: the engine grades nbgrader's own quickstart course as stock
`nbgrader autograde` does, student by student and cell by cell.

The course is made by `nbgrader quickstart course101` (plus a hidden test that reads a data
file beside the notebook, and a test cell that displays partial credit); its students hand in
nbgrader's layout `submitted/<student>/ps1/<notebook>.ipynb`: right, blank, partly wrong,
crashing, test cells tampered with, code that writes to stderr (which nbgrader scores 0), a
test cell deleted (left to a person, as nbgrader leaves it), and one notebook of the two ("half").
Stock nbgrader grades them in the course's own folder; the engine grades the same folder with
`python -m autograder --course DIR grade`.
"""

import json
import sqlite3
import zipfile

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.engine import course
from autograder.engine.collect import FLAT, NBGRADER
from autograder.engine.messages import caused_by
from tests.support import ROOT
from autograder.samples import nbgrader_quickstart as quickstart
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.engine.grading import details, grades, run_grader

SUBMITTED_AT = "2026-01-01 10:00:00.000000 UTC"
MANUAL = "needs manual grading"
WRITER = "open('data/numbers.txt', 'w').write('0')"
STUDENTS = (*quickstart.KINDS, "half")
LISTER = ("import os\nprint('notebooks here:', len([f for f in os.listdir('.') if f.endswith('.ipynb')]),\n"
          "      'data:', *os.listdir('data'), 'image:', os.path.isfile('jupyter.png'))")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """(course folder, stock scores, our OUT): both graders on the same submitted/ folder."""
    folder = tmp_path_factory.mktemp("nbgrader")
    course101 = quickstart.make_course(folder)
    released = quickstart.generate(course101)
    submitted = folder / "handed-in" / "submitted"
    for kind in quickstart.KINDS:
        quickstart.write_submitted(submitted, kind, quickstart.submission(course101, released, kind),
                                   SUBMITTED_AT if kind == "right" else None)
    half = quickstart.submission(course101, released, "right")
    quickstart.write_submitted(submitted, "half", {"problem1": half["problem1"]})
    stock, _ = quickstart.autograde(course101, submitted)
    out = folder / "out"
    process = run_grader("--course", course101, "grade", submitted.parent, "--out", out)
    assert process.returncode == 0, process.stderr
    return course101, released, stock, out


def ours(out):
    """{student: {"<notebook>/<grade_id>": (score, needs manual grading)}} from details.csv."""
    return {student: {check: (float(row["score"]), row["message"].startswith(MANUAL))
                      for check, row in checks.items()}
            for (student, _), checks in details(out).items()}


@pytest.mark.parametrize("kind", STUDENTS)
def test_every_cell_scores_as_stock_nbgrader_autograde_scores_it(batch, kind):
    _, _, stock, out = batch
    assert ours(out)[kind] == stock[kind]


def test_the_batch_has_full_partial_and_zero_marks_and_cells_left_for_a_person(batch):
    # agreement would mean little if every student scored alike
    _, _, stock, _ = batch
    totals = {kind: sum(score for score, _ in cells.values()) for kind, cells in stock.items()}
    assert totals["blank"] == 0
    assert 0 < totals["wrong"] < totals["right"] and 0 < totals["noisy"] < totals["right"]
    assert totals["tampered"] < totals["right"]
    assert stock["right"]["problem1/squares_partly"][0] == 1.5  # the displayed partial credit
    assert {check for check, (_, manual) in stock["right"].items() if manual} == {
        "problem1/sum_of_squares_equation", "problem1/sum_of_squares_application",
        "problem1/cell-938593c4a215c6cc", "problem2/part-a", "problem2/part-b"}


def test_one_row_per_student_with_the_notebooks_scores_summed_and_the_maximum_of_all(batch):
    _, _, stock, out = batch
    rows = grades(out)
    assert sorted(rows) == sorted((kind, "ps1") for kind in STUDENTS)
    for kind in STUDENTS:
        assert float(rows[kind, "ps1"]["score"]) == sum(score for score, _ in stock[kind].values())
        assert float(rows[kind, "ps1"]["max_score"]) == 15  # 13 of the quickstart, 2 of the partial credit
    assert rows["tampered", "ps1"]["status"] == "invalid-structure"
    assert rows["right", "ps1"]["status"] == rows["half", "ps1"]["status"] == "graded"
    assert float(rows["half", "ps1"]["score"]) == float(rows["right", "ps1"]["score"])  # problem2: all manual


def test_the_tests_ran_as_recorded_in_source_with_their_hidden_part(batch):
    _, _, _, out = batch
    tampered = details(out)["tampered", "ps1"]
    assert tampered["problem1/correct_squares"]["score"] == "0"
    assert tampered["problem1/correct_squares"]["max_score"] == "1"  # its points as recorded, not 100
    notes = json.loads((out / "results" / "tampered" / "ps1.json").read_text())["notes"]
    assert any("locked cell `correct_squares` was edited" in note for note in notes)


def test_a_feedback_page_per_notebook_and_one_that_links_them(batch):
    _, _, _, out = batch
    index = (out / "feedback" / "right" / "ps1.html").read_text()
    assert "ps1/problem1.html" in index and "ps1/problem2.html" in index and MANUAL in index
    page = (out / "feedback" / "right" / "ps1" / "problem1.html").read_text()
    assert "correct_squares" in page and "BEGIN HIDDEN TESTS" in page  # nbgrader's tests are no secret
    assert (out / "feedback" / "right" / "ps1" / "problem2.html").is_file()


def test_timestamp_txt_beside_the_notebooks_is_the_submission_time(batch):
    _, _, _, out = batch
    result = json.loads((out / "results" / "right" / "ps1.json").read_text())
    assert result["submitted_at"] == SUBMITTED_AT


def test_the_gradebook_export_leaves_manual_grades_to_the_formgrader(batch, tmp_path):
    course101, _, stock, out = batch
    database = tmp_path / "gradebook.db"
    process = run_grader("--course", course101, "export", out, "--to", "nbgrader", "--output", database)
    assert process.returncode == 0, process.stderr
    rows = sqlite3.connect(database).execute(
        "SELECT student.id, notebook.name, cell.name, grade.auto_score, grade.needs_manual_grade "
        "FROM grade JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id "
        "JOIN notebook ON submitted_notebook.notebook_id = notebook.id "
        "JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id "
        "JOIN student ON submitted_assignment.student_id = student.id "
        "JOIN base_cell AS cell ON grade.cell_id = cell.id").fetchall()
    exported = {}
    for student, notebook, cell, auto, manual in rows:
        exported.setdefault(student, {})[f"{notebook}/{cell}"] = (auto or 0.0, bool(manual))
    assert exported == stock


def test_a_zip_of_the_submitted_folder_grades_the_same(batch, tmp_path):
    course101, _, _, out = batch
    archive = tmp_path / "submitted.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted((course101 / "submitted").rglob("*")):
            if path.is_file():
                handle.write(path, path.relative_to(course101).as_posix())
    again = tmp_path / "out"
    process = run_grader("--course", course101, "grade", archive, "--out", again)
    assert process.returncode == 0, process.stderr
    assert {key: row["score"] for key, row in grades(again).items()} == \
        {key: row["score"] for key, row in grades(out).items()}


def test_files_beside_the_notebooks_are_there_read_only_and_the_sources_are_not(batch, tmp_path):
    course101, released, _, _ = batch
    notebooks = quickstart.submission(course101, released, "right")
    notebooks["problem1"].cells[1:1] = [_cell(LISTER, notebooks["problem1"]), _cell(WRITER, notebooks["problem1"])]
    quickstart.write_submitted(tmp_path / "submitted", "writer", notebooks)
    out = tmp_path / "out"
    process = run_grader("--course", course101, "grade", tmp_path, "--out", out)
    assert process.returncode == 0, process.stderr
    assert details(out)["writer", "ps1"]["problem1/correct_squares"]["score"] == "1"  # it read 7, not 0
    page = (out / "feedback" / "writer" / "ps1" / "problem1.html").read_text()
    assert "Read-only file system" in page or "Permission denied" in page
    assert "notebooks here: 0 data: numbers.txt image: True" in page


def _cell(source, notebook):
    cell = new_code_cell(source)
    if notebook.nbformat_minor < 5:
        del cell["id"]
    return cell


def test_our_course_grades_nbgrader_s_layout_as_its_own(tmp_path):
    # the same notebook, flat and in nbgrader's layout with timestamp.txt beside it
    notebook = submission(SLUG, implementations(SLUG).CORRECT)
    write(tmp_path / "batch", "flat", notebook)
    nested = tmp_path / "batch" / "nested" / SLUG
    nested.mkdir(parents=True)
    nbformat.write(notebook, nested / f"{SLUG}.ipynb")
    (nested / "timestamp.txt").write_text(SUBMITTED_AT)
    out = tmp_path / "out"
    process = run_grader("grade", tmp_path / "batch", "--out", out)
    assert process.returncode == 0, process.stderr
    rows = grades(out)
    assert rows["nested", SLUG]["score"] == rows["flat", SLUG]["score"] == rows["flat", SLUG]["max_score"]
    assert json.loads((out / "results" / "nested" / f"{SLUG}.json").read_text())["submitted_at"] == SUBMITTED_AT


def test_a_layout_builds_the_paths_it_parses():
    assert FLAT.parse(FLAT.path(student_id="ada", assignment="ps1")) == {"student_id": "ada", "assignment": "ps1"}
    fields = {"student_id": "ada", "assignment": "ps1", "notebook": "problem1"}
    assert NBGRADER.parse(NBGRADER.path(**fields)) == fields
    assert FLAT.parse("ada/ps1/problem1.ipynb") is None and NBGRADER.parse("ada/ps1.ipynb") is None


# -- the course file -------------------------------------------------------------------

COURSE = """id = "demo"\nsource = "source"\nexercises = "exercises"\nreferences = REFS\nchecks = "demo_checks"\n"""


def _course_file(folder, text):
    path = folder / "course.toml"
    path.write_text(text)
    return path


def test_an_unknown_or_misspelt_key_is_an_error_naming_the_key_and_the_file(tmp_path):
    path = _course_file(tmp_path, COURSE.replace("REFS", '"demo"') + 'privat = ["tests"]\n')
    with pytest.raises(course.CourseError, match=r"course\.toml.*'privat'"):
        course.load(path)
    path = _course_file(tmp_path, COURSE.replace("REFS", '"demo"') + '[book]\nchapters = "x"\n')
    with pytest.raises(course.CourseError, match=r"'book\.chapters'"):
        course.load(path)


def test_references_as_a_string_or_a_list_and_toc_optional(tmp_path):
    one = course.load(_course_file(tmp_path, COURSE.replace("REFS", '"demo"')))
    assert one.references == ("demo",) and one.toc is None
    two = course.load(_course_file(tmp_path, COURSE.replace("REFS", '["demo", "more"]')))
    assert two.references == ("demo", "more")
    with pytest.raises(course.CourseError, match="'references'"):
        course.load(_course_file(tmp_path, COURSE.replace("REFS", "3")))
    with pytest.raises(course.CourseError, match="'checks'"):
        course.load(_course_file(tmp_path, COURSE.replace("REFS", '"demo"').replace('checks = "demo_checks"\n', "")))


def test_an_nbgrader_course_folder_is_a_course(batch):
    course101 = batch[0]
    loaded = course.load(course101)
    assert loaded.nbgrader and loaded.id == "course101" and loaded.source == course101 / "source"
    assert course.load(course101 / "nbgrader_config.py") == loaded


def test_without_a_toc_the_assignments_are_alphabetical(tmp_path):
    for slug in ("zeta", "alpha"):
        (tmp_path / "source" / slug).mkdir(parents=True)
        (tmp_path / "source" / slug / f"{slug}.ipynb").write_text("{}")
    assert course.assignments(course.load(_course_file(tmp_path, COURSE.replace("REFS", '"demo"')))) == ["alpha", "zeta"]


def test_the_readme_describes_every_setting_of_the_course_file():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for setting in course.SETTINGS:
        assert f"| `{setting.key}` |" in readme, setting.key
    assert "## Grading your own nbgrader course" in readme


def test_a_test_cell_names_the_student_s_cell_whose_error_left_its_name_undefined(batch):
    _, _, _, out = batch
    row = details(out)["crashing", "ps1"]["problem1/correct_sum_of_squares"]
    assert row["score"] == "0"
    assert row["message"] == ("`sum_of_squares` is not defined because your cell `sum_of_squares` raised "
                              "ModuleNotFoundError: No module named 'undefined_module_of_nobody'")


def test_a_name_error_names_a_cause_only_when_that_cell_alone_was_to_define_the_name():
    missing = {"ename": "NameError", "evalue": "name 'num_permutation' is not defined"}
    crash = {"ename": "RuntimeError", "evalue": "oops"}
    defining = "def num_permutation(n):\n    return n\nraise RuntimeError('oops')"
    assert caused_by(missing, [("your cell `combinations`", defining, crash, True)]) == (
        "`num_permutation` is not defined because your cell `combinations` raised RuntimeError: oops")
    for earlier in ([("your cell `combinations`", "x = 1", crash, True)],  # it was not to define it
                    [("your cell `combinations`", defining, None, True)],  # it did not raise
                    [("a given cell", defining, crash, False)],  # not the student's
                    [("your cell `a`", defining, crash, True),  # another cell defines it too
                     ("your cell `b`", "num_permutation = 1", None, True)]):
        assert caused_by(missing, earlier) is None, earlier
    assert caused_by(crash, [("your cell `combinations`", defining, crash, True)]) is None
