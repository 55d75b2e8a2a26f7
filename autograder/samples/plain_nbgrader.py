"""Grading a batch with plain nbgrader, as an instructor without our command would.

The course's notebooks stay valid nbgrader notebooks: `nbgrader autograde`
runs the hidden checks inside the student's kernel (with reproducible inputs,
as there is no grader secret). On honest submissions it must give the scores
that `python -m autograder grade` gives.
"""

import csv
import shutil
import time
from pathlib import Path

from nbgrader.api import Gradebook

from autograder.engine.course import make_course_dir, nbgrader


class NbgraderFailed(RuntimeError):
    """An nbgrader command exited with an error."""


def autograde(course, batch, course_dir, names):
    """Grade BATCH/<student>/<name>.ipynb for `names` of `course` with plain nbgrader in a new `course_dir`.

    The course is laid out as an instructor's (sources, generate_assignment,
    submitted/<student>/<name>/<name>.ipynb), then ONE `nbgrader autograde NAME`
    per assignment grades every student. Returns ({(student, name): {grade_id:
    score}}, seconds spent in the autograde commands).
    """
    batch, folder = Path(batch), make_course_dir(course, course_dir, names)
    for name in names:
        run(course, folder, "generate_assignment", name, "--force")
    handed_in = {}
    for path in sorted(batch.glob("*/*.ipynb")):
        student, name = path.parent.name, path.stem
        if name in names:
            target = folder / "submitted" / student / name / f"{name}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
            handed_in.setdefault(name, []).append(student)
    started = time.perf_counter()
    for name in names:
        if handed_in.get(name):
            run(course, folder, "autograde", name)
    seconds = time.perf_counter() - started
    scores = {}
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gradebook:
        for name, students in handed_in.items():
            for student in students:
                notebook = gradebook.find_submission_notebook(name, name, student)
                scores[student, name] = {grade.name: float(grade.score) for grade in notebook.grades}
    return scores, seconds


def run(course, folder, *args, timeout=1800):
    """`nbgrader ARGS` in `folder`, a course folder of `course` (None: one the engine does not know);
    raises NbgraderFailed when it fails."""
    result = nbgrader(course, folder, *args, timeout=timeout)
    if result.returncode != 0:
        raise NbgraderFailed(f"nbgrader {' '.join(args)} exited with {result.returncode}:\n{result.stderr[-3000:]}")
    return result


def our_scores(out):
    """{(student, assignment): {check: score}} from the details.csv of `python -m autograder grade`."""
    scores = {}
    with open(Path(out) / "details.csv", newline="") as file:
        for row in csv.DictReader(file):
            scores.setdefault((row["student_id"], row["assignment"]), {})[row["check"]] = float(row["score"])
    return scores


def differences(ours, plain, names=("ours", "plain nbgrader")):
    """Lines describing every submission or check cell scored differently (none when they agree)."""
    lines = []
    for key in sorted(set(ours) | set(plain)):
        student, name = key
        if key not in ours or key not in plain:
            lines.append(f"{student} {name}: graded only by {names[0] if key in ours else names[1]}")
            continue
        for check in sorted(set(ours[key]) | set(plain[key])):
            a, b = ours[key].get(check), plain[key].get(check)
            if a != b:
                lines.append(f"{student} {name} {check}: {names[0]} {a}, {names[1]} {b}")
    return lines
