"""Hidden checks for the backpropagation exercise.

Each ``check_*`` runs the student's function on seeded random inputs (several
leading axes, masks with all-masked rows, logits of ±1e4, label smoothing on
and off), compares every gradient with the reference in
``solutions/backpropagation.py`` and, at the first difference, raises
``CheckFailed`` with one sentence that names the mistake when the wrong
gradient equals what a usual mistake gives (computed here by the reference
pieces with one step changed). Only results are compared, never how they were
computed.
"""

import math

import numpy as np

from solutions import backpropagation as reference
from solutions.scaled_dot_product import causal_mask, masked_softmax, padding_mask, softmax

from autograder.engine.checking import check, check_shape, close
from autograder.engine.harness import call, compare, seeded

SEED = 19861009  # Rumelhart, Hinton & Williams, "Learning representations by back-propagating errors", Nature, 9 October 1986
NAN = "contains NaN or inf (an all-masked row has weight 0 everywhere: its gradient is 0)"
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.softmax_backward, reference.scaled_dot_product_attention_backward,
          reference.layer_norm_backward, reference.cross_entropy, reference.multi_head_attention_backward)




def _compare(actual, expected, name, mistakes=(), hint=""):
    """Check one gradient: its shape, finite, then the harness's loop (reference, the usual
    mistakes). ``hint`` (a string, or a function giving one, called only on failure) says what
    the gradient should be."""
    check_shape(actual, expected.shape, name)
    check(np.all(np.isfinite(actual)), f"{name} {NAN}.")
    compare(actual, expected, name, mistakes, hint=hint)


def _unpack(result, count, function, description):
    name = getattr(function, "__name__", "your function")
    check(isinstance(result, (tuple, list)) and len(result) == count,
          f"{name} should return {count} gradients as a tuple, but on {description} it returned "
          f"{type(result).__name__}{'' if not isinstance(result, (tuple, list)) else f' of length {len(result)}'}.")
    return result


# -- softmax -----------------------------------------------------------------------

def check_softmax_backward(softmax_backward):
    rng = seeded(SEED)
    masked = masked_softmax(rng.normal(size=(2, 4, 4)), causal_mask(4)[::-1] & (np.arange(4) > 0))
    cases = [
        ("a vector of 5 weights", softmax(rng.normal(size=5)), -1),
        ("weights of shape (3, 4) along the last axis", softmax(rng.normal(size=(3, 4))), -1),
        ("weights of shape (2, 3, 4, 4) along the last axis", softmax(rng.normal(size=(2, 3, 4, 4))), -1),
        ("weights of shape (4, 3) along axis 0", softmax(rng.normal(size=(4, 3)), 0), 0),
        ("masked weights (2, 4, 4) with an all-masked row", masked, -1),
        ("saturated weights (scores of ±1e4)", softmax(rng.uniform(-1e4, 1e4, size=(3, 5))), -1),
    ]
    for description, weights, axis in cases:
        grad_weights = rng.normal(size=weights.shape)
        actual = call(softmax_backward, weights, grad_weights, axis=axis, on=description)
        expected = reference.softmax_backward(weights, grad_weights, axis)
        dot = np.sum(grad_weights * weights, axis=axis, keepdims=True)
        mistakes = [
            (weights * grad_weights, "the term − Σ_j g_j w_j is missing: the Jacobian is "
                                     "diag(w) − w wᵀ, so subtract each row's sum of g ⊙ w"),
            (weights * (1 - weights) * grad_weights,
             "only the diagonal of the Jacobian is used: every weight depends on every score"),
            (grad_weights - dot, "the result must be multiplied by the weights: w ⊙ (g − Σ g ⊙ w)"),
        ]
        for wrong_axis in range(-weights.ndim, 0):
            if wrong_axis != axis - weights.ndim * (axis >= 0) and weights.shape[wrong_axis] > 1:
                wrong_dot = np.sum(grad_weights * weights, axis=wrong_axis, keepdims=True)
                mistakes.append((weights * (grad_weights - wrong_dot),
                                 f"the sum Σ g ⊙ w is taken over axis {wrong_axis}: take it "
                                 f"over the softmax's axis ({axis}), with keepdims=True"))
        if weights.ndim > 1 and weights.shape[-1] == weights.shape[-2] and axis == -1:
            mistakes.append((weights * (grad_weights - np.sum(grad_weights * weights, axis=-1)[..., None, :]),
                             "the row sums are broadcast along the wrong axis: keep the summed "
                             "axis (keepdims=True)"))
        _compare(actual, expected, f"the gradient on {description}", mistakes,
                 "it should be w ⊙ (g − Σ_axis g ⊙ w)")


# -- scaled dot-product attention --------------------------------------------------

def check_scaled_dot_product_attention_backward(attention_backward):
    rng = seeded(SEED + 1)

    def problem(lead, T_q, T_k, d_k, d_v, scale=1.0):
        return (scale * rng.normal(size=(*lead, T_q, d_k)), scale * rng.normal(size=(*lead, T_k, d_k)),
                rng.normal(size=(*lead, T_k, d_v)), rng.normal(size=(*lead, T_q, d_v)))

    empty_row = rng.random((3, 5)) < 0.6
    empty_row[1] = False
    empty_row[:, 0] |= np.arange(3) != 1
    cases = [
        ("one sequence (T_q=3, T_k=4, d_k=5, d_v=2)", problem((), 3, 4, 5, 2), None),
        ("a batch (B=2, T=4, d_k=d_v=8) with a causal mask", problem((2,), 4, 4, 8, 8), causal_mask(4)),
        ("two leading axes (2, 3), T_q=3, T_k=5, d_k=4, d_v=3, a mask with an all-masked query",
         problem((2, 3), 3, 5, 4, 3), empty_row),
        ("a batch (B=3, T_q=2, T_k=4) with a padding mask (B, 1, T_k)", problem((3,), 2, 4, 4, 2),
         padding_mask(np.array([4, 2, 1]), 4)[:, None, :]),
        ("large scores (entries of Q and K about 5)", problem((2,), 3, 3, 4, 2, scale=5.0), None),
    ]
    # the task's examples: one query, two keys orthogonal to it; a batch with an all-masked query
    example = (np.array([[1.0, 0, 0, 0]]), np.array([[0, 1.0, 0, 0], [0, -1.0, 0, 0]]), np.array([[1.0], [0.0]]),
               np.array([[1.0]]))
    visible = np.random.default_rng(0)
    batch = (visible.normal(size=(2, 3, 4)), visible.normal(size=(2, 3, 4)), visible.normal(size=(2, 3, 2)),
             visible.normal(size=(2, 3, 2)))
    causal_from_1 = np.tril(np.ones((3, 3), dtype=bool)) & (np.arange(3) > 0)[:, None]
    cases += [("the task's example", example, None),
              ("the task's example with key 1 masked", example, np.array([[True, False]])),
              ("the task's batch with a causal mask and an all-masked query 0", batch, causal_from_1)]
    for description, (Q, K, V, G), mask in cases:
        result = call(attention_backward, Q, K, V, G, mask=mask, on=description, stand_ins=GRADED)
        grads = _unpack(result, 3, attention_backward, description)
        expected = reference.scaled_dot_product_attention_backward(Q, K, V, G, mask)
        wrong = _sdpa_mistakes(Q, K, V, G, mask)
        for i, name in enumerate(("grad_Q", "grad_K", "grad_V")):
            _compare(grads[i], expected[i], f"{name} on {description}",
                     [(w[i], mistake) for w, mistake in wrong],
                     hint="with S = Q Kᵀ/√d_k and A = softmax(S): grad_V = Aᵀ G, grad_A = G Vᵀ, "
                     "grad_S = softmax_backward(A, grad_A), grad_Q = grad_S K/√d_k, grad_K = grad_Sᵀ Q/√d_k")


def _sdpa_mistakes(Q, K, V, G, mask):
    """(gradients, what is wrong) for the usual mistakes of the attention backward."""
    root = math.sqrt(Q.shape[-1])
    weights = masked_softmax(Q @ np.swapaxes(K, -1, -2) / root, mask)
    grad_weights = G @ np.swapaxes(V, -1, -2)
    grad_V = np.swapaxes(weights, -1, -2) @ G

    def with_scores_grad(grad_scores, grad_V=grad_V):
        return grad_scores @ K, np.swapaxes(grad_scores, -1, -2) @ Q, grad_V

    right = reference.softmax_backward(weights, grad_weights)
    unscaled = with_scores_grad(right)
    mistakes = [
        (unscaled, "the scale is forgotten in the backward: the scores are Q Kᵀ/√d_k, so their "
                   "gradient is divided by √d_k too"),
        (with_scores_grad(right / root ** 2), "the gradient is divided by √d_k twice (once is right)"),
        (with_scores_grad(weights * grad_weights / root),
         "the softmax backward lacks its subtraction term: grad_S = A ⊙ (grad_A − Σ_k grad_A ⊙ A)"),
        (with_scores_grad(weights * (grad_weights - np.sum(grad_weights * weights, axis=-2, keepdims=True))
                          / root),
         "the softmax backward sums over the queries (axis −2): the softmax runs over the keys (axis −1)"),
    ]
    if mask is not None:
        ignored = reference.scaled_dot_product_attention_backward(Q, K, V, G)
        mistakes.append((ignored, "the mask is ignored in the backward: recompute the weights "
                                  "with the mask, as the forward does"))
    return mistakes


# -- layer norm --------------------------------------------------------------------

def check_layer_norm_backward(layer_norm_backward):
    rng = seeded(SEED + 2)
    cases = [
        ("one vector of size 6", (), 6, 1e-5),
        ("X of shape (4, 5)", (4,), 5, 1e-5),
        ("X of shape (2, 3, 8) (several leading axes)", (2, 3), 8, 1e-5),
        ("X of shape (3, 4) with eps=0.5", (3,), 4, 0.5),
        ("X of shape (2, 3) with large, shifted entries", (2,), 3, 1e-5),
    ]
    for description, lead, d, eps in cases:
        X = rng.normal(size=(*lead, d))
        if "shifted" in description:
            X = 100 + 30 * X
        gamma, beta, G = rng.normal(size=d), rng.normal(size=d), rng.normal(size=(*lead, d))
        result = call(layer_norm_backward, X, gamma, beta, G, eps=eps, on=description, stand_ins=GRADED)
        grad_X, grad_gamma, grad_beta = _unpack(result, 3, layer_norm_backward, description)
        expected = reference.layer_norm_backward(X, gamma, beta, G, eps)
        _compare(grad_X, expected[0], f"grad_X on {description}", _layer_norm_mistakes(X, gamma, G, eps),
                 "with g = grad_output ⊙ γ: grad_X = (g − mean(g) − x̂ · mean(g ⊙ x̂)) / √(var + eps)")
        for name, actual, right in (("grad_gamma", grad_gamma, expected[1]),
                                    ("grad_beta", grad_beta, expected[2])):
            check(np.shape(actual) != X.shape or len(lead) == 0,
                  f"{name} on {description} has the shape of X {X.shape}: sum it over all "
                  f"the leading axes, to shape ({d},).")
            _compare(actual, right, f"{name} on {description}",
                     [(expected[2] if name == "grad_gamma" else expected[1],
                       "grad_gamma and grad_beta are swapped")],
                     "grad_gamma = Σ grad_output ⊙ x̂ and grad_beta = Σ grad_output, over all leading axes")


def _layer_norm_mistakes(X, gamma, G, eps):
    def grad_X(g, ddof=0, mean_term=True, variance_term=True, eps=eps):
        centred = X - X.mean(axis=-1, keepdims=True)
        std = np.sqrt(X.var(axis=-1, ddof=ddof, keepdims=True) + eps)
        normalized = centred / std
        result = g
        if mean_term:
            result = result - g.mean(axis=-1, keepdims=True)
        if variance_term:
            result = result - normalized * (g * normalized).mean(axis=-1, keepdims=True)
        return result / std

    g = G * gamma
    return [
        (grad_X(g, mean_term=False), "the term through the mean is dropped: subtract mean(g)"),
        (grad_X(g, variance_term=False), "the term through the variance is dropped: subtract "
                                         "x̂ · mean(g ⊙ x̂)"),
        (grad_X(g, mean_term=False, variance_term=False), "the paths through the mean and the "
                                                          "variance are both dropped"),
        (grad_X(g, ddof=1), "the variance is unbiased (divides by d − 1): layer norm uses the "
                            "biased variance, dividing by d"),
        (grad_X(G), "γ is missing: the gradient reaching x̂ is grad_output ⊙ γ"),
        (grad_X(g, eps=0.0), "eps is missing: σ = √(var + eps)"),
    ]


# -- cross-entropy -----------------------------------------------------------------

def check_cross_entropy(cross_entropy):
    rng = seeded(SEED + 3)
    V = 7
    padded = rng.random((3, 5)) < 0.7
    padded[:, 0] = True
    padded[2] = False
    cases = [
        ("logits (4, 7), no mask, no smoothing", (4,), None, 0.0, 1.0),
        ("logits (2, 3, 7) (two leading axes), smoothing 0.1", (2, 3), None, 0.1, 1.0),
        ("logits (3, 5, 7) with a padding mask (targets −100 where not counted)", (3, 5), padded, 0.0, 1.0),
        ("logits (3, 5, 7) with a padding mask and smoothing 0.1", (3, 5), padded, 0.1, 1.0),
        ("logits of ±1e4, smoothing 0.1", (2, 4), None, 0.1, 1e4),
        ("logits of ±1e4, no smoothing", (5,), None, 0.0, 1e4),
        ("no counted position", (2, 2), np.zeros((2, 2), bool), 0.1, 1.0),
    ]
    for description, lead, mask, smoothing, scale in cases:
        logits = scale * rng.uniform(-1, 1, size=(*lead, V)) if scale > 1 else rng.normal(size=(*lead, V))
        targets = rng.integers(0, V, size=lead)
        if mask is not None:
            targets = np.where(mask, targets, -100)
        result = call(cross_entropy, logits, targets, mask=mask, label_smoothing=smoothing, on=description,
                      stand_ins=GRADED)
        loss, grad = _unpack(result, 2, cross_entropy, description)
        expected_loss, expected_grad = reference.cross_entropy(logits, targets, mask, smoothing)
        check(np.ndim(loss) == 0 and np.isrealobj(loss),
              f"the loss on {description} should be one number (a float), got {type(loss).__name__} "
              f"of shape {np.shape(loss)}.")
        wrong = _cross_entropy_mistakes(logits, targets, mask, smoothing)
        check(np.isfinite(loss), f"the loss on {description} is not finite: compute log softmax "
                                 "as shifted − log Σ exp(shifted), with shifted = logits − max, "
                                 "not log(softmax), which is −inf where softmax underflows to 0.")
        if not close(loss, expected_loss):
            for (wrong_loss, _), mistake in wrong:
                check(not close(loss, wrong_loss), f"the loss on {description} is wrong: {mistake}.")
        check(close(loss, expected_loss),
              f"the loss on {description} is {float(loss):.6g}, but it should be "
              f"{expected_loss:.6g}: the mean over counted positions of −Σ_k q_k log softmax_k.")
        _compare(grad, expected_grad, f"grad_logits on {description}",
                 [(g, mistake) for (_, g), mistake in wrong],
                 "it should be (softmax(logits) − q) / N at counted positions, 0 elsewhere")


def _cross_entropy_mistakes(logits, targets, mask, smoothing):
    counted = np.ones(targets.shape, bool) if mask is None else mask
    N, V = max(int(counted.sum()), 1), logits.shape[-1]
    log_probs = logits - logits.max(axis=-1, keepdims=True)
    log_probs = log_probs - np.log(np.exp(log_probs).sum(axis=-1, keepdims=True))
    onehot = np.eye(V)[np.where(counted, targets, 0)]

    def outcome(q, divide_by=N, counted=counted):
        losses = -np.sum(q * log_probs, axis=-1)
        grad = (np.exp(log_probs) - q) * counted[..., None] / divide_by
        return float(np.sum(losses[counted]) / divide_by), grad

    q = (1 - smoothing) * onehot + smoothing / V
    mistakes = [
        (outcome(q, divide_by=1), "it is summed over the positions: take the mean over the N "
                                  "counted positions (the gradient is divided by N)"),
        (outcome(q, counted=np.ones(targets.shape, bool)) if mask is None else outcome(q, targets.size),
         "the mean is taken over padded positions too: divide by N, the number of counted "
         "positions"),
        ((outcome(q)[0], (np.exp(log_probs) - q) / N), "the padded positions get a gradient: it "
                                                       "is 0 where the mask is False"),
        ((outcome(q)[0], (q - np.exp(log_probs)) * counted[..., None] / N),
         "the gradient has the wrong sign: it is softmax(logits) − q"),
    ]
    if smoothing:
        mistakes += [
            (outcome((1 - smoothing) * onehot + smoothing / (V - 1) * (1 - onehot)),
             "the smoothing puts ε/(V−1) on the other classes only: the course (Szegedy et al. "
             "2016) uses q = (1 − ε)·onehot + ε/V, so the target keeps ε/V too"),
            (outcome(onehot), "label_smoothing is ignored: q = (1 − ε)·onehot + ε/V"),
            (outcome((1 - smoothing) * onehot), "the ε/V spread over every class is missing: "
                                                "q = (1 − ε)·onehot + ε/V"),
        ]
    return mistakes


# -- multi-head attention ----------------------------------------------------------

def check_multi_head_attention_backward(mha_backward):
    rng = seeded(SEED + 4)
    B, T, d_model = 2, 4, 8
    causal_with_empty = np.broadcast_to(causal_mask(T), (B, 1, T, T)).copy()
    causal_with_empty[1, 0, 2] = False  # query 2 of sequence 1 sees nothing
    cases = [
        ("self-attention (B=2, T=4, d_model=8, 2 heads)", (B, T, T, d_model, 2), None, True),
        ("cross-attention (B=2, T_q=3, T_k=5, d_model=12, 3 heads) with a padding mask",
         (2, 3, 5, 12, 3), padding_mask(np.array([5, 2]), 5)[:, None, None, :], False),
        ("self-attention with a causal mask and an all-masked query (B=2, T=4, 2 heads)",
         (B, T, T, d_model, 2), causal_with_empty, True),
        ("cross-attention with one head (B=1, T_q=2, T_k=3, d_model=4)", (1, 2, 3, 4, 1), None, False),
    ]
    problems = []
    for description, (B, T_q, T_k, d, h), mask, self_attention in cases:
        Q, K, V = (rng.normal(size=(B, n, d)) for n in (T_q, T_k, T_k))
        if self_attention:
            K = V = Q
        params = {f"W_{n}": rng.normal(size=(d, d)) / np.sqrt(d) for n in "qkvo"}
        params |= {f"b_{n}": rng.normal(size=d) for n in "qkvo"}
        problems.append((description, Q, K, V, params, h, rng.normal(size=(B, T_q, d)), mask, self_attention))
    visible = np.random.default_rng(0)  # the task's example: B=2, T_q=3, T_k=4, d_model=4, 2 heads
    Q, K, V = (visible.normal(size=(2, T, 4)) for T in (3, 4, 4))
    params = {f"W_{n}": visible.normal(size=(4, 4)) / 2 for n in "qkvo"}
    params.update({f"b_{n}": visible.normal(size=4) for n in "qkvo"})
    problems.append(("the task's example", Q, K, V, params, 2, visible.normal(size=(2, 3, 4)), None, False))
    for description, Q, K, V, params, h, G, mask, self_attention in problems:
        result = call(mha_backward, Q, K, V, params, h, G, mask=mask, on=description, stand_ins=GRADED)
        *grads, grad_params = _unpack(result, 4, mha_backward, description)
        expected = reference.multi_head_attention_backward(Q, K, V, params, h, G, mask)
        mistakes = _mha_mistakes(Q, K, V, params, h, G, mask, expected, self_attention)
        for i, name in enumerate(("grad_Q", "grad_K", "grad_V")):
            _compare(grads[i], expected[i], f"{name} on {description}",
                     [(wrong[i], mistake) for wrong, mistake in mistakes],
                     hint="for Y = X @ W + b, grad_X = grad_Y @ Wᵀ; the heads are split after "
                     "the projection, so their gradients are merged before it")
        check(isinstance(grad_params, dict) and set(grad_params) == set(params),
              f"grad_params on {description} should be a dict with the keys {sorted(params)}.")
        for key in params:
            actual, right = grad_params[key], expected[3][key]
            if key.startswith("b") and np.shape(actual) != right.shape:
                check(False, f"grad_params['{key}'] on {description} has shape {np.shape(actual)}: "
                             f"sum it over the batch and time axes, to shape {right.shape}.")
            _compare(actual, right, f"grad_params['{key}'] on {description}",
                     [(right.T, "it is transposed: for Y = X @ W, grad_W = Xᵀ @ grad_Y, "
                                "of W's shape (d_in, d_out)")],
                     hint="for Y = X @ W + b: grad_W = Xᵀ grad_Y and grad_b = Σ grad_Y, summed "
                     "over the batch and time axes")


def _mha_mistakes(Q, K, V, params, h, G, mask, expected, self_attention):
    """(grad_Q, grad_K, grad_V, what is wrong) for the usual mistakes of the backward."""
    # grad_X = grad_projected @ W.T; the mistake multiplies by W itself
    untransposed = tuple(
        np.linalg.solve(params[f"W_{n}"], np.swapaxes(grad, -1, -2)).swapaxes(-1, -2) @ params[f"W_{n}"]
        for grad, n in zip(expected[:3], "qkv"))
    mistakes = [(untransposed, "the gradient through X @ W is grad_Y @ W, without the "
                               "transpose: it is grad_Y @ Wᵀ")]
    if mask is not None:
        mistakes.append((reference.multi_head_attention_backward(Q, K, V, params, h, G)[:3],
                         "the mask is ignored in the backward: pass it to the attention's backward"))
    if self_attention:
        total = sum(expected[:3])
        mistakes.append(((total,) * 3, "each of grad_Q, grad_K and grad_V is the gradient through "
                                       "its own argument; only their sum is the gradient of the "
                                       "self-attention input"))
    return mistakes
