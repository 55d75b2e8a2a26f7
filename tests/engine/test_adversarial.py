"""Grades that student code cannot forge: one batch of cheaters among honest students.

Each cheater (tests/engine/adversarial.py) hands in a wrong solution plus
one trick. For each: it earns no point the same solution without the trick
does not earn, the batch completes, every other student's grade is what it
is when graded without the cheaters, nothing outside OUT is written, and the
report says what happened (a status for crashes and limits, a flag for the
tricks that can be seen in the code).
"""

import csv
import hashlib
import os
import re
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.engine import grade, results, sandboxes
from autograder.engine.sandbox import Limits
from tests.support import COURSE, ROOT
from tests.engine import adversarial
from tests.engine.adversarial import ALL_CHEATS, CACHE_SLUG, HONEST, HONEST_UNSTABLE, SLUG
from autograder.samples.submissions import write

MEMORY_MB = 512
LIMITS = Limits(cell_seconds=5, call_seconds=5, submission_seconds=20, memory_bytes=MEMORY_MB * 2 ** 20)
OPTIONS = ["--workers", "2", "--cell-timeout", "5", "--submission-timeout", "20", "--memory", str(MEMORY_MB)]

SLUGS = (SLUG, CACHE_SLUG)


@dataclass
class Batch:
    folder: Path
    out: Path
    returncode: int
    log: str
    results: dict       # (student, assignment) -> Result
    submissions: dict   # the submissions folder before grading: relative path -> sha256
    submissions_after: dict
    git_before: str
    git_after: str

    def feedback(self, student, slug=SLUG):
        return (self.out / "feedback" / student / f"{slug}.html").read_text()


def digests(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def git_status():
    return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout


def results_in(out):
    return {(r.student_id, r.assignment): r for r in results.load_results(COURSE, out)}


@pytest.fixture(scope="module")
def secret(tmp_path_factory):
    """One key for every run here, so that a student's checks get the same inputs in each."""
    path = tmp_path_factory.mktemp("secret") / "secret.key"
    path.write_text(secrets.token_hex(32) + "\n")
    return path


@pytest.fixture(scope="module")
def batch(tmp_path_factory, secret):
    """Grade the honest students and every cheater in one batch, with the command line."""
    folder = tmp_path_factory.mktemp("submissions")
    for student, (slug, notebook) in HONEST.items():
        write(folder, student, notebook(), slug)
    for cheat in ALL_CHEATS:
        write(folder, cheat.student, adversarial.notebook(cheat), cheat.slug)
    before, git_before = digests(folder), git_status()
    out = tmp_path_factory.mktemp("out")
    process = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(folder), "--out", str(out),
         "--secret", str(secret), *OPTIONS],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    return Batch(folder, out, process.returncode, process.stderr, results_in(out), before,
                 digests(folder), git_before, git_status())


def grade_in_process(tmp_path, secret, notebooks, workers=1):
    """Grade {student: (slug, notebook)} with the grader's API, as one batch of their own."""
    folder, out = tmp_path / "submissions", tmp_path / "out"
    for student, (slug, notebook) in notebooks.items():
        write(folder, student, notebook, slug)
    grade.grade(COURSE, folder, out, workers=workers, secret=secret, limits=LIMITS, log=lambda _: None)
    return results_in(out)


@pytest.fixture(scope="module")
def alone(tmp_path_factory, secret):
    """The honest students graded by themselves, without the cheaters."""
    return grade_in_process(tmp_path_factory.mktemp("alone"), secret,
                            {student: (slug, notebook()) for student, (slug, notebook) in HONEST.items()})


def check_scores(result):
    return {check.name: check.score for check in result.checks}


# -- the batch ----------------------------------------------------------------------

def test_the_batch_completes_with_a_row_per_submission(batch):
    assert batch.returncode == 0, batch.log
    students = set(HONEST) | {cheat.student for cheat in ALL_CHEATS}
    rows = list(csv.DictReader(open(batch.out / "grades.csv")))
    assert sorted((r["student_id"], r["assignment"]) for r in rows) == sorted(
        (student, slug) for student in students for slug in SLUGS)
    # a result and a feedback page per submission, and nothing else in OUT
    written = {str(p.relative_to(batch.out)) for p in batch.out.rglob("*") if p.is_file()}
    expected = {"grades.csv", "details.csv", "summary.html"}
    for student in students:
        for slug in SLUGS:
            expected |= {f"results/{student}/{slug}.json", f"feedback/{student}/{slug}.html"}
    assert written == expected


# Whether greedy_decode uses its cache is counted where it runs, in the student's process: code
# there can hide its work from the count. Outputs cannot tell (the cache must give the same
# tokens), so this one property is not decided outside; the trick is flagged for the instructor.
@pytest.mark.parametrize("cheat", ALL_CHEATS, ids=lambda cheat: cheat.name)
def test_no_trick_earns_a_point(batch, cheat):
    result, deserved = batch.results[cheat.student, cheat.slug], batch.results[cheat.honest, cheat.slug]
    assert result.max_score == deserved.max_score
    earned = check_scores(result)
    assert earned.keys() == check_scores(deserved).keys()
    undeserved = {name: score for name, score in earned.items() if score > check_scores(deserved)[name]}
    assert not undeserved, f"{cheat.trick}: {result.checks}"


@pytest.mark.parametrize("cheat", ALL_CHEATS, ids=lambda cheat: cheat.name)
def test_the_report_says_what_happened(batch, cheat):
    result = batch.results[cheat.student, cheat.slug]
    assert result.status in cheat.status, (result.status, result.notes)
    if cheat.note:
        assert any(cheat.note in note for note in result.notes), result.notes
    if cheat.flag:
        assert any(cheat.flag in flag for flag in result.flags), result.flags
    if cheat.message:
        checked = next(check for check in result.checks if check.name == cheat.check_cell)
        assert cheat.message in checked.message, checked.message


@pytest.mark.parametrize("cheat", [c for c in ALL_CHEATS if c.against_visible_checks and c.code],
                         ids=lambda cheat: cheat.name)
def test_tricks_against_the_visible_checks_get_past_them_and_the_hidden_checks_stop_them(batch, cheat):
    """Not the grader's test but the tricks': without this, they might just not work."""
    honest = next(c for c in batch.results[HONEST_UNSTABLE, SLUG].checks if c.name == "test_softmax")
    tricked = next(c for c in batch.results[cheat.student, SLUG].checks if c.name == "test_softmax")
    assert honest.message.startswith("softmax([1e4, 1e4])")  # the visible check that fails
    assert tricked.score == 0 and tricked.message.startswith("softmax on scores around 1e4"), tricked


@pytest.mark.parametrize("student", sorted(HONEST))
def test_honest_grades_do_not_depend_on_the_cheaters(batch, alone, student):
    slug = HONEST[student][0]
    graded_with, graded_alone = batch.results[student, slug], alone[student, slug]
    assert (graded_with.status, graded_with.checks, graded_with.notes) == (
        graded_alone.status, graded_alone.checks, graded_alone.notes)


def test_nothing_outside_the_output_folder_is_written(batch):
    assert batch.submissions_after == batch.submissions  # no notebook changed, none added
    assert batch.git_after == batch.git_before
    # Files the cheaters name freely are cheat-marker-*; anything a notebook creates belongs to
    # its sandbox's user. (The machine's temporary folder only at its top: running sandboxes of
    # other batches live below it.)
    places = [(ROOT, 10), (batch.folder, 10), (batch.out, 10), (Path.home(), 1),
              (Path(tempfile.gettempdir()), 0)]
    planted = [path for place, depth in places for path in _files(place, depth)
               if "cheat-marker" in path.name or _by_a_sandbox(path)]
    assert not planted


def _files(place, depth):
    """Files and folders under `place`, down to `depth` folders below it, not in .git."""
    for folder, subfolders, files in os.walk(place):
        level = len(Path(folder).relative_to(place).parts)
        yield from (Path(folder, name) for name in subfolders + files)
        subfolders[:] = [s for s in subfolders if s != ".git" and level < depth]


def _by_a_sandbox(path):
    try:
        return path.lstat().st_uid in range(sandboxes.BASE_UID, sandboxes.BASE_UID + 64)
    except OSError:
        return False


def test_no_process_of_a_notebook_outlives_the_batch(batch):
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if name.startswith("cheat-"):
            left.append((pid, name))
    assert not left


def test_a_notebook_cannot_hold_more_memory_than_its_limit_in_other_processes(batch):
    page = batch.feedback("submitted-cheat-memory-in-children")
    said = re.findall(r"cheat-held-(\d+)-MB-in-\d+-other-processes \((\d+) of (\d+) answered\)", page)
    assert said, "the trick did not get to say what it held"
    held, answered, started = map(int, said[0])
    assert answered == started, "its processes were too slow to say whether they held their memory"
    assert held <= MEMORY_MB, f"beside the notebook, its other processes held {held} MB"


def test_a_later_run_finds_nothing_an_earlier_run_saved(batch, tmp_path, secret):
    cheat = next(c for c in ALL_CHEATS if c.name == "previous-inputs")
    again = grade_in_process(tmp_path, secret, {cheat.student: (SLUG, adversarial.second_attempt(cheat))})
    result = again[cheat.student, SLUG]
    page = (tmp_path / "out" / "feedback" / cheat.student / f"{SLUG}.html").read_text()
    found = re.findall(r"found (\d+) inputs saved by an earlier run", page)
    assert found == ["0"]
    assert result.score <= batch.results[cheat.honest, SLUG].score


def test_a_malformed_message_does_not_stop_a_batch_graded_by_one_worker(tmp_path, secret):
    cheat = next(c for c in ALL_CHEATS if c.name == "malformed-message")
    graded = grade_in_process(tmp_path, secret, {cheat.student: (SLUG, adversarial.notebook(cheat))})
    result = graded[cheat.student, SLUG]
    assert result.status == "crashed" and result.score == 0
    assert any("malformed message" in note for note in result.notes), result.notes
