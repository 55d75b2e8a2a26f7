"""The exercise on attention at scale, graded as a class would hand it in.

The memory a check allows is decided outside the student's reach (`harness.call_in_memory`):
under `grade`, a FlashAttention that forms the whole score matrix scores no more than the
honest untiled one, whatever it redefines or patches in its notebook; the tiled one keeps
its points. A plain function runs in a forked child under the same kind of cap. Where a
visible check fails, the feedback adds the mistake the hidden check names.
"""

import inspect
import math
import textwrap

import numpy as np
import pytest

from autograder.engine import harness
from autograder.engine.checking import CheckFailed
from autograder.samples.submissions import submission, write
from tests.engine.grading import details, grades, run_grader
from autograder.samples.implementations import efficient_attention as students
from solutions.scaled_dot_product import scaled_dot_product_attention  # noqa: F401 (given)

SLUG = "efficient_attention"
LIMIT = 8 * 2 ** 20


def _small(n):
    return np.ones(n).sum()


def _square(n):
    return np.ones((n, n)).sum()


def _square_or_zero(n):
    try:
        return np.ones((n, n)).sum()
    except MemoryError:
        return 0.0


def test_a_plain_function_runs_in_a_child_within_the_limit():
    assert harness.call_in_memory(_small, 1000, on="n=1000", limit_bytes=LIMIT) == 1000.0
    # 2 GiB: far beyond what a child forked from a long-running process finds free in the heap it
    # inherits (glibc keeps up to 64 MiB of freed memory mapped), which a smaller array could reuse
    with pytest.raises(CheckFailed, match=r"_square did not fit in 8 MiB of memory on n=16384"):
        harness.call_in_memory(_square, 16384, on="n=16384", limit_bytes=LIMIT)
    # a function that catches the MemoryError returns what it likes: the check judges the value
    assert harness.call_in_memory(_square_or_zero, 16384, on="n=16384", limit_bytes=LIMIT) == 0.0
    with pytest.raises(CheckFailed, match=r"raised ZeroDivisionError \(division by zero\) on n=0"):
        harness.call_in_memory(lambda n: 1 / n, 0, on="n=0", limit_bytes=LIMIT)


def _cell_source(function, name):
    return textwrap.dedent(inspect.getsource(function)).replace(f"def {function.__name__}(", f"def {name}(", 1)


def _untiled(**prefixes):
    """The honest untiled submission, with code before the two FlashAttention functions."""
    notebook = submission(SLUG, {**students.CORRECT, "flash_attention": students.flash_attention_whole_score_matrix,
                                 "flash_attention_backward": students.flash_backward_whole_matrices})
    for cell in notebook.cells:
        task = cell.metadata.get("nbgrader", {}).get("grade_id")
        if task in prefixes:
            cell.source = prefixes[task] + "\n" + cell.source
    return notebook


def reserve_freed_in_call(Q, K, V, block_size=64, causal=False):
    _reserve.clear()  # noqa: F821 (the notebook's): room for the whole score matrix
    return _whole(Q, K, V, block_size, causal)  # noqa: F821


def float16_scores(Q, K, V, block_size=64, causal=False):
    scores = (Q.astype(np.float16) @ np.swapaxes(K, -1, -2).astype(np.float16)) / np.float16(np.sqrt(Q.shape[-1]))
    if causal:
        T_q, T_k = Q.shape[-2], K.shape[-2]
        scores = np.where((T_k - T_q + np.arange(T_q))[:, None] >= np.arange(T_k), scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True).astype(float)
    shift = np.where(np.isinf(top), 0.0, top)
    weights = np.exp(scores - shift)
    total = weights.sum(axis=-1, keepdims=True)
    output = np.where(total > 0, (weights @ V) / np.where(total > 0, total, 1), 0.0)
    with np.errstate(divide="ignore"):
        return output, (shift + np.log(total))[..., 0]


PATCH = {  # cheat -> code run before both FlashAttention functions
    "peak-memory-redefined": "def peak_memory(function, *args, **kwargs):\n    return function(*args, **kwargs), 0\n",
    "tracemalloc-patched": "import tracemalloc\ntracemalloc.get_traced_memory = lambda: (0, 0)\n",
    "tracemalloc-stopped": "import tracemalloc\ntracemalloc.start = lambda *args: None\ntracemalloc.stop()\n",
    "numpy-and-tracemalloc-patched": ("import tracemalloc\nif not hasattr(np, '_zeros'):\n    np._zeros = np.zeros\n"
                                      "    np.zeros = lambda *a, **k: np._zeros(*a, **k)\n"
                                      "tracemalloc.reset_peak = lambda: None\n"
                                      "tracemalloc.get_traced_memory = lambda: (1, 1)\n"),
}


def _cheats():
    cheats = {name: _untiled(flash_attention=code, flash_attention_backward=code) for name, code in PATCH.items()}
    reserve = _untiled()
    for cell in reserve.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "flash_attention":
            cell.source = ("_reserve = [np.ones(160 * 2 ** 20 // 8)]  # held by the notebook, freed in the call\n"
                           + _cell_source(students.flash_attention_whole_score_matrix, "_whole")
                           + "\n" + _cell_source(reserve_freed_in_call, "flash_attention")
                           + "\npeak_memory = lambda function, *args, **kwargs: (function(*args, **kwargs), 0)\n")
    cheats["reserve-freed-in-call"] = reserve
    cheats["float16-scores"] = _untiled(flash_attention=PATCH["peak-memory-redefined"])
    for cell in cheats["float16-scores"].cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "flash_attention":
            cell.source = PATCH["peak-memory-redefined"] + "\n" + _cell_source(float16_scores, "flash_attention")
    return cheats


def flash_sum_not_rescaled(Q, K, V, block_size=64, causal=False):
    T_q, d = Q.shape[-2:]
    T_k, lead = K.shape[-2], Q.shape[:-2]
    output, logsumexp = np.zeros((*lead, T_q, V.shape[-1])), np.zeros((*lead, T_q))
    for q0 in range(0, T_q, block_size):
        q = Q[..., q0:q0 + block_size, :] / math.sqrt(d)
        n = q.shape[-2]
        top, total = np.full((*lead, n, 1), -np.inf), np.zeros((*lead, n, 1))
        accumulated = np.zeros((*lead, n, V.shape[-1]))
        for k0 in range(0, T_k, block_size):
            scores = q @ np.swapaxes(K[..., k0:k0 + block_size, :], -1, -2)
            if causal:
                position = T_k - T_q + np.arange(q0, q0 + n)
                scores = np.where(position[:, None] >= np.arange(k0, k0 + scores.shape[-1]), scores, -np.inf)
            new_top = np.maximum(top, scores.max(axis=-1, keepdims=True))
            shift = np.where(np.isinf(new_top), 0.0, new_top)
            weights = np.exp(scores - shift)
            total = total + weights.sum(axis=-1, keepdims=True)  # the mistake: not rescaled
            accumulated = np.exp(top - shift) * accumulated + weights @ V[..., k0:k0 + block_size, :]
            top = new_top
        output[..., q0:q0 + n, :] = np.where(total > 0, accumulated / np.where(total > 0, total, 1), 0.0)
        with np.errstate(divide="ignore"):
            logsumexp[..., q0:q0 + n] = (top + np.log(total))[..., 0]
    return output, logsumexp


def _output_not_rescaled():
    """flash_sum_not_rescaled with the other rescaling left out: the sum's kept, the output's dropped."""
    notebook = submission(SLUG, {**students.CORRECT, "flash_attention": flash_sum_not_rescaled})
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "flash_attention":
            for wrong, right in (("total = total + weights.sum(axis=-1, keepdims=True)  # the mistake: not rescaled",
                                  "total = np.exp(top - shift) * total + weights.sum(axis=-1, keepdims=True)"),
                                 ("accumulated = np.exp(top - shift) * accumulated + weights @ V[..., k0:k0 + block_size, :]",
                                  "accumulated = accumulated + weights @ V[..., k0:k0 + block_size, :]  # the mistake")):
                assert wrong in cell.source
                cell.source = cell.source.replace(wrong, right)
    return notebook


def gqa_tiled(Q, K, V, params, num_heads, num_kv_heads, mask=None):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, T_q, d_model = Q.shape
    T_k, d_head = K.shape[1], d_model // num_heads
    if mask is not None:
        mask = np.broadcast_to(mask, (B, num_heads, T_q, T_k))
    heads, all_weights = [], []
    for i in range(num_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        j = i % num_kv_heads  # the mistake: np.tile's order
        kv_cols = slice(j * d_head, (j + 1) * d_head)
        q = Q @ params["W_q"][:, cols] + params["b_q"][cols]
        k = K @ params["W_k"][:, kv_cols] + params["b_k"][kv_cols]
        v = V @ params["W_v"][:, kv_cols] + params["b_v"][kv_cols]
        head, weights = scaled_dot_product_attention(q, k, v, None if mask is None else mask[:, i])
        heads.append(head)
        all_weights.append(weights)
    return np.concatenate(heads, axis=-1) @ params["W_o"] + params["b_o"], np.stack(all_weights, axis=1)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    write(folder, "tiled", submission(SLUG, students.CORRECT), SLUG)
    write(folder, "untiled", _untiled(), SLUG)
    for name, notebook in _cheats().items():
        write(folder, name, notebook, SLUG)
    write(folder, "sum-not-rescaled", submission(SLUG, {**students.CORRECT, "flash_attention": flash_sum_not_rescaled}),
          SLUG)
    write(folder, "output-not-rescaled", _output_not_rescaled(), SLUG)
    write(folder, "keys-scaled-once", submission(SLUG, {**students.CORRECT, "flash_attention_backward":
                                                        students.flash_backward_keys_scaled_once}), SLUG)
    write(folder, "gqa-tiled", submission(SLUG, {**students.CORRECT,
                                                 "grouped_query_attention": gqa_tiled}), SLUG)
    out = tmp_path_factory.mktemp("out")
    process = run_grader("grade", folder, "--out", out, "--workers", 2)
    assert process.returncode == 0, process.stderr
    return grades(out), details(out)


def test_the_tiled_submission_keeps_full_marks_and_the_untiled_one_loses_the_tiling_tasks(graded):
    grades, details = graded
    assert grades["tiled", SLUG]["score"] == grades["tiled", SLUG]["max_score"] == "15"
    assert grades["untiled", SLUG]["score"] == "6"


@pytest.mark.parametrize("cheat", [*PATCH, "reserve-freed-in-call", "float16-scores"])
def test_no_cheat_scores_more_than_the_honest_untiled_version(graded, cheat):
    grades, details = graded
    assert grades[cheat, SLUG]["status"] == "graded"
    assert float(grades[cheat, SLUG]["score"]) <= float(grades["untiled", SLUG]["score"])
    for check in ("test_flash_attention", "test_flash_attention_backward"):
        assert details[cheat, SLUG][check]["score"] == "0"


@pytest.mark.parametrize("student, cause", [("sum-not-rescaled", "the running sum is not rescaled"),
                                            ("output-not-rescaled", "the accumulated output is not rescaled")])
def test_the_visible_check_names_the_cause_the_hidden_check_would(graded, student, cause):
    grades, details = graded
    message = details[student, SLUG]["test_flash_attention"]["message"]
    assert message.startswith("(logsumexp, output) of one query and 4 keys in 2 blocks of 2: ")  # the visible check
    assert f"{cause} by exp(m_old − m_new) when the running maximum grows" in message
    assert message.count("not rescaled") == 1
    assert grades[student, SLUG]["score"] == "10"  # only the task's own points


def test_a_right_backward_that_scales_the_keys_once_is_told_nothing(graded):
    # it holds a (T_k, d) array more than the reference: within the visible memory budget
    grades, details = graded
    assert grades["keys-scaled-once", SLUG]["score"] == "15"
    assert not details["keys-scaled-once", SLUG]["test_flash_attention_backward"]["message"]


def test_the_visible_check_names_np_tile_itself(graded):
    grades, details = graded
    message = details["gqa-tiled", SLUG]["test_grouped_query_attention"]["message"]
    assert "(np.repeat, not np.tile)" in message and message.count("np.tile") == 1
    assert grades["gqa-tiled", SLUG]["score"] == "12"
