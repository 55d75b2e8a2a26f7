"""`python -m autograder student-copy DIR`: the exercises, the class edition's sources and the
README's student section; no solutions, hidden checks or instructor notebooks, and no graded
body but those an exercise's given cells hand over (the copy is searched as the class edition
is, and the search finds a planted body and a planted hidden check). Only the exercises the
term releases, and none whose given cells hold an answer of an assignment that is not closed
(issue 40)."""

import argparse
import contextlib
import dataclasses
import io
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from autograder.engine import course, reference
from autograder.engine.assignment import load
from autograder.engine.commands import student_copy
from tests.support import COURSE, EARLIER, GIVER, TAKER, course_file


def run(*args, term_file=None):
    return subprocess.run([sys.executable, "-m", "autograder", *(["--course", term_file] if term_file else []),
                           "student-copy", *map(str, args)], capture_output=True, text=True, cwd=COURSE.root,
                          timeout=300)


def run_in_process(term_course, folder, *names):
    """student-copy of `term_course` (this course with another term) into `folder`: (exit code, stderr)."""
    parser = argparse.ArgumentParser()
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            code = student_copy.run(term_course, argparse.Namespace(dir=folder, assignments=list(names)), parser)
        except SystemExit as exit:  # parser.error
            code = exit.code
    return code, stderr.getvalue()


def with_term(released=(), closed=()):
    return dataclasses.replace(COURSE, released=tuple(released), closed=tuple(closed))


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """The copy of a term that has released and closed every exercise."""
    folder = tmp_path_factory.mktemp("students") / "course"
    everything = course.assignments(COURSE)
    code, said = run_in_process(with_term(everything, everything), folder)
    assert code == 0, said
    return folder, said


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
    assert "note: the given cells of bahdanau.ipynb hold answers of rnn_encoder_decoder, closed this term" in said


def test_the_default_term_releases_nothing(tmp_path):
    assert COURSE.released == COURSE.closed == ()
    result = run(tmp_path / "copy")
    assert result.returncode == 0, result.stderr
    assert not list((tmp_path / "copy" / "exercises").iterdir())
    assert (tmp_path / "copy" / "book" / f"{TAKER}.md").is_file()


def test_only_the_released_exercises_are_copied(tmp_path):
    term = with_term([*EARLIER, GIVER, TAKER], [*EARLIER, GIVER])
    code, said = run_in_process(term, tmp_path / "copy")
    assert code == 0, said
    assert sorted(p.stem for p in (tmp_path / "copy" / "exercises").iterdir()) == sorted([*EARLIER, GIVER, TAKER])
    code, said = run_in_process(term, tmp_path / "named", "luong")
    assert code == 2 and "not released this term" in said and "luong" in said


def given_names(giver, taker):
    names = [f.name for f in reference.given(COURSE, taker) if f.assignment == giver]
    assert names  # what the refusals below rest on
    return names


@pytest.mark.parametrize("released, state", [([*EARLIER, GIVER, TAKER], "open (released, not closed)"),
                                             ([*EARLIER, TAKER], "not released")])
def test_an_exercise_that_gives_away_an_answer_not_closed_is_refused(tmp_path, released, state):
    """From the command line: exit 1, naming the exercise, the functions and the assignment (and
    nothing else: the earlier ones are closed), and nothing written."""
    result = run(tmp_path / "copy", term_file=course_file(tmp_path, released, EARLIER))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("error: ") == 1, result.stderr
    assert f"error: the exercise {TAKER} is released, but its given cells hold the bodies of " \
           f"{', '.join(given_names(GIVER, TAKER))}, the answers of the assignment {GIVER}, which is {state}" \
        in result.stderr
    assert not (tmp_path / "copy").exists()


def test_every_exercise_that_gives_away_is_named():
    refusals = student_copy.term_refusals(with_term(course.assignments(COURSE)))
    expected = {(name, f.assignment) for name in course.assignments(COURSE) for f in reference.given(COURSE, name)}
    assert len(refusals) == len(expected) > 10
    for name, giver in expected:
        assert any(f"the exercise {name} is released" in r and f"of the assignment {giver}," in r for r in refusals)


@pytest.mark.parametrize("term, error", [
    ('released = ["multi_head"]\nclosed = ["luong"]\n', "closed has luong, which released does not"),
    ('released = ["multihead"]\n', "names 'multihead', which is not an assignment"),
    ('relased = ["multi_head"]\n', "unknown key 'term.relased'"),
    ('released = "multi_head, luong"\n', "names 'multi_head, luong', which is not an assignment")])
def test_a_term_that_cannot_be_is_an_error_naming_it(tmp_path, term, error):
    path = course_file(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:text.index("[term]")] + "[term]\n" + term, encoding="utf-8")
    with pytest.raises(course.CourseError, match=re.escape(error)):
        course.load(path)


def test_private_includes_and_a_used_folder_are_refused(tmp_path):
    with pytest.raises(ValueError, match="private"):
        student_copy.included_files(COURSE, ["solutions/*.py"])
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("")
    result = run(tmp_path / "used")
    assert result.returncode == 2 and "not an empty folder" in result.stderr
