"""Batches of honest submissions: what students who do not cheat hand in.

Each submission is one of an assignment's honest variants: the correct
implementations of `tests/course/implementations/<slug>.py`, the untouched
exercise, or the correct ones with one of its GRADED_MISTAKES.
"""

import json
import statistics
from functools import cache
from pathlib import Path

from tests.engine.grading import implementations, write
from tests.conftest import submission


@cache
def variants(slug):
    """[(label, notebook)]: "correct", "unchanged", then each graded mistake of `slug`."""
    students = implementations(slug)
    honest = [("correct", submission(slug, students.CORRECT)), ("unchanged", submission(slug, {}))]
    for mistake in students.GRADED_MISTAKES:
        task, wrong, _, _ = students.MISTAKES[mistake]
        honest.append((mistake, submission(slug, {**students.CORRECT, task: wrong})))
    return honest


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


def time_per_notebook(out):
    """One line: where a notebook's time went, medians over OUT/results:
    sandbox start (bubblewrap, the interpreter), imports (NumPy; IPython only for a notebook that
    needs it, in its cells), cells, hidden checks."""
    phases = {}
    for path in sorted(Path(out).glob("results/*/*.json")):
        for phase, seconds in json.loads(path.read_text()).get("seconds", {}).items():
            phases.setdefault(phase, []).append(seconds)
    medians = {phase: statistics.median(values) for phase, values in phases.items()}
    total = sum(medians.values()) or 1.0
    return "time per notebook (medians): " + ", ".join(
        f"{phase} {seconds:.3f} s ({seconds / total:.0%})" for phase, seconds in medians.items())
