"""Hidden checks for the training exercise: ``noam_learning_rate`` as a case table (`engine.cases`);
``adam_step`` and ``train``, whose nested parameters are judged leaf by leaf, in plain Python beside it
(a right loop gives the reference's numbers: the task fixes every choice), with the stand-ins."""

import functools

import numpy as np

from solutions import training as reference
from solutions.training import _map

from autograder.engine.cases import Exercise, Fact, Mistake, case
from autograder.engine.checking import ATOL, RTOL, CheckFailed, check, named_cause
from autograder.engine.harness import call, seeded

SEED = 14126980  # arXiv 1412.6980, Kingma & Ba, "Adam"


def _noam(pick=min, exponent=-1.5):
    """The rate with `pick` of the two terms, its warm-up term step · warmup_steps^`exponent`."""
    return lambda step, d_model, warmup_steps, scale: scale * d_model ** -0.5 * pick(
        step ** -0.5, step * warmup_steps ** exponent)


exercise = Exercise(reference)
noam_learning_rate = exercise.task(
    "noam_learning_rate", hint="it should be scale · d_model^(−0.5) · min(step^(−0.5), step · warmup_steps^(−1.5))",
    requires=[Fact("{name} should be one float.", lambda actual, **_: isinstance(actual, (float, np.floating)))],
    mistakes=[Mistake("it takes the max of the two terms: the rate is the min of step^(−0.5) and "
                      "step · warmup_steps^(−1.5)", _noam(pick=max)),
              Mistake("the warm-up term is step · warmup_steps^(−1.5), not ^(−0.5)", _noam(exponent=-0.5)),
              Mistake("the factor d_model^(−0.5) is missing", lambda d_model, **given: reference.noam_learning_rate(
                  d_model=1, **given)),
              Mistake("it ignores scale", lambda scale, **given: reference.noam_learning_rate(**given)),
              Mistake("it counts the steps from 0 (uses step + 1): step counts from 1",
                      lambda step, **given: reference.noam_learning_rate(step + 1, **given))])
exercise.task("adam_step")
exercise.task("train")


def check_noam_learning_rate(function):
    rng = seeded(SEED)
    d_model, warmup, scale = int(rng.choice([16, 64, 512])), int(rng.integers(20, 5000)), float(rng.uniform(0.5, 2.0))
    steps = sorted({1, 2, warmup - 1, warmup, warmup + 1, 4 * warmup,
                    *(int(s) for s in rng.integers(1, 10 * warmup, size=6))})
    on = f"d_model={d_model}, warmup_steps={warmup}, scale={scale:.3f}"
    noam_learning_rate.check(function, [case(f"step={step}, {on}", step, d_model, warmup, scale) for step in steps] + [
        case(f"step={step}", step, d_model, warmup, scale).rejected("step counts from 1") for step in (0, -3)])


def _leaves(tree, path=""):
    """(path, array) of each leaf of nested dicts and lists, keys in order."""
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in _leaves(tree[key], f"{path}[{key!r}]")]
    if isinstance(tree, (list, tuple)):
        return [leaf for index, item in enumerate(tree) for leaf in _leaves(item, f"{path}[{index}]")]
    return [(path, tree)]


def _same(got, want, nan_equal=False):
    """Whether the nested arrays ``got`` equal ``want``, leaf by leaf, with ATOL scaled to each leaf's size (v is
    of order g²). NaN equals nothing, unless ``nan_equal`` (to recognise a mistake's NaN, never for points)."""
    pairs = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
             for (_, a), (_, b) in zip(_leaves(got), _leaves(want))]
    return len(pairs) == len(_leaves(want)) and all(a.shape == b.shape and np.allclose(
        a, b, RTOL, ATOL * (np.max(np.abs(b), initial=0.0, where=np.isfinite(b)) or 1.0), nan_equal) for a, b in pairs)


def _nested(rng, scale=1.0):  # parameters as a dict of arrays and a list of dicts
    W, b, b_2, gamma = (scale * rng.normal(size=shape) for shape in ((3, 4), (4,), (2,), (2,)))
    return {"W": W, "layers": [{"b": b}, {"b": b_2, "gamma": gamma}]}


def _adam(function, on, params, *args, **kwargs):
    """The student's (new parameters, new state) on `on`, of the structure of `params`."""
    result = call(function, params, *args, on=on, stand_ins=exercise.graded, **kwargs)
    check(isinstance(result, tuple) and len(result) == 2, "adam_step should return a tuple (new_params, new_state).")
    got, state = result
    shape = _map(np.shape, params)
    check(_map(np.shape, got) == shape, f"the new parameters should have the structure of params (the same keys, "
                                        f"lists and shapes) on {on}.")
    check(isinstance(state, dict) and {"step", "m", "v"} <= state.keys() and _map(np.shape, state["m"]) == shape
          == _map(np.shape, state["v"]), f'the state should be a dict with keys "step", "m" and "v", m and v of the '
          f'structure of params, on {on}.')
    return got, state


def check_adam_step(function):
    rng = seeded(SEED + 1)
    params = _nested(rng)
    grads = [_nested(rng, scale) for scale in (1e-4, 3.0, 1e-5, 0.5, 3e-9)]  # some near ε, as late on
    lr, beta1, beta2, eps = float(rng.uniform(1e-3, 1e-2)), 0.9, 0.98, 1e-9
    state, current = None, params
    for n, g in enumerate(grads, start=1):
        on = f"step {n} (a nested dict of arrays and a list of dicts, lr={lr:.4f}, Vaswani et al.'s beta2=0.98 and " \
             "eps=1e-9)"
        got, got_state = _adam(function, on, current, g, state, lr=lr, beta1=beta1, beta2=beta2, eps=eps)
        check(got_state["step"] == n, f'state["step"] should be {n} after {n} call(s), got {got_state["step"]!r}: '
                                      "it counts the steps taken, from 1.")
        want, want_state = reference.adam_step(current, g, state, lr, beta1, beta2, eps)
        if not _same(got, want):
            with np.errstate(all="ignore"):  # a first step with one step changed (10 ** 6: 1 − β^step = 1)
                mistakes = [] if n > 1 else [(reference.adam_step(current, g, {"step": step, "m": _map(
                    np.zeros_like, g), "v": _map(np.zeros_like, g)}, lr, beta1, beta2, eps)[0], why) for step, why in (
                        (-1, "the bias correction uses the step counted from 0, 1 − β^0 = 0: count from 1"),
                        (10 ** 6, "there is no bias correction: divide m by 1 − β1^step and v by 1 − β2^step"))]
                mistakes.append((_map(lambda p, g: p - lr * g / np.sqrt(g * g + eps), current, g),
                                 "ε is inside the square root: it is added after it, √v̂ + ε"))
            cause = named_cause(got, want, mistakes, same=functools.partial(_same, nan_equal=True))
            right = ("they should be p − lr · m̂ / (√v̂ + ε), with m̂ = m / (1 − β1^step) and v̂ = v / (1 − β2^step)"
                     if all(np.all(np.isfinite(a)) for _, a in _leaves(got)) else "they hold inf or nan")
            raise CheckFailed(f"adam_step gives wrong parameters at {on}: {cause or right}.", cause=cause)
        pytorch_v = _map(lambda v, g: 0.999 * v + 0.001 * g * g, (state or {"v": _map(np.zeros_like, params)})["v"], g)
        check(not _same(got_state["v"], pytorch_v) or _same(pytorch_v, want_state["v"]),
              f"state[\"v\"] is 0.999 v + 0.001 g² at {on}: it uses PyTorch's default β2 = 0.999 "
              "instead of the beta2 it was given (Vaswani et al.'s 0.98).")
        for name in ("m", "v"):
            check(_same(got_state[name], want_state[name]),
                  f'state["{name}"] is wrong at {on}: keep the running averages without the '
                  "bias correction, m = β1 m + (1 − β1) g and v = β2 v + (1 − β2) g².")
        current, state = want, want_state
    # The defaults, where each matters: ε only where gradients are near it (|g| ~ 1e-9), as late in training.
    near_eps = _map(lambda g: 3e-9 * g / np.abs(g).max(), grads[1])
    on = "the default arguments, with gradients of about 3e-9 (near ε)"
    got, got_state = _adam(function, on, params, near_eps)
    check(not _same(got_state["v"], _map(lambda g: 0.001 * g * g, near_eps)),
          "with the default arguments, v = 0.001 g² after one step: the default β2 should be Vaswani et al.'s 0.98, "
          "not PyTorch's 0.999.")
    if not _same(got, reference.adam_step(params, near_eps)[0]):
        check(not _same(got, reference.adam_step(params, near_eps, eps=1e-8)[0]),
              f"with {on}, adam_step takes eps=1e-8 (PyTorch's default): Vaswani et al.'s, "
              "the default it should have, is 1e-9.")
        check(False, f"with {on}, adam_step gives other parameters than with lr=1e-3 (Kingma & Ba's α), beta1=0.9, "
                     "and Vaswani et al.'s beta2=0.98 and eps=1e-9, the defaults it should have.")


def _afresh(num_steps, batch_size, seed):
    """The reference loop with one mistake: Adam's state dropped after every step."""
    params, rng = reference.init_transformer(10, 16, 32, 1, seed=seed), np.random.default_rng(seed)
    for step in range(1, num_steps + 1):
        src, tgt = reference.reversal_batch(rng, batch_size, 4, 10)
        _, grads = reference.transformer_loss_and_grads(src, tgt, params, 2)
        params, _ = reference.adam_step(params, grads, lr=reference.noam_learning_rate(step, 16, warmup_steps=50))
    return params


def _without_b_k(params):
    """The leaves but the key biases b_k, of gradient 0: Adam turns the sign of its rounding noise into a step."""
    return [a for path, a in _leaves(params) if not path.endswith("['b_k']")]


def check_train(function):
    """A few steps on a secret seed give the reference's parameters (a long run: the visible check)."""
    rng = seeded(SEED + 2)
    seed, steps, batch_size = int(rng.integers(1000, 10 ** 6)), 12, int(rng.integers(4, 12))
    on = f"{steps} steps with batch_size={batch_size}, seed={seed}"
    params = call(function, steps, batch_size=batch_size, seed=seed, on=on, stand_ins=exercise.graded)
    initial = reference.init_transformer(10, 16, 32, 1, seed=seed)
    check(isinstance(params, dict) and _map(np.shape, params) == _map(np.shape, initial),
          "train should return the trained parameters, with the structure init_transformer "
          "gives (vocab_size=10, d_model=16, d_ff=32, num_layers=1).")
    got, expected = _without_b_k(params), _without_b_k(reference.train(steps, batch_size, seed))
    if not _same(got, expected):
        cause = named_cause(got, expected, same=_same, mistakes=[
            (_without_b_k(initial), "are still the initial ones: keep what adam_step returns, params, state = "
                                    "adam_step(params, grads, state, lr=lr)"),
            (_without_b_k(_afresh(steps, batch_size, seed)),
             "are those of a loop that starts Adam afresh at every step: pass the state adam_step returned to the "
             "next call"),
            (_without_b_k(reference.train(steps - 1, batch_size, seed)),
             f"are those of num_steps − 1 = {steps - 1} steps: the loop runs step = 1, 2, …, num_steps")])
        raise CheckFailed(f"after {on} the parameters " + (f"{cause}." if cause else (
            "differ from those of the loop the task describes: init_transformer(10, 16, 32, 1, seed=seed), rng = "
            "np.random.default_rng(seed), then for step = 1 … num_steps a batch reversal_batch(rng, batch_size, 4, "
            "10), the gradients, lr = noam_learning_rate(step, 16, warmup_steps=50) and one adam_step that keeps the "
            "new parameters and state.")), cause=cause)
