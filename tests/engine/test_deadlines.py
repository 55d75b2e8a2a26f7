"""Late submissions: started days, penalty, cap, extensions, times from nbgrader and LMS exports."""

import csv
import shutil
from datetime import datetime, timedelta, timezone

import pytest

from autograder.engine import deadlines, reports
from tests.support import COURSE
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.engine.grading import max_score, run_grader

CORRECT = implementations(SLUG).CORRECT
DUE = datetime(2026, 3, 1, 23, 59, tzinfo=timezone(timedelta(hours=1)))


def test_times_need_a_zone_except_submission_times_which_nbgrader_reads_as_utc():
    assert deadlines.parse_time("2026-03-01T23:59:00+01:00") == DUE
    assert deadlines.parse_time("2026-03-01T22:59:00Z") == DUE
    with pytest.raises(ValueError, match="no time zone"):
        deadlines.parse_time("2026-03-01T23:59:00")
    with pytest.raises(ValueError, match="not an ISO 8601 time"):
        deadlines.parse_time("next Friday")
    utc = datetime(2026, 3, 1, 22, 59, tzinfo=timezone.utc)
    assert deadlines.parse_time("2026-03-01 22:59:00.000000 UTC", assume_utc=True) == utc  # timestamp.txt
    assert deadlines.parse_time("2026-03-01-22-59-00", assume_utc=True) == utc  # nbgrader's export names
    assert deadlines.parse_time("2026-03-01T22:59:00", assume_utc=True) == utc


@pytest.mark.parametrize("late, days", [(timedelta(0), 0), (timedelta(seconds=-5), 0), (timedelta(seconds=1), 1),
                                        (timedelta(days=1), 1), (timedelta(days=1, seconds=1), 2),
                                        (timedelta(days=6, hours=1), 7)])
def test_any_lateness_counts_as_started_days(late, days):
    policy = deadlines.Policy(DUE, penalty=0.1, cap=0.5)
    lateness = deadlines.assess(policy, "ada", (DUE + late).isoformat())
    assert lateness.late_days == days
    assert lateness.factor == pytest.approx(1 - min(0.1 * days, 0.5))


def test_an_extension_moves_the_deadline_of_one_student_only():
    policy = deadlines.Policy(DUE, penalty=0.25, extensions={"bob": DUE + timedelta(days=3)})
    handed_in = (DUE + timedelta(days=2)).isoformat()
    assert deadlines.assess(policy, "bob", handed_in).late_days == 0
    assert deadlines.assess(policy, "ada", handed_in).late_days == 2


def test_no_time_or_an_unreadable_one_is_not_guessed():
    policy = deadlines.Policy(DUE, penalty=0.5)
    for text in ("", "sometime on Sunday"):
        lateness = deadlines.assess(policy, "ada", text)
        assert (lateness.submitted_at, lateness.late_days, lateness.factor) == (None, None, 1.0)


def test_bad_policies_and_extension_files_say_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="must lie in"):
        deadlines.Policy(DUE, penalty=1.5)
    path = tmp_path / "extensions.csv"
    path.write_text("student_id,due\nada,2026-03-04T12:00:00\n")
    with pytest.raises(ValueError, match="line 2: .*no time zone"):
        deadlines.read_extensions(path)
    path.write_text("student,until\n")
    with pytest.raises(ValueError, match="student_id,due"):
        deadlines.read_extensions(path)


def test_describe_rounds_up_to_the_minute():
    assert deadlines.describe(timedelta(days=2, hours=3, seconds=1)) == "2 days 3 h 1 min"
    assert deadlines.describe(timedelta(0)) == "0 min"


@pytest.fixture(scope="module")
def late_batch(tmp_path_factory):
    """Folder students with nbgrader's timestamp.txt, an LMS export file, one without a time."""
    folder = tmp_path_factory.mktemp("late")
    stamps = {"on-time": DUE - timedelta(hours=1), "two-days": DUE + timedelta(days=1, hours=2),
              "extended": DUE + timedelta(days=2), "very-late": DUE + timedelta(days=30)}
    for student, moment in stamps.items():
        write(folder, student, submission(SLUG, CORRECT))
        utc = moment.astimezone(timezone.utc)
        (folder / student / "timestamp.txt").write_text(utc.strftime("%Y-%m-%d %H:%M:%S.%f UTC") + "\n")
    write(folder, "no-time", submission(SLUG, CORRECT))
    lms_time = (DUE + timedelta(minutes=30)).astimezone(timezone.utc).strftime("%Y-%m-%d-%H-%M-%S")
    path = write(folder, "tmp", submission(SLUG, CORRECT))
    path.rename(folder / f"ps1_lmsstudent_attempt_{lms_time}_{SLUG}.ipynb")
    (folder / "tmp").rmdir()
    extensions = tmp_path_factory.mktemp("ext") / "extensions.csv"
    extensions.write_text(f"student_id,due\nextended,{(DUE + timedelta(days=3)).isoformat()}\n")
    out = tmp_path_factory.mktemp("out")
    process = run_grader("grade", folder, "--out", out, "--workers", 2, "--due", DUE.isoformat(),
                         "--extensions", extensions, "--late-penalty", "0.1", "--late-cap", "0.5")
    assert process.returncode == 0, process.stderr
    rows = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    return out, rows


def test_grades_gain_the_deadline_columns_after_status(late_batch):
    out, _ = late_batch
    assert open(out / "grades.csv").readline().strip() == (
        "student_id,assignment,score,max_score,status,submitted_at,late_days,raw_score")


@pytest.mark.parametrize("student, days, kept", [("on-time", 0, 1.0), ("two-days", 2, 0.8), ("extended", 0, 1.0),
                                                 ("very-late", 30, 0.5), ("lmsstudent", 1, 0.9)])
def test_penalty_is_per_started_day_up_to_the_cap(late_batch, student, days, kept):
    _, rows = late_batch
    row, full = rows[student], max_score(SLUG)
    assert (row["status"], row["late_days"], row["raw_score"]) == ("graded", str(days), f"{full:g}")
    assert float(row["score"]) == pytest.approx(full * kept)
    assert deadlines.parse_time(row["submitted_at"])  # a time with its zone


def test_a_submission_without_a_time_is_reported_not_guessed(late_batch):
    out, rows = late_batch
    row = rows["no-time"]
    assert (row["status"], row["submitted_at"], row["late_days"]) == ("no-time", "", "")
    assert row["score"] == row["raw_score"] == f"{max_score(SLUG):g}"
    assert "no-time" in (out / "summary.html").read_text()


def test_summary_shows_who_was_late_and_by_how_much(late_batch):
    out, _ = late_batch
    page = (out / "summary.html").read_text()
    late_part = page[page.index("<h2>Late ("):page.index("<h2>No submission time")]
    assert "<h2>Late (3 submissions of 3 students)</h2>" in page
    for student, by in (("two-days", "1 day 2 h"), ("very-late", "30 days"), ("lmsstudent", "30 min")):
        assert student in late_part and by in late_part
    assert "on-time" not in late_part and "extended" not in late_part


def test_shards_keep_the_deadline_when_merged(late_batch, tmp_path):
    out, _ = late_batch
    merged = tmp_path / "merged"
    reports.merge(COURSE, [out], merged)
    assert (merged / "grades.csv").read_text() == (out / "grades.csv").read_text()


def test_a_deadline_without_a_zone_is_refused(tmp_path):
    process = run_grader("grade", tmp_path, "--out", tmp_path / "out", "--due", "2026-03-01T23:59")
    assert process.returncode == 2 and "no time zone" in process.stderr


def test_the_student_page_says_when_it_was_handed_in_and_what_it_cost(late_batch):
    out, _ = late_batch
    page = (out / "feedback" / "two-days" / f"{SLUG}.html").read_text()
    assert "1 day 2 h after the deadline" in page and "2 started days late, 20 % off" in page
    assert f"Your score: {0.8 * max_score(SLUG):g} / {max_score(SLUG):g}" in page
    assert "on time" in (out / "feedback" / "on-time" / f"{SLUG}.html").read_text()
    assert "No time of handing in" in (out / "feedback" / "no-time" / f"{SLUG}.html").read_text()


def test_regrading_without_a_deadline_clears_it_from_the_pages(late_batch, tmp_path):
    out, _ = late_batch
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    (copy / deadlines.POLICY_FILE).unlink()
    reports.write_reports(COURSE, copy)
    page = (copy / "feedback" / "two-days" / f"{SLUG}.html").read_text()
    assert "after the deadline" not in page and "<!--deadline--><!--/deadline-->" in page
    assert open(copy / "grades.csv").readline().strip() == "student_id,assignment,score,max_score,status"
