"""Each function is judged on its own: one task wrong beside right ones costs only that task's points.

For the exercises whose tasks call each other (a student's `sample_next` calls
their `filter_logits`, `greedy_decode` their `decode_step`, `train` their
`adam_step`, ...): every wrong implementation of one task kept in
autograder/samples/implementations/<slug>.py (`MISTAKES`), and that task left
unfinished (raising NotImplementedError), goes into a notebook namespace beside
the correct implementations of the others (`CORRECT`), each function seeing the
others through that namespace as in a student's notebook. Then every check
cell that grades the wrong task, or calls it, runs as the grader runs it: its
visible part, whose failure costs the cell's points, and its hidden checks. Only
the wrong task's cells may fail, and no message names a mistake
(`CheckFailed.cause`, or the words of another mistake of that task) that the
code does not make.

A cell "calls" a task when grading it with every task right calls that task's
function (tracked on a first run): a cell that never calls it cannot be moved by
its being wrong, so only those run again.
"""

import functools
import importlib
import types

import pytest

from autograder.engine import harness
from autograder.samples.submissions import implementations
from tests.support import COURSE
from tests.course.checks.test_double_mistakes import HIDDEN, student_namespace

SLUGS = ["language_model", "efficient_attention", "rnn_encoder_decoder", "transformer_decoder", "training"]
UNFINISHED = "unfinished"
# Words of MISTAKES that name no cause: they show the values or say what is right.
GENERIC = {"instead of", "raised", "of the whole prefix at position", "the beam search of the task gives",
           "differ from greedy decoding"}
# Sentences that say what is right and name no cause, though they hold words of MISTAKES: left out of
# a message before its words are matched.
HINTS = ["the next token comes from the decoder's output at the last position of the whole prefix (BOS and "
         "every token so far)",  # the one thing two mistakes (last token only, first position) both miss
         "np.random.default_rng(seed)"]  # the training loop as the task describes it ("default" is a mistake's word)
# Mistakes whose code also makes another of its task's: (slug, name) -> the words of those.
ALSO_MADE = {("language_model", "beam-search-no-penalty"): {"log P without the length penalty"},  # scores too
             ("training", "adam-pytorch-defaults"): {"0.999"},        # PyTorch's β2 and ε both
             ("training", "adam-default-eps-1e-8"): {"default"},      # ε = 1e-8 is PyTorch's default
             ("training", "adam-pytorch-beta2"): {"default"},  # "the paper's beta2 = 0.98 by default": its β2 is not
             ("efficient_attention", "backward-exp-before-mask"): {"contains NaN or inf"}}  # its exp overflows

# An unfinished task that a later task calls: beside it, a raise of the later task earns nothing, since
# nothing tells a right function beside it from a wrong one that only calls it (which would earn points
# without the skill, and the untouched notebook would score). Those cells fail with it, as not
# implemented, and name no mistake. (slug, unfinished task) -> those cells.
WAITING = {("rnn_encoder_decoder", "encode"): {"test_greedy_decode"},
           ("rnn_encoder_decoder", "decode_step"): {"test_greedy_decode"},
           **{("transformer_decoder", task): {"test_transformer_logits", "test_greedy_decode"}
              for task in ("decoder_layer", "decoder")},
           ("transformer_decoder", "transformer_logits"): {"test_greedy_decode"},
           **{("transformer_decoder", task): {"test_greedy_decode_cache"}
              for task in ("init_decoder_cache", "decoder_step")},
           ("training", "noam_learning_rate"): {"test_train"},
           ("training", "adam_step"): {"test_train"}}
# A mistake of an earlier task that gives NaN where a later task calls it: NaN never earns a point, so
# the later task's cells cannot be judged right beside it; they fail asking to fix the earlier task
# first. (slug, mistake) -> those cells.
NAN_BESIDE = {("training", "adam-step-from-0"): {"test_train"}}


def _rebound(function, namespace, module):
    """``function`` (of the implementations module) looking its global names up in ``namespace``,
    as the same code would in a notebook; so do the functions it closes over."""
    if not isinstance(function, types.FunctionType) or function.__module__ != module.__name__:
        return function
    cells = tuple(types.CellType(_rebound(cell.cell_contents, namespace, module))
                  for cell in function.__closure__ or ())
    rebound = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__,
                                 cells or None)
    rebound.__kwdefaults__ = function.__kwdefaults__
    return rebound


def _names(function):
    """The global names ``function`` and the functions it closes over read."""
    names = set(function.__code__.co_names)
    for cell in function.__closure__ or ():
        if isinstance(cell.cell_contents, types.FunctionType):
            names |= _names(cell.cell_contents)
    return names


def _unfinished(task):
    def unfinished(*args, **kwargs):
        raise NotImplementedError()
    unfinished.__name__ = task
    return unfinished


def _traced(function, task, calls):
    @functools.wraps(function)
    def traced(*args, **kwargs):
        calls.add(task)
        return function(*args, **kwargs)
    return traced


def notebook(slug, wrong=None, calls=None):
    """(namespace, {check cell: (task, visible source, hidden check names)}): the instructor
    notebook's cells run with every task correct but ``wrong`` = (task, function); with
    ``calls``, every task's function records its name there when called."""
    students = implementations(slug)
    namespace, cells = student_namespace(slug, {})
    for name, value in vars(students).items():
        namespace.setdefault(name, value)  # the module's own helpers, where a notebook has none
    for task, function in students.CORRECT.items():
        function = _rebound(function, namespace, students)
        namespace[task] = function if calls is None else _traced(function, task, calls)
    if wrong:
        task, function = wrong
        # a mistake written as the correct function changed calls it by the task's name
        own = {**namespace} if task in _names(function) else namespace
        namespace[task] = _rebound(function, own, students)
    owner = {check: task for task, checks in students.CHECKS_OF_TASK.items() for check in checks}
    graded = {}
    for cell_id, visible in cells.items():
        source = next(c.source for c in _cells(slug) if c.metadata["nbgrader"].get("grade_id") == cell_id)
        hidden = [name for name in owner if f"{name}(" in source.split(HIDDEN)[1]]
        graded[cell_id] = (owner[hidden[0]], visible, hidden)
    return namespace, graded


@functools.cache
def _cells(slug):
    import nbformat

    return [c for c in nbformat.read(COURSE.source / slug / f"{slug}.ipynb", as_version=4).cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]


def grade_cell(slug, namespace, cell):
    """The failures of one check cell, as the grader would meet them: [(where, exception)]."""
    task, visible, hidden = cell
    checks = importlib.import_module(f"autograder.checks.{slug}")
    failures = []
    try:
        exec(compile(visible, "visible checks", "exec"), namespace)
    except Exception as failure:  # noqa: BLE001 - any error of the cell costs its points
        failures.append(("visible", failure))
    with harness.secret(12345):
        for name in hidden:
            try:
                getattr(checks, name)(namespace[task])
            except Exception as failure:  # noqa: BLE001
                failures.append((name, failure))
    return failures


@functools.cache
def callers(slug):
    """{task: the check cells that call its function when every task is right}, and those cells pass."""
    found = {}
    for cell_id in notebook(slug)[1]:
        calls = set()
        namespace, graded = notebook(slug, calls=calls)
        failures = grade_cell(slug, namespace, graded[cell_id])
        assert not failures, f"{slug}: {cell_id} fails with every task right: {failures}"
        for task in calls:
            found.setdefault(task, set()).add(cell_id)
    return found


def wrong_versions(slug):
    students = implementations(slug)
    return [(slug, name) for name in students.MISTAKES] + \
           [(slug, f"{UNFINISHED}-{task}") for task in students.CHECKS_OF_TASK]


CASES = [case for slug in SLUGS for case in wrong_versions(slug)]


@pytest.mark.parametrize("slug, name", CASES)
def test_one_wrong_task_costs_only_its_own_points(slug, name):
    students = implementations(slug)
    if name.startswith(UNFINISHED):
        task = name[len(UNFINISHED) + 1:]
        function, words = _unfinished(task), "not implemented"
    else:
        task, function, _, words = students.MISTAKES[name]
    namespace, graded = notebook(slug, wrong=(task, function))
    own = {cell_id for cell_id, (owner, _, _) in graded.items() if owner == task}
    affected = own | callers(slug).get(task, set())
    # words of the other mistakes of this task: a message that holds them names a mistake not made
    forbidden = {w for t, _, _, w in students.MISTAKES.values() if t == task and w not in words} \
        - GENERIC - ALSO_MADE.get((slug, name), set())
    lost = []
    for cell_id in sorted(affected):
        for where, failure in grade_cell(slug, namespace, graded[cell_id]):
            message = f"{cell_id} ({where}): {type(failure).__name__}: {failure}"
            waiting = name.startswith(UNFINISHED) and cell_id in WAITING.get((slug, task), set()) and (
                isinstance(failure, (NotImplementedError, harness.Unfinished)))
            waiting |= cell_id in NAN_BESIDE.get((slug, name), set()) and f"fix {task} first" in str(failure)
            assert cell_id in own or waiting, f"{task} is wrong, and {message}"
            cause = getattr(failure, "cause", None)
            assert cause is None or words in cause or not name.startswith(UNFINISHED) and \
                not [w for w in forbidden if w in cause], f"names a cause the code does not have: {message}"
            said = str(failure)
            for hint in HINTS:
                said = said.replace(hint, "")
            named = [w for w in forbidden if w in said]
            assert not named, f"names {named}, mistakes the code does not make: {message}"
            lost.append(cell_id)
    assert lost, f"{name}: no check of {task} failed"


def unfinished_pairs(slug):
    """(slug, task, earlier): every task with an earlier task that its check cells call."""
    owner = {cell_id: task for cell_id, (task, _, _) in notebook(slug)[1].items()}
    return sorted({(slug, owner[cell_id], earlier) for earlier, cells in callers(slug).items()
                   for cell_id in cells if owner[cell_id] != earlier})


@pytest.mark.parametrize("slug, task, earlier", [pair for slug in SLUGS for pair in unfinished_pairs(slug)])
def test_a_task_as_released_earns_nothing_beside_an_unfinished_earlier_one(slug, task, earlier):
    """The other side of WAITING: a function as released raises NotImplementedError, as a right one
    does beside an unfinished earlier task; were such cases left to the earlier task's check, the
    untouched function would earn its points whenever another earlier function runs."""
    namespace, graded = notebook(slug, wrong=(earlier, _unfinished(earlier)))
    stub = _unfinished(task)  # as released: a function of the notebook, whose names are the notebook's
    namespace[task] = types.FunctionType(stub.__code__, namespace, task, None, stub.__closure__)
    for cell_id, (owner, _, _) in graded.items():
        if owner == task:
            assert grade_cell(slug, namespace, graded[cell_id]), f"{cell_id} passes with {task} as released"
