"""`python -m autograder export`: grades into Canvas, Moodle, Blackboard and nbgrader's gradebook.

The rosters in fixtures/ are laid out as each LMS exports them (see fixtures/README.md)."""

import csv
import io
from datetime import timedelta, timezone
from pathlib import Path

import pytest

from autograder.engine import course, export
from tests.support import COURSE
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.engine.grading import details, grades, run_grader

FIXTURES = Path(__file__).parent / "fixtures"
CORRECT = implementations(SLUG).CORRECT


def out_with(tmp_path, rows):
    """An OUT folder whose grades.csv holds `rows` (student, assignment, score, max, status)."""
    out = tmp_path / "out"
    out.mkdir(parents=True)
    text = "student_id,assignment,score,max_score,status\n" + "".join(
        ",".join(map(str, row)) + "\n" for row in rows)
    (out / "grades.csv").write_text(text)
    return out


def read(path, encoding="utf-8"):
    return list(csv.reader(io.StringIO(Path(path).read_text(encoding=encoding))))


@pytest.fixture
def out(tmp_path):
    return out_with(tmp_path, [("alyssa.hacker", SLUG, 6.3, 10, "graded"), ("ben.bitdiddle", SLUG, 10, 10, "graded"),
                               ("ben.bitdiddle", "bahdanau", 8, 10, "graded"), ("cy.dropped", SLUG, 5, 10, "graded")])


def test_canvas_gets_its_own_export_back_with_the_assignments_filled(out, tmp_path):
    target = tmp_path / "canvas.csv"
    process = run_grader("export", out, "--to", "canvas", "--output", target,
                         "--roster", FIXTURES / "canvas_gradebook.csv", "--allow-unmatched")
    assert process.returncode == 0, process.stderr
    rows = read(target)
    # the identity columns Canvas needs; bahdanau is new (Canvas creates it), the existing
    # column keeps its Canvas id; the read-only totals and other assignments are left out
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "bahdanau",
                       "scaled_dot_product (50234)"]
    assert rows[1] == ["    Points Possible", "", "", "", "", "10", "10.00"]
    by_login = {row[3]: row[5:] for row in rows[2:]}
    assert by_login == {"ben.bitdiddle": ["8", "10"], "alyssa.hacker": ["", "6.3"],
                        "louis.reasoner": ["", ""], "6f1c7e2a9b3d4c5e": ["", ""]}
    assert rows[2][:3] == ["Bitdiddle, Ben", "4401", "20261001"]
    assert "1 student has a result but no row in the roster (left out): cy.dropped" in process.stderr  # listed, as allowed


def test_a_result_without_a_roster_row_fails_the_export_naming_the_student(out, tmp_path):
    target = tmp_path / "canvas.csv"
    process = run_grader("export", out, "--to", "canvas", "--output", target,
                         "--roster", FIXTURES / "canvas_gradebook.csv")
    assert process.returncode == 1 and "cy.dropped" in process.stderr and "usage" not in process.stderr
    assert "'SIS Login ID' (e.g. 'ben.bitdiddle')" in process.stderr and "--allow-unmatched" in process.stderr
    assert not target.exists()  # nothing half-done to import
    with pytest.raises(export.Refused, match="cy.dropped"):
        export.export(COURSE, out, "blackboard", target, FIXTURES / "blackboard_grade_center.xls")
    assert not target.exists()


def test_ids_are_matched_ignoring_case_when_that_is_unambiguous(tmp_path):
    target = tmp_path / "canvas.csv"
    export.export(COURSE, out_with(tmp_path, [("Ben.Bitdiddle", SLUG, 9, 10, "graded")]), "canvas", target,
                  FIXTURES / "canvas_gradebook.csv")
    assert {row[3]: row[-1] for row in read(target)[2:]}["ben.bitdiddle"] == "9"
    twins = out_with(tmp_path / "twins", [("Ben.Bitdiddle", SLUG, 9, 10, "graded"), ("BEN.BITDIDDLE", SLUG, 1, 10, "graded")])
    with pytest.raises(export.Refused, match="BEN.BITDIDDLE, Ben.Bitdiddle"):
        export.export(COURSE, twins, "canvas", target, FIXTURES / "canvas_gradebook.csv")


def canvas_roster(tmp_path, points):
    """The Canvas fixture with the points possible of scaled_dot_product set to `points`."""
    text = (FIXTURES / "canvas_gradebook.csv").read_text(encoding="utf-8-sig")
    path = tmp_path / "canvas_roster.csv"
    path.write_text(text.replace("Points Possible,,,,,5.00,10.00,", f"Points Possible,,,,,5.00,{points},"))
    return path


def test_points_possible_that_differ_from_ours_fail_the_export_unless_rescaled(tmp_path):
    # a 16-point assignment, a Canvas column of 100 points: 16 would be 16 %, not full marks
    out = out_with(tmp_path, [("ben.bitdiddle", SLUG, 16, 16, "graded"), ("alyssa.hacker", SLUG, 6, 16, "graded")])
    target, roster = tmp_path / "canvas.csv", canvas_roster(tmp_path, "100.00")
    process = run_grader("export", out, "--to", "canvas", "--output", target, "--roster", roster)
    assert process.returncode == 1 and not target.exists()
    assert "scaled_dot_product has 100 in the roster, 16 here" in process.stderr and "--rescale" in process.stderr
    process = run_grader("export", out, "--to", "canvas", "--output", target, "--roster", roster, "--rescale")
    assert process.returncode == 0, process.stderr
    rows = read(target)
    assert rows[1][-1] == "100.00"  # the column keeps its points
    assert {row[3]: row[-1] for row in rows[2:]} == {"ben.bitdiddle": "100", "alyssa.hacker": "37.5",
                                                      "louis.reasoner": "", "6f1c7e2a9b3d4c5e": ""}
    assert "rescaled" in process.stderr
    export.export(COURSE, out, "canvas", target, canvas_roster(tmp_path, "16"))  # the same points: no question


def test_blackboard_points_are_checked_against_the_grade_center_column(tmp_path):
    out = out_with(tmp_path, [("ben.bitdiddle", SLUG, 16, 16, "graded")])
    target = tmp_path / "upload.csv"
    with pytest.raises(export.Refused, match="scaled_dot_product has 10 in the roster, 16 here"):
        export.export(COURSE, out, "blackboard", target, FIXTURES / "blackboard_grade_center.xls")
    export.export(COURSE, out, "blackboard", target, FIXTURES / "blackboard_grade_center.xls", rescale=True)
    assert read(target)[1] == ["ben.bitdiddle", "10"]


def test_canvas_needs_its_roster_and_the_match_column(out, tmp_path):
    process = run_grader("export", out, "--to", "canvas", "--output", tmp_path / "x.csv")
    assert process.returncode == 2 and "--roster" in process.stderr
    process = run_grader("export", out, "--to", "canvas", "--output", tmp_path / "x.csv",
                         "--roster", FIXTURES / "canvas_gradebook.csv", "--match-column", "Email")
    assert process.returncode == 2 and "no column 'Email'" in process.stderr


def test_canvas_match_column_option(out, tmp_path):
    target = tmp_path / "canvas.csv"
    by_sis_id = out_with(tmp_path / "other", [("20261002", SLUG, 7, 10, "graded")])
    export.export(COURSE, by_sis_id, "canvas", target, FIXTURES / "canvas_gradebook.csv", "SIS User ID")
    assert {row[2]: row[-1] for row in read(target)[2:]}["20261002"] == "7"


def test_moodle_gets_email_and_one_column_per_assignment(tmp_path):
    out = out_with(tmp_path, [("ben.bitdiddle@example.edu", SLUG, 10, 10, "graded"),
                              ("louis.reasoner@example.edu", "bahdanau", 3.5, 10, "graded")])
    target = tmp_path / "moodle.csv"
    export.export(COURSE, out, "moodle", target, FIXTURES / "moodle_grades.csv")
    assert read(target) == [["email", "bahdanau", SLUG], ["ben.bitdiddle@example.edu", "", "10"],
                            ["alyssa.hacker@example.edu", "", ""], ["louis.reasoner@example.edu", "3.5", ""]]
    export.export(COURSE, out, "moodle", target)  # no roster: the students of the results
    assert [row[0] for row in read(target)] == ["email", "ben.bitdiddle@example.edu", "louis.reasoner@example.edu"]


def test_moodle_with_ids_that_are_not_email_addresses_fails_and_says_what_they_must_be(out, tmp_path):
    target = tmp_path / "moodle.csv"
    process = run_grader("export", out, "--to", "moodle", "--output", target, "--roster", FIXTURES / "moodle_grades.csv")
    assert process.returncode == 1 and not target.exists()
    assert "4 students" not in process.stderr  # three students, each named
    assert "3 students have a result but no row in the roster: alyssa.hacker, ben.bitdiddle, cy.dropped" in process.stderr
    assert "'Email address' (e.g. 'ben.bitdiddle@example.edu')" in process.stderr
    process = run_grader("export", out, "--to", "moodle", "--output", target)  # no roster: Moodle would not match
    assert process.returncode == 1 and "e-mail address" in process.stderr and "alyssa.hacker" in process.stderr
    export.export(COURSE, out, "moodle", target, match_column="username")  # Moodle's username field: fine
    assert read(target)[0] == ["username", "bahdanau", SLUG] and len(read(target)) == 4


def test_moodle_says_which_maximum_each_grade_item_needs(tmp_path):
    out = out_with(tmp_path, [("ben.bitdiddle@example.edu", SLUG, 16, 16, "graded")])
    said = []
    export.export(COURSE, out, "moodle", tmp_path / "moodle.csv", log=said.append)
    assert said == ["Moodle imports the scores as they are: each grade item's maximum grade must be the "
                    "assignment's (scaled_dot_product 16)"]


def test_blackboard_upload_has_username_and_total_points_columns(out, tmp_path):
    target = tmp_path / "blackboard.csv"
    export.export(COURSE, out, "blackboard", target)
    text = target.read_text()
    assert text.splitlines()[0] == '"Username","bahdanau [Total Pts: 10]","scaled_dot_product [Total Pts: 10]"'
    assert '"ben.bitdiddle","8","10"' in text.splitlines()
    # with the Grade Center's own download (UTF-16, tab-delimited) the existing column keeps its id
    export.export(COURSE, out, "blackboard", target, FIXTURES / "blackboard_grade_center.xls", allow_unmatched=True)
    rows = read(target)
    assert rows[0] == ["Username", "bahdanau [Total Pts: 10]", "scaled_dot_product [Total Pts: 10 Score] |50304"]
    assert rows[1:] == [["ben.bitdiddle", "8", "10"], ["alyssa.hacker", "", "6.3"], ["louis.reasoner", "", ""]]


def test_unknown_format_and_missing_grades_are_refused(tmp_path):
    process = run_grader("export", tmp_path, "--to", "canvas", "--output", tmp_path / "x.csv",
                         "--roster", FIXTURES / "canvas_gradebook.csv")
    assert process.returncode == 2 and "grades.csv does not exist" in process.stderr
    process = run_grader("export", tmp_path, "--to", "sakai", "--output", tmp_path / "x.csv")
    assert process.returncode == 2 and "invalid choice" in process.stderr


# -- nbgrader: a real gradebook, read back by the real `nbgrader export` --------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Three students graded for real, one of them late with a penalty."""
    folder = tmp_path_factory.mktemp("subs")
    task, wrong, _, _ = implementations(SLUG).MISTAKES["attention-unscaled"]
    write(folder, "ada", submission(SLUG, CORRECT))
    write(folder, "bob", submission(SLUG, {}))
    write(folder, "cy", submission(SLUG, {**CORRECT, task: wrong}))
    (folder / "cy" / "timestamp.txt").write_text("2026-03-03 10:00:00.000000 UTC\n")
    (folder / "ada" / "timestamp.txt").write_text("2026-03-01 10:00:00.000000 UTC\n")
    out = tmp_path_factory.mktemp("out")
    process = run_grader("grade", folder, "--out", out, "--workers", 2, "--due", "2026-03-01T23:59:00+00:00",
                         "--late-penalty", "0.2")
    assert process.returncode == 0, process.stderr
    return out


@pytest.fixture(scope="module")
def gradebook(graded, tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "gradebook.db"
    for _ in range(2):  # updating an existing gradebook gives the same
        process = run_grader("export", graded, "--to", "nbgrader", "--output", path)
        assert process.returncode == 0, process.stderr
    return path


def test_nbgrader_export_shows_our_scores(graded, gradebook, tmp_path):
    process = course.nbgrader(COURSE, tmp_path, "export", f"--db=sqlite:///{gradebook}", timeout=600)
    assert process.returncode == 0, process.stderr
    theirs = {(row["student_id"], row["assignment"]): row for row in csv.DictReader(open(tmp_path / "grades.csv"))}
    ours = grades(graded)
    assert set(theirs) == set(ours)
    for key, row in ours.items():
        assert float(theirs[key]["score"]) == pytest.approx(float(row["score"])), key
        assert float(theirs[key]["raw_score"]) == pytest.approx(float(row["raw_score"])), key
        assert float(theirs[key]["max_score"]) == pytest.approx(float(row["max_score"])), key
    assert float(ours["cy", SLUG]["score"]) < float(ours["cy", SLUG]["raw_score"])  # the late one


def test_nbgrader_gradebook_has_our_score_for_every_check(graded, gradebook):
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{gradebook}") as book:
        assert sorted(s.id for s in book.students) == ["ada", "bob", "cy"]
        for (student, name), checks in details(graded).items():
            for check, row in checks.items():
                grade = book.find_grade(check, name, name, student)
                assert grade.score == pytest.approx(float(row["score"])), (student, check)
                assert grade.max_score == pytest.approx(float(row["max_score"]))
            submission = book.find_submission(name, student)
            assert not submission.needs_manual_grade
        assert book.find_submission(SLUG, "cy").timestamp.replace(tzinfo=timezone.utc) - (
            book.find_assignment(SLUG).duedate.replace(tzinfo=timezone.utc)) == timedelta(hours=34, minutes=1)
