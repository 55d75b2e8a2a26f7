"""A planted class for the similarity report: honest authors and disguised copies.

Each student hands in the scaled dot-product exercise: {task: source of its
answer cell}, and perhaps cells of their own (ADDED). The honest authors wrote
their code independently (A is the sample correct implementations,
the others are written here, each in a style of its own, with the overlaps
independent students really have, such as the one-line `np.tril` causal mask).
Each copy takes one author's code and disguises it: renamed variables, changed
comments and whitespace, expressions split in two, helper functions reordered.
"""

import inspect
import re
import textwrap

import nbformat

from autograder.engine import assignment as assignments_
from autograder.engine import reference
from autograder.engine.results import Check, Result
from autograder.samples.submissions import COURSE, SLUG, implementations

A = {task: textwrap.dedent(inspect.getsource(function)) for task, function in
     implementations(SLUG).CORRECT.items()}

A_COPY = {
    "softmax": '''def softmax(x, axis=-1):
    # stable: work in log space
    values = np.asarray(x, dtype=float)
    peak = np.max(values, axis=axis, keepdims=True)
    summed = np.sum(np.exp(values - peak), axis=axis, keepdims=True)
    log_norm = peak + np.log(summed)
    return np.exp(values - log_norm)
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(Q, K, V, mask=None):
    dim = Q.shape[-1]
    s = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(dim)
    if mask is None:
        mask = np.ones(s.shape, dtype=bool)
    full = np.broadcast_shapes(mask.shape, s.shape)
    mask = np.broadcast_to(mask, full)
    s = np.where(mask, s, -1e300)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s) * mask
    tot = w.sum(axis=-1, keepdims=True)
    w = w / np.where(tot == 0, 1.0, tot)
    return np.einsum("...qk,...kv->...qv", w, V), w
''',
    "causal_mask": '''def causal_mask(T):
    m = np.zeros((T, T), dtype=bool)
    for row in range(T):
        for col in range(row + 1):
            m[row, col] = True   # on or below the diagonal
    return m
''',
    "padding_mask": '''def padding_mask(lengths, T):
    return np.array([[p < n for p in range(T)] for n in lengths])
''',
}

B = {
    "softmax": '''def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(Q, K, V, mask=None):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    # a fully masked row has max -inf: shift it by 0
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exps = np.exp(scores - row_max)
    totals = exps.sum(axis=-1, keepdims=True)
    weights = np.divide(exps, totals, out=np.zeros_like(exps), where=totals > 0)
    return weights @ V, weights
''',
    "causal_mask": '''def causal_mask(T):
    return np.tril(np.ones((T, T), dtype=bool))
''',
    "padding_mask": '''def padding_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]
''',
}

B_COPY = {
    "softmax": '''def softmax(x, axis=-1):
    # subtract the max for stability
    arr = np.asarray(x, dtype=float)
    biggest = np.max(arr, axis=axis, keepdims=True)
    centred = arr - biggest
    ex = np.exp(centred)
    return ex / np.sum(ex, axis=axis, keepdims=True)
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(Q, K, V, mask=None):
    dim = Q.shape[-1]
    Kt = np.swapaxes(K, -1, -2)
    s = Q @ Kt / np.sqrt(dim)
    if mask is not None:
        s = np.where(mask, s, -np.inf)      # masked -> -inf
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    ex = np.exp(s - m)
    tot = ex.sum(axis = -1, keepdims = True)
    w = np.divide(ex, tot, out=np.zeros_like(ex), where=tot > 0)
    return w @ V, w
''',
    "causal_mask": '''def causal_mask(T):
    return np.tril(np.ones((T,T), dtype=bool))   # lower triangle
''',
    "padding_mask": '''def padding_mask(lengths, T):
    positions = np.arange(T)[None, :]
    return positions < np.asarray(lengths)[:, None]
''',
}

C = {
    "softmax": '''def softmax(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    numerator = np.exp(z)
    denominator = numerator.sum(axis=axis, keepdims=True)
    return numerator / denominator
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(Q, K, V, mask=None):
    scale = 1.0 / np.sqrt(K.shape[-1])
    logits = np.matmul(Q, np.moveaxis(K, -1, -2)) * scale
    if mask is None:
        weights = softmax(logits, axis=-1)
    else:
        logits = np.where(mask, logits, -1e9)
        weights = softmax(logits, axis=-1) * mask
        norm = weights.sum(axis=-1, keepdims=True)
        norm[norm == 0] = 1.0
        weights = weights / norm
    return np.matmul(weights, V), weights
''',
    "causal_mask": '''def causal_mask(T):
    rows = np.arange(T)[:, None]
    cols = np.arange(T)[None, :]
    return cols <= rows
''',
    "padding_mask": '''def padding_mask(lengths, T):
    out = np.zeros((len(lengths), T), dtype=bool)
    for b, n in enumerate(lengths):
        out[b, :n] = True
    return out
''',
}

D_HELPERS = '''def stable_exp(values, axis):
    """exp of the values shifted by their maximum along axis"""
    peak = np.amax(values, axis=axis, keepdims=True)
    peak = np.where(np.isneginf(peak), 0.0, peak)
    return np.exp(values - peak)


def normalise(values, axis):
    total = np.sum(values, axis=axis, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    return values / safe
'''

D = {
    "softmax": '''def softmax(x, axis=-1):
    return normalise(stable_exp(np.asarray(x, float), axis), axis)
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(Q, K, V, mask=None):
    Q = np.asarray(Q); K = np.asarray(K); V = np.asarray(V)
    raw = np.einsum('...id,...jd->...ij', Q, K)
    raw = raw / np.sqrt(Q.shape[-1])
    if mask is not None:
        raw = np.where(mask, raw, -np.inf)
    attn = normalise(stable_exp(raw, -1), -1)
    result = np.einsum('...ij,...jv->...iv', attn, V)
    return result, attn
''',
    "causal_mask": '''def causal_mask(T):
    return ~np.triu(np.ones((T, T), dtype=bool), k=1)
''',
    "padding_mask": '''def padding_mask(lengths, T):
    return np.less.outer(np.arange(T), np.asarray(lengths)).T
''',
}

D_COPY_HELPERS = '''# helper functions
def norm_rows(arr, ax):
    # divide by the sum, never by zero
    s = np.sum(arr, axis=ax, keepdims=True)
    s_safe = np.where(s > 0, s, 1.0)
    return arr / s_safe

def exp_shifted(arr, ax):
    top = np.amax(arr, axis=ax, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    return np.exp(arr - top)
'''

D_COPY = {
    "softmax": '''def softmax(x, axis=-1):
    return norm_rows(exp_shifted(np.asarray(x, float), axis), axis)
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(Q, K, V, mask=None):
    Q = np.asarray(Q)
    K = np.asarray(K)
    V = np.asarray(V)
    sc = np.einsum('...id,...jd->...ij', Q, K)
    sc = sc / np.sqrt(Q.shape[-1])
    if mask is not None:
        sc = np.where(mask, sc, -np.inf)
    probs = norm_rows(exp_shifted(sc, -1), -1)
    return np.einsum('...ij,...jv->...iv', probs, V), probs
''',
    "causal_mask": '''def causal_mask(T):
    # strictly upper = future
    return ~np.triu(np.ones((T, T), dtype = bool), k = 1)
''',
    "padding_mask": '''def padding_mask(lengths, T):
    return np.less.outer(np.arange(T), np.asarray(lengths)).T
''',
}

E = {
    "softmax": '''def softmax(x, axis=-1):
    x = np.array(x, dtype=np.float64)
    x -= x.max(axis=axis, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=axis, keepdims=True)
    return x
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(Q, K, V, mask=None):
    T_q, d_k = Q.shape[-2:]
    scores = (Q @ K.swapaxes(-1, -2)) / d_k ** 0.5
    if mask is not None:
        mask = np.broadcast_to(mask, scores.shape)
        scores = np.where(mask, scores, -np.inf)
        empty = ~mask.any(axis=-1, keepdims=True)
        scores = np.where(empty, 0.0, scores)
    weights = softmax(scores, axis=-1)
    if mask is not None:
        weights = np.where(empty, 0.0, weights)
    return weights @ V, weights
''',
    "causal_mask": '''def causal_mask(T):
    return np.tril(np.ones((T, T), dtype=bool))
''',
    "padding_mask": '''def padding_mask(lengths, T):
    lengths = np.asarray(lengths).reshape(-1, 1)
    return np.arange(T).reshape(1, -1) < lengths
''',
}

E_COPY = {
    "softmax": '''def softmax(x, axis=-1):
    # work on a float copy
    y = np.array(x, dtype=np.float64)
    y -= y.max(axis=axis, keepdims=True)
    np.exp(y, out=y)
    y /= y.sum(axis=axis, keepdims=True)
    return y
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(Q, K, V, mask=None):
    n, depth = Q.shape[-2:]
    kt = K.swapaxes(-1, -2)
    logits = (Q @ kt) / depth ** 0.5
    if mask is not None:
        mask = np.broadcast_to(mask, logits.shape)
        logits = np.where(mask, logits, -np.inf)
        none_allowed = ~mask.any(axis=-1, keepdims=True)
        logits = np.where(none_allowed, 0.0, logits)
    probs = softmax(logits, axis=-1)
    if mask is not None:
        probs = np.where(none_allowed, 0.0, probs)
    return probs @ V, probs
''',
    "causal_mask": '''def causal_mask(T):
    return np.tril(np.ones((T, T), dtype=bool))
''',
    "padding_mask": '''def padding_mask(lengths, T):
    L = np.asarray(lengths).reshape(-1, 1)
    return np.arange(T).reshape(1, -1) < L
''',
}

# student -> (answers, cells of their own); "a-copy" copied "a", and so on
CLASS = {
    "a": (A, []), "b": (B, []), "c": (C, []), "d": (D, [D_HELPERS]), "e": (E, []),
    "a-copy": (A_COPY, []), "b-copy": (B_COPY, []), "d-copy": (D_COPY, [D_COPY_HELPERS]),
    "e-copy": (E_COPY, []),
}
COPIES = {("a", "a-copy"), ("b", "b-copy"), ("d", "d-copy"), ("e", "e-copy")}


def notebook(answers, added=()):
    """The released notebook with its answer cells replaced by `answers` and `added` cells put
    before the first answer cell, as a student would hand it in."""
    handed_in = nbformat.read(COURSE.exercises / f"{SLUG}.ipynb", as_version=4)
    first = None
    for index, cell in enumerate(handed_in.cells):
        task = cell.metadata.get("nbgrader", {}).get("grade_id")
        if first is None and cell.metadata.get("nbgrader", {}).get("solution"):
            first = index
        if task in answers:
            cell.source = answers[task].strip()
    handed_in.cells[first:first] = [nbformat.v4.new_code_cell(source) for source in added]
    return handed_in


def result(student, handed_in):
    """The Result the grader would keep for `handed_in` (its checks are not run: not needed here)."""
    spec = assignments_.load(COURSE, SLUG)
    cells, _ = assignments_.fit(spec, handed_in)
    return Result(student, SLUG, "graded", [Check(t.grade_id, 0.0, t.points) for t in spec.tests],
                  code=assignments_.own_code(spec, cells))


def write_class(out, students):
    """OUT/results/<student>/<SLUG>.json for {student: notebook}."""
    for student, handed_in in students.items():
        path = out / "results" / student / f"{SLUG}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(result(student, handed_in).to_json())
    return out


def book_copies():
    """Students who copied the open edition's listings (the reference's functions): {student:
    (answers, cells of their own)}. "book-1" pasted them as printed, "book-2" renamed and
    re-commented them, "book-3" did the same for two tasks and wrote the masks as author C."""
    graded = reference.graded(COURSE, SLUG)
    printed = {f.name: f.source() + "\n" for f in graded if not f.name.startswith("_")}
    helpers = "\n\n".join(f.source() for f in graded if f.name.startswith("_"))

    def disguise(source, names, comment):
        for old, new in names:
            source = re.sub(rf"\b{old}\b", new, source)
        return re.sub(r"#.*", comment, source)

    two = [("scores", "logits"), ("weights", "probs"), ("shifted", "centred"), ("lengths", "lens")]
    three = [("scores", "s"), ("weights", "w"), ("exps", "numerators"), ("x", "values")]
    book_2 = {task: disguise(source, two, "# see the paper") for task, source in printed.items()}
    book_3 = {task: disguise(source, three, "") for task, source in printed.items() if "mask" not in task}
    return {"book-1": (printed, [helpers]), "book-2": (book_2, [disguise(helpers, two, "")]),
            "book-3": ({**book_3, "causal_mask": C["causal_mask"], "padding_mask": C["padding_mask"]},
                       [disguise(helpers, three, "# checks")])}
