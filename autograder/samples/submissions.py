"""Student notebooks made from the released exercises and the sample implementations."""

import importlib
import inspect
import textwrap
from functools import cache
from pathlib import Path

import nbformat

from autograder.engine import course

COURSE = course.load(Path(__file__).resolve().parents[2] / "course.toml")  # this course
SLUG = "scaled_dot_product"  # the assignment of the samples that are about grading, not content


def implementations(slug):
    """The module of right and wrong implementations of `slug` (`CORRECT`, `MISTAKES`, ...)."""
    return importlib.import_module(f"{__package__}.implementations.{slug}")


def submission(slug, answers):
    """The student notebook of `slug` with solution cells replaced.

    `answers` maps a task (the grade_id of its solution cell, which is also
    the function's name) to a function whose source goes into that cell,
    renamed to the task, as a student would have typed it.
    """
    notebook = nbformat.read(COURSE.exercises / f"{slug}.ipynb", as_version=4)
    for cell in notebook.cells:
        task = cell.metadata.get("nbgrader", {}).get("grade_id")
        if task in answers:
            function = answers[task]
            source = textwrap.dedent(inspect.getsource(function))
            cell.source = source.replace(f"def {function.__name__}(", f"def {task}(", 1).strip()
    return notebook


def write(folder, student, notebook_or_text, slug=SLUG):
    """FOLDER/<student>/<slug>.ipynb, the flat layout of a batch; its path."""
    path = folder / student / f"{slug}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(notebook_or_text, str):
        path.write_text(notebook_or_text)
    else:
        nbformat.write(notebook_or_text, path)
    return path


@cache
def variants(slug):
    """[(label, notebook)] of honest students: "correct", "unchanged", each graded mistake of `slug`
    (the correct implementations with that one mistake), then "unfinished-E" for every earlier task E
    that a later one uses (E as released beside right later tasks, which keep their points)."""
    students = implementations(slug)
    honest = [("correct", submission(slug, students.CORRECT)), ("unchanged", submission(slug, {}))]
    for mistake in students.GRADED_MISTAKES:
        task, wrong, _, _ = students.MISTAKES[mistake]
        honest.append((mistake, submission(slug, {**students.CORRECT, task: wrong})))
    for task in used_by_later_tasks(slug):
        honest.append((f"unfinished-{task}", submission(slug, {t: f for t, f in students.CORRECT.items() if t != task})))
    return honest


def used_by_later_tasks(slug):
    """The graded functions of `slug` that another one's reference calls (and whose stand-ins judge it)."""
    from autograder.engine import standins
    from autograder.engine.recording import exercise_of

    exercise = exercise_of(COURSE, slug)
    graded = frozenset(function.__name__ for function in exercise.graded) if exercise else frozenset()
    used = set().union(*(standins.reached(task.reference, graded) - {task.name} for task in exercise.tasks)) \
        if exercise else set()
    return [task.name for task in exercise.tasks if task.name in used] if exercise else []


def write_batch(folder, students, slugs):
    """`students` students, each with one submission per slug; return {(student, slug): label}.

    Student k hands in variant k (shifted by the slug's position, so that a
    student is not correct or wrong everywhere at once): every variant occurs,
    and the same arguments always give the same batch.
    """
    labels = {}
    for k in range(students):
        student = f"student-{k + 1:03d}"
        for shift, slug in enumerate(slugs):
            options = variants(slug)
            label, notebook = options[(k + shift) % len(options)]
            write(folder, student, notebook, slug)
            labels[student, slug] = label
    return labels
