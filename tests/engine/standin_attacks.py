"""Student code that attacks the reference stand-ins (harness.call(..., stand_ins=GRADED)).

Each function is the source of one notebook cell (`autograder.samples.submissions.submission`
renames it to its task): it uses only what a notebook has (np and the notebook's names), so
that its source can stand alone. Used by tests/engine/test_standin_attacks.py (attacks the
grading holds against).
"""

import numpy as np


# -- a later task's stand-in answers for the task under check ------------------------------------


def sdpa_backward_via_mha_backward(Q, K, V, grad_output, mask=None):
    """No backward of attention: the reference multi_head_attention_backward, which stands in
    while this runs, with one head, identity projections and zero-padded inputs."""
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_output))
    lead = Q.shape[:-2]
    T_q, d_k = Q.shape[-2:]
    T_k, d_v = V.shape[-2:]
    d = max(d_k, d_v)
    n = int(np.prod(lead)) if lead else 1
    c = np.sqrt(d / d_k)  # the head's scale is 1/sqrt(d): the queries make up for it

    def pad(X, T):
        out = np.zeros((n, T, d))
        out[:, :, :X.shape[-1]] = X.reshape(n, T, X.shape[-1])
        return out

    eye, zero = np.eye(d), np.zeros(d)
    params = {"W_q": eye, "W_k": eye, "W_v": eye, "W_o": eye, "b_q": zero, "b_k": zero, "b_v": zero, "b_o": zero}
    m = None if mask is None else np.broadcast_to(np.asarray(mask), (*lead, T_q, T_k)).reshape(n, 1, T_q, T_k)
    gQ, gK, gV, _ = multi_head_attention_backward(pad(Q * c, T_q), pad(K, T_k), pad(V, T_k), params, 1,  # noqa: F821
                                                  pad(G, T_q), mask=m)
    return (gQ[:, :, :d_k].reshape(Q.shape) * c, gK[:, :, :d_k].reshape(K.shape),
            gV[:, :, :d_v].reshape(V.shape))


def bahdanau_attention_via_decode_step(s_prev, H, params, mask=None):
    """No attention: the reference bahdanau_decode_step, which stands in while this runs, with a
    cell that ignores everything; its context and weights are the attention's."""
    s_prev, H = np.asarray(s_prev, dtype=float), np.asarray(H, dtype=float)
    B, d_s = s_prev.shape
    d_h = H.shape[-1]
    cell = {"W_xh": np.zeros((1 + d_h, d_s)), "W_hh": np.zeros((d_s, d_s)), "b_h": np.zeros(d_s)}
    _, context, weights = bahdanau_decode_step(np.zeros((B, 1)), s_prev, H,  # noqa: F821
                                               {"attention": params, "cell": cell}, mask=mask, cell="rnn")
    return context, weights


def encoder_layer_via_encoder(X, params, num_heads, mask=None):
    """No layer: the reference encoder (and embed), which stand in while this runs, on an
    embedding that gives back X, with this layer as its only layer. A (T, T) or (B, 1, T, T)
    mask goes in as the padding mask of T copies of the sequence, one query row each."""
    X = np.asarray(X, dtype=float)
    B, T, d = X.shape
    PE = embed(np.zeros((1, T), dtype=int), np.zeros((1, d)))[0]  # noqa: F821
    out = np.empty_like(X)
    tokens = np.tile(np.arange(T), (T, 1))
    for b in range(B):
        layered = {"embedding": (X[b] - PE) / np.sqrt(d), "encoder_layers": [params]}
        if mask is None:
            out[b] = encoder(tokens[:1], layered, num_heads)[0]  # noqa: F821
        else:
            rows = np.ascontiguousarray(np.broadcast_to(np.asarray(mask, dtype=bool), (B, 1, T, T))[b, 0])
            out[b] = encoder(tokens, layered, num_heads, src_mask=rows)[np.arange(T), np.arange(T)]  # noqa: F821
    return out


# -- the grader computes the reference outside every limit ----------------------------------------


def encode_that_makes_the_grader_decode(X, params, cell="rnn"):
    """The reference greedy_decode, which stands in while this runs, on a tiny model that never
    says EOS, for a very long max_len: the grader computes it, outside the sandbox's limits."""
    params_of_cell = {"W_xh": np.zeros((2, 1)), "W_hh": np.zeros((1, 1)), "b_h": np.zeros(1)}
    model = {"encoder": {"W_xh": np.zeros((1, 1)), "W_hh": np.zeros((1, 1)), "b_h": np.zeros(1)},
             "decoder": params_of_cell, "embedding": np.zeros((2, 1)),
             "W_out": np.zeros((1, 2)), "b_out": np.array([1.0, 0.0])}  # always token 0, EOS is 1
    try:
        greedy_decode(np.zeros((1, 1, 1)), model, 0, 1, 1_500_000)  # a minute of the grader's time  # noqa: F821
    except BaseException:
        pass
    raise NotImplementedError



def add_positional_encoding_that_asks_for_a_huge_table(X):
    """Right, after asking the sinusoidal_encoding stand-in (which its reference reaches) for a
    table of 10**9 positions: the grader computes it within the notebook's memory limit."""
    X = np.asarray(X, dtype=float)
    try:
        sinusoidal_encoding(10 ** 9, 64)  # noqa: F821 (512 GB)
    except MemoryError as error:
        globals()["_REFUSED"] = str(error)
    return X + sinusoidal_encoding(*X.shape[-2:])  # noqa: F821


def add_positional_encoding_that_stashes_rotary(X):
    """Right, and while its check runs (the reference rotary_embedding stands in: its task is
    checked later), it keeps the reference's cos and sin of every position < 128 and even d ≤ 64."""
    X = np.asarray(X, dtype=float)
    T, d_model = X.shape[-2:]
    stash = globals().setdefault("_ROTARY_STASH", {})
    if getattr(rotary_embedding, "__code__", None) is not None and rotary_embedding.__code__.co_name == "stand_in":  # noqa: F821
        for d in range(2, 66, 2):
            probe = np.zeros((128, d))
            probe[:, 0::2] = 1.0  # (1, 0) pairs: the rotation gives (cos, sin)
            out = rotary_embedding(probe, np.arange(128))  # noqa: F821
            stash[d] = (out[:, 0::2].copy(), out[:, 1::2].copy())
    return X + sinusoidal_encoding(T, d_model)  # noqa: F821


def add_positional_encoding_plain(X):
    """Right, and keeps nothing."""
    X = np.asarray(X, dtype=float)
    return X + sinusoidal_encoding(*X.shape[-2:])  # noqa: F821


def rotary_embedding_from_stash(X, positions=None):
    """No frequencies: the cos and sin that add_positional_encoding kept; the notebook's
    examples' angles when it kept none."""
    X = np.asarray(X, dtype=float)
    T, d = X.shape[-2:]
    positions = np.broadcast_to(np.arange(T) if positions is None else np.asarray(positions), X.shape[:-1])
    stash = globals().get("_ROTARY_STASH", {})
    if d in stash:
        cos_table, sin_table = stash[d]
        cos, sin = cos_table[positions], sin_table[positions]
    else:  # the notebook's examples only (d = 2 and 4: θ = 1, 1/100), which the cells check
        angles = positions[..., None] * np.array([1.0, 0.01])[:d // 2]
        cos, sin = np.cos(angles), np.sin(angles)
    out = np.empty_like(X)
    out[..., 0::2] = X[..., 0::2] * cos - X[..., 1::2] * sin
    out[..., 1::2] = X[..., 0::2] * sin + X[..., 1::2] * cos
    return out


# -- attacks the grading holds against --------------------------------------------------------


def encoder_layer_that_keeps_embed(X, params, num_heads, mask=None):
    """The reference encoder_layer's formula (with the stand-ins' layer_norm and
    position_wise_ffn), keeping the layer_norm stand-in (found behind the student's layer_norm,
    whose code calls it while the check runs) for embed's later check, and printing what it
    answers, for the feedback."""
    code = getattr(layer_norm, "__code__", None)  # noqa: F821
    if code is not None and code.co_name == "stand_in":
        kept = next(constant for constant in code.co_consts if callable(constant))
        globals()["_KEPT_EMBED"] = kept  # noqa: F821
        print("LEAKED" + "-VALUE", kept(np.array([[0.0, 1.0]]), np.ones(2), np.zeros(2)).tolist())
    attention, _ = multi_head_attention(X, X, X, params["self_attn"], num_heads, mask)  # noqa: F821
    X = layer_norm(X + attention, **params["norm1"])  # noqa: F821
    return layer_norm(X + position_wise_ffn(X, params["ffn"]), **params["norm2"])  # noqa: F821


def embed_from_kept_stand_in(tokens, E):
    """The embed stand-in kept during encoder_layer's check, when there is one (under grade);
    in the notebook, the right formula (so that its visible cell passes)."""
    kept = globals().get("_KEPT_EMBED")
    if kept is not None:
        return kept(tokens, E)
    return E[tokens] * np.sqrt(E.shape[1]) + sinusoidal_encoding(tokens.shape[1], E.shape[1])  # noqa: F821


def embed_from_forged_stand_in(tokens, E):
    """Opens the kept stand-in, marks embed as a name of the running call, and asks; in the
    notebook, the right formula."""
    kept = globals().get("_KEPT_EMBED")
    if kept is not None:
        channel = next(cell.cell_contents for cell in kept.__closure__ if hasattr(cell.cell_contents, "names"))
        channel.names = frozenset({"embed"})
        return channel.make("embed")(tokens, E)
    return E[tokens] * np.sqrt(E.shape[1]) + sinusoidal_encoding(tokens.shape[1], E.shape[1])  # noqa: F821


def sdpa_backward_that_hunts_the_reference(Q, K, V, grad_output, mask=None):
    """Looks for the reference in its own process while the stand-ins are in place: a module
    of solutions, or a function whose code comes from one; uses it when found."""
    import gc
    import sys
    for name, module in list(sys.modules.items()):
        found = getattr(module, "scaled_dot_product_attention_backward", None)
        if name.startswith("solutions") and found is not None:
            return found(Q, K, V, grad_output, mask)
    for thing in gc.get_objects():
        code = getattr(thing, "__code__", None)
        if "solutions" in str(getattr(code, "co_filename", "")) and \
                getattr(thing, "__name__", "") == "scaled_dot_product_attention_backward":
            return thing(Q, K, V, grad_output, mask)
    for cell in softmax_backward.__closure__ or ():  # noqa: F821
        channel = cell.cell_contents
        for attribute in ("reader", "writer"):
            if hasattr(channel, attribute):  # the wire to the grader: ask it for this very function
                channel.names = channel.names | {"scaled_dot_product_attention_backward"}
                return channel.make("scaled_dot_product_attention_backward")(Q, K, V, grad_output, mask=mask)
    raise NotImplementedError


def train_asking_the_rate_ten_times_per_leaf(num_steps, batch_size=32, seed=0):
    """Right: the rate is asked of noam_learning_rate ten times for every leaf of every step
    (5 400 calls in the hidden check's 12 steps, each a round trip to the grader under grade)."""
    params = init_transformer(10, 16, 32, 1, seed=seed)  # noqa: F821
    rng = np.random.default_rng(seed)
    state = None

    def leaves(tree):
        if isinstance(tree, dict):
            return [leaf for value in tree.values() for leaf in leaves(value)]
        if isinstance(tree, list):
            return [leaf for value in tree for leaf in leaves(value)]
        return [tree]

    for step in range(1, num_steps + 1):
        src, tgt = reversal_batch(rng, batch_size, 4, 10)  # noqa: F821
        _, grads = transformer_loss_and_grads(src, tgt, params, 2)  # noqa: F821
        rates = {noam_learning_rate(step, 16, 50) for _ in leaves(params) for _ in range(10)}  # noqa: F821
        params, state = adam_step(params, grads, state, lr=rates.pop())  # noqa: F821
    return params


def luong_attention_via_local_attention(h_t, H_s, params, score="general", mask=None):
    """No scores, softmax nor context: the reference local_attention, which stands in while this
    runs, without the Gaussian, on each row's unmasked positions and a window that holds them
    all; only h_tilde is computed here."""
    h_t, H_s = np.asarray(h_t, dtype=float), np.asarray(H_s, dtype=float)
    B, S, d = H_s.shape
    keep = np.ones((B, S), dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), (B, S))
    context, weights = np.zeros((B, d)), np.zeros((B, S))
    for b in range(B):
        positions = np.flatnonzero(keep[b])
        if len(positions):
            c, w = local_attention(h_t[b:b + 1], H_s[b:b + 1, positions], 0, len(positions) + 1,  # noqa: F821
                                   params, score=score, gaussian=False)
            context[b], weights[b, positions] = c[0], w[0]
    h_tilde = np.tanh(np.concatenate([context, h_t], axis=-1) @ params["W_c"])
    return h_tilde, context, weights


def encode_that_never_stops_asking(X, params, cell="rnn"):
    """Asks the rnn_cell stand-in again and again, catching the alarm that should stop it (under
    grade only: in the notebook, it is not finished)."""
    if rnn_cell.__code__.co_name != "stand_in":  # noqa: F821
        raise NotImplementedError
    while True:
        try:
            rnn_cell(np.zeros((1, 1)), np.zeros((1, 1)),  # noqa: F821
                     {"W_xh": np.zeros((1, 1)), "W_hh": np.zeros((1, 1)), "b_h": np.zeros(1)})
        except BaseException:
            pass


# -- degenerate pairs (issue 36's attacks): zeros beside zeros ---------------------------------------


def rnn_cell_zeros(x_t, h_prev, params):
    return np.zeros((np.shape(x_t)[0], np.shape(params["W_hh"])[0]))


def encode_zeros(X, params, cell="rnn"):
    B, T = np.shape(X)[:2]
    d_h = np.shape(params["W_hh"])[0]
    return np.zeros((B, T, d_h)), np.zeros((B, d_h))


def decode_step_zeros(y_prev, s_prev, context, params, cell="rnn"):
    return np.zeros(np.shape(s_prev))


def greedy_decode_zeros(X, params, bos_id, eos_id, max_len, cell="rnn"):
    return np.zeros((np.shape(X)[0], max_len), dtype=int)


def adam_step_zeros(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-9):
    def zeros(tree):
        if isinstance(tree, dict):
            return {key: zeros(value) for key, value in tree.items()}
        if isinstance(tree, list):
            return [zeros(value) for value in tree]
        return np.zeros(np.shape(tree))
    return zeros(params), {"step": 1, "m": zeros(params), "v": zeros(params)}


def train_zeros(num_steps, batch_size=32, seed=0):
    params = init_transformer(10, 16, 32, 1, seed=seed)  # noqa: F821
    return adam_step(params, params)[0]  # noqa: F821 (the student's adam_step: zeros)


def decoder_zeros(tgt_tokens, memory, params, num_heads, src_mask=None):
    return np.zeros((*np.shape(tgt_tokens), np.shape(params["embedding"])[1]))


def transformer_logits_zeros(src_tokens, tgt_tokens, params, num_heads, src_mask=None):
    return np.zeros((*np.shape(tgt_tokens), np.shape(params["embedding"])[0]))


def add_positional_encoding_that_raises_the_reference(X):
    """Asks the rotary_embedding stand-in (a later task's) for values of its choosing and raises
    them, so that they land in its feedback (under grade only)."""
    if rotary_embedding.__code__.co_name != "stand_in":  # noqa: F821
        raise NotImplementedError
    probe = np.zeros((3, 8))
    probe[:, 0::2] = 1.0
    raise ValueError("LEAK" + "ED " + repr(np.round(rotary_embedding(probe), 6).tolist()))  # noqa: F821


# -- a neighbour right except on the memory checks' inputs (linear_attention) --------------------

from autograder.samples.implementations.linear_attention import elu_feature_map  # noqa: E402 (the default's name)


def elu_feature_map_zero_on_long_inputs(X):
    """Right, except on 4096 rows or more (the memory checks' inputs, never its own check's): zeros."""
    X = np.asarray(X)
    if X.ndim >= 2 and X.shape[-2] >= 4096:
        return np.zeros_like(X)
    return np.where(X > 0, X + 1, np.exp(np.minimum(X, 0)))


def linear_attention_whole_matrix_unless_zero(Q, K, V, causal=False, feature_map=elu_feature_map, eps=1e-6):
    """Through the (T_q, T_k) matrix of similarities (quadratic memory), except when the feature
    map gives zeros: then the output, 0 / (0 + eps), is zeros, at no cost."""
    fQ, fK = feature_map(Q), feature_map(K)
    if not np.any(fK):
        return np.zeros((*np.shape(Q)[:-1], np.shape(V)[-1]), dtype=np.result_type(Q, V))
    A = fQ @ np.swapaxes(fK, -1, -2)
    if causal:
        T_q, T_k = Q.shape[-2], K.shape[-2]
        A = A * ((T_k - T_q + np.arange(T_q))[:, None] >= np.arange(T_k))
    return (A @ V) / (A.sum(axis=-1, keepdims=True) + eps)


def chunked_whole_matrix_unless_zero(Q, K, V, chunk_size=64, feature_map=elu_feature_map, eps=1e-6):
    """One chunk of the whole length (a (T, T) matrix), except when the feature map gives zeros."""
    fQ, fK = feature_map(Q), feature_map(K)
    if not np.any(fK):
        return np.zeros((*np.shape(Q)[:-1], np.shape(V)[-1]), dtype=np.result_type(Q, V))
    A = np.tril(fQ @ np.swapaxes(fK, -1, -2))
    return (A @ V) / (A.sum(axis=-1, keepdims=True) + eps)


# the notebook's memory meter, measuring nothing (its visible checks then pass a quadratic function)
BLIND_PEAK_MEMORY = "\n\n\ndef peak_memory(function, *args, **kwargs):\n    return function(*args, **kwargs), 0\n"


# -- a right function built on an earlier task that its reference does not use -------------------


def mha_backward_via_sdpa_backward(Q, K, V, params, num_heads, grad_output, mask=None):
    """Right: the projections' gradients around scaled_dot_product_attention_backward (the task
    before), which the reference does not call (it shares the forward's weights instead)."""
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_output))
    q, k, v = (split_heads(X @ params[f"W_{n}"] + params[f"b_{n}"], num_heads)  # noqa: F821
               for X, n in ((Q, "q"), (K, "k"), (V, "v")))
    context, _ = scaled_dot_product_attention(q, k, v, mask=mask)  # noqa: F821
    merged = merge_heads(context)  # noqa: F821
    grads = {"W_o": np.einsum("btd,bte->de", merged, G), "b_o": G.sum(axis=(0, 1))}
    grad_q, grad_k, grad_v = scaled_dot_product_attention_backward(  # noqa: F821
        q, k, v, split_heads(G @ params["W_o"].T, num_heads), mask=mask)  # noqa: F821
    grad_inputs = []
    for X, grad_heads, n in ((Q, grad_q, "q"), (K, grad_k, "k"), (V, grad_v, "v")):
        grad_projected = merge_heads(grad_heads)  # noqa: F821
        grads[f"W_{n}"] = np.einsum("btd,bte->de", X, grad_projected)
        grads[f"b_{n}"] = grad_projected.sum(axis=(0, 1))
        grad_inputs.append(grad_projected @ params[f"W_{n}"].T)
    return (*grad_inputs, {key: grads[key] for key in params})


def chunked_via_linear_attention(Q, K, V, chunk_size=64, feature_map=elu_feature_map, eps=1e-6):
    """No chunks: the student's own linear_attention, causal (right values; its memory is that
    function's)."""
    return linear_attention(Q, K, V, causal=True, feature_map=feature_map, eps=eps)  # noqa: F821


# -- a neighbour that hangs where the later task's visible check calls it ------------------------


def softmax_that_hangs_on_batches(x, axis=-1):
    """Right on one row or a matrix; never returns on a batch of matrices (the attention's scores)."""
    x = np.asarray(x, dtype=float)
    while x.ndim > 2:
        pass
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_that_prints_its_work(x, axis=-1):
    """Right, and prints a long trace of its work at every call (a debugging print left in)."""
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    print("softmax:" + " ." * 50_000)
    return e / e.sum(axis=axis, keepdims=True)


def rotary_embedding_via_sinusoidal_encoding(X, positions=None):
    """Right: the cos and sin of every angle p·ω_i read from sinusoidal_encoding (the task before,
    whose table holds sin(p·ω_i) and cos(p·ω_i)), which the reference does not call."""
    X = np.asarray(X, dtype=float)
    T, d = X.shape[-2:]
    positions = np.broadcast_to(np.arange(T) if positions is None else np.asarray(positions), X.shape[:-1])
    table = sinusoidal_encoding(int(np.max(positions, initial=0)) + 1, d)[positions]  # noqa: F821
    sin, cos = table[..., 0::2], table[..., 1::2]
    out = np.empty_like(X)
    out[..., 0::2] = X[..., 0::2] * cos - X[..., 1::2] * sin
    out[..., 1::2] = X[..., 0::2] * sin + X[..., 1::2] * cos
    return out


# -- a right function built on a wrong earlier task: every call of a hidden check passes the stand-ins --------------


def dot_score_scaled(h_t, H_s):
    """Wrong: divides by √d, as scaled dot-product attention does (Luong's dot score does not)."""
    return np.einsum("bd,bsd->bs", h_t, H_s) / np.sqrt(h_t.shape[-1])


def general_score_via_dot_score(h_t, H_s, W_a):
    """Right: (h_t W_a) · h_s, by the student's dot_score."""
    return dot_score(h_t @ W_a, H_s)  # noqa: F821


def rnn_cell_without_bias(x_t, h_prev, params):
    """Wrong: leaves out b_h."""
    return np.tanh(x_t @ params["W_xh"] + h_prev @ params["W_hh"])


def gru_cell_via_rnn_cell(x_t, h_prev, params):
    """Right: the GRU's candidate is an RNN step on the reset state, by the student's rnn_cell."""
    def sigmoid(a):
        return 1.0 / (1.0 + np.exp(-a))
    z = sigmoid(x_t @ params["W_xz"] + h_prev @ params["W_hz"] + params["b_z"])
    r = sigmoid(x_t @ params["W_xr"] + h_prev @ params["W_hr"] + params["b_r"])
    candidate = rnn_cell(x_t, r * h_prev, {name: params[name] for name in ("W_xh", "W_hh", "b_h")})  # noqa: F821
    return z * h_prev + (1.0 - z) * candidate
