"""Batches as instructors run them: archives, LMS exports, workers, shards, re-runs, interruptions."""

import shutil
import signal
import subprocess
import sys
import time
import zipfile

import pytest

from autograder.engine import grade
from autograder.engine import harness
from tests.support import COURSE
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.engine.grading import grades, max_score, run_grader

CORRECT = implementations(SLUG).CORRECT
MISTAKES = implementations(SLUG).MISTAKES


def with_mistake(name):
    task, wrong, _, _ = MISTAKES[name]
    return submission(SLUG, {**CORRECT, task: wrong})


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Six students, one assignment, each graded differently; a shared secret key."""
    folder = tmp_path_factory.mktemp("batch")
    write(folder, "ada", submission(SLUG, CORRECT))
    write(folder, "bob", submission(SLUG, {}))
    for student, mistake in zip(["cy", "dee", "eve", "fay"], implementations(SLUG).GRADED_MISTAKES * 2):
        write(folder, student, with_mistake(mistake))
    secret = tmp_path_factory.mktemp("key") / "secret.key"
    secret.write_text("ab" * 32 + "\n")
    return folder, secret


@pytest.fixture(scope="module")
def serial(batch, tmp_path_factory):
    """The batch graded by one worker: the reference outputs of the tests below."""
    folder, secret = batch
    out = tmp_path_factory.mktemp("serial")
    grade_in_process(folder, out, secret, workers=1)
    return out


def grade_in_process(folder, out, secret, **options):
    """The log of grading `folder` into `out` (in this process: the CLI is tested elsewhere)."""
    lines = []
    grade.grade(COURSE, folder, out, secret=secret, log=lines.append, **options)
    return "\n".join(lines)


def outputs(out):
    return {name: (out / name).read_text() for name in ("grades.csv", "details.csv")}


def test_parallel_workers_give_the_serial_results(batch, serial, tmp_path):
    folder, secret = batch
    grade_in_process(folder, tmp_path, secret, workers=2)
    assert outputs(tmp_path) == outputs(serial)
    assert len(grades(serial)) == 6


def test_shards_merged_give_the_unsharded_results(batch, serial, tmp_path):
    folder, secret = batch
    shards = [tmp_path / f"shard{i}" for i in (1, 2)]
    for i, shard in enumerate(shards, start=1):
        grade_in_process(folder, shard, secret, shard=(i, 2))
    sizes = [len(grades(shard)) for shard in shards]
    assert sum(sizes) == 6 and all(sizes), "each shard grades a share of the students"
    process = run_grader("merge", *shards, "--out", tmp_path / "merged")
    assert process.returncode == 0, process.stderr
    assert outputs(tmp_path / "merged") == outputs(serial)
    assert sorted(p.parent.name for p in (tmp_path / "merged" / "feedback").glob("*/*.html")) == sorted(
        p.parent.name for p in (serial / "feedback").glob("*/*.html"))


def test_a_rerun_grades_nothing_again_and_gives_the_same_results(batch, serial, tmp_path):
    folder, secret = batch
    out = tmp_path / "out"
    shutil.copytree(serial, out)
    log = grade_in_process(folder, out, secret)
    assert "6 submissions already graded" in log
    assert outputs(out) == outputs(serial)


def test_a_page_or_result_left_empty_by_a_crash_of_the_machine_is_graded_again(batch, serial, tmp_path):
    # results and pages are synced once per batch, not each: a crash of the machine itself may
    # leave the last ones empty
    folder, secret = batch
    out = tmp_path / "out"
    shutil.copytree(serial, out)
    (out / "results" / "ada" / f"{SLUG}.json").write_text("")
    next((out / "feedback").glob("bob/*.html")).write_text("")
    log = grade_in_process(folder, out, secret)
    assert "4 submissions already graded" in log
    assert outputs(out) == outputs(serial) and next((out / "feedback").glob("bob/*.html")).stat().st_size


def test_regrading_one_student_replaces_only_their_rows(batch, serial, tmp_path):
    _, secret = batch
    out = tmp_path / "out"
    shutil.copytree(serial, out)
    resubmitted = tmp_path / "resubmitted"
    write(resubmitted, "bob", submission(SLUG, CORRECT))  # bob fixed his notebook
    grade_in_process(resubmitted, out, secret)
    before, after = grades(serial), grades(out)
    assert after["bob", SLUG]["score"] == f"{max_score(SLUG):g}"
    assert {k: v for k, v in after.items() if k[0] != "bob"} == {k: v for k, v in before.items() if k[0] != "bob"}


def test_an_interrupted_run_loses_no_finished_grade_and_resumes(batch, serial, tmp_path):
    folder, secret = batch
    out = tmp_path / "out"
    command = [sys.executable, "-m", "autograder", "grade", str(folder), "--out", str(out),
               "--workers", "1", "--secret", str(secret)]
    process = subprocess.Popen(command, cwd=COURSE.root, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list(out.glob("results/*/*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)  # the instructor presses Ctrl-C
    process.wait(timeout=60)
    finished = list(out.glob("results/*/*.json"))
    assert 2 <= len(finished) < 6, "interrupted while grading"
    log = grade_in_process(folder, out, secret)
    assert f"{len(finished)} submissions already graded" in log
    assert outputs(out) == outputs(serial)


def test_a_zip_of_the_folder_grades_like_the_folder(tmp_path):
    archive = tmp_path / "class.zip"
    notebook = write(tmp_path / "class", "alice", submission(SLUG, CORRECT))
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(notebook, f"class/alice/{SLUG}.ipynb")
        zipped.writestr("../escape/evil.ipynb", "{}")
        zipped.writestr("/absolute/evil.ipynb", "{}")
        info = zipfile.ZipInfo("class/link.ipynb")
        info.external_attr = 0o120777 << 16  # a symbolic link
        zipped.writestr(info, "/etc/passwd")
    out = tmp_path / "out"
    process = run_grader("grade", archive, "--out", out)
    assert process.returncode == 0, process.stderr
    assert "evil.ipynb" in process.stderr and "link.ipynb" in process.stderr
    assert not (tmp_path / "escape").exists()
    assert [(k, r["score"], r["status"]) for k, r in grades(out).items()] == [
        (("alice", SLUG), f"{max_score(SLUG):g}", "graded")]


def test_a_learning_management_system_export_is_understood(tmp_path):
    """One file per student and attempt, the id in its name (as nbgrader zip_collect reads them)."""
    export = tmp_path / "export"
    export.mkdir()
    older = export / f"ps1_alice_attempt_2026-11-01-09-00-00_{SLUG}.ipynb"
    newer = export / f"ps1_alice_attempt_2026-11-02-09-00-00_{SLUG}.ipynb"
    shutil.copy(write(tmp_path / "tmp", "a", submission(SLUG, {})), older)
    shutil.copy(write(tmp_path / "tmp", "b", submission(SLUG, CORRECT)), newer)
    shutil.copy(newer, export / f"ps1_bob_attempt_2026-11-01-09-00-00_{SLUG}.ipynb")
    (export / "readme.ipynb").write_text("{}")
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in export.iterdir():
            zipped.write(path, path.name)
    out = tmp_path / "out"
    log = grade_in_process(archive, out, None)
    assert "readme.ipynb" in log
    full = f"{max_score(SLUG):g}"
    assert {k: r["score"] for k, r in grades(out).items()} == {("alice", SLUG): full, ("bob", SLUG): full}


def test_without_bubblewrap_grading_stops_with_a_clear_message(tmp_path):
    write(tmp_path / "class", "alice", submission(SLUG, CORRECT))
    process = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "class"),
                              "--out", str(tmp_path / "out")], cwd=COURSE.root, capture_output=True,
                             text=True, env={"PATH": str(tmp_path)}, timeout=120)  # no bwrap on PATH
    assert process.returncode == 2
    assert "bubblewrap" in process.stderr and "Traceback" not in process.stderr


def test_grading_leaves_no_secret_behind(batch, serial):
    """The checks' secret is the grader's for one submission at a time; afterwards, none."""
    assert harness.current_secret() is None
