"""The exercise on linear attention, graded as a class would hand it in: the memory decides points
only where the student's code cannot reach it.

Whether `linear_attention` keeps a state of fixed size is decided by `harness.call_in_memory` (T = 16384,
d = 8 and T = 4096, d = 64 under hard caps, outside the notebook's process); the visible cell measures
the same rule with `peak_memory` and fails beyond three times the size of the inputs, but a student may
redefine `peak_memory`: the points are the hidden check's. Its message says what happened, never a
cause the code may not have: similarities 256 rows at a time (no (T, T) array) were once blamed for
"an array as large as the (T, T) matrix".
"""

import numpy as np
import pytest

from autograder.samples.submissions import submission, write
from tests.engine.grading import details, grades, run_grader
from autograder.samples.implementations import linear_attention as students
from autograder.samples.implementations.linear_attention import elu_feature_map

SLUG = "linear_attention"


def rows_at_a_time(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    # every similarity, 256 query rows at a time: no (T, T) array, but (256, T) ones
    fQ, fK = feature_map(Q), feature_map(K)
    T_q, T_k = Q.shape[-2], K.shape[-2]
    outputs = []
    for i0 in range(0, T_q, 256):
        A = fQ[..., i0:i0 + 256, :] @ np.swapaxes(fK, -1, -2)
        if causal:
            rows = T_k - T_q + np.arange(i0, min(i0 + 256, T_q))
            A = np.where(rows[:, None] >= np.arange(T_k), A, 0.0)
        outputs.append((A @ V) / (A.sum(axis=-1, keepdims=True) + eps))
    return np.concatenate(outputs, axis=-2)


def unfinished(X):
    raise NotImplementedError()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    write(folder, "rows", submission(SLUG, {**students.CORRECT, "linear_attention": rows_at_a_time}), SLUG)
    cumulative = submission(SLUG, {**students.CORRECT, "linear_attention": students.linear_attention_cumulative_states})
    for cell in cumulative.cells:  # with the notebook's memory meter silenced: only the hidden rule can see it
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "linear_attention":
            cell.source = "def peak_memory(function, *args, **kwargs):\n    return function(*args, **kwargs), 0\n\n" + cell.source
    write(folder, "cumulative-states", cumulative, SLUG)
    write(folder, "no-elu", submission(SLUG, {**students.CORRECT, "elu_feature_map": unfinished}), SLUG)
    write(folder, "relu", submission(SLUG, {**students.CORRECT, "elu_feature_map": students.elu_relu}), SLUG)
    out = tmp_path_factory.mktemp("out")
    process = run_grader("grade", folder, "--out", out, "--workers", 1)
    assert process.returncode == 0, process.stderr
    return grades(out), details(out)


def test_code_that_forms_no_square_array_is_not_told_it_does(graded):
    grades, details = graded
    message = details["rows", SLUG]["test_linear_attention"]["message"]
    assert "as large as the (T, T) matrix" not in message
    assert "held" in message and "more than expected" in message  # the visible check, which names no cause
    assert grades["rows", SLUG]["score"] == "9"  # only the task's own points


def test_one_state_per_position_loses_the_task_at_d_64_whatever_the_notebook_measures(graded):
    grades, details = graded
    message = details["cumulative-states", SLUG]["test_linear_attention"]["message"]
    assert message.startswith("linear_attention did not run within 96 MiB on T=4096, d_k=d_v=64, causal=True")
    assert grades["cumulative-states", SLUG]["score"] == "9"


@pytest.mark.parametrize("student", ["no-elu", "relu"])
def test_a_wrong_or_unfinished_feature_map_costs_only_its_own_point(graded, student):
    # the three tasks that use it by default are judged with the reference's standing in, memory checks included
    grades, details = graded
    lost = {check: row["message"] for check, row in details[student, SLUG].items() if row["score"] != row["max_score"]}
    assert list(lost) == ["test_elu_feature_map"], lost
    assert grades[student, SLUG]["score"] == "12"
