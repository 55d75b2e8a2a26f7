"""Plain `nbgrader autograde` still grades the course's notebooks, and agrees with our command.

Instructors may grade with nbgrader alone. On honest submissions (correct,
untouched, one plausible mistake) it must give every check cell the score that
`python -m autograder grade` gives. The mistakes are chosen where the two
graders work differently: a check that probes the student's earlier functions
(RNN greedy decoding) and one that hands the student's function caches built
by the reference (the key/value cache step), in the kernel for nbgrader,
through the sandbox, as plain data, for us.
"""

import os
import signal
import subprocess
import sys

import nbformat
import pytest

from tests.support import COURSE
from autograder.samples import plain_nbgrader
from autograder.samples.submissions import variants, write

# Two assignments keep the test near a minute: each nbgrader command starts in about 6 s.
# `python -m benchmarks.grading` compares the graders on every assignment and mistake.
MISTAKE = {"rnn_encoder_decoder": "greedy-includes-bos",
           "transformer_decoder": "step-forgets-past"}
# An earlier task left as released beside right later ones that use it: its check cells alone lose
# points, in the student's kernel too (the later cells' visible checks answer from the recorded
# answers, or say "Not checked yet" and leave the points to the hidden checks).
EARLIER = {"rnn_encoder_decoder": "decode_step", "transformer_decoder": "decoder_layer"}
STUDENTS = ["correct", "unchanged", "mistake", "earlier"]  # "mistake" hands in MISTAKE[slug], "earlier"
                                                           # EARLIER[slug] unfinished


def check_cells(slug):
    """{grade_id: points} of the assignment's check cells."""
    notebook = nbformat.read(COURSE.source / slug / f"{slug}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"])
            for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")}


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    """Both graders on one batch: ({(student, slug): {check: score}} of ours, of plain nbgrader)."""
    batch = tmp_path_factory.mktemp("batch")
    for slug, mistake in MISTAKE.items():
        notebooks = dict(variants(slug))
        for student, label in (("correct", "correct"), ("unchanged", "unchanged"), ("mistake", mistake),
                               ("earlier", f"unfinished-{EARLIER[slug]}")):
            write(batch, student, notebooks[label], slug)
    out = tmp_path_factory.mktemp("out")
    # Plain nbgrader grades one notebook at a time: ours runs meanwhile, on the other core.
    ours = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(batch), "--out", str(out),
                             "--workers", "2"], cwd=COURSE.root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        plain, _ = plain_nbgrader.autograde(COURSE, batch, tmp_path_factory.mktemp("course"), list(MISTAKE))
        _, log = ours.communicate(timeout=600)
    except BaseException:
        os.killpg(ours.pid, signal.SIGKILL)  # with its workers
        ours.communicate()
        raise
    assert ours.returncode == 0, log
    return plain_nbgrader.our_scores(out), plain


@pytest.mark.parametrize("student", STUDENTS)
@pytest.mark.parametrize("slug", MISTAKE)
def test_plain_nbgrader_scores_every_check_cell_as_our_command_does(scores, slug, student):
    ours, plain = scores
    key = (student, slug)
    assert key in plain, f"plain nbgrader did not grade {key}"
    assert set(plain[key]) == set(check_cells(slug))
    assert plain[key] == ours[key], plain_nbgrader.differences({key: ours[key]}, {key: plain[key]})


@pytest.mark.parametrize("slug", MISTAKE)
def test_the_batch_has_full_zero_and_partial_marks(scores, slug):
    # Agreement would mean little if every submission scored the same.
    _, plain = scores
    total = {student: sum(plain[student, slug].values()) for student in STUDENTS}
    assert total["correct"] == sum(check_cells(slug).values())
    assert total["unchanged"] == 0
    assert 0 < total["mistake"] < total["correct"]


@pytest.mark.parametrize("slug", MISTAKE)
def test_an_unfinished_earlier_task_costs_only_its_own_points_under_both(scores, slug):
    ours, plain = scores
    task = EARLIER[slug]
    for graded in (ours, plain):
        lost = {cell for cell, got in graded["earlier", slug].items() if got < check_cells(slug)[cell]}
        assert lost == {cell for cell in check_cells(slug) if cell == f"test_{task}" or
                        cell.startswith(f"test_{task}_")}, lost
