"""Hidden checks for the multi-head attention exercise, as case tables (`engine.cases`).

A mistake is the reference with one step changed: its parameters (scaling folded into ``W_q``, zeroed biases,
permuted columns for strided heads), its split or merge, or the layout of its weights. The output is judged
first: it tells apart mistakes that give the same weights (a missing b_k changes none).
"""

import numpy as np

from solutions import multi_head as reference
from solutions.scaled_dot_product import causal_mask, padding_mask, scaled_dot_product_attention

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case
from autograder.engine.harness import seeded

SEED = 20170612  # the day "Attention is all you need" appeared on arXiv
_AS_GIVEN = ("the mask must broadcast against the scores (B, h, T_q, T_k) as it is given (do not add axes to it; "
             "in a loop over heads, give head i np.broadcast_to(mask, (B, h, T_q, T_k))[:, i])")
_SPLIT_ALONE = ("the heads are split by a reshape alone, which mixes the tokens: reshape to (B, T, h, d_head), "
                "then transpose to (B, h, T, d_head)")


def _split_alone(X, num_heads):  # a reshape straight to (B, h, T, d/h)
    return X.reshape(X.shape[0], num_heads, X.shape[1], -1)


def _merge_alone(X):  # a reshape straight to (B, T, h·d_head)
    return X.reshape(X.shape[0], X.shape[2], -1)


def _merge_interleaved(X):  # the features of the heads interleaved
    return X.transpose(0, 2, 3, 1).reshape(X.shape[0], X.shape[2], -1)


def _with(change=lambda params, h: {}, **fixed):
    """The reference with its parameters changed: to `fixed` values, and as `change(params, h)` gives."""
    return lambda Q, K, V, params, num_heads, mask: reference.multi_head_attention(
        Q, K, V, {**params, **fixed, **change(params, num_heads)}, num_heads, mask)


def _strided(params, h, o_rows):
    """The parameters whose contiguous block i is head i of a split that takes every h-th feature."""
    d = len(params["b_o"])
    order = np.arange(d).reshape(d // h, h).T.reshape(-1)
    return {f"{key}_{n}": params[f"{key}_{n}"][..., order] for n in "qkv" for key in "Wb"} | (
        {"W_o": params["W_o"][order]} if o_rows else {})


def _projected(Q, K, V, params, num_heads, split=reference.split_heads):
    return [split(X @ params[f"W_{n}"] + params[f"b_{n}"], num_heads) for X, n in zip((Q, K, V), "qkv")]


def _split_merge(split, merge):
    """The reference attention with a wrong split or merge."""
    def gives(Q, K, V, params, num_heads, mask):
        context, weights = scaled_dot_product_attention(*_projected(Q, K, V, params, num_heads, split), mask=mask)
        return merge(context) @ params["W_o"] + params["b_o"], weights
    return gives


def _whole_mask_in_each_head(Q, K, V, params, num_heads, mask):
    """A loop over heads that gives every head the whole mask."""
    heads = [scaled_dot_product_attention(q, k, v, mask) for q, k, v in zip(*(
        np.moveaxis(X, 1, 0) for X in _projected(Q, K, V, params, num_heads)))]
    return (np.concatenate([head for head, _ in heads], axis=-1) @ params["W_o"] + params["b_o"],
            np.stack([weights for _, weights in heads], axis=1))


def _weights(change):
    """The reference's weights, changed by `change`."""
    return lambda Q, K, V, params, num_heads, mask: change(
        reference.multi_head_attention(Q, K, V, params, num_heads, mask)[1])


HEAD_MISTAKES = [
    Mistake("the scores are divided by √d_model: divide them by √d_head, the size of one head's queries and keys",
            _with(lambda p, h: {n: p[n] / np.sqrt(h) for n in ("W_q", "b_q")})),
    Mistake("the scores are not divided by √d_head",
            _with(lambda p, h: {n: p[n] * np.sqrt(len(p["b_q"]) // h) for n in ("W_q", "b_q")})),
    Mistake("the biases are missing: every projection is X @ W + b, and the output is @ W_o + b_o",
            _with(b_q=0.0, b_k=0.0, b_v=0.0, b_o=0.0)),
    Mistake("the biases b_q, b_k and b_v of the projections are missing", _with(b_q=0.0, b_k=0.0, b_v=0.0)),
    Mistake("the bias b_q is missing from the queries", _with(b_q=0.0)),
    Mistake("the bias b_v is missing from the values", _with(b_v=0.0)),
    Mistake("the output projection W_o is missing: merge the heads, then @ W_o + b_o",
            _with(lambda p, h: {"W_o": np.eye(len(p["W_o"]))})),
    Mistake("the output projection W_o and its bias b_o are missing: merge the heads, then @ W_o + b_o",
            _with(lambda p, h: {"W_o": np.eye(len(p["W_o"]))}, b_o=0.0)),
    Mistake("the bias b_o is missing: the output is merge_heads(...) @ W_o + b_o", _with(b_o=0.0)),
    Mistake("the heads take every h-th feature: head i must take the consecutive features "
            "i·d_head … (i+1)·d_head − 1", _with(lambda p, h: _strided(p, h, o_rows=True))),
    Mistake("the heads take every h-th feature when they are split: head i must take the consecutive features "
            "i·d_head … (i+1)·d_head − 1", _with(lambda p, h: _strided(p, h, o_rows=False))),
    Mistake(_SPLIT_ALONE, _split_merge(_split_alone, _merge_alone)),
    Mistake(_SPLIT_ALONE, _split_merge(_split_alone, reference.merge_heads)),
    Mistake("the heads are merged by a reshape alone, which mixes the tokens: transpose (B, h, T, d_head) to "
            "(B, T, h, d_head), then reshape", _split_merge(reference.split_heads, _merge_alone)),
    Mistake("the heads are merged with their features interleaved: transpose to (B, T, h, d_head), axes "
            "(0, 2, 1, 3), then reshape", _split_merge(reference.split_heads, _merge_interleaved)),
    Mistake("the mask is ignored: pass it to the attention of every head",
            lambda Q, K, V, params, num_heads, mask: reference.multi_head_attention(Q, K, V, params, num_heads)),
    Mistake("the mask is applied over the queries instead of the keys: it must broadcast to (B, h, T_q, T_k) "
            "as it is given", lambda Q, K, V, params, num_heads, mask: reference.multi_head_attention(
                Q, K, V, params, num_heads, np.swapaxes(np.broadcast_to(
                    mask, (Q.shape[0], num_heads, Q.shape[1], K.shape[1])), -1, -2)),
            when=lambda Q, K, V, params, num_heads, mask: mask is not None),
    Mistake(_AS_GIVEN, _whole_mask_in_each_head),
]

exercise = Exercise(reference)
split_heads = exercise.task(
    "split_heads", hint="head i at time t should hold X[b, t, i·d/h : (i+1)·d/h]", mistakes=[
        Mistake("it has shape (B, T, h, d/h): transpose it to (B, h, T, d/h) so that the head axis comes before "
                "the time axis", lambda X, num_heads: X.reshape(*X.shape[:2], num_heads, -1)),
        Mistake("it mixes the tokens between heads: reshaping straight to (B, h, T, d/h) is not enough; reshape "
                "to (B, T, h, d/h), then move the head axis in front of the time axis with a transpose",
                _split_alone),
        Mistake("it gives head i every h-th feature: head i must take the consecutive features i·d/h … (i+1)·d/h − 1",
                lambda X, num_heads: X.reshape(*X.shape[:2], -1, num_heads).transpose(0, 3, 1, 2))])
merge_heads = exercise.task(
    "merge_heads", hint="it should undo split_heads: head i fills the features i·d_head … (i+1)·d_head − 1 of "
                        "each token", mistakes=[
        Mistake("it has shape (B, T, h, d_head): after the transpose, reshape it to (B, T, h·d_head)",
                lambda X: X.transpose(0, 2, 1, 3)),
        Mistake("it mixes the tokens: a reshape alone does not undo split_heads; transpose (B, h, T, d_head) to "
                "(B, T, h, d_head) first, then reshape", _merge_alone),
        Mistake("it interleaves the features of the heads: transpose to (B, T, h, d_head), axes (0, 2, 1, 3), so "
                "that head i fills the features i·d_head … (i+1)·d_head − 1", _merge_interleaved)])
attention = exercise.task("multi_head_attention", order=("output", "weights"), outputs=[
    Output("output", mistakes=HEAD_MISTAKES,
           hint="it should be the heads' outputs (weights @ values), merged, then @ W_o + b_o"),
    Output("weights", mistakes=HEAD_MISTAKES + [
        Mistake("they are averaged over the heads: return the weights of every head, shape (B, h, T_q, T_k)",
                _weights(lambda weights: weights.mean(axis=1))),
        Mistake("they are laid out (B, T_q, h, T_k): return them as (B, h, T_q, T_k), one (T_q, T_k) map per head",
                _weights(lambda weights: weights.transpose(0, 2, 1, 3)))],
        hint="they differ from softmax(Q_i K_iᵀ / √d_head) in every head i, where "
             "Q_i = (Q @ W_q + b_q)[..., i·d_head : (i+1)·d_head] and likewise K_i",
        facts=[Fact("{name}: keys that the mask hides get nonzero weight: the mask must broadcast to "
                    "(B, h, T_q, T_k) as it is given, with its last axis over the keys.",
                    lambda actual, Q, K, V, params, num_heads, mask: mask is None or
                        np.allclose(actual[~np.broadcast_to(mask, actual.shape)], 0.0))])])


def _problem(rng, B, T_q, T_k, d_model, scale=1.0):
    """Random inputs and parameters whose projections have entries of size about `scale`."""
    Q, K, V = (rng.normal(size=(B, T, d_model)) for T in (T_q, T_k, T_k))
    return Q, K, V, {f"{kind}_{n}": scale * rng.normal(size=(d_model, d_model)) / np.sqrt(d_model) if kind == "W"
                     else rng.normal(size=d_model) for n in "qkvo" for kind in "Wb"}  # drawn W_q, b_q, W_k, …


def _example():
    """The task's visible example: one query, two keys, d_model = 8, identity projections."""
    ln3 = np.log(3.0)
    Q = np.array([[[ln3, ln3, 0, 0, ln3, ln3, 0, 0]]])
    K = np.array([[[0, 0, 0, 0, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0]]], dtype=float)
    V = np.array([[[4, 0, 0, 0, 8, 0, 0, 0], [0, 4, 0, 0, 0, 0, 0, 0]]], dtype=float)
    return Q, K, V, {f"W_{n}": np.eye(8) for n in "qkvo"} | {f"b_{n}": np.zeros(8) for n in "qkvo"}


def check_split_heads(function):
    rng = seeded(SEED)
    split_heads.check(function, [case(f"X of shape {(B, T, d)} with num_heads={h}", rng.normal(size=(B, T, d)), h)
                                 for B, T, d, h in [(2, 3, 8, 2), (1, 5, 12, 3), (3, 4, 6, 6), (2, 4, 8, 4),
                                                    (2, 3, 6, 1)]]
                       + [case("the task's two sequences of two tokens (0 … 11 and 12 … 23), num_heads=3",
                               np.arange(24.0).reshape(2, 2, 6), 3)])


def check_merge_heads(function):
    rng = seeded(SEED + 1)
    merge_heads.check(function, [case(f"X of shape {shape} (B, h, T, d_head)", rng.normal(size=shape))
                                 for shape in [(2, 2, 3, 4), (1, 3, 5, 4), (3, 6, 4, 1), (2, 4, 4, 4), (2, 1, 3, 6)]]
                       + [case("the task's heads of two sequences", np.arange(24.0).reshape(2, 2, 3, 2).transpose(
                           0, 2, 1, 3))])


def check_multi_head_attention(function):
    """Unmasked: self- and cross-attention, several sizes, one head, large scores."""
    rng = seeded(SEED + 2)
    cases = []
    for description, (B, T_q, T_k, d_model, h), scale in [
            ("self-attention with B=2, T=5, d_model=8, num_heads=2", (2, 5, 5, 8, 2), 1.0),
            ("cross-attention with B=2, T_q=3, T_k=6, d_model=12, num_heads=3", (2, 3, 6, 12, 3), 1.0),
            ("self-attention with B=1, T=4, d_model=6, num_heads=1", (1, 4, 4, 6, 1), 1.0),
            ("cross-attention with B=3, T_q=2, T_k=3, d_model=4, num_heads=4", (3, 2, 3, 4, 4), 1.0),
            ("self-attention with B=2, T=3, d_model=16, num_heads=4 and large scores", (2, 3, 3, 16, 4), 8.0)]:
        Q, K, V, params = _problem(rng, B, T_q, T_k, d_model, scale)
        cases.append(case(description, Q, *((Q, Q) if "self" in description else (K, V)), params, h))
    Q, K, V, params = _example()
    with_o = {**params, "W_o": np.eye(8)[::-1], "b_o": np.arange(8.0)}
    attention.check(function, cases + [
        case("the task's example", Q, K, V, params, 2),
        case("the task's example with a second query of zeros", np.concatenate([Q, np.zeros_like(Q)], axis=1), K, V,
             params, 2),
        case("the task's example with W_o and b_o", Q, K, V, with_o, 2),
        case("the task's example with the query in b_q", np.zeros_like(Q), K, V, {**with_o, "b_q": Q[0, 0]}, 2),
        case("the task's batch of two sequences, the second with its keys swapped", np.concatenate([Q, Q]),
             np.concatenate([K, K[:, ::-1]]), np.concatenate([V, V]), params, 2)])


def check_multi_head_attention_masks(function):
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
    example = (*_example(), 2)
    Q_ex, K_ex, V_ex, params_ex = _example()
    K_large = K_ex.copy()
    K_large[0, 1, :2] = 1e4                                            # head 0's score 1e4 ln 3 on key 1
    B_large = [rng.normal(size=(2, n, d_model)) for n in (3, 4, 4)]
    B_large[0][0, 0], B_large[1][0, 3] = np.eye(d_model)[0], 1e4 * np.eye(d_model)[0]  # score 1e4, masked
    attention.check(function, [each.on_raise(_AS_GIVEN, case("without the mask", *each.args[:5])) for each in [
        case("a padding mask of shape (B, 1, 1, T_k)", X, X, X, params, h, padding),
        case("a causal mask of shape (T, T)", X, X, X, params, h, causal),
        case("a causal and padding mask of shape (B, 1, T, T)", X, X, X, params, h, causal & padding),
        case("a mask of shape (1, h, T, T) that differs between the heads", X, X, X, params, h, per_head),
        case("a query whose keys are all masked", X, X, X, params, h, fully_masked),
        case("cross-attention (T_q=2, T_k=6, num_heads=3) with a padding mask (B, 1, 1, T_k)",
             Q_cross, K_cross, V_cross, params_cross, 3, padding_mask(np.array([6, 4, 1]), 6)[:, None, None, :]),
        case("the task's example with key 1 masked", *example, np.array([True, False]).reshape(1, 1, 1, 2)),
        case("a masked key whose score is 5e3 in head 0 of sequence 0 (identity projections, lengths 3, 2)",
             *B_large, params_ex, 2,
             padding_mask(np.array([3, 2]), 4)[:, None, None, :]),
        case("the task's batch whose masked key 1 of sequence 0 has a score of 1e4 ln 3 in head 0",
             np.concatenate([Q_ex, Q_ex]), np.concatenate([K_large, K_ex]), np.concatenate([V_ex, V_ex]), params_ex,
             2, np.array([[True, False], [True, True]]).reshape(2, 1, 1, 2)),
        case("the task's example with a different mask per head", *example,
             np.array([[[[True, False]], [[False, True]]]]))]])
