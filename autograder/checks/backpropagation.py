"""Hidden checks for the backpropagation exercise, as case tables (`engine.cases`): each task's gradients,
known mistakes and facts; each check's seeded cases (several leading axes, masks with all-masked rows,
logits of ±1e4, label smoothing on and off). A later task is judged with the reference's earlier ones."""

import numpy as np

from solutions import backpropagation as reference
from solutions.scaled_dot_product import causal_mask, masked_softmax, padding_mask, softmax

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case
from autograder.engine.harness import seeded

SEED = 19861009  # Rumelhart, Hinton & Williams, "Learning representations by back-propagating errors", Nature, 9 October 1986
FINITE = Fact("{name} contains NaN or inf (an all-masked row has weight 0 everywhere: its gradient is 0).",
              lambda actual, **_: np.all(np.isfinite(actual)))
MHA = reference.multi_head_attention_backward


def _through_scores(grad_scores):
    """The attention's gradients when the scores' is `grad_scores(A, grad_A, √d_k)`."""
    def gives(Q, K, V, grad_output, mask):
        root = np.sqrt(Q.shape[-1])
        weights = masked_softmax(Q @ np.swapaxes(K, -1, -2) / root, mask)
        grad = grad_scores(weights, grad_output @ np.swapaxes(V, -1, -2), root)
        return grad @ K, np.swapaxes(grad, -1, -2) @ Q, np.swapaxes(weights, -1, -2) @ grad_output
    return gives


def _layer_norm(ddof=0, mean=True, variance=True, with_gamma=True, with_eps=True):
    """grad_X with one step changed: the variance's `ddof`, a path (`mean`, `variance`), γ or eps dropped."""
    def gives(X, gamma, beta, grad_output, eps):
        grad = grad_output * (gamma if with_gamma else 1.0)
        std = np.sqrt(X.var(axis=-1, ddof=ddof, keepdims=True) + eps * with_eps)
        normalized = (X - X.mean(axis=-1, keepdims=True)) / std
        result = grad - mean * grad.mean(axis=-1, keepdims=True)
        return (result - variance * normalized * (grad * normalized).mean(axis=-1, keepdims=True)) / std
    return gives


def _cross_entropy(target=lambda onehot, e, V: (1 - e) * onehot + e / V, divide=lambda counted, N: N,
                   padded=False, sign=1):
    """(loss, grad_logits) with one step changed: the target q, the divisor, padded positions, the sign."""
    def gives(logits, targets, mask, label_smoothing):
        counted = np.ones(targets.shape, bool) if mask is None else mask
        N, V = max(int(counted.sum()), 1), logits.shape[-1]
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        q = target(np.eye(V)[np.where(counted, targets, 0)], label_smoothing, V)
        n = divide(counted, N)
        grad = sign * (np.exp(log_p) - q) * (True if padded else counted[..., None]) / n
        return float(np.sum(-np.sum(q * log_p, axis=-1)[counted]) / n), grad
    return gives


exercise = Exercise(reference)
softmax_backward = exercise.task("softmax_backward", hint="it should be w ⊙ (g − Σ_axis g ⊙ w)", facts=[FINITE],
                                 mistakes=[
    Mistake("the term − Σ_j g_j w_j is missing: the Jacobian is diag(w) − w wᵀ, so subtract each row's sum of "
            "g ⊙ w", lambda weights, grad_weights, axis: weights * grad_weights),
    Mistake("only the diagonal of the Jacobian is used: every weight depends on every score",
            lambda weights, grad_weights, axis: weights * (1 - weights) * grad_weights),
    Mistake("the result must be multiplied by the weights: w ⊙ (g − Σ g ⊙ w)",
            lambda weights, grad_weights, axis: grad_weights - np.sum(grad_weights * weights, axis, keepdims=True)),
    Mistake("the row sums are broadcast along the wrong axis: keep the summed axis (keepdims=True)",
            lambda weights, grad_weights, axis: weights * (grad_weights - np.sum(grad_weights * weights, -1)[..., None, :]),
            when=lambda weights, grad_weights, axis: axis == -1 and weights.ndim > 1
            and weights.shape[-1] == weights.shape[-2]),
    *(Mistake(f"the sum Σ g ⊙ w is taken over axis {a}: take it over the softmax's axis, with keepdims=True",
              lambda weights, grad_weights, axis, a=a: weights * (grad_weights - np.sum(grad_weights * weights, a,
                                                                                         keepdims=True)),
              when=lambda weights, grad_weights, axis, a=a: -weights.ndim <= a != axis - weights.ndim * (axis >= 0)
              and weights.shape[a] > 1) for a in (-1, -2, -3, -4))])
SDPA_MISTAKES = [
    Mistake("the scale is forgotten in the backward: the scores are Q Kᵀ/√d_k, so their gradient is divided by "
            "√d_k too", _through_scores(lambda A, grad_A, root: reference.softmax_backward(A, grad_A))),
    Mistake("the gradient is divided by √d_k twice (once is right)",
            _through_scores(lambda A, grad_A, root: reference.softmax_backward(A, grad_A) / root ** 2)),
    Mistake("the softmax backward lacks its subtraction term: grad_S = A ⊙ (grad_A − Σ_k grad_A ⊙ A)",
            _through_scores(lambda A, grad_A, root: A * grad_A / root)),
    Mistake("the softmax backward sums over the queries (axis −2): the softmax runs over the keys (axis −1)",
            _through_scores(lambda A, grad_A, root: A * (grad_A - np.sum(grad_A * A, axis=-2, keepdims=True)) / root)),
    Mistake("the mask is ignored in the backward: recompute the weights with the mask, as the forward does",
            lambda mask, **given: reference.scaled_dot_product_attention_backward(**given),
            when=lambda mask, **_: mask is not None)]
attention_backward = exercise.task("scaled_dot_product_attention_backward", outputs=[
    Output(name, "with S = Q Kᵀ/√d_k and A = softmax(S): grad_V = Aᵀ G, grad_A = G Vᵀ, grad_S = "
           "softmax_backward(A, grad_A), grad_Q = grad_S K/√d_k, grad_K = grad_Sᵀ Q/√d_k", SDPA_MISTAKES, [FINITE])
    for name in ("grad_Q", "grad_K", "grad_V")])
layer_norm_backward = exercise.task("layer_norm_backward", outputs=[
    Output("grad_X", "with g = grad_output ⊙ γ: grad_X = (g − mean(g) − x̂ · mean(g ⊙ x̂)) / √(var + eps)", [
        Mistake("the term through the mean is dropped: subtract mean(g)", _layer_norm(mean=False)),
        Mistake("the term through the variance is dropped: subtract x̂ · mean(g ⊙ x̂)", _layer_norm(variance=False)),
        Mistake("the paths through the mean and the variance are both dropped", _layer_norm(mean=False, variance=False)),
        Mistake("the variance is unbiased (divides by d − 1): layer norm uses the biased variance, dividing by d",
                _layer_norm(ddof=1)),
        Mistake("γ is missing: the gradient reaching x̂ is grad_output ⊙ γ", _layer_norm(with_gamma=False)),
        Mistake("eps is missing: σ = √(var + eps)", _layer_norm(with_eps=False))], [FINITE]),
    *(Output(name, "grad_gamma = Σ grad_output ⊙ x̂ and grad_beta = Σ grad_output, over all leading axes",
             [Mistake("grad_gamma and grad_beta are swapped",
                      lambda other=other, **given: reference.layer_norm_backward(**given)[other])], [FINITE],
             requires=[Fact("{name} has the shape of X {X.shape}: sum it over all the leading axes, to shape "
                            "{gamma.shape}.", lambda actual, X, **_: np.shape(actual) != X.shape or X.ndim == 1)])
      for name, other in (("grad_gamma", 2), ("grad_beta", 1)))])
CE_MISTAKES = [
    Mistake("it is summed over the positions: take the mean over the N counted positions (the gradient is "
            "divided by N)", _cross_entropy(divide=lambda counted, N: 1)),
    Mistake("the mean is taken over padded positions too: divide by N, the number of counted positions",
            _cross_entropy(divide=lambda counted, N: counted.size)),
    Mistake("the padded positions get a gradient: it is 0 where the mask is False", _cross_entropy(padded=True)),
    Mistake("the gradient has the wrong sign: it is softmax(logits) − q", _cross_entropy(sign=-1)),
    *(Mistake(message, _cross_entropy(target), when=lambda label_smoothing, **_: label_smoothing)
      for message, target in (
          ("the smoothing puts ε/(V−1) on the other classes only: the course (Szegedy et al. 2016) uses "
           "q = (1 − ε)·onehot + ε/V, so the target keeps ε/V too",
           lambda onehot, e, V: (1 - e) * onehot + e / (V - 1) * (1 - onehot)),
          ("label_smoothing is ignored: q = (1 − ε)·onehot + ε/V", lambda onehot, e, V: onehot),
          ("the ε/V spread over every class is missing: q = (1 − ε)·onehot + ε/V",
           lambda onehot, e, V: (1 - e) * onehot)))]
cross_entropy = exercise.task("cross_entropy", outputs=[
    Output("loss", "it should be the mean over counted positions of −Σ_k q_k log softmax_k", CE_MISTAKES, [
        Fact("{name} is not finite: compute log softmax as shifted − log Σ exp(shifted), with shifted = "
             "logits − max, not log(softmax), which is −inf where softmax underflows to 0.",
             lambda actual, **_: np.isfinite(actual))]),
    Output("grad_logits", "it should be (softmax(logits) − q) / N at counted positions, 0 elsewhere", CE_MISTAKES,
           [FINITE])])
MHA_MISTAKES = [
    Mistake("the gradient through X @ W is grad_Y @ W, without the transpose: it is grad_Y @ Wᵀ",
            lambda params, **given: tuple(np.linalg.solve(W := params[f"W_{n}"], np.swapaxes(grad, -1, -2)).swapaxes(
                -1, -2) @ W for grad, n in zip(MHA(params=params, **given), "qkv"))),
    Mistake("the mask is ignored in the backward: pass it to the attention's backward",
            lambda mask, **given: MHA(**given)[:3], when=lambda mask, **_: mask is not None),
    Mistake("each of grad_Q, grad_K and grad_V is the gradient through its own argument; only their sum is "
            "the gradient of the self-attention input", lambda **given: (sum(MHA(**given)[:3]),) * 3,
            when=lambda Q, K, V, **_: K is Q and V is Q)]
mha_backward = exercise.task("multi_head_attention_backward", outputs=[
    *(Output(name, "for Y = X @ W + b, grad_X = grad_Y @ Wᵀ; the heads are split after the projection, so their "
             "gradients are merged before it", MHA_MISTAKES, [FINITE]) for name in ("grad_Q", "grad_K", "grad_V")),
    Output("grad_params", "for Y = X @ W + b: grad_W = Xᵀ grad_Y and grad_b = Σ grad_Y, summed over the batch "
           "and time axes", leaves=True, facts=[FINITE], mistakes=[
               Mistake("it is transposed: for Y = X @ W, grad_W = Xᵀ @ grad_Y, of W's shape (d_in, d_out)",
                       lambda **given: {key: value.T for key, value in MHA(**given)[3].items()}),
               Mistake("it is 0: for Y = X @ W + b, grad_b = Σ grad_Y over the batch and time axes, the gradient "
                       "that reaches the projection (only b_k's is 0: the softmax ignores a shift of all the scores "
                       "of a query)", lambda **given: {key: np.zeros_like(value) if key.startswith("b_") else value
                                                      for key, value in MHA(**given)[3].items()})],
           requires=[Fact("{name} has another shape than its parameter: sum it over the batch and time axes.",
                          lambda actual, params, **_: np.shape(actual) in {p.shape for p in params.values()})])])


def check_softmax_backward(function):
    rng = seeded(SEED)
    masked = masked_softmax(rng.normal(size=(2, 4, 4)), causal_mask(4)[::-1] & (np.arange(4) > 0))
    softmax_backward.check(function, [case(text, w, rng.normal(size=w.shape), axis=axis) for text, w, axis in [
        ("a vector of 5 weights", softmax(rng.normal(size=5)), -1),
        ("weights of shape (3, 4) along the last axis", softmax(rng.normal(size=(3, 4))), -1),
        ("weights of shape (2, 3, 4, 4) along the last axis", softmax(rng.normal(size=(2, 3, 4, 4))), -1),
        ("weights of shape (4, 3) along axis 0", softmax(rng.normal(size=(4, 3)), 0), 0),
        ("masked weights (2, 4, 4) with an all-masked row", masked, -1),
        ("saturated weights (scores of ±1e4)", softmax(rng.uniform(-1e4, 1e4, size=(3, 5))), -1)]])


def check_scaled_dot_product_attention_backward(function):
    rng, visible = seeded(SEED + 1), np.random.default_rng(0)  # visible: the task's batch

    def problem(lead, T_q, T_k, d_k, d_v, scale=1.0, draw=rng):
        return (scale * draw.normal(size=(*lead, T_q, d_k)), scale * draw.normal(size=(*lead, T_k, d_k)),
                draw.normal(size=(*lead, T_k, d_v)), draw.normal(size=(*lead, T_q, d_v)))
    empty_row = rng.random((3, 5)) < 0.6
    empty_row[1] = False
    empty_row[:, 0] |= np.arange(3) != 1
    example = (np.array([[1.0, 0, 0, 0]]), np.array([[0, 1.0, 0, 0], [0, -1.0, 0, 0]]), np.array([[1.0], [0.0]]),
               np.array([[1.0]]))
    attention_backward.check(function, [case(description, *arrays, mask=mask) for description, arrays, mask in [
        ("one sequence (T_q=3, T_k=4, d_k=5, d_v=2)", problem((), 3, 4, 5, 2), None),
        ("a batch (B=2, T=4, d_k=d_v=8) with a causal mask", problem((2,), 4, 4, 8, 8), causal_mask(4)),
        ("two leading axes (2, 3), T_q=3, T_k=5, d_k=4, d_v=3, a mask with an all-masked query",
         problem((2, 3), 3, 5, 4, 3), empty_row),
        ("a batch (B=3, T_q=2, T_k=4) with a padding mask (B, 1, T_k)", problem((3,), 2, 4, 4, 2),
         padding_mask(np.array([4, 2, 1]), 4)[:, None, :]),
        ("large scores (entries of Q and K about 5)", problem((2,), 3, 3, 4, 2, scale=5.0), None),
        ("the task's example (one query, two keys orthogonal to it)", example, None),
        ("the task's example with key 1 masked", example, np.array([[True, False]])),
        ("the task's example with key 1 masked and its score 1e4",
         (example[0], np.array([[0, 1.0, 0, 0], [2e4, 0, 0, 0]]), *example[2:]), np.array([[True, False]])),
        ("the task's batch with a causal mask and an all-masked query 0", problem((2,), 3, 3, 4, 2, draw=visible),
         np.tril(np.ones((3, 3), dtype=bool)) & (np.arange(3) > 0)[:, None])]])


def check_layer_norm_backward(function):
    rng = seeded(SEED + 2)

    def problem(description, lead, d, eps, shift=False):
        X = rng.normal(size=(*lead, d))
        X = 100 + 30 * X if shift else X
        return case(description, X, rng.normal(size=d), rng.normal(size=d), rng.normal(size=(*lead, d)), eps=eps)
    layer_norm_backward.check(function, [
        problem("one vector of size 6", (), 6, 1e-5),
        problem("X of shape (4, 5)", (4,), 5, 1e-5),
        problem("X of shape (2, 3, 8) (several leading axes)", (2, 3), 8, 1e-5),
        problem("X of shape (3, 4) with eps=0.5", (3,), 4, 0.5),
        problem("X of shape (2, 3) with large, shifted entries", (2,), 3, 1e-5, shift=True)])


def check_cross_entropy(function):
    rng = seeded(SEED + 3)
    padded = rng.random((3, 5)) < 0.7
    padded[:, 0] = True
    padded[2] = False

    def problem(description, lead, mask, smoothing, scale=1.0):
        logits = scale * rng.uniform(-1, 1, size=(*lead, 7)) if scale > 1 else rng.normal(size=(*lead, 7))
        targets = rng.integers(0, 7, size=lead)
        return case(description, logits, targets if mask is None else np.where(mask, targets, -100), mask=mask,
                    label_smoothing=smoothing)
    cross_entropy.check(function, [
        problem("logits (4, 7), no mask, no smoothing", (4,), None, 0.0),
        problem("logits (2, 3, 7) (two leading axes), smoothing 0.1", (2, 3), None, 0.1),
        problem("logits (3, 5, 7) with a padding mask (targets −100 where not counted)", (3, 5), padded, 0.0),
        problem("logits (3, 5, 7) with a padding mask and smoothing 0.1", (3, 5), padded, 0.1),
        problem("logits of ±1e4, smoothing 0.1", (2, 4), None, 0.1, 1e4),
        problem("logits of ±1e4, no smoothing", (5,), None, 0.0, 1e4),
        problem("logits of ±1e4 with a padding mask and smoothing 0.1", (3, 5), padded, 0.1, 1e4),
        problem("no counted position", (2, 2), np.zeros((2, 2), bool), 0.1)])


def check_multi_head_attention_backward(function):
    rng = seeded(SEED + 4)
    causal_with_empty = np.broadcast_to(causal_mask(4), (2, 1, 4, 4)).copy()
    causal_with_empty[1, 0, 2] = False  # query 2 of sequence 1 sees nothing

    def problem(description, B, T_q, T_k, d, h, mask=None, self_attention=False, draw=rng):
        Q, K, V = (draw.normal(size=(B, n, d)) for n in (T_q, T_k, T_k))
        K, V = (Q, Q) if self_attention else (K, V)
        params = {f"W_{n}": draw.normal(size=(d, d)) / np.sqrt(d) for n in "qkvo"}
        params |= {f"b_{n}": draw.normal(size=d) for n in "qkvo"}
        return case(description, Q, K, V, params, h, draw.normal(size=(B, T_q, d)), mask=mask)
    def large_masked_key(each):
        each.args[1][:, 2] *= 1e3  # scores of thousands on the key the mask hides
        return each
    mha_backward.check(function, [
        problem("self-attention (B=2, T=4, d_model=8, 2 heads)", 2, 4, 4, 8, 2, self_attention=True),
        problem("cross-attention (B=2, T_q=3, T_k=5, d_model=12, 3 heads) with a padding mask",
                2, 3, 5, 12, 3, padding_mask(np.array([5, 2]), 5)[:, None, None, :]),
        problem("self-attention with a causal mask and an all-masked query (B=2, T=4, 2 heads)",
                2, 4, 4, 8, 2, causal_with_empty, self_attention=True),
        problem("cross-attention with one head (B=1, T_q=2, T_k=3, d_model=4)", 1, 2, 3, 4, 1),
        problem("the task's example", 2, 3, 4, 4, 2, draw=np.random.default_rng(0)),
        large_masked_key(problem("cross-attention whose masked key 2 is 1e3 times larger (B=2, T_q=3, T_k=4, "
                                 "d_model=8, 2 heads)", 2, 3, 4, 8, 2, np.array([True, True, False, True])))])
