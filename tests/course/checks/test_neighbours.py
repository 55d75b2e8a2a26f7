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

import numpy as np
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
             ("efficient_attention", "backward-exp-before-mask"): {"contains NaN or inf"},  # its exp overflows
             ("bahdanau", "bahdanau-softmax-unstable"): {"NaN"}}  # so does this one's


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
        for where, failure in graded_as_grade_does(slug, namespace, graded[cell_id]):
            message = f"{cell_id} ({where}): {type(failure).__name__}: {failure}"
            assert cell_id in own, f"{task} is wrong, and {message}"
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
    """A function as released raises NotImplementedError, as a right one does beside an unfinished
    earlier task (which the hidden checks replace by the reference's); were such cases left to the
    earlier task's check, the untouched function would earn its points whenever another earlier
    function runs."""
    namespace, graded = notebook(slug, wrong=(earlier, _unfinished(earlier)))
    stub = _unfinished(task)  # as released: a function of the notebook, whose names are the notebook's
    namespace[task] = types.FunctionType(stub.__code__, namespace, task, None, stub.__closure__)
    for cell_id, (owner, _, _) in graded.items():
        if owner == task:
            assert grade_cell(slug, namespace, graded[cell_id]), f"{cell_id} passes with {task} as released"


# -- judged with correct neighbours (stand-ins) ----------------------------------------------------
#
# In the exercises below, a check calls the student's function L with the reference's versions of
# the other graded functions standing in for the student's (`Task.check` of the case tables),
# and its visible checks with the recorded answers of a correct E standing in
# (`recorded.on_its_own`): no check cell of L fails, visible or hidden (the visible part may say
# "Not checked yet" where L calls E on inputs the record does not hold and E is wrong there, and go
# on). For every pair (L, E) where the
# reference's L reaches E (found from solutions/<slug>.py: by name, through an ungraded helper, or
# as a default argument), E wrong, unfinished, degenerate (zeros of the right shape) or stashed
# (right except on the inputs L's checks gave it) costs L nothing, and an L that does no work
# (zeros of the right shape, or as released) earns nothing beside any of them.

STAND_IN_SLUGS = ["scaled_dot_product", "multi_head", "luong", "bahdanau", "transformer_encoder",
                  "backpropagation", "positional_encoding", "language_model",
                  "rnn_encoder_decoder", "training", "transformer_decoder", "linear_attention",
                  "efficient_attention"]


def reached(slug):
    """{L: the other graded functions the reference's L reaches}, read from solutions/<slug>.py (and
    the helpers it imports from other modules of solutions/, which the notebook gives)."""
    import ast

    @functools.cache
    def module(name):
        """{function name: (its node, the module whose names it sees)} of solutions/<name>.py."""
        tree = ast.parse((COURSE.root / "solutions" / f"{name}.py").read_text())
        found = {node.name: (node, name) for node in tree.body if isinstance(node, ast.FunctionDef)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                for alias in node.names:
                    imported = module(node.module).get(alias.name)
                    if imported:
                        found[alias.asname or alias.name] = imported
        return found

    graded = set(implementations(slug).CHECKS_OF_TASK)

    def reach(name, where, seen):
        node, home = module(where)[name]
        for used in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & set(module(home)) - seen:
            seen.add(used)  # a graded function, or a helper whose reach is L's too (bodies and defaults)
            if used not in graded or home != slug:
                reach(used, home, seen)
        return seen

    return {task: sorted(reach(task, slug, set()) & graded - {task}) for task in sorted(graded)}


def stand_in_pairs(slug):
    return [(slug, task, earlier) for task, earlier_tasks in reached(slug).items() for earlier in earlier_tasks]


def graded_as_grade_does(slug, namespace, cell):
    """The failures of one check cell as `grade` counts them: a visible failure costs nothing when
    the hidden checks pass with the reference standing in for a function the task used."""
    with harness.answering() as stood_in:
        failures = grade_cell(slug, namespace, cell)
    if stood_in and all(where == "visible" for where, _ in failures):
        return []
    return failures


def not_recorded(namespace, task):
    """Whether the notebook's record holds only the names of the functions `task` calls (its calls
    are too large to record: `recording.LIMIT`)."""
    return any(given is None for _, given, _ in namespace.get("RECORDED_ANSWERS", {}).get(task, ()))


def judged_on_its_own(slug, namespace, cell):
    """The failures of one check cell of a right function beside a wrong neighbour: none may fail,
    visible or hidden (where the visible part cannot judge it, it says "Not checked yet" and goes
    on: its hidden checks judge it with correct neighbours)."""
    return grade_cell(slug, namespace, cell)


def _zeros_like(value):
    import numpy as np

    if isinstance(value, (tuple, list)):
        return type(value)(_zeros_like(item) for item in value)
    if isinstance(value, dict):
        return {key: _zeros_like(item) for key, item in value.items()}
    return np.zeros_like(value) if hasattr(value, "shape") else value


def _degenerate(slug, task):
    """``task`` doing no work: zeros of the shape the reference gives."""
    reference = getattr(importlib.import_module(f"solutions.{slug}"), task)

    def degenerate(*args, **kwargs):
        return _zeros_like(reference(*args, **kwargs))
    degenerate.__name__ = task
    return degenerate


def beside(slug, earlier, function, task):
    """(namespace, cells) of ``notebook``, with ``earlier`` = ``function`` and ``task`` the reference's
    code as a student would write it in the notebook: it calls the notebook's functions by name."""
    import inspect

    namespace, graded = notebook(slug, wrong=(earlier, function))
    reference, students = importlib.import_module(f"solutions.{slug}"), implementations(slug)
    for name, value in vars(reference).items():
        if inspect.ismodule(value):
            namespace.setdefault(name, value)
        elif inspect.isfunction(value) and value.__module__ == reference.__name__ and (
                name not in namespace or getattr(namespace[name], "__module__", None) == students.__name__):
            # the reference's helpers, unless a given cell of the notebook defines them
            namespace[name] = _rebound(value, namespace, reference)
        elif not name.startswith("__"):
            namespace.setdefault(name, value)  # its constants, and functions imported from another module
    namespace[task] = _rebound(getattr(reference, task), namespace, reference)
    return namespace, graded


def _recorded_inputs(slug, task, earlier):
    """The arguments the checks of ``task`` give the student's ``earlier`` when both are right: those
    of the visible checks (the hidden ones call the reference's ``earlier`` instead)."""
    import copy

    seen = []
    namespace, graded = beside(slug, earlier, implementations(slug).CORRECT[earlier], task)
    right = namespace[earlier]

    def recording(*args, **kwargs):
        seen.append(copy.deepcopy((args, kwargs)))
        return right(*args, **kwargs)
    recording.__name__ = earlier
    namespace[earlier] = recording
    for cell_id, cell in graded.items():
        if cell[0] == task:
            grade_cell(slug, namespace, cell)
    return seen


def _stashed(slug, task, earlier):
    """``earlier`` right, except on the inputs the checks of ``task`` gave it (if any): there, zeros."""
    import numpy as np

    recorded = _recorded_inputs(slug, task, earlier)
    right = getattr(importlib.import_module(f"solutions.{slug}"), earlier)

    def same(a, b):
        try:
            return len(a) == len(b) and all(np.shape(x) == np.shape(y) and np.array_equal(x, y)
                                            for x, y in zip(a, b))
        except TypeError:
            return False

    def stashed(*args, **kwargs):
        value = right(*args, **kwargs)
        hit = any(same(args, a) and kwargs.keys() == k.keys() and same(list(kwargs.values()), list(k.values()))
                  for a, k in recorded)
        return _zeros_like(value) if hit else value
    stashed.__name__ = earlier
    return stashed


def earlier_versions(slug, task, earlier):
    """{kind: E's function}: each of E's wrong implementations, unfinished, degenerate, stashed."""
    students = implementations(slug)
    versions = {name: function for name, (owner, function, _, _) in students.MISTAKES.items() if owner == earlier}
    versions[UNFINISHED] = _unfinished(earlier)
    versions["degenerate"] = _degenerate(slug, earlier)
    versions["stashed"] = _stashed(slug, task, earlier)
    return versions


@pytest.mark.parametrize("slug, task, earlier", [pair for slug in STAND_IN_SLUGS for pair in stand_in_pairs(slug)])
def test_a_right_function_keeps_its_points_beside_any_earlier_one(slug, task, earlier):
    students = implementations(slug)
    for kind, function in earlier_versions(slug, task, earlier).items():
        words = students.MISTAKES[kind][3] if kind in students.MISTAKES else None
        forbidden = {w for t, _, _, w in students.MISTAKES.values() if t == earlier and w != words} - GENERIC
        namespace, graded = beside(slug, earlier, function, task)
        if kind == "stashed" and not_recorded(namespace, task):
            continue  # the notebook cannot know E is wrong on calls too large to record (grading does)
        for cell_id, cell in graded.items():
            if cell[0] == earlier:
                continue  # E's own cells: their points are E's
            for where, failure in judged_on_its_own(slug, namespace, cell):
                pytest.fail(f"{earlier} {kind}: {task}'s {cell_id} ({where}) fails: {failure}")
        # E's own cells name no mistake E does not make
        for cell_id, cell in graded.items():
            if cell[0] == earlier and kind in students.MISTAKES:
                for where, failure in graded_as_grade_does(slug, namespace, cell):
                    named = [w for w in forbidden - ALSO_MADE.get((slug, kind), set()) if w in str(failure)]
                    assert not named, f"{kind}: {cell_id} ({where}) names {named}: {failure}"


@pytest.mark.parametrize("slug, task, earlier", [pair for slug in STAND_IN_SLUGS for pair in stand_in_pairs(slug)])
def test_a_function_that_does_no_work_earns_nothing_beside_any_earlier_one(slug, task, earlier):
    """The attacks of the last red team: beside a degenerate, stashed or unfinished earlier function,
    a later one that returns zeros (or is as released) earned the later task's points when a check
    accepted "the reference run with your own earlier functions"."""
    lazy = {"zeros": _degenerate(slug, task), "as released": _unfinished(task)}
    for kind, function in earlier_versions(slug, task, earlier).items():
        for how, idle in lazy.items():
            namespace, graded = notebook(slug, wrong=(earlier, function))
            namespace[task] = idle
            for cell_id, cell in graded.items():
                if cell[0] == task:
                    assert graded_as_grade_does(slug, namespace, cell), \
                        f"{task} {how} passes {cell_id} beside {earlier} {kind}"


def zeros_softmax(x, axis=-1):
    return np.zeros_like(x)  # noqa: F821 (np is the notebook's)


def zeros_attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2)  # noqa: F821
    return np.zeros(scores.shape[:-1] + V.shape[-1:]), np.zeros_like(scores)  # noqa: F821


def stashed_softmax(x, axis=-1):
    # right, except on the task's example scores, where it gives what a lazy attention returns
    import numpy as np
    if np.shape(x) == (1, 2) and np.allclose(x, [[0.0, np.log(3.0)]]):
        return np.zeros_like(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_with_the_real_grade_command_a_task_is_judged_on_its_own(tmp_path):
    """The last red team's attacks and fairness cases in scaled_dot_product, graded by `grade`:
    a right attention that calls a wrong or unfinished softmax keeps its 6 points; an attention that
    returns zeros earns nothing beside a softmax that returns zeros or is stashed."""
    from autograder.samples.submissions import submission, write
    from tests.engine.grading import details, run_grader

    slug = "scaled_dot_product"
    students = implementations(slug)
    right = {**students.CORRECT, "scaled_dot_product_attention": students.attention_with_own_softmax}
    batch = {"wrong-softmax": ({**right, "softmax": students.softmax_wrong_axis}, 6.0),
             "unfinished-softmax": ({task: f for task, f in right.items() if task != "softmax"}, 6.0),
             "degenerate": ({**right, "softmax": zeros_softmax, "scaled_dot_product_attention": zeros_attention}, 0.0),
             "stashed": ({**right, "softmax": stashed_softmax, "scaled_dot_product_attention": zeros_attention}, 0.0)}
    for student, (answers, _) in batch.items():
        write(tmp_path / "in", student, submission(slug, answers), slug)
    finished = run_grader("grade", tmp_path / "in", "--out", tmp_path / "out", "--workers", "2")
    assert finished.returncode == 0, finished.stderr
    table = details(tmp_path / "out")
    for student, (_, points) in batch.items():
        rows = table[student, slug]
        got = float(rows["test_attention"]["score"]) + float(rows["test_attention_masks"]["score"])
        assert got == points, (student, {check: (row["score"], row.get("message")) for check, row in rows.items()})
