"""Hidden checks for the training exercise.

``check_noam_learning_rate`` and ``check_adam_step`` compare the student's
functions with the reference on seeded random inputs and name the usual
mistakes (no bias correction, ε inside the square root, the step counted from
0, PyTorch's β₂ or ε, the warm-up exponent, ``d_model^−0.5`` missing, ``max``
for ``min``, the inputs or the state modified in place, nested parameters not
handled). ``check_train`` runs a few steps of the student's training loop on a
secret seed and compares the parameters with the reference loop's (the task
fixes every choice, so a correct loop gives the same numbers).
"""

import numpy as np

from solutions import training as reference

from autograder.engine.checking import check, close, named_cause
from autograder.engine.harness import call, seeded

SEED = 14126980  # arXiv 1412.6980, Kingma & Ba, "Adam"
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.noam_learning_rate, reference.adam_step, reference.train)


# -- noam_learning_rate -------------------------------------------------------

def check_noam_learning_rate(noam_learning_rate):
    rng = seeded(SEED)
    d_model = int(rng.choice([16, 64, 512]))
    warmup = int(rng.integers(20, 5000))
    scale = float(rng.uniform(0.5, 2.0))
    steps = sorted({1, 2, warmup - 1, warmup, warmup + 1, 4 * warmup,
                    *(int(s) for s in rng.integers(1, 10 * warmup, size=6))})
    for step in steps:
        on = f"step={step}, d_model={d_model}, warmup_steps={warmup}, scale={scale:.3f}"
        got = call(noam_learning_rate, step, d_model, warmup, scale, on=on)
        expected = reference.noam_learning_rate(step, d_model, warmup, scale)
        check(isinstance(got, (float, np.floating)) and np.ndim(got) == 0,
              f"noam_learning_rate should return one float, got {type(got).__name__} on {on}.")
        if close(got, expected):
            continue
        base = expected / scale
        warm, decay = step * warmup ** -1.5, step ** -0.5
        hints = [
            (scale * max(warm, decay) * d_model ** -0.5,
             "it takes the max of the two terms: the rate is the min of step^(−0.5) and "
             "step · warmup_steps^(−1.5)"),
            (scale * min(step * warmup ** -0.5, decay) * d_model ** -0.5,
             "the warm-up term is step · warmup_steps^(−1.5), not ^(−0.5)"),
            (scale * min(warm, decay), "the factor d_model^(−0.5) is missing"),
            (base, "it ignores scale"),
            (reference.noam_learning_rate(step + 1, d_model, warmup, scale),
             "it counts the steps from 0 (uses step + 1): step counts from 1"),
        ]
        reason = named_cause(got, expected, hints) or \
            "it should be scale · d_model^(−0.5) · min(step^(−0.5), step · warmup_steps^(−1.5))"
        check(False, f"noam_learning_rate is {got:.6g} instead of {expected:.6g} on {on}: {reason}.")
    for step in (0, -3):
        try:
            noam_learning_rate(step, d_model, warmup, scale)
        except ValueError:
            continue
        except Exception as error:  # noqa: BLE001 - student code
            check(False, f"noam_learning_rate(step={step}) should raise ValueError, "
                         f"not {type(error).__name__}.")
        check(False, f"noam_learning_rate(step={step}) should raise ValueError: step counts "
                     "from 1.")


# -- adam_step ------------------------------------------------------------------

def _nested(rng, shapes, scale=1.0):
    return {"W": scale * rng.normal(size=shapes[0]),
            "layers": [{"b": scale * rng.normal(size=shapes[1])},
                       {"b": scale * rng.normal(size=shapes[2]), "gamma": scale * rng.normal(size=shapes[3])}]}


def _leaves(tree, path=""):
    if isinstance(tree, dict):
        for key in sorted(tree):
            yield from _leaves(tree[key], f"{path}[{key!r}]")
    elif isinstance(tree, (list, tuple)):
        for index, item in enumerate(tree):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, tree


def _map_zeros(tree):
    if isinstance(tree, dict):
        return {k: _map_zeros(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_map_zeros(v) for v in tree]
    return np.zeros(np.shape(tree))


def _same_structure(a, b):
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            _same_structure(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(
            _same_structure(x, y) for x, y in zip(a, b))
    return np.shape(a) == np.shape(b)


def _same(got, want, nan_equal=False):
    """Whether the nested arrays ``got`` equal ``want``, leaf by leaf, with the checks' one
    tolerance applied to each leaf divided by its size (Adam's v is of order g², 1e-10 here).
    NaN equals nothing, unless ``nan_equal`` (to recognise a mistake's NaN, never for points)."""
    pairs = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
             for (_, a), (_, b) in zip(_leaves(got), _leaves(want))]
    return len(pairs) == len(list(_leaves(want))) and all(
        a.shape == b.shape and np.array_equal(np.isfinite(a), np.isfinite(b))
        and np.array_equal(a[~np.isfinite(a)], b[~np.isfinite(b)], equal_nan=nan_equal)  # the same infinities
        and close(np.where(np.isfinite(a), a, 0) / _size(b), np.where(np.isfinite(b), b, 0) / _size(b))
        for a, b in pairs)


def _size(array):
    return float(np.max(np.abs(array), initial=0.0, where=np.isfinite(array))) or 1.0


def _adam_mistakes(params, grads, lr, beta1, beta2, eps):
    """(new parameters, what is wrong) of the usual mistakes of a first Adam step."""
    def first_step(update):
        with np.errstate(all="ignore"):
            return _tree_map(update, params, grads)
    return [
        (first_step(lambda p, g: p - lr * ((1 - beta1) * g / (1 - beta1 ** 0))
                    / (np.sqrt((1 - beta2) * g * g / (1 - beta2 ** 0)) + eps)),
         "the bias correction uses the step counted from 0, 1 − β^0 = 0: count from 1"),
        (first_step(lambda p, g: p - lr * ((1 - beta1) * g) / (np.sqrt((1 - beta2) * g * g) + eps)),
         "there is no bias correction: divide m by 1 − β1^step and v by 1 − β2^step"),
        (first_step(lambda p, g: p - lr * g / np.sqrt(g * g + eps)),
         "ε is inside the square root: it is added after it, √v̂ + ε"),
    ]


def _tree_map(f, *trees):
    if isinstance(trees[0], dict):
        return {k: _tree_map(f, *(t[k] for t in trees)) for k in trees[0]}
    if isinstance(trees[0], (list, tuple)):
        return [_tree_map(f, *items) for items in zip(*trees)]
    return f(*trees)


def check_adam_step(adam_step):
    rng = seeded(SEED + 1)
    shapes = [(3, 4), (4,), (2,), (2,)]
    params = _nested(rng, shapes)
    # Gradients of very different sizes, some near ε, as late in training.
    grads = [_nested(rng, shapes, scale) for scale in (1e-4, 3.0, 1e-5, 0.5, 3e-9)]
    lr, beta1, beta2, eps = float(rng.uniform(1e-3, 1e-2)), 0.9, 0.98, 1e-9
    state, expected_params, expected_state = None, params, None
    for n, g in enumerate(grads, start=1):
        on = (f"step {n} (a nested dict of arrays and a list of dicts, lr={lr:.4f}, "
              f"Vaswani et al.'s beta2=0.98 and eps=1e-9)")
        result = call(adam_step, expected_params, g, expected_state if n > 1 else None,
                      lr=lr, beta1=beta1, beta2=beta2, eps=eps, on=on, stand_ins=GRADED)
        check(isinstance(result, tuple) and len(result) == 2,
              "adam_step should return a tuple (new_params, new_state).")
        got, state = result
        check(_same_structure(got, params),
              f"the new parameters should have the structure of params (the same keys, "
              f"lists and shapes) on {on}.")
        check(isinstance(state, dict) and {"step", "m", "v"} <= state.keys(),
              f'the state should be a dict with keys "step", "m" and "v" on {on}.')
        check(state["step"] == n,
              f'state["step"] should be {n} after {n} call(s), got {state["step"]!r}: it counts '
              "the steps taken, from 1.")
        check(_same_structure(state["m"], params) and _same_structure(state["v"], params),
              f'state["m"] and state["v"] should have the structure of params on {on}.')
        want, want_state = reference.adam_step(expected_params, g, expected_state, lr, beta1, beta2,
                                               eps)
        if not _same(got, want):
            mistakes = _adam_mistakes(expected_params, g, lr, beta1, beta2, eps) if n == 1 else []
            cause = named_cause(got, want, mistakes, same=lambda a, b: _same(a, b, nan_equal=True))
            if cause is not None:
                check(False, f"adam_step gives wrong parameters at {on}: {cause}.")
            check(all(np.all(np.isfinite(a)) for _, a in _leaves(got)),
                  f"adam_step gives parameters that hold inf or nan at {on}.")
            check(False, f"adam_step gives wrong parameters at {on}: they should be "
                         "p − lr · m̂ / (√v̂ + ε), with m̂ = m / (1 − β1^step) and v̂ = v / (1 − β2^step).")
        previous_v = (expected_state or {"v": _map_zeros(params)})["v"]
        pytorch_v = _tree_map(lambda v, gg: 0.999 * v + 0.001 * gg * gg, previous_v, g)
        check(not _same(state["v"], pytorch_v) or _same(pytorch_v, want_state["v"]),
              f"state[\"v\"] is 0.999 v + 0.001 g² at {on}: it uses PyTorch's default β2 = 0.999 "
              "instead of the beta2 it was given (Vaswani et al.'s 0.98).")
        for name in ("m", "v"):
            check(_same(state[name], want_state[name]),
                  f'state["{name}"] is wrong at {on}: keep the running averages without the '
                  "bias correction, m = β1 m + (1 − β1) g and v = β2 v + (1 − β2) g².")
        expected_params, expected_state = want, want_state
    _check_adam_defaults(adam_step, params, grads[1])


def _check_adam_defaults(adam_step, params, grads):
    """The defaults, where each matters: ε only where gradients are near it (|g| ~ 1e-9),
    as late in training, and β2 in the state."""
    near_eps = _tree_map(lambda g: 3e-9 * g / _size(g), grads)
    on = "the default arguments, with gradients of about 3e-9 (near ε)"
    got, state = call(adam_step, params, near_eps, on=on, stand_ins=GRADED)
    if _same(state["v"], _tree_map(lambda g: 0.001 * g * g, near_eps)):
        check(False, "with the default arguments, v = 0.001 g² after one step: the default "
                     "β2 should be Vaswani et al.'s 0.98, not PyTorch's 0.999.")
    want, _ = reference.adam_step(params, near_eps)
    if not _same(got, want):
        check(not _same(got, reference.adam_step(params, near_eps, eps=1e-8)[0]),
              f"with {on}, adam_step takes eps=1e-8 (PyTorch's default): Vaswani et al.'s, "
              "the default it should have, is 1e-9.")
        check(False, f"with {on}, adam_step gives other parameters than with lr=1e-3 (Kingma & "
                     "Ba's α), beta1=0.9, and Vaswani et al.'s beta2=0.98 and eps=1e-9, the "
                     "defaults it should have.")


# -- train ---------------------------------------------------------------------------

def check_train(train):
    """The loop, on a secret seed: a few steps must give exactly the reference's parameters.

    The task fixes every choice (initialisation and batches from ``seed``, the
    rate of ``noam_learning_rate(step, 16, 50)``, Adam's defaults), so a
    correct loop is deterministic; a short run is enough to tell, and cheap.
    How well a long run reverses is the visible check's business.
    """
    rng = seeded(SEED + 2)
    seed, steps, batch_size = int(rng.integers(1000, 10 ** 6)), 12, int(rng.integers(4, 12))
    on = f"{steps} steps with batch_size={batch_size}, seed={seed}"
    params = call(train, steps, batch_size=batch_size, seed=seed, on=on, stand_ins=GRADED)
    initial = reference.init_transformer(10, 16, 32, 1, seed=seed)
    check(isinstance(params, dict) and _same_structure(params, initial),
          "train should return the trained parameters, with the structure init_transformer "
          "gives (vocab_size=10, d_model=16, d_ff=32, num_layers=1).")
    expected = reference.train(steps, batch_size, seed)
    # The key biases b_k are left out: their gradient is exactly 0 (a shift of every key
    # leaves the softmax unchanged), so what reaches Adam is rounding noise, and Adam
    # turns its sign into a full step; another order of summation gives another sign.
    if _same(_without_b_k(params), _without_b_k(expected)):
        return
    if all(np.array_equal(a, b) for (_, a), (_, b) in zip(_leaves(params), _leaves(initial))):
        check(False, f"after {on} the parameters are still the initial ones: keep what adam_step "
                     "returns, params, state = adam_step(params, grads, state, lr=lr).")
    check(not _same(_without_b_k(params), _without_b_k(_loop(steps, batch_size, seed, keep_state=False))),
          f"after {on} the parameters are those of a loop that starts Adam afresh at every step: "
          "pass the state adam_step returned to the next call.")
    check(False, f"after {on} the parameters differ from those of the loop the task describes: "
                 "init_transformer(10, 16, 32, 1, seed=seed), rng = np.random.default_rng(seed), "
                 "then for step = 1 … num_steps a batch reversal_batch(rng, batch_size, 4, 10), "
                 "the gradients, lr = noam_learning_rate(step, 16, warmup_steps=50) and one "
                 "adam_step that keeps the new parameters and state.")


def _without_b_k(params):
    return [a for path, a in _leaves(params) if not path.endswith("['b_k']")]


def _loop(num_steps, batch_size, seed, keep_state=True):
    """The reference loop, or with one mistake: Adam's state dropped after every step
    (``keep_state=False``)."""
    params = reference.init_transformer(10, 16, 32, 1, seed=seed)
    rng, state = np.random.default_rng(seed), None
    for step in range(1, num_steps + 1):
        src, tgt = reference.reversal_batch(rng, batch_size, 4, 10)
        _, grads = reference.transformer_loss_and_grads(src, tgt, params, 2)
        params, state = reference.adam_step(params, grads, state if keep_state else None,
                                            lr=reference.noam_learning_rate(step, 16, warmup_steps=50))
    return params
