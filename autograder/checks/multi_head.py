"""Hidden checks for the multi-head attention exercise.

Each ``check_*`` runs the student's function on seeded random inputs and on
the inputs that expose the usual mistakes, compares with the reference in
``solutions/`` and, at the first difference, raises ``CheckFailed`` with one
sentence that names the mistake when it can be recognised from the output.
A mistake is recognised by computing what it would give, from the reference
with transformed parameters where possible (scaling folded into ``W_q``,
zeroed biases, permuted columns for strided heads) and otherwise with the
reference attention and a wrong split or merge. Any correct implementation
passes (loops over heads, einsum, ...): only results are compared, never how
they were computed. Multi-head attention is judged with the reference's
split_heads and merge_heads standing in for the student's (``GRADED``), on
cases that include the task's visible examples.
"""

import numpy as np

from solutions import multi_head as reference
from solutions.scaled_dot_product import causal_mask, padding_mask, scaled_dot_product_attention

from autograder.engine.checking import CheckFailed, check, check_close, check_shape, close
from autograder.engine.harness import call, seeded

SEED = 20170612  # the day "Attention is all you need" appeared on arXiv
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.split_heads, reference.merge_heads, reference.multi_head_attention)
_AS_GIVEN = ("the mask must broadcast against the scores (B, h, T_q, T_k) as it is given "
             "(do not add axes to it; in a loop over heads, give head i "
             "np.broadcast_to(mask, (B, h, T_q, T_k))[:, i])")


# -- split and merge ---------------------------------------------------------


def check_split_heads(split_heads):
    rng = seeded(SEED)
    cases = [(2, 3, 8, 2), (1, 5, 12, 3), (3, 4, 6, 6), (2, 4, 8, 4), (2, 3, 6, 1)]
    for B, T, d, h in cases:
        X = rng.normal(size=(B, T, d))
        description = f"X of shape {(B, T, d)} with num_heads={h}"
        name = f"split_heads of {description}"
        actual = call(split_heads, X, h, on=description)
        expected = reference.split_heads(X, h)
        d_head = d // h
        if isinstance(actual, np.ndarray) and actual.shape == (B, T, h, d_head) \
                and actual.shape != expected.shape \
                and np.allclose(actual, X.reshape(B, T, h, d_head)):
            check(False, f"{name} has shape (B, T, h, d/h) = {actual.shape}: transpose it "
                         "to (B, h, T, d/h) so that the head axis comes before the time axis.")
        check_shape(actual, expected.shape, name)
        if h > 1 and not np.allclose(actual, expected):
            check(not np.allclose(actual, X.reshape(B, h, T, d_head)),
                  f"{name} mixes the tokens between heads: reshaping straight to "
                  "(B, h, T, d/h) is not enough; reshape to (B, T, h, d/h), then move "
                  "the head axis in front of the time axis with a transpose.")
            check(not np.allclose(actual, _split_strided(X, h)),
                  f"{name} gives head i every h-th feature: head i must take the "
                  "consecutive features i·d/h … (i+1)·d/h − 1.")
        check_close(actual, expected, name,
                    "head i at time t should hold X[b, t, i·d/h : (i+1)·d/h]")


def check_merge_heads(merge_heads):
    rng = seeded(SEED + 1)
    cases = [(2, 2, 3, 4), (1, 3, 5, 4), (3, 6, 4, 1), (2, 4, 4, 4), (2, 1, 3, 6)]
    for B, h, T, d_head in cases:
        X = rng.normal(size=(B, h, T, d_head))
        description = f"X of shape {(B, h, T, d_head)} (B, h, T, d_head)"
        name = f"merge_heads of {description}"
        actual = call(merge_heads, X, on=description, stand_ins=GRADED)
        expected = reference.merge_heads(X)
        if isinstance(actual, np.ndarray) and actual.shape == (B, T, h, d_head) \
                and actual.shape != expected.shape \
                and np.allclose(actual, X.transpose(0, 2, 1, 3)):
            check(False, f"{name} has shape (B, T, h, d_head) = {actual.shape}: after the "
                         "transpose, reshape it to (B, T, h·d_head).")
        check_shape(actual, expected.shape, name)
        if h > 1 and not np.allclose(actual, expected):
            check(not np.allclose(actual, X.reshape(B, T, h * d_head)),
                  f"{name} mixes the tokens: a reshape alone does not undo split_heads; "
                  "transpose (B, h, T, d_head) to (B, T, h, d_head) first, then reshape.")
            check(not np.allclose(actual, _merge_interleaved(X)),
                  f"{name} interleaves the features of the heads: transpose to "
                  "(B, T, h, d_head), axes (0, 2, 1, 3), so that head i fills the features "
                  "i·d_head … (i+1)·d_head − 1.")
        check_close(actual, expected, name,
                    "it should undo split_heads: head i fills the features "
                    "i·d_head … (i+1)·d_head − 1 of each token")


# -- multi-head attention ----------------------------------------------------


def check_multi_head_attention(multi_head_attention):
    """Unmasked: self- and cross-attention, several sizes, one head, large scores."""
    rng = seeded(SEED + 2)
    cases = [
        ("self-attention with B=2, T=5, d_model=8, num_heads=2", (2, 5, 5, 8, 2), 1.0),
        ("cross-attention with B=2, T_q=3, T_k=6, d_model=12, num_heads=3", (2, 3, 6, 12, 3), 1.0),
        ("self-attention with B=1, T=4, d_model=6, num_heads=1", (1, 4, 4, 6, 1), 1.0),
        ("cross-attention with B=3, T_q=2, T_k=3, d_model=4, num_heads=4", (3, 2, 3, 4, 4), 1.0),
        ("self-attention with B=2, T=3, d_model=16, num_heads=4 and large scores",
         (2, 3, 3, 16, 4), 8.0),
    ]
    for description, (B, T_q, T_k, d_model, h), scale in cases:
        Q, K, V, params = _problem(rng, B, T_q, T_k, d_model, scale)
        if T_q == T_k and "self" in description:
            K = V = Q  # self-attention: one sequence
        _check_mha_case(multi_head_attention, description, Q, K, V, params, h, mask=None)
    Q, K, V, params = _example()
    _check_mha_case(multi_head_attention, "the task's example", Q, K, V, params, 2, mask=None)
    _check_mha_case(multi_head_attention, "the task's example with a second query of zeros",
                    np.concatenate([Q, np.zeros_like(Q)], axis=1), K, V, params, 2, mask=None)
    params.update(W_o=np.eye(8)[::-1], b_o=np.arange(8.0))
    _check_mha_case(multi_head_attention, "the task's example with W_o and b_o", Q, K, V, params, 2, mask=None)
    params["b_q"] = Q[0, 0]
    _check_mha_case(multi_head_attention, "the task's example with the query in b_q", np.zeros_like(Q), K, V,
                    params, 2, mask=None)


def check_multi_head_attention_masks(multi_head_attention):
    """Masks of every shape that broadcasts to (B, h, T_q, T_k), and an all-masked query."""
    rng = seeded(SEED + 3)
    B, T, d_model, h = 3, 5, 8, 2
    X, _, _, params = _problem(rng, B, T, T, d_model)
    padding = padding_mask(np.array([5, 3, 2]), T)[:, None, None, :]   # (B, 1, 1, T_k)
    causal = causal_mask(T)                                            # (T, T)
    per_head = np.stack([causal, causal.T])[None]                      # (1, h, T, T)
    fully_masked = np.ones((B, 1, T, T), dtype=bool)
    fully_masked[1, 0, 2, :] = False                                   # query 2 of sequence 1
    Q_cross, K_cross, V_cross, params_cross = _problem(rng, B, 2, 6, 12)
    cross_padding = padding_mask(np.array([6, 4, 1]), 6)[:, None, None, :]
    cases = [
        ("a padding mask of shape (B, 1, 1, T_k)", (X, X, X, params, h), padding),
        ("a causal mask of shape (T, T)", (X, X, X, params, h), causal),
        ("a causal and padding mask of shape (B, 1, T, T)", (X, X, X, params, h),
         causal & padding),
        ("a mask of shape (1, h, T, T) that differs between the heads", (X, X, X, params, h),
         per_head),
        ("a query whose keys are all masked", (X, X, X, params, h), fully_masked),
        ("cross-attention (T_q=2, T_k=6, num_heads=3) with a padding mask (B, 1, 1, T_k)",
         (Q_cross, K_cross, V_cross, params_cross, 3), cross_padding),
    ]
    example = (*_example(), 2)
    cases += [("the task's example with key 1 masked", example, np.array([True, False]).reshape(1, 1, 1, 2)),
              ("the task's example with a different mask per head", example,
               np.array([[[[True, False]], [[False, True]]]]))]
    for description, (Q, K, V, p, heads), mask in cases:
        _check_mha_case(multi_head_attention, description, Q, K, V, p, heads, mask)


def _example():
    """The task's visible example: one query, two keys, d_model = 8, identity projections."""
    params = {name: np.eye(8) for name in ("W_q", "W_k", "W_v", "W_o")}
    params.update({name: np.zeros(8) for name in ("b_q", "b_k", "b_v", "b_o")})
    ln3 = np.log(3.0)
    Q = np.array([[[ln3, ln3, 0, 0, ln3, ln3, 0, 0]]])
    K = np.array([[[0, 0, 0, 0, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0]]], dtype=float)
    V = np.array([[[4, 0, 0, 0, 8, 0, 0, 0], [0, 4, 0, 0, 0, 0, 0, 0]]], dtype=float)
    return Q, K, V, params


def _check_mha_case(mha, description, Q, K, V, params, h, mask):
    expected_output, expected_weights = reference.multi_head_attention(Q, K, V, params, h, mask)
    if mask is None:
        result = call(mha, Q, K, V, params, h, on=description, stand_ins=GRADED)
    else:
        try:
            result = call(mha, Q, K, V, params, h, mask=mask, on=description, stand_ins=GRADED)
        except CheckFailed as failure:
            if "not implemented" in str(failure):
                raise
            try:
                call(mha, Q, K, V, {k: v.copy() for k, v in params.items()}, h, on=description, stand_ins=GRADED)
            except CheckFailed:
                raise failure from None
            raise CheckFailed(f"{str(failure).rstrip('.')}, but not without the mask: {_AS_GIVEN}.") \
                from None
    check(isinstance(result, tuple) and len(result) == 2,
          f"multi_head_attention should return a pair (output, weights), "
          f"but on {description} it returned a {type(result).__name__}.")
    output, weights = result
    B, h_, T_q, T_k = expected_weights.shape
    if np.shape(output) == expected_weights.shape and np.shape(weights) == expected_output.shape:
        check(False, "return (output, weights) in this order, not (weights, output).")
    if isinstance(weights, np.ndarray) and weights.shape != expected_weights.shape:
        if mask is not None and weights.ndim > 4:
            check(False, f"on {description}, the weights have shape {weights.shape}: "
                         f"{_AS_GIVEN}.")
        if weights.shape == (B, T_q, T_k) and np.allclose(weights, expected_weights.mean(axis=1)):
            check(False, f"on {description}, the weights are averaged over the heads: return "
                         f"the weights of every head, shape (B, h, T_q, T_k) = "
                         f"{expected_weights.shape}.")
        if weights.shape == (B, T_q, h_, T_k):
            check(False, f"on {description}, the weights have shape (B, T_q, h, T_k) = "
                         f"{weights.shape}: return them as (B, h, T_q, T_k), one "
                         "(T_q, T_k) map per head.")
    check_shape(weights, expected_weights.shape, f"the weights on {description}")
    check_shape(output, expected_output.shape, f"the output on {description}")

    allowed = np.ones(expected_weights.shape, dtype=bool) if mask is None \
        else np.broadcast_to(mask, expected_weights.shape)
    check(np.all(np.isfinite(weights)) and np.all(np.isfinite(output)),
          f"on {description}, the weights or the output contain NaN or inf.")
    weights_right = close(weights, expected_weights)
    output_right = close(output, expected_output)
    if not (weights_right and output_right):
        if mask is not None and not weights_right:
            ignored = reference.multi_head_attention(Q, K, V, params, h)[1]
            check(not np.allclose(weights, ignored),
                  f"on {description}, the mask is ignored: pass it to the attention of every head.")
        variants = list(_variants(Q, K, V, params, h, mask))
        for mistake, (variant_output, variant_weights) in variants:
            check(not (np.allclose(output, variant_output)
                       and np.allclose(weights, variant_weights)),
                  f"on {description}, {mistake}.")
        if not weights_right:
            for mistake, (_, variant_weights) in variants:
                check(not np.allclose(weights, variant_weights), f"on {description}, {mistake}.")
            check(np.allclose(weights[~allowed], 0.0),
                  f"on {description}, keys that the mask hides get nonzero weight: the mask "
                  "must broadcast to (B, h, T_q, T_k) as it is given, with its last axis "
                  "over the keys.")
    check_close(weights, expected_weights, f"the weights on {description}",
                "they differ from softmax(Q_i K_iᵀ / √d_head) in every head i, where "
                "Q_i = (Q @ W_q + b_q)[..., i·d_head : (i+1)·d_head] and likewise K_i")
    check_close(output, expected_output, f"the output on {description}",
                "the weights are right but the output is not the heads' outputs "
                "(weights @ values), merged, then @ W_o + b_o")


def _variants(Q, K, V, params, h, mask):
    """(what is wrong, (output, weights) it gives), for the usual mistakes."""
    d_model = Q.shape[-1]
    d_head = d_model // h
    zeros = np.zeros(d_model)
    strided = _strided_order(d_model, h)  # head i's features when taken every h-th one

    def with_params(**changes):
        return lambda: reference.multi_head_attention(Q, K, V, {**params, **changes}, h, mask)

    def with_split(split, merge):
        return lambda: _attention_with(Q, K, V, params, h, mask, split, merge)

    def permuted(o_rows):
        changes = {f"{key}_{n}": params[f"{key}_{n}"][..., strided]
                   for n in "qkv" for key in ("W", "b")}
        if o_rows:
            changes["W_o"] = params["W_o"][strided]
        return with_params(**changes)

    candidates = [
        ("the scores are divided by √d_model: divide them by √d_head, the size of one "
         "head's queries and keys",
         with_params(W_q=params["W_q"] / np.sqrt(h), b_q=params["b_q"] / np.sqrt(h))),
        ("the scores are not divided by √d_head",
         with_params(W_q=params["W_q"] * np.sqrt(d_head), b_q=params["b_q"] * np.sqrt(d_head))),
        ("the biases are missing: every projection is X @ W + b, and the output is "
         "@ W_o + b_o", with_params(b_q=zeros, b_k=zeros, b_v=zeros, b_o=zeros)),
        ("the biases b_q, b_k and b_v of the projections are missing",
         with_params(b_q=zeros, b_k=zeros, b_v=zeros)),
        ("the bias b_q is missing from the queries", with_params(b_q=zeros)),
        ("the bias b_v is missing from the values", with_params(b_v=zeros)),
        ("the output projection W_o is missing: merge the heads, then @ W_o + b_o",
         with_params(W_o=np.eye(d_model))),
        ("the output projection W_o and its bias b_o are missing: merge the heads, then "
         "@ W_o + b_o", with_params(W_o=np.eye(d_model), b_o=zeros)),
        ("the bias b_o is missing: the output is merge_heads(...) @ W_o + b_o",
         with_params(b_o=zeros)),
        ("the heads take every h-th feature: head i must take the consecutive features "
         "i·d_head … (i+1)·d_head − 1", permuted(o_rows=True)),
        ("the heads take every h-th feature when they are split: head i must take the "
         "consecutive features i·d_head … (i+1)·d_head − 1", permuted(o_rows=False)),
        ("the heads are split by a reshape alone, which mixes the tokens: reshape to "
         "(B, T, h, d_head), then transpose to (B, h, T, d_head)",
         with_split(_split_no_transpose, _merge_no_transpose)),
        ("the heads are split by a reshape alone, which mixes the tokens: reshape to "
         "(B, T, h, d_head), then transpose to (B, h, T, d_head)",
         with_split(_split_no_transpose, reference.merge_heads)),
        ("the heads are merged by a reshape alone, which mixes the tokens: transpose "
         "(B, h, T, d_head) to (B, T, h, d_head), then reshape",
         with_split(reference.split_heads, _merge_no_transpose)),
        ("the heads are merged with their features interleaved: transpose to "
         "(B, T, h, d_head), axes (0, 2, 1, 3), then reshape",
         with_split(reference.split_heads, _merge_interleaved)),
    ]
    if mask is not None and Q.shape[1] == K.shape[1]:
        B, T = Q.shape[0], Q.shape[1]
        swapped = np.swapaxes(np.broadcast_to(mask, (B, h, T, T)), -1, -2)
        candidates.append((
            "the mask is applied over the queries instead of the keys: it must broadcast "
            "to (B, h, T_q, T_k) as it is given",
            lambda: reference.multi_head_attention(Q, K, V, params, h, swapped)))
    for mistake, compute in candidates:
        yield mistake, compute()


def _attention_with(Q, K, V, params, h, mask, split, merge):
    heads = [split(X @ params[f"W_{n}"] + params[f"b_{n}"], h)
             for X, n in ((Q, "q"), (K, "k"), (V, "v"))]
    context, weights = scaled_dot_product_attention(*heads, mask=mask)
    return merge(context) @ params["W_o"] + params["b_o"], weights


def _split_no_transpose(X, h):
    B, T, d = X.shape
    return X.reshape(B, h, T, d // h)


def _split_strided(X, h):
    B, T, d = X.shape
    return X.reshape(B, T, d // h, h).transpose(0, 3, 1, 2)


def _merge_no_transpose(X):
    B, h, T, d_head = X.shape
    return X.reshape(B, T, h * d_head)


def _merge_interleaved(X):
    B, h, T, d_head = X.shape
    return X.transpose(0, 2, 3, 1).reshape(B, T, h * d_head)


def _strided_order(d_model, h):
    """Feature indices such that contiguous block i of the result is head i of a strided split."""
    return np.arange(d_model).reshape(d_model // h, h).T.reshape(-1)


def _problem(rng, B, T_q, T_k, d_model, scale=1.0):
    """Random inputs and parameters whose projections have entries of size about `scale`."""
    Q, K, V = (rng.normal(size=(B, T, d_model)) for T in (T_q, T_k, T_k))
    params = {}
    for n in "qkvo":
        params[f"W_{n}"] = scale * rng.normal(size=(d_model, d_model)) / np.sqrt(d_model)
        params[f"b_{n}"] = rng.normal(size=d_model)
    return Q, K, V, params
