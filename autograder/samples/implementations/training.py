"""What students write for the training exercise.

`CORRECT` holds correct implementations written unlike the reference (flat
lists of leaves, a recursive update that builds new containers, a loop
written out): the hidden checks must accept them. `MISTAKES` holds plausible
wrong implementations, each of one task: the hidden checks must reject every
one, and say why. The `train` functions call the names the notebook defines
(`init_transformer`, `reversal_batch`, `transformer_loss_and_grads`,
`noam_learning_rate`, `adam_step`), imported here from solutions/. The
mistakes graded end to end (GRADED_MISTAKES) are self-contained; the others
share `_tree_map` and are only given to the hidden checks directly.
"""

import math

import numpy as np

from solutions.training import (  # noqa: F401 - the notebook's given names
    adam_step, init_transformer, noam_learning_rate, reversal_batch, transformer_loss_and_grads)

# -- correct, by other means -------------------------------------------------


def correct_noam(step, d_model, warmup_steps=4000, scale=1.0):
    if step < 1:
        raise ValueError("step counts from 1")
    if step < warmup_steps:
        return scale * step / (math.sqrt(d_model) * warmup_steps ** 1.5)
    return scale / math.sqrt(d_model * step)


def correct_adam(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    # recursion that builds new containers; the state keeps a flat count
    def zeros(tree):
        if isinstance(tree, dict):
            return {k: zeros(v) for k, v in tree.items()}
        if isinstance(tree, list):
            return [zeros(v) for v in tree]
        return np.zeros(np.shape(tree))

    if state is None:
        state = {"step": 0, "m": zeros(params), "v": zeros(params)}
    t = state["step"] + 1

    def walk(p, g, m, v):
        if isinstance(p, dict):
            out = {k: walk(p[k], g[k], m[k], v[k]) for k in p}
            return ({k: o[0] for k, o in out.items()}, {k: o[1] for k, o in out.items()},
                    {k: o[2] for k, o in out.items()})
        if isinstance(p, list):
            out = [walk(*x) for x in zip(p, g, m, v)]
            return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out]
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * np.square(g)
        m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
        return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v

    new, m, v = walk(params, grads, state["m"], state["v"])
    return new, {"step": t, "m": m, "v": v}


def correct_train(num_steps, batch_size=32, seed=0):
    params = init_transformer(10, 16, 32, 1, seed=seed)
    rng = np.random.default_rng(seed)
    state = None
    step = 0
    while step < num_steps:
        step += 1
        src, tgt = reversal_batch(rng, batch_size, 4, 10)
        _, grads = transformer_loss_and_grads(src, tgt, params, 2)
        params, state = adam_step(params, grads, state, lr=noam_learning_rate(step, 16, 50))
    return params


# -- mistakes ------------------------------------------------------------------


def noam_warmup_exponent(step, d_model, warmup_steps=4000, scale=1.0):
    if step < 1:
        raise ValueError("step counts from 1")
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)


def noam_no_d_model(step, d_model, warmup_steps=4000, scale=1.0):
    if step < 1:
        raise ValueError("step counts from 1")
    return scale * min(step ** -0.5, step * warmup_steps ** -1.5)


def noam_max(step, d_model, warmup_steps=4000, scale=1.0):
    if step < 1:
        raise ValueError("step counts from 1")
    return scale * d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)


def noam_from_0(step, d_model, warmup_steps=4000, scale=1.0):
    step = step + 1  # "so that step 0 works"
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def noam_accepts_0(step, d_model, warmup_steps=4000, scale=1.0):
    if step == 0:
        return 0.0
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def _tree_map(f, *trees):
    first = trees[0]
    if isinstance(first, dict):
        return {k: _tree_map(f, *(t[k] for t in trees)) for k in first}
    if isinstance(first, list):
        return [_tree_map(f, *items) for items in zip(*trees)]
    return f(*trees)


def adam_no_bias_correction(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    def tree_map(f, *trees):  # self-contained: graded end to end in a notebook
        if isinstance(trees[0], dict):
            return {k: tree_map(f, *(t[k] for t in trees)) for k in trees[0]}
        if isinstance(trees[0], list):
            return [tree_map(f, *items) for items in zip(*trees)]
        return f(*trees)

    if state is None:
        state = {"step": 0, "m": tree_map(np.zeros_like, params), "v": tree_map(np.zeros_like, params)}
    m = tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
    v = tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
    new = tree_map(lambda p, m, v: p - lr * m / (np.sqrt(v) + eps), params, m, v)
    return new, {"step": state["step"] + 1, "m": m, "v": v}


def adam_eps_inside_sqrt(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    def tree_map(f, *trees):  # self-contained: graded end to end in a notebook
        if isinstance(trees[0], dict):
            return {k: tree_map(f, *(t[k] for t in trees)) for k in trees[0]}
        if isinstance(trees[0], list):
            return [tree_map(f, *items) for items in zip(*trees)]
        return f(*trees)

    if state is None:
        state = {"step": 0, "m": tree_map(np.zeros_like, params), "v": tree_map(np.zeros_like, params)}
    t = state["step"] + 1
    m = tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
    v = tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
    new = tree_map(lambda p, m, v: p - lr * (m / (1 - beta1 ** t)) / np.sqrt(v / (1 - beta2 ** t) + eps),
                   params, m, v)
    return new, {"step": t, "m": m, "v": v}


def adam_step_from_0(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    if state is None:
        state = {"step": 0, "m": _tree_map(np.zeros_like, params), "v": _tree_map(np.zeros_like, params)}
    t = state["step"]  # corrected with the count before this step
    m = _tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
    v = _tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
    new = _tree_map(lambda p, m, v: p - lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps),
                    params, m, v)
    return new, {"step": t + 1, "m": m, "v": v}


def adam_pytorch_beta2(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    beta2 = 0.999  # "the usual value"
    if state is None:
        state = {"step": 0, "m": _tree_map(np.zeros_like, params), "v": _tree_map(np.zeros_like, params)}
    t = state["step"] + 1
    m = _tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
    v = _tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
    new = _tree_map(lambda p, m, v: p - lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps),
                    params, m, v)
    return new, {"step": t, "m": m, "v": v}


def adam_pytorch_defaults(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    if state is None:
        state = {"step": 0, "m": _tree_map(np.zeros_like, params), "v": _tree_map(np.zeros_like, params)}
    t = state["step"] + 1
    m = _tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
    v = _tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
    new = _tree_map(lambda p, m, v: p - lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps),
                    params, m, v)
    return new, {"step": t, "m": m, "v": v}


def adam_in_place(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    if state is None:
        state = {"step": 0, "m": _tree_map(np.zeros_like, params), "v": _tree_map(np.zeros_like, params)}
    state["step"] += 1
    t = state["step"]

    def update(p, g, m, v):
        m *= beta1
        m += (1 - beta1) * g
        v *= beta2
        v += (1 - beta2) * g * g
        p -= lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps)
        return p

    _tree_map(update, params, grads, state["m"], state["v"])
    return params, state


def adam_flat_dict_only(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    if state is None:
        state = {"step": 0, "m": {k: np.zeros_like(p) for k, p in params.items()},
                 "v": {k: np.zeros_like(p) for k, p in params.items()}}
    t = state["step"] + 1
    new, m, v = {}, {}, {}
    for k in params:
        m[k] = beta1 * state["m"][k] + (1 - beta1) * np.asarray(grads[k])
        v[k] = beta2 * state["v"][k] + (1 - beta2) * np.asarray(grads[k]) ** 2
        new[k] = params[k] - lr * (m[k] / (1 - beta1 ** t)) / (np.sqrt(v[k] / (1 - beta2 ** t)) + eps)
    return new, {"step": t, "m": m, "v": v}


def adam_default_eps_1e8(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-8):
    # right but for PyTorch's default eps, which matters only where |g| is near it
    return correct_adam(params, grads, state, lr, beta1, beta2, eps)


def train_without_state(num_steps, batch_size=32, seed=0):
    # Adam starts afresh at every step: each parameter moves by ±lr (92.6% on 500 sequences)
    params = init_transformer(10, 16, 32, 1, seed=seed)
    rng = np.random.default_rng(seed)
    for step in range(1, num_steps + 1):
        src, tgt = reversal_batch(rng, batch_size, 4, 10)
        _, grads = transformer_loss_and_grads(src, tgt, params, 2)
        params, _ = adam_step(params, grads, None, lr=noam_learning_rate(step, 16, 50))
    return params


def train_never_updates(num_steps, batch_size=32, seed=0):
    params = init_transformer(10, 16, 32, 1, seed=seed)
    rng, state = np.random.default_rng(seed), None
    for step in range(1, num_steps + 1):
        src, tgt = reversal_batch(rng, batch_size, 4, 10)
        _, grads = transformer_loss_and_grads(src, tgt, params, 2)
        new_params, state = adam_step(params, grads, state, lr=noam_learning_rate(step, 16, 50))
    return params


def train_rate_of_step_1(num_steps, batch_size=32, seed=0):
    params = init_transformer(10, 16, 32, 1, seed=seed)
    rng, state = np.random.default_rng(seed), None
    for step in range(1, num_steps + 1):
        src, tgt = reversal_batch(rng, batch_size, 4, 10)
        _, grads = transformer_loss_and_grads(src, tgt, params, 2)
        params, state = adam_step(params, grads, state, lr=noam_learning_rate(1, 16, 50))
    return params


def train_one_step_short(num_steps, batch_size=32, seed=0):
    # the loop runs step = 1, …, num_steps − 1
    params = init_transformer(10, 16, 32, 1, seed=seed)
    rng, state = np.random.default_rng(seed), None
    for step in range(1, num_steps):
        src, tgt = reversal_batch(rng, batch_size, 4, 10)
        _, grads = transformer_loss_and_grads(src, tgt, params, 2)
        params, state = adam_step(params, grads, state, lr=noam_learning_rate(step, 16, 50))
    return params


CORRECT = {"noam_learning_rate": correct_noam, "adam_step": correct_adam, "train": correct_train}

CHECKS_OF_TASK = {"noam_learning_rate": ["check_noam_learning_rate"],
                  "adam_step": ["check_adam_step"],
                  "train": ["check_train"]}

MISTAKES = {
    "noam-warmup-exponent": ("noam_learning_rate", noam_warmup_exponent,
                             "check_noam_learning_rate", "warmup_steps^(−1.5), not ^(−0.5)"),
    "noam-no-d-model": ("noam_learning_rate", noam_no_d_model,
                        "check_noam_learning_rate", "d_model^(−0.5) is missing"),
    "noam-max": ("noam_learning_rate", noam_max, "check_noam_learning_rate", "max of the two"),
    "noam-from-0": ("noam_learning_rate", noam_from_0, "check_noam_learning_rate", "from 0"),
    "noam-accepts-0": ("noam_learning_rate", noam_accepts_0, "check_noam_learning_rate",
                       "should raise ValueError"),
    "adam-no-bias-correction": ("adam_step", adam_no_bias_correction, "check_adam_step",
                                "no bias correction"),
    "adam-eps-inside-sqrt": ("adam_step", adam_eps_inside_sqrt, "check_adam_step",
                             "inside the square root"),
    "adam-step-from-0": ("adam_step", adam_step_from_0, "check_adam_step", "from 0"),
    "adam-pytorch-beta2": ("adam_step", adam_pytorch_beta2, "check_adam_step", "0.999"),
    "adam-pytorch-defaults": ("adam_step", adam_pytorch_defaults, "check_adam_step", "default"),
    "adam-in-place": ("adam_step", adam_in_place, "check_adam_step", "modified its input"),
    "adam-flat-dict-only": ("adam_step", adam_flat_dict_only, "check_adam_step", "raised"),
    "adam-default-eps-1e-8": ("adam_step", adam_default_eps_1e8, "check_adam_step", "eps=1e-8"),
    "train-without-state": ("train", train_without_state, "check_train", "starts Adam afresh"),
    "train-never-updates": ("train", train_never_updates, "check_train", "still the initial ones"),
    "train-rate-of-step-1": ("train", train_rate_of_step_1, "check_train", "noam_learning_rate(step, 16"),
    "train-one-step-short": ("train", train_one_step_short, "check_train", "those of num_steps − 1"),
}

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["noam-warmup-exponent", "adam-no-bias-correction", "adam-eps-inside-sqrt",
                   "train-without-state"]


# -- two mistakes at once ------------------------------------------------------------

def adam_no_correction_eps_inside(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    def tree_map(f, *trees):
        if isinstance(trees[0], dict):
            return {k: tree_map(f, *(t[k] for t in trees)) for k in trees[0]}
        if isinstance(trees[0], list):
            return [tree_map(f, *items) for items in zip(*trees)]
        return f(*trees)
    if state is None:
        state = {"step": 0, "m": tree_map(np.zeros_like, params), "v": tree_map(np.zeros_like, params)}
    m = tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], grads)
    v = tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], grads)
    new = tree_map(lambda p, m, v: p - lr * m / np.sqrt(v + eps), params, m, v)
    return new, {"step": state["step"] + 1, "m": m, "v": v}


def train_without_state_rate_of_step_1(num_steps, batch_size=32, seed=0):
    params = init_transformer(10, 16, 32, 1, seed=seed)
    rng = np.random.default_rng(seed)
    for step in range(1, num_steps + 1):
        src, tgt = reversal_batch(rng, batch_size, 4, 10)
        _, grads = transformer_loss_and_grads(src, tgt, params, 2)
        params, _ = adam_step(params, grads, None, lr=noam_learning_rate(1, 16, 50))
    return params


# name -> ({task: wrong function}, the check cell whose visible checks run, the words a
#          message may name: those of the mistakes the code makes)
DOUBLE_MISTAKES = {
    "adam-no-correction-eps-inside": ({"adam_step": adam_no_correction_eps_inside}, "test_adam_step",
                                      ("bias correction", "inside the square root")),
    "train-without-state-rate-of-step-1": ({"train": train_without_state_rate_of_step_1}, "test_train",
                                           ("afresh", "state", "noam_learning_rate(step")),
}
