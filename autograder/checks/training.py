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

import math

import numpy as np

from solutions import training as reference

from autograder.checking import check
from autograder.harness import blame, call, quietly, seeded

SEED = 14126980  # arXiv 1412.6980, Kingma & Ba, "Adam"


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
        if math.isclose(got, expected, rel_tol=1e-9):
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
        reason = next((why for value, why in hints if math.isclose(got, value, rel_tol=1e-9)),
                      "it should be scale · d_model^(−0.5) · min(step^(−0.5), step · warmup_steps^(−1.5))")
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


def _diagnose_adam(got, params, grads, lr, beta1, beta2, eps):
    """Why the first step from a fresh state is wrong, when it can be told."""
    variants = {
        "there is no bias correction: divide m by 1 − β1^step and v by 1 − β2^step":
            lambda p, g: p - lr * ((1 - beta1) * g) / (np.sqrt((1 - beta2) * g * g) + eps),
        "ε is inside the square root: it is added after it, √v̂ + ε":
            lambda p, g: p - lr * g / np.sqrt(g * g + eps),
    }
    for why, step in variants.items():
        if all(np.allclose(a, step(p, g), rtol=1e-9, atol=1e-14)
               for (_, a), (_, p), (_, g) in zip(_leaves(got), _leaves(params), _leaves(grads))):
            return why
    return None


def check_adam_step(adam_step):
    rng = seeded(SEED + 1)
    shapes = [(3, 4), (4,), (2,), (2,)]
    params = _nested(rng, shapes)
    # Gradients of very different sizes, some near ε, as late in training.
    grads = [_nested(rng, shapes, scale) for scale in (1e-4, 3.0, 1e-5, 0.5)]
    lr, beta1, beta2, eps = float(rng.uniform(1e-3, 1e-2)), 0.9, 0.98, 1e-9
    state, expected_params, expected_state = None, params, None
    for n, g in enumerate(grads, start=1):
        on = (f"step {n} (a nested dict of arrays and a list of dicts, lr={lr:.4f}, "
              f"the paper's beta2=0.98 and eps=1e-9)")
        result = call(adam_step, expected_params, g, expected_state if n > 1 else None,
                      lr=lr, beta1=beta1, beta2=beta2, eps=eps, on=on)
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
        ok = all(np.allclose(a, b, rtol=1e-9, atol=1e-14)
                 for (_, a), (_, b) in zip(_leaves(got), _leaves(want)))
        if not ok:
            nan = any(not np.all(np.isfinite(a)) for _, a in _leaves(got))
            why = (_diagnose_adam(got, expected_params, g, lr, beta1, beta2, eps) if n == 1 else None)
            if nan:
                why = ("the new parameters hold inf or nan: with the step counted from 0 the bias "
                       "correction 1 − β^0 is 0; count from 1")
            check(False, f"adam_step gives wrong parameters at {on}: "
                         f"{why or 'follow the formulas m̂ = m / (1 − β1^step), v̂ = v / (1 − β2^step), p − lr · m̂ / (√v̂ + ε)'}.")
        previous_v = (expected_state or {"v": _map_zeros(params)})["v"]
        pytorch_v = [0.999 * v + 0.001 * gg * gg for (_, v), (_, gg) in
                     zip(_leaves(previous_v), _leaves(g))]
        check(not all(np.allclose(a, b, rtol=1e-9, atol=0) for (_, a), b in zip(_leaves(state["v"]), pytorch_v)),
              f"state[\"v\"] is 0.999 v + 0.001 g² at {on}: it uses PyTorch's default β2 = 0.999 "
              "instead of the beta2 it was given (the paper's 0.98).")
        for name in ("m", "v"):
            check(all(np.allclose(a, b, rtol=1e-9, atol=1e-30) for (_, a), (_, b)
                      in zip(_leaves(state[name]), _leaves(want_state[name]))),
                  f'state["{name}"] is wrong at {on}: keep the running averages without the '
                  "bias correction, m = β1 m + (1 − β1) g and v = β2 v + (1 − β2) g².")
        expected_params, expected_state = want, want_state
    # Using the default arguments: the paper's.
    _, default_state = call(adam_step, params, grads[1], on="the default arguments")
    v_got = default_state["v"]["W"]
    if np.allclose(v_got, 0.001 * grads[1]["W"] ** 2):
        check(False, "with the default arguments, v = 0.001 g² after one step: the default "
                     "β2 should be the paper's 0.98, not PyTorch's 0.999.")
    want, _ = reference.adam_step(params, grads[1])
    check(np.allclose(call(adam_step, params, grads[1], on="the default arguments")[0]["W"],
                      want["W"], rtol=1e-9),
          "with the default arguments adam_step should use the paper's lr=1e-3, beta1=0.9, "
          "beta2=0.98 and eps=1e-9.")


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
    params = call(train, steps, batch_size=batch_size, seed=seed, on=on)
    initial = reference.init_transformer(10, 16, 32, 1, seed=seed)
    check(isinstance(params, dict) and _same_structure(params, initial),
          "train should return the trained parameters, with the structure init_transformer "
          "gives (vocab_size=10, d_model=16, d_ff=32, num_layers=1).")
    expected = reference.train(steps, batch_size, seed)
    # The key biases b_k are left out: their gradient is exactly 0 (a shift of every key
    # leaves the softmax unchanged), so what reaches Adam is rounding noise, and Adam
    # turns its sign into a full step; another order of summation gives another sign.
    if all(np.allclose(a, b, rtol=1e-6, atol=1e-8)
           for (path, a), (_, b) in zip(_leaves(params), _leaves(expected))
           if not path.endswith("['b_k']")):
        return
    if all(np.array_equal(a, b) for (_, a), (_, b) in zip(_leaves(params), _leaves(initial))):
        check(False, f"after {on} the parameters are still the initial ones: keep what adam_step "
                     "returns, params, state = adam_step(params, grads, state, lr=lr).")
    check(False, f"after {on} the parameters differ from those of the loop the task describes: "
                 "init_transformer(10, 16, 32, 1, seed=seed), rng = np.random.default_rng(seed), "
                 "then for step = 1 … num_steps a batch reversal_batch(rng, batch_size, 4, 10), "
                 "the gradients, lr = noam_learning_rate(step, 16, warmup_steps=50) and one "
                 "adam_step that keeps the new parameters and state"
                 + blame(train, ["noam_learning_rate", "adam_step"], _works) + ".")


def _works(name, function):
    """Whether the student's earlier task passes its check."""
    checks = {"noam_learning_rate": check_noam_learning_rate, "adam_step": check_adam_step}
    return quietly(lambda: checks[name](function) or True) is True
