"""Attacks on the reference stand-ins (issue 36) that the grading holds against.

Student code (tests/engine/standin_attacks.py, and cells written here) in the untouched
notebook or beside the sample implementations, graded by the real `grade` command in one batch:

- a stand-in kept during one check (encoder_layer's layer_norm, found behind the student's layer_norm) answers
  nothing in a later check (embed's own), even when the student opens it and marks its name as
  one of the running call, or asks the grader for the checked function itself;
- what a stand-in answered, printed during a hidden check, does not reach the feedback;
- the reference is nowhere in the notebook's process (sys.modules, gc) while stand-ins run;
- right code keeps its points beside a wrong, NaN or raising softmax when it reaches softmax by
  its global name, through a lambda or an object that looks it up, with keyword arguments,
  a NumPy float and non-contiguous views; beside a softmax that is itself a lambda;
- a right training loop that asks noam_learning_rate ten times for every leaf of every step
  (5 400 round trips to the grader in the hidden check) keeps its points within the call's time
  limit (it lost them before the standins commit b5d9ec0: the grader's time counted);
- an attention that returns NaN beside the stand-ins earns nothing;
- zeros earn nothing beside unfinished or zero neighbours (issue 36's degenerate pairs):
  greedy_decode beside unfinished encode and decode_step; encode, decode_step and
  greedy_decode beside an rnn_cell that returns zeros; train beside an adam_step that returns
  zeros; transformer_logits beside a decoder that returns zeros;
- a function that asks a stand-in again and again, catching the alarm meant to stop it, is
  stopped at the submission's time limit (the grader checks the deadline between round trips);
- (the red team's findings, fixed) only the graded functions that the checked function's
  reference reaches stand in, so a later task's reference (multi_head_attention_backward,
  bahdanau_decode_step, local_attention, encoder, rotary_embedding, greedy_decode) never computes
  the task under check, leaves values for a later check, or keeps the grader busy; a right
  attention keeps its points when it reaches a wrong softmax through an alias, a
  functools.partial or a helper's default, with a NumPy integer axis, or through the student's
  own right softmax with a renamed or added parameter; an exception raised after stand-ins
  answered shows its type and line, not the values in its message;
- (the red team's second round, fixed) a quadratic linear_attention earns no memory points beside an
  elu_feature_map that gives zeros on the memory checks' inputs only (the reference's stands in), nor
  a chunked_linear_attention that calls it; a right multi_head_attention_backward built on a wrong
  scaled_dot_product_attention_backward, which its reference does not call, keeps its points (every
  task before the checked one stands in); a right attention keeps its points beside a softmax that
  never returns on its scores, though its visible check ran out of time inside that softmax (a call
  where the function it was running then stands in runs it again); a right attention that prints
  keeps its points beside a softmax whose prints used up the notebook's output allowance;
- (the red team's third round, fixed) a right general_score built on a wrong dot_score, and a right
  gru_cell on a wrong rnn_cell, keep their points: every call of a hidden check passes the stand-ins
  (tests/course/checks/test_stand_ins_everywhere.py reads the checks for one that does not).
"""

import json

import pytest

from autograder.samples.submissions import implementations, submission, write
from tests.engine import standin_attacks as attacks
from tests.engine.grading import details, run_grader

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
WAYS = {  # the same right attention, calling softmax in several ways
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


PRINTING_ATTENTION = WAYS["global-name"].replace(
    "    return weights @ V, weights", "    print('weights of shape', weights.shape)\n    return weights @ V, weights")


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


SOFTMAX = implementations("scaled_dot_product")
WRONG_SOFTMAXES = {  # the softmax cell
    "wrong-axis": SOFTMAX.softmax_wrong_axis,
    "nan": lambda x, axis=-1: np.full(np.shape(x), np.nan),  # noqa: F821 (a notebook's np)
    "raising": lambda x, axis=-1: np.asarray(x)["no such field"],  # noqa: F821
}
SOFTMAX_CELLS = {
    "nan": "def softmax(x, axis=-1):\n    return np.full(np.shape(x), np.nan)",
    "raising": "def softmax(x, axis=-1):\n    raise ValueError('not this way')",
    "lambda": "softmax = lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)",
}
ATTENTIONS = {
    "global-name": RIGHT_ATTENTION.replace("NORMALISE(scores)", "softmax(scores, axis=-1)"),
    "late-lambda": "_normalise = lambda scores: softmax(scores, axis=-1)\n"
                   + RIGHT_ATTENTION.replace("NORMALISE(scores)", "_normalise(scores)"),
    "object": "class _Normaliser:\n    def __call__(self, scores):\n        return softmax(scores, axis=-1)\n\n\n"
              "_normalise = _Normaliser()\n" + RIGHT_ATTENTION.replace("NORMALISE(scores)", "_normalise(scores)"),
    "keywords-and-views": RIGHT_ATTENTION.replace(
        "NORMALISE(scores)",
        "softmax(x=np.swapaxes(scores, -1, -2) * np.float64(1.0), axis=-2).swapaxes(-1, -2)"),
    "nan": RIGHT_ATTENTION.replace("weights @ V, weights", "np.full((weights @ V).shape, np.nan), weights"),
}


def _attention_student(softmax_cell, attention):
    notebook = submission("scaled_dot_product", {"softmax": SOFTMAX.softmax_wrong_axis})
    if softmax_cell in SOFTMAX_CELLS:
        _with_cell(notebook, "softmax", SOFTMAX_CELLS[softmax_cell])
    return _with_cell(notebook, "scaled_dot_product_attention", ATTENTIONS[attention])


def _with_blind_meter(notebook, *tasks):
    """The cells of `tasks` also redefine the notebook's peak_memory, which then measures nothing."""
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in tasks:
            cell.source += attacks.BLIND_PEAK_MEMORY
    return notebook


LINEAR = implementations("linear_attention")
TRAINING = implementations("training")
SUBMISSION_SECONDS = 30
STUDENTS = {  # student -> (assignment, notebook)
    "kept-embed": ("transformer_encoder", lambda: submission("transformer_encoder", {
        "encoder_layer": attacks.encoder_layer_that_keeps_embed, "embed": attacks.embed_from_kept_stand_in})),
    "forged-embed": ("transformer_encoder", lambda: submission("transformer_encoder", {
        "encoder_layer": attacks.encoder_layer_that_keeps_embed, "embed": attacks.embed_from_forged_stand_in})),
    "hunter": ("backpropagation", lambda: submission("backpropagation", {
        "scaled_dot_product_attention_backward": attacks.sdpa_backward_that_hunts_the_reference})),
    "never-stops-asking": ("rnn_encoder_decoder", lambda: submission("rnn_encoder_decoder", {
        "encode": attacks.encode_that_never_stops_asking})),
    "zeros-beside-unfinished-rnn": ("rnn_encoder_decoder", lambda: submission("rnn_encoder_decoder", {
        "greedy_decode": attacks.greedy_decode_zeros})),
    "zeros-beside-zero-cells": ("rnn_encoder_decoder", lambda: submission("rnn_encoder_decoder", {
        "rnn_cell": attacks.rnn_cell_zeros, "encode": attacks.encode_zeros, "decode_step": attacks.decode_step_zeros,
        "greedy_decode": attacks.greedy_decode_zeros})),
    "zeros-train-beside-zeros-adam": ("training", lambda: submission("training", {
        "adam_step": attacks.adam_step_zeros, "train": attacks.train_zeros})),
    "rate-ten-times-per-leaf": ("training", lambda: submission("training", {
        **TRAINING.CORRECT, "train": attacks.train_asking_the_rate_ten_times_per_leaf})),
    **{f"{softmax}-softmax-{attention}-attention": ("scaled_dot_product",
                                                     lambda s=softmax, a=attention: _attention_student(s, a))
       for softmax, attention in [("wrong-axis", "global-name"), ("wrong-axis", "late-lambda"),
                                  ("wrong-axis", "object"), ("wrong-axis", "keywords-and-views"),
                                  ("nan", "global-name"), ("raising", "global-name"), ("lambda", "global-name"),
                                  ("wrong-axis", "nan")]},
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
    "huge-table": ("positional_encoding", lambda: submission(
        "positional_encoding", {"add_positional_encoding": attacks.add_positional_encoding_that_asks_for_a_huge_table})),
    "grader-decodes": ("rnn_encoder_decoder", lambda: submission(
        "rnn_encoder_decoder", {"encode": attacks.encode_that_makes_the_grader_decode})),
    # quadratic memory, and a blind memory meter; the first beside an elu_feature_map that gives zeros on
    # the memory checks' inputs only (which makes their outputs zeros, at no cost)
    "zero-elu-on-long-inputs": ("linear_attention", lambda: _with_blind_meter(submission("linear_attention", {
        **LINEAR.CORRECT, "elu_feature_map": attacks.elu_feature_map_zero_on_long_inputs,
        "linear_attention": attacks.linear_attention_whole_matrix_unless_zero,
        "chunked_linear_attention": attacks.chunked_whole_matrix_unless_zero}),
        "linear_attention", "chunked_linear_attention")),
    "whole-matrix": ("linear_attention", lambda: _with_blind_meter(submission("linear_attention", {
        **LINEAR.CORRECT, "linear_attention": LINEAR.linear_attention_whole_matrix,
        "chunked_linear_attention": LINEAR.chunked_whole_matrix}), "linear_attention", "chunked_linear_attention")),
    # chunked_linear_attention through the student's own linear_attention: quadratic, then right
    "chunked-via-whole-matrix": ("linear_attention", lambda: _with_blind_meter(submission("linear_attention", {
        **LINEAR.CORRECT, "linear_attention": LINEAR.linear_attention_whole_matrix,
        "chunked_linear_attention": attacks.chunked_via_linear_attention}), "linear_attention")),
    "chunked-via-right-attention": ("linear_attention", lambda: submission("linear_attention", {
        **LINEAR.CORRECT, "chunked_linear_attention": attacks.chunked_via_linear_attention})),
    # a right multi_head_attention_backward built on scaled_dot_product_attention_backward, which is wrong
    "mha-backward-via-wrong-sdpa-backward": ("backpropagation", lambda: submission("backpropagation", {
        **implementations("backpropagation").CORRECT,
        "scaled_dot_product_attention_backward": implementations("backpropagation").sdpa_backward_no_scale,
        "multi_head_attention_backward": attacks.mha_backward_via_sdpa_backward})),
    # a right attention (by its global name, or an alias) beside a softmax that never returns on its scores
    **{f"hanging-softmax-attention-{way}": ("scaled_dot_product", lambda way=way: _with_cell(submission(
        "scaled_dot_product", {"softmax": attacks.softmax_that_hangs_on_batches}), "scaled_dot_product_attention",
        WAYS[way])) for way in ("global-name", "alias")},
    # a right attention that prints a line, beside a right softmax that prints a long trace at every call
    "printing-softmax-printing-attention": ("scaled_dot_product", lambda: _with_cell(submission(
        "scaled_dot_product", {"softmax": attacks.softmax_that_prints_its_work}), "scaled_dot_product_attention",
        PRINTING_ATTENTION)),
    # a right rotary_embedding that reads its angles from sinusoidal_encoding, which is wrong
    "rotary-via-wrong-sinusoidal": ("positional_encoding", lambda: submission("positional_encoding", {
        **implementations("positional_encoding").CORRECT,
        "sinusoidal_encoding": implementations("positional_encoding").pe_exponent_i_over_d,
        "rotary_embedding": attacks.rotary_embedding_via_sinusoidal_encoding})),
    # a right general_score built on a wrong dot_score, a right gru_cell on a wrong rnn_cell: called by their hidden
    # checks without the stand-ins before the red team's third round
    "general-score-via-wrong-dot-score": ("luong", lambda: submission("luong", {
        **implementations("luong").CORRECT, "dot_score": attacks.dot_score_scaled,
        "general_score": attacks.general_score_via_dot_score})),
    "gru-cell-via-wrong-rnn-cell": ("rnn_encoder_decoder", lambda: submission("rnn_encoder_decoder", {
        **implementations("rnn_encoder_decoder").CORRECT, "rnn_cell": attacks.rnn_cell_without_bias,
        "gru_cell": attacks.gru_cell_via_rnn_cell})),
    **{f"softmax-wrong-attention-{way}": ("scaled_dot_product", lambda way=way: _with_cell(submission(
        "scaled_dot_product", {"softmax": implementations("scaled_dot_product").softmax_wrong_axis}),
        "scaled_dot_product_attention", WAYS[way]))
       for way in ("global-name", "alias", "partial", "helper-default", "numpy-int-axis")},
    # all right: a softmax whose parameters the student named and extended, and an attention using them
    **{f"own-softmax-attention-{way}": ("scaled_dot_product", lambda way=way: _with_cell(_with_cell(submission(
        "scaled_dot_product", {}), "softmax", OWN_SOFTMAX), "scaled_dot_product_attention", WAYS[way]))
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
    rows = {(student, check): row for (student, slug), checks in details(out).items()
            if slug == STUDENTS[student][0] for check, row in checks.items()}
    return rows, out


def _score(graded, student, check):
    return float(graded[0][student, check]["score"])


@pytest.mark.parametrize("student", ["kept-embed", "forged-embed"])
def test_a_kept_stand_in_answers_nothing_later(graded, student):
    assert _score(graded, student, "test_encoder_layer") == 3  # right, judged with the stand-ins
    assert _score(graded, student, "test_embed") == 0  # right in the notebook; the kept stand-in refuses


def test_what_a_stand_in_answered_does_not_reach_the_feedback(graded):
    for student in ("kept-embed", "forged-embed"):
        assert "LEAKED-VALUE" not in (graded[1] / "feedback" / student / "transformer_encoder.html").read_text()


def test_the_reference_is_not_in_the_notebooks_process_nor_answered_for_the_checked_function(graded):
    assert _score(graded, "hunter", "test_scaled_dot_product_attention_backward") == 0


@pytest.mark.parametrize("student", [
    "wrong-axis-softmax-global-name-attention", "wrong-axis-softmax-late-lambda-attention",
    "wrong-axis-softmax-object-attention", "wrong-axis-softmax-keywords-and-views-attention",
    "nan-softmax-global-name-attention", "raising-softmax-global-name-attention",
    "lambda-softmax-global-name-attention"])
def test_a_right_attention_keeps_its_points_beside_a_wrong_softmax(graded, student):
    assert _score(graded, student, "test_softmax") == 0
    assert _score(graded, student, "test_attention") == 3
    assert _score(graded, student, "test_attention_masks") == 3


def test_nan_earns_nothing_beside_the_stand_ins(graded):
    student = "wrong-axis-softmax-nan-attention"
    assert _score(graded, student, "test_attention") == _score(graded, student, "test_attention_masks") == 0


def test_thousands_of_round_trips_stay_within_the_calls_limit(graded):
    student = "rate-ten-times-per-leaf"
    assert _score(graded, student, "test_train") == 3, graded[0][student, "test_train"]["message"]


def test_asking_stand_ins_forever_stops_at_the_submissions_limit(graded):
    result = json.loads((graded[1] / "results" / "never-stops-asking" / "rnn_encoder_decoder.json").read_text())
    assert result["status"] == "timeout"
    # (it now also asks forever in its visible check, whose on_its_own block swaps rnn_cell too:
    # the notebook's process is stopped there, and the hidden checks never start)
    assert result["seconds"].get("checks", 0) < SUBMISSION_SECONDS


@pytest.mark.parametrize("student, checks", [
    ("zeros-beside-unfinished-rnn", ["test_greedy_decode"]),
    ("zeros-beside-zero-cells", ["test_encode", "test_decode_step", "test_greedy_decode"]),
    ("zeros-train-beside-zeros-adam", ["test_train"]),
])
def test_zeros_earn_nothing_beside_unfinished_or_zero_neighbours(graded, student, checks):
    assert [_score(graded, student, check) for check in checks] == [0] * len(checks)


@pytest.mark.parametrize("cheater, twin, check", [
    ("sdpa-backward-from-mha", "untouched-backpropagation", "test_scaled_dot_product_attention_backward"),
    ("attention-from-decode-step", "untouched-bahdanau", "test_bahdanau_attention"),
    ("layer-from-encoder", "untouched-transformer-encoder", "test_encoder_layer"),
    ("luong-from-local", "untouched-luong", "test_luong_attention"),
    ("luong-from-local", "untouched-luong", "test_luong_attention_masks"),
])
def test_a_later_tasks_stand_in_does_not_answer_for_the_checked_task(graded, cheater, twin, check):
    assert _score(graded, cheater, check) == _score(graded, twin, check) == 0


def test_a_later_tasks_reference_values_cannot_be_kept(graded):
    for check in ("test_rotary_embedding", "test_rotary_positions"):
        assert _score(graded, "rotary-from-stash", check) == _score(graded, "rotary-without-stash", check) == 0


def test_the_grader_does_not_compute_for_a_student_beyond_the_submissions_limit(graded):
    result = json.loads((graded[1] / "results" / "grader-decodes" / "rnn_encoder_decoder.json").read_text())
    # (it now also asks forever in its visible check, whose on_its_own block swaps rnn_cell too:
    # the notebook's process is stopped there, and the hidden checks never start)
    assert result["seconds"].get("checks", 0) < SUBMISSION_SECONDS + 5


@pytest.mark.parametrize("way", ["alias", "partial", "helper-default", "numpy-int-axis"])
def test_a_right_attention_keeps_its_points_beside_a_wrong_softmax_however_it_reaches_it(graded, way):
    for check in ("test_attention", "test_attention_masks"):
        assert _score(graded, f"softmax-wrong-attention-{way}", check) == \
            _score(graded, "softmax-wrong-attention-global-name", check) == 3


def test_zeros_earn_nothing_beside_a_zero_neighbour(graded):
    assert _score(graded, "zeros-logits-beside-zeros-decoder", "test_transformer_logits") == 0


@pytest.mark.parametrize("way", ["own-keyword", "extra-argument"])
def test_right_code_calling_its_own_right_softmax_keeps_its_points(graded, way):
    student = f"own-softmax-attention-{way}"
    assert [_score(graded, student, check) for check in ("test_softmax", "test_attention", "test_attention_masks")] \
        == [2, 3, 3]


def test_what_a_stand_in_answered_does_not_reach_the_feedback_through_an_exception(graded):
    feedback = (graded[1] / "feedback" / "raises-the-reference" / "positional_encoding.html").read_text()
    assert "LEAKED" not in feedback


def test_the_grader_computes_a_stand_ins_answer_within_the_notebooks_memory_limit(graded):
    """sinusoidal_encoding(10**9, 64) asked of the grader: the student's call gets a MemoryError,
    which it catches; the grading goes on, and the right function keeps its points."""
    result = json.loads((graded[1] / "results" / "huge-table" / "positional_encoding.json").read_text())
    assert result["status"] != "crashed"
    assert _score(graded, "huge-table", "test_add_positional_encoding") == \
        _score(graded, "rotary-without-stash", "test_add_positional_encoding") > 0


def test_a_neighbour_right_except_on_the_memory_cases_earns_no_memory_points(graded):
    """An elu_feature_map right except on the memory checks' inputs (zeros there) beside a quadratic
    linear_attention and chunked_linear_attention that return zeros when the features are zeros: the
    reference elu_feature_map stands in, so the memory decides (before, the reference run with the
    student's own feature map was accepted: 13/13 where 6/13 is earned)."""
    assert _score(graded, "zero-elu-on-long-inputs", "test_elu_feature_map") == 1
    for check in ("test_linear_attention", "test_chunked_linear_attention"):
        assert _score(graded, "zero-elu-on-long-inputs", check) == _score(graded, "whole-matrix", check) == 0


def test_a_function_built_on_its_own_earlier_task_keeps_that_tasks_memory(graded):
    """chunked_linear_attention as the student's own linear_attention, causal: only the feature map stands
    in (the reference's linear_attention would compute the memory cases in the grader, outside the cap)."""
    assert _score(graded, "chunked-via-whole-matrix", "test_chunked_linear_attention") == 0
    assert _score(graded, "chunked-via-right-attention", "test_chunked_linear_attention") == 3


@pytest.mark.parametrize("student, earlier, later", [
    ("mha-backward-via-wrong-sdpa-backward", ["test_scaled_dot_product_attention_backward"],
     {"test_multi_head_attention_backward": 4}),
    ("rotary-via-wrong-sinusoidal", ["test_sinusoidal_encoding"],
     {"test_rotary_embedding": 3, "test_rotary_positions": 1}),
])
def test_a_right_function_built_on_an_earlier_task_its_reference_does_not_use_keeps_its_points(
        graded, student, earlier, later):
    """multi_head_attention_backward around a wrong scaled_dot_product_attention_backward, rotary_embedding
    on the angles of a wrong sinusoidal_encoding: their references call neither, and every task before
    the checked one stands in (they lost their 4 points before; the rotary checks passed no stand-in)."""
    assert [_score(graded, student, check) for check in earlier] == [0] * len(earlier)
    assert {check: _score(graded, student, check) for check in later} == later


@pytest.mark.parametrize("way", ["global-name", "alias"])
def test_a_right_function_keeps_its_points_beside_a_neighbour_that_never_returns(graded, way):
    """The attention's visible check runs out of time inside the student's softmax, and stops the
    attention (the outermost function); its hidden checks, where the reference's softmax stands in,
    run it again (it lost 6 points before, stopped for its neighbour's endless loop)."""
    student = f"hanging-softmax-attention-{way}"
    assert _score(graded, student, "test_softmax") == 0
    assert _score(graded, student, "test_attention") == _score(graded, student, "test_attention_masks") == 3


def test_a_function_that_prints_keeps_its_points_beside_a_neighbour_that_printed_the_notebooks_allowance(graded):
    """softmax prints a long trace at every call, which uses up the notebook's output allowance in its
    hidden checks; the right attention, which prints one line, keeps its points: a check's call has an
    allowance of its own (its output goes nowhere). Before, it lost its 6 points ("it printed more than
    the notebook's output limit"), and the right softmax its 2."""
    student = "printing-softmax-printing-attention"
    assert [_score(graded, student, check) for check in ("test_softmax", "test_attention", "test_attention_masks")] \
        == [2, 3, 3]


@pytest.mark.parametrize("student, earlier, later, points", [
    ("general-score-via-wrong-dot-score", "test_dot_score", "test_general_score", 1),
    ("gru-cell-via-wrong-rnn-cell", "test_rnn_cell", "test_gru_cell", 3),
])
def test_a_right_function_on_a_wrong_earlier_task_keeps_its_points(graded, student, earlier, later, points):
    assert _score(graded, student, earlier) == 0
    assert _score(graded, student, later) == points, graded[0][student, later]["message"]
    assert graded[0][student, later]["message"].startswith("Judged with a correct ")
