"""`python -m autograder student-copy DIR`: the exercises, the class edition's sources and the
README's student section; no solutions, hidden checks or instructor notebooks, and no graded
body but those an exercise's given cells hand over (the copy is searched as the class edition
is, and the search finds a planted body and a planted hidden check)."""

import shutil
import subprocess
import sys

import nbformat
import pytest

from autograder.engine import course, reference
from autograder.engine.assignment import load
from autograder.engine.commands import student_copy
from tests.support import COURSE


def run(*args):
    return subprocess.run([sys.executable, "-m", "autograder", "student-copy", *map(str, args)],
                          capture_output=True, text=True, cwd=COURSE.root, timeout=300)


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("students") / "course"
    result = run(folder)
    assert result.returncode == 0, result.stderr
    return folder, result.stderr


def test_the_copy_holds_what_students_need_and_nothing_private(copy):
    folder, _ = copy
    assert sorted(p.name for p in (folder / "exercises").iterdir()) == sorted(
        f"{name}.ipynb" for name in course.assignments(COURSE))
    for name in course.assignments(COURSE):
        assert (folder / "book" / f"{name}.md").is_file()
    assert (folder / "README.md").read_text().startswith("# For students\n")
    assert not (folder / "solutions").exists() and not (folder / "autograder").exists()
    assert not list(folder.rglob("*.py")) or all("_ext" in p.parts for p in folder.rglob("*.py"))


def test_no_graded_body_and_no_hidden_check_is_in_the_copy(copy):
    """Searched independently of the command: every file, every graded body's distinctive
    lines; an exercise notebook may hold only the bodies its given cells list."""
    folder, _ = copy
    lines = reference.distinctive_lines(COURSE)
    hidden = [line.strip() for name in course.assignments(COURSE) for test in load(COURSE, name).tests
              for line in test.hidden.splitlines() if len(line.strip()) >= 20]
    assert hidden
    for path in (p for p in folder.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        given = set(reference.given(COURSE, path.stem)) if path.suffix == ".ipynb" else set()
        assert reference.leaked(text, {f: lines[f] for f in lines if f not in given}) == [], path
        assert not [line for line in hidden if line in text], path
    # the exercise's own answers are stubs in its notebook, never given
    for name in course.assignments(COURSE):
        own = set(reference.graded(COURSE, name))
        assert not own & set(reference.given(COURSE, name))


def test_the_search_finds_a_planted_body_and_a_planted_hidden_check(copy, tmp_path):
    folder, _ = copy
    planted = tmp_path / "planted"
    shutil.copytree(folder, planted)
    function = reference.graded(COURSE, "luong")[0]
    (planted / "book" / "notes.md").write_text("A student's notes:\n\n" + function.source())
    notebook = nbformat.read(planted / "exercises" / "luong.ipynb", as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(load(COURSE, "luong").tests[0].hidden))
    nbformat.write(notebook, planted / "exercises" / "luong.ipynb")
    found = {(path.name, what.split(" (")[0]) for path, what in student_copy.leaks(COURSE, planted)}
    assert found == {("notes.md", f"the body of {function.name}, graded in luong"),
                     ("luong.ipynb", "a hidden check")}


def test_the_instructor_is_told_which_exercises_hand_over_earlier_answers(copy):
    _, said = copy
    assert "note: the given cells of bahdanau.ipynb hold answers of rnn_encoder_decoder" in said


def test_private_includes_and_a_used_folder_are_refused(tmp_path):
    with pytest.raises(ValueError, match="private"):
        student_copy.included_files(COURSE, ["solutions/*.py"])
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("")
    result = run(tmp_path / "used")
    assert result.returncode == 2 and "not an empty folder" in result.stderr
