"""Attacks on the reference stand-ins (issue 36) that SUCCEED today: findings for the lead.

Each test asserts what should hold and fails while the attack succeeds (nothing is marked
xfail: the lead decides). The attacks are student code (tests/engine/standin_attacks.py) in
the untouched notebook, graded by the real `grade` command in one batch, beside their honest
twin (the untouched notebook, or the same notebook without the trick).

1. A later task's stand-in answers for the task under check. A check passes every graded
   function but the checked one (`stand_ins=GRADED`), so functions that *use* the checked one
   stand in too, and their reference computes it:
   - backpropagation: scaled_dot_product_attention_backward from the reference
     multi_head_attention_backward (one head, identity projections, zero-padded inputs);
   - bahdanau: bahdanau_attention from the reference bahdanau_decode_step (a cell that ignores
     its input; the context and weights it returns are the attention's);
   - luong: luong_attention's scores, softmax and context from the reference local_attention
     (no Gaussian, each row's unmasked positions, a window that holds them all);
   - transformer_encoder: encoder_layer from the reference encoder (an embedding that gives X
     back through the reference embed, the layer as the only layer; a (T, T) mask as the
     padding masks of T copies of the sequence, one query row each).
2. A later task's reference values, kept: while add_positional_encoding's check runs, the
   reference rotary_embedding stands in (its task is checked after); the student keeps its cos
   and sin of every position < 128 for every even d ≤ 64, and rotary_embedding reads them.
3. The grader computes the reference outside every limit: a stand-in's round trip blocks the
   notebook's alarms, and the grader's `_answer` runs the reference with no time limit, so an
   `encode` that asks the reference greedy_decode for 300 000 steps of a model that never
   says EOS keeps the grader busy far beyond the submission's time limit (a bigger max_len:
   hours).
4. Right code loses points: a right attention that reaches a wrong softmax through a
   module-level alias or a functools.partial, or as the default of a helper, is judged with
   the student's softmax, not the reference's (the swap replaces the global name and the
   called function's own defaults only), and its message names a mistake the attention does
   not make ("the softmax is taken over the queries").
5. Right code loses points: a NumPy integer crosses the wire as an array of shape (1,)
   (`wire.encode` sends a scalar through `np.ascontiguousarray`, which makes 0-d arrays 1-d),
   so a right attention calling `softmax(scores, axis=np.int64(-1))` gets a TypeError from the
   reference (np.int64 is not an int; np.float64, a float, travels as one).
6. Code that does no work earns points (issue 36's degenerate pair, transformer_decoder not yet
   judged with stand-ins): a transformer_logits that returns zeros beside a decoder that returns
   zeros gets 1/1.
7. Right code loses points: a student's right softmax whose parameter they renamed (z) or
   extended (temperature=1.0), and a right attention that calls it with that name or that extra
   argument: the reference's softmax(x, axis) raises TypeError, and the attention loses 6/6
   though every line of the notebook is right.
8. The reference's values reach the feedback: a function judged with stand-ins asks one (here
   add_positional_encoding asks the later rotary_embedding's) for values of its choosing and
   raises them in an exception, whose message the feedback shows ("add_positional_encoding
   raised ValueError (LEAKED [[[1.0, 0.0, ...") (printing them is held: stdout is not shown).
"""

import json

import pytest

from autograder.samples.submissions import implementations, submission, write
from tests.engine import standin_attacks as attacks
from tests.engine.grading import details, run_grader

SUBMISSION_SECONDS = 10

RIGHT_ATTENTION = '''
def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e300)
    weights = NORMALISE(scores)
    if mask is not None:  # a query that sees no key takes nothing
        weights = np.where(np.any(np.broadcast_to(mask, scores.shape), axis=-1, keepdims=True), weights, 0.0)
    return weights @ V, weights
'''
ATTENTIONS = {  # the same right attention, calling softmax in several ways
    "global-name": RIGHT_ATTENTION.replace("NORMALISE(scores)", "softmax(scores, axis=-1)"),
    "alias": "_softmax = softmax\n" + RIGHT_ATTENTION.replace("NORMALISE(scores)", "_softmax(scores)"),
    "partial": "import functools\n_row_softmax = functools.partial(softmax, axis=-1)\n"
               + RIGHT_ATTENTION.replace("NORMALISE(scores)", "_row_softmax(scores)"),
    "own-keyword": RIGHT_ATTENTION.replace("NORMALISE(scores)", "softmax(z=scores, axis=-1)"),
    "extra-argument": RIGHT_ATTENTION.replace("NORMALISE(scores)", "softmax(scores, -1, 1.0)"),
    "numpy-int-axis": RIGHT_ATTENTION.replace("NORMALISE(scores)", "softmax(scores, axis=np.int64(-1))"),
    "helper-default": "def _normalise(scores, function=softmax):\n    return function(scores, axis=-1)\n\n"
                      + RIGHT_ATTENTION.replace("NORMALISE(scores)", "_normalise(scores)"),
}


OWN_SOFTMAX = """
def softmax(z, axis=-1, temperature=1.0):
    z = np.asarray(z, dtype=float) / temperature
    e = np.exp(z - np.max(z, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
"""


def _with_cell(notebook, task, source):
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == task:
            cell.source = source.strip()
    return notebook


STUDENTS = {  # student -> (assignment, notebook)
    "untouched-backpropagation": ("backpropagation", lambda: submission("backpropagation", {})),
    "sdpa-backward-from-mha": ("backpropagation", lambda: submission(
        "backpropagation", {"scaled_dot_product_attention_backward": attacks.sdpa_backward_via_mha_backward})),
    "untouched-bahdanau": ("bahdanau", lambda: submission("bahdanau", {})),
    "attention-from-decode-step": ("bahdanau", lambda: submission(
        "bahdanau", {"bahdanau_attention": attacks.bahdanau_attention_via_decode_step})),
    "zeros-logits-beside-zeros-decoder": ("transformer_decoder", lambda: submission("transformer_decoder", {
        "decoder": attacks.decoder_zeros, "transformer_logits": attacks.transformer_logits_zeros})),
    "untouched-luong": ("luong", lambda: submission("luong", {})),
    "luong-from-local": ("luong", lambda: submission(
        "luong", {"luong_attention": attacks.luong_attention_via_local_attention})),
    "untouched-transformer-encoder": ("transformer_encoder", lambda: submission("transformer_encoder", {})),
    "layer-from-encoder": ("transformer_encoder", lambda: submission(
        "transformer_encoder", {"encoder_layer": attacks.encoder_layer_via_encoder})),
    "rotary-without-stash": ("positional_encoding", lambda: submission(
        "positional_encoding", {"add_positional_encoding": attacks.add_positional_encoding_plain,
                                "rotary_embedding": attacks.rotary_embedding_from_stash})),
    "rotary-from-stash": ("positional_encoding", lambda: submission(
        "positional_encoding", {"add_positional_encoding": attacks.add_positional_encoding_that_stashes_rotary,
                                "rotary_embedding": attacks.rotary_embedding_from_stash})),
    "raises-the-reference": ("positional_encoding", lambda: submission(
        "positional_encoding", {"add_positional_encoding": attacks.add_positional_encoding_that_raises_the_reference})),
    "grader-decodes": ("rnn_encoder_decoder", lambda: submission(
        "rnn_encoder_decoder", {"encode": attacks.encode_that_makes_the_grader_decode})),
    **{f"softmax-wrong-attention-{way}": ("scaled_dot_product", lambda way=way: _with_cell(submission(
        "scaled_dot_product", {"softmax": implementations("scaled_dot_product").softmax_wrong_axis}),
        "scaled_dot_product_attention", ATTENTIONS[way]))
       for way in ("global-name", "alias", "partial", "helper-default", "numpy-int-axis")},
    # all right: a softmax whose parameters the student named and extended, and an attention using them
    **{f"own-softmax-attention-{way}": ("scaled_dot_product", lambda way=way: _with_cell(_with_cell(submission(
        "scaled_dot_product", {}), "softmax", OWN_SOFTMAX), "scaled_dot_product_attention", ATTENTIONS[way]))
       for way in ("own-keyword", "extra-argument")},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder, out = tmp_path_factory.mktemp("submissions"), tmp_path_factory.mktemp("graded") / "out"
    for student, (slug, notebook) in STUDENTS.items():
        write(folder, student, notebook(), slug)
    process = run_grader("grade", folder, "--out", out, "--workers", "2",
                         "--submission-timeout", SUBMISSION_SECONDS, timeout=600)
    assert process.returncode in (0, 1), process.stderr[-3000:]
    scores = {(student, check): float(row["score"])
              for (student, slug), rows in details(out).items() if slug == STUDENTS[student][0]
              for check, row in rows.items()}
    return scores, out


def _score(graded, student, check):
    return graded[0][student, check]


@pytest.mark.parametrize("cheater, twin, check", [
    ("sdpa-backward-from-mha", "untouched-backpropagation", "test_scaled_dot_product_attention_backward"),
    ("attention-from-decode-step", "untouched-bahdanau", "test_bahdanau_attention"),
    ("layer-from-encoder", "untouched-transformer-encoder", "test_encoder_layer"),
    ("luong-from-local", "untouched-luong", "test_luong_attention"),
    ("luong-from-local", "untouched-luong", "test_luong_attention_masks"),
])
def test_a_later_tasks_stand_in_does_not_answer_for_the_checked_task(graded, cheater, twin, check):
    """Today: 4/4, 1/1, 3/3, and 2/2 + 1/1 where the untouched notebook gets 0."""
    assert _score(graded, cheater, check) == _score(graded, twin, check) == 0


def test_a_later_tasks_reference_values_cannot_be_kept(graded):
    """Today: rotary_embedding's two checks (3 + 1 points) pass from the values kept (its visible
    cells pass on the notebook's own examples, d = 2 and 4)."""
    for check in ("test_rotary_embedding", "test_rotary_positions"):
        assert _score(graded, "rotary-from-stash", check) == _score(graded, "rotary-without-stash", check) == 0


def test_the_grader_does_not_compute_for_a_student_beyond_the_submissions_limit(graded):
    """Today: the checks of that one submission take 20+ s of the grader's time (limit 10 s)."""
    result = json.loads((graded[1] / "results" / "grader-decodes" / "rnn_encoder_decoder.json").read_text())
    assert result["seconds"]["checks"] < SUBMISSION_SECONDS + 5


@pytest.mark.parametrize("way", ["alias", "partial", "helper-default", "numpy-int-axis"])
def test_a_right_attention_keeps_its_points_beside_a_wrong_softmax_however_it_reaches_it(graded, way):
    """Today: 0/6 where the same attention calling softmax by its global name gets 6/6."""
    for check in ("test_attention", "test_attention_masks"):
        assert _score(graded, f"softmax-wrong-attention-{way}", check) == \
            _score(graded, "softmax-wrong-attention-global-name", check) == 3


def test_zeros_earn_nothing_beside_a_zero_neighbour(graded):
    """Today: transformer_logits 1/1."""
    assert _score(graded, "zeros-logits-beside-zeros-decoder", "test_transformer_logits") == 0


@pytest.mark.parametrize("way", ["own-keyword", "extra-argument"])
def test_right_code_calling_its_own_right_softmax_keeps_its_points(graded, way):
    """Today: softmax 2/2, attention 0/3 + 0/3 (TypeError from the reference's signature)."""
    student = f"own-softmax-attention-{way}"
    assert [_score(graded, student, check) for check in ("test_softmax", "test_attention", "test_attention_masks")] \
        == [2, 3, 3]


def test_what_a_stand_in_answered_does_not_reach_the_feedback_through_an_exception(graded):
    """Today: the feedback shows the reference rotary_embedding's values for the student's probe."""
    feedback = (graded[1] / "feedback" / "raises-the-reference" / "positional_encoding.html").read_text()
    assert "LEAKED" not in feedback
