"""A decoder-only Transformer (Radford et al. 2018, 2019) and how it writes.

The model keeps the decoder's masked self-attention and drops the encoder and
the attention over it: the embedding of the encoder chapter (``embed``), a
stack of **pre-LN** blocks under the causal mask (Radford et al. 2019; Xiong
et al. 2020), a final layer norm and the tied output projection ``@ E.T``.
Its gradients come from the backward functions of the backpropagation
chapter, its training from ``adam_step``. Writing with it: the key/value
cache, the filters of sampling (temperature, top-k, nucleus; Holtzman et al.
2020), and beam search with the length penalty of Wu et al. (2016) for the
encoder-decoder of the decoder chapter. And the chapter's own model, saved by
``make book``: ``load_course_model()`` and ``write(prompt, ...)``.
"""

import math

import numpy as np

from .backpropagation import (
    cross_entropy, layer_norm_backward, multi_head_attention_backward,
    position_wise_ffn_backward)
from .multi_head import multi_head_attention
from .scaled_dot_product import causal_mask, softmax
from .training import (
    _encoder_backward, _encoder_forward, adam_step, init_transformer, noam_learning_rate)
from .transformer_decoder import _attend, _embed_next, _heads, decoder_step, init_decoder_cache
from .transformer_encoder import embed, encoder, layer_norm, position_wise_ffn


# -- the model ---------------------------------------------------------------------

def init_language_model(vocab_size, d_model, d_ff, num_layers, seed=0):
    """Random parameters for ``language_model_logits``, drawn as ``init_transformer`` draws them.

    ``{"embedding": (V, d_model), "layers": [{"norm1", "self_attn", "norm2",
    "ffn"}, ...], "final_norm": {"gamma", "beta"}}``: a block has the keys of
    an encoder layer, so the blocks are ``init_transformer``'s encoder layers
    (Glorot-uniform weights, zero biases, ``gamma`` 1, ``beta`` 0, embedding
    normal with standard deviation ``d_model^(−1/2)``). Same seed, same model.
    """
    transformer = init_transformer(vocab_size, d_model, d_ff, num_layers, seed=seed)
    return {"embedding": transformer["embedding"], "layers": transformer["encoder_layers"],
            "final_norm": {"gamma": np.ones(d_model), "beta": np.zeros(d_model)}}


def language_model_block(X, params, num_heads, mask=None):
    """One pre-LN block: ``X ← X + MHA(LN1(X))``, then ``X ← X + FFN(LN2(X))``.

    The layer norm moves from after the residual sum (post-LN, the 2017 paper)
    to the input of each sub-layer: the residual path from the embedding to
    the output is then a plain sum, untouched by any normalisation.
    """
    normed = layer_norm(X, **params["norm1"])
    attended, _ = multi_head_attention(normed, normed, normed, params["self_attn"], num_heads, mask)
    X = X + attended
    return X + position_wise_ffn(layer_norm(X, **params["norm2"]), params["ffn"])


def language_model_logits(tokens, params, num_heads):
    """Next-token logits ``(B, T, V)`` of ``tokens (B, T)``; position ``t`` sees tokens ``0 … t``."""
    X = embed(tokens, params["embedding"])                       # (B, T, d_model)
    mask = causal_mask(X.shape[1])
    for block in params["layers"]:
        X = language_model_block(X, block, num_heads, mask)
    return layer_norm(X, **params["final_norm"]) @ params["embedding"].T


def language_model_loss_and_grads(tokens, params, num_heads, mask=None, label_smoothing=0.0):
    """Next-token prediction: ``(loss, grads)`` of the logits of ``tokens[:, :-1]`` on ``tokens[:, 1:]``.

    ``tokens (B, T)``, ``T ≥ 2``; ``mask (B, T)`` is ``True`` at real tokens,
    and a position is scored when its *next* token is real (``mask[:, 1:]``),
    as ``tgt_mask`` in training. ``grads`` has exactly the structure of
    ``params``; the embedding's gradient sums its two uses (input and output).
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (B, T) with T >= 2 (an input and its next token), "
                         f"got shape {tokens.shape}")
    if mask is not None and np.shape(mask) != tokens.shape:
        raise ValueError(f"mask must have the shape of tokens {tokens.shape}, got {np.shape(mask)}")
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    scored = None if mask is None else np.asarray(mask, dtype=bool)[:, 1:]
    E = params["embedding"]
    attention_mask = causal_mask(inputs.shape[1])

    # Forward, keeping what each backward function needs: every block's input and middle.
    X = embed(inputs, E)                                         # (B, T - 1, d_model)
    records = []
    for block in params["layers"]:
        middle = X + multi_head_attention(*[layer_norm(X, **block["norm1"])] * 3, block["self_attn"],
                                          num_heads, attention_mask)[0]
        records.append((X, middle))
        X = middle + position_wise_ffn(layer_norm(middle, **block["norm2"]), block["ffn"])
    final = layer_norm(X, **params["final_norm"])
    loss, grad_logits = cross_entropy(final @ E.T, targets, scored, label_smoothing)

    # Backward, last block first: each residual passes its gradient on unchanged.
    grad_E = np.einsum("btv,btd->vd", grad_logits, final)
    grad_X, grad_gamma, grad_beta = layer_norm_backward(X, **params["final_norm"],
                                                        grad_output=grad_logits @ E)
    grad_layers = [None] * len(records)
    for i in reversed(range(len(records))):
        block, (X, middle) = params["layers"][i], records[i]
        normed2 = layer_norm(middle, **block["norm2"])
        grad_normed2, grad_ffn = position_wise_ffn_backward(normed2, block["ffn"], grad_X)
        grad_middle, grad_g2, grad_b2 = layer_norm_backward(middle, **block["norm2"],
                                                            grad_output=grad_normed2)
        grad_middle = grad_middle + grad_X                       # the residual
        normed1 = layer_norm(X, **block["norm1"])
        grad_Q, grad_K, grad_V, grad_attn = multi_head_attention_backward(
            normed1, normed1, normed1, block["self_attn"], num_heads, grad_middle, attention_mask)
        grad_X, grad_g1, grad_b1 = layer_norm_backward(X, **block["norm1"],
                                                       grad_output=grad_Q + grad_K + grad_V)
        grad_X = grad_X + grad_middle                            # the residual
        grad_layers[i] = {"norm1": {"gamma": grad_g1, "beta": grad_b1}, "self_attn": grad_attn,
                          "norm2": {"gamma": grad_g2, "beta": grad_b2}, "ffn": grad_ffn}
    np.add.at(grad_E, inputs, math.sqrt(E.shape[1]) * grad_X)    # E[tokens] · √d_model
    return loss, {"embedding": grad_E, "layers": grad_layers,
                  "final_norm": {"gamma": grad_gamma, "beta": grad_beta}}


def post_ln_loss_and_grads(tokens, params, num_heads, label_smoothing=0.0):
    """The same loss for the post-LN model of 2017: ``params = {"embedding", "encoder_layers"}``.

    A post-LN decoder-only block is the encoder layer under the causal mask,
    ``LN(X + MHA(X))`` then ``LN(X + FFN(X))``, so this reuses the forward and
    backward of the training chapter's encoder; its last layer norm ends the
    stack (no final norm). For the comparison of the two placements only.
    """
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    E, mask = params["embedding"], causal_mask(inputs.shape[1])
    X, records = _encoder_forward(inputs, params, num_heads, mask)
    loss, grad_logits = cross_entropy(X @ E.T, targets, None, label_smoothing)
    grad_layers, grad_embedded = _encoder_backward(grad_logits @ E, records, params, num_heads, mask)
    grad_E = np.einsum("btv,btd->vd", grad_logits, X)
    np.add.at(grad_E, inputs, math.sqrt(E.shape[1]) * grad_embedded)
    return loss, {"embedding": grad_E, "encoder_layers": grad_layers}


# -- the cache -------------------------------------------------------------------------

def init_language_model_cache(params, batch_size, num_heads):
    """The empty cache: one dict per block, ``"k"`` and ``"v"`` of shape ``(B, h, 0, d_head)``."""
    d_model = params["embedding"].shape[1]
    if d_model % num_heads:
        raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}")
    empty = np.zeros((batch_size, num_heads, 0, d_model // num_heads))
    return [{"k": empty, "v": empty.copy()} for _ in params["layers"]]


def language_model_step(token, cache, params, num_heads):
    """``(logits (B, V), new cache)`` for the newest token ``(B,)`` at position ``t = cache[0]["k"].shape[2]``.

    The token alone goes through every block: its key and value (of the
    normed input, pre-LN) are appended to the block's cache, and it attends
    to all of them, no mask needed. ``logits`` equals
    ``language_model_logits(prefix_and_token)[:, t]`` up to rounding; the
    input cache is not modified. Each step costs ``O(t)`` instead of the
    ``O(t²)`` of running the whole prefix again.
    """
    E = params["embedding"]
    if len(cache) != len(params["layers"]) or not cache:
        raise ValueError(f"the cache has {len(cache)} layers, the model {len(params['layers'])} "
                         "(a model without layers has no cache)")
    x = _embed_next(token, E, cache)  # (B, 1, d_model)
    new_cache = []
    for block, kept in zip(params["layers"], cache):
        attn, normed = block["self_attn"], layer_norm(x, **block["norm1"])
        k = np.concatenate([kept["k"], _heads(normed, attn, "k", num_heads)], axis=2)  # (B, h, t+1, d_head)
        v = np.concatenate([kept["v"], _heads(normed, attn, "v", num_heads)], axis=2)
        x = x + _attend(normed, attn, k, v, num_heads)
        x = x + position_wise_ffn(layer_norm(x, **block["norm2"]), block["ffn"])
        new_cache.append({"k": k, "v": v})
    return (layer_norm(x, **params["final_norm"]) @ E.T)[:, 0], new_cache


# -- decoding ------------------------------------------------------------------------------

def filter_logits(logits, top_k=None, top_p=None):
    """The logits where kept, ``-inf`` elsewhere, along the last axis: top-k, then nucleus.

    ``top_k``: keep every entry ≥ the ``k``-th largest (ties at the boundary
    are all kept, so more than ``k`` may survive; ``top_k ≥ V`` keeps all).
    ``top_p`` (Holtzman et al. 2020): sort the probabilities of what top-k
    kept in decreasing order (equal probabilities: lower token id first) and
    keep the shortest prefix whose sum reaches ``top_p`` — at least one
    token; ``top_p = 1`` keeps them all. ``None`` disables a filter.
    """
    logits = np.asarray(logits, dtype=float)
    if logits.ndim < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., V) with V >= 1, got {logits.shape}")
    if top_k is not None and (isinstance(top_k, bool) or not float(top_k).is_integer() or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must lie in (0, 1] or be None, got {top_p!r}")
    V = logits.shape[-1]
    if top_k is not None and top_k < V:
        kth_largest = np.sort(logits, axis=-1)[..., V - int(top_k), None]
        logits = np.where(logits >= kth_largest, logits, -np.inf)
    if top_p is not None and top_p < 1.0:
        p = softmax(logits, axis=-1)
        order = np.argsort(-p, axis=-1, kind="stable")           # decreasing; ties: lower id first
        sorted_p = np.take_along_axis(p, order, axis=-1)
        before = np.cumsum(sorted_p, axis=-1) - sorted_p          # the sum of the tokens ranked above
        keep = np.zeros(logits.shape, dtype=bool)
        np.put_along_axis(keep, order, before < top_p, axis=-1)
        logits = np.where(keep, logits, -np.inf)
    return logits


def sample_next(logits, rng, temperature=1.0, top_k=None, top_p=None):
    """One token per row of ``logits (B, V)``: int array ``(B,)``.

    ``temperature == 0`` is greedy: the argmax, lowest id on ties, and ``rng``
    is not used. Otherwise ``p = softmax(filter_logits(logits / temperature,
    top_k, top_p))``, one call ``u = rng.random(B)``, and row ``b`` gets the
    smallest token id whose cumulative probability (in token-id order)
    exceeds ``u[b]`` — inverse-transform sampling, so a seed fixes the
    samples (if rounding leaves none, the last token of non-zero probability).
    """
    logits = np.asarray(logits, dtype=float)
    if logits.ndim != 2:
        raise ValueError(f"logits must have shape (B, V), got {logits.shape}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return np.argmax(logits, axis=-1)
    p = softmax(filter_logits(logits / temperature, top_k, top_p), axis=-1)   # (B, V)
    u = rng.random(logits.shape[0])                                           # (B,)
    cumulative = np.cumsum(p, axis=-1)
    token = np.sum(cumulative <= u[:, None], axis=-1)            # the first id whose sum exceeds u
    last_possible = p.shape[-1] - 1 - np.argmax(p[:, ::-1] > 0, axis=-1)
    return np.minimum(token, last_possible)


def generate(prompt, params, num_heads, max_new_tokens, rng, temperature=1.0, top_k=None,
             top_p=None):
    """``prompt (B, P)`` followed by ``max_new_tokens`` sampled tokens: ``(B, P + max_new_tokens)``.

    The prompt goes through the cache one token at a time; then each new
    token comes from one ``sample_next`` call and is fed back through
    ``language_model_step``.
    """
    prompt = np.asarray(prompt)
    if prompt.ndim != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must have shape (B, P) with P >= 1, got {prompt.shape}")
    cache = init_language_model_cache(params, prompt.shape[0], num_heads)
    for t in range(prompt.shape[1]):
        logits, cache = language_model_step(prompt[:, t], cache, params, num_heads)
    tokens = [prompt]
    for i in range(max_new_tokens):
        token = sample_next(logits, rng, temperature, top_k, top_p)
        tokens.append(token[:, None])
        if i + 1 < max_new_tokens:
            logits, cache = language_model_step(token, cache, params, num_heads)
    return np.concatenate(tokens, axis=1)


def log_softmax(logits, axis=-1):
    """``log softmax(logits)``, computed as ``shifted − log Σ exp(shifted)``: finite for ±1e4."""
    shifted = logits - np.max(logits, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def length_penalty_of(n, alpha):
    """Wu et al. (2016): ``lp = ((5 + n) / 6) ** alpha`` for ``n`` tokens after BOS."""
    return ((5 + n) / 6) ** alpha


def beam_search(src_tokens, params, num_heads, bos_id, eos_id, max_len, beam_size=4,
                length_penalty=0.6):
    """Beam search on the encoder-decoder of ``transformer_decoder``: ``(tokens (B, L), scores (B,))``.

    Each source row alone. The beam starts as ``[BOS]``, log-probability 0.
    At each of at most ``max_len`` steps every live hypothesis is extended by
    every token and the ``beam_size`` extensions of highest total
    log-probability are kept, in that order (ties: the extension of the
    hypothesis ranked earlier, then the lower token id). A kept one ending in
    ``eos_id`` is finished with score ``log P / lp``, ``lp = ((5 + n) / 6) **
    length_penalty`` (``n``: its tokens after BOS, EOS included), and leaves
    the beam; after ``max_len`` steps the live ones are finished the same
    way. The answer is the finished hypothesis of highest score (ties: the
    one finished earlier, then the one ranked earlier; those finished by
    ``max_len`` last). ``tokens`` has no BOS; rows are padded with ``eos_id``.
    """
    src_tokens = np.asarray(src_tokens)
    if src_tokens.ndim != 2:
        raise ValueError(f"src_tokens must have shape (B, S), got {src_tokens.shape}")
    if beam_size < 1 or max_len < 0:
        raise ValueError(f"need beam_size >= 1 and max_len >= 0, got {beam_size}, {max_len}")
    E = params["embedding"]
    best = []
    for row in src_tokens:
        memory = encoder(row[None], params, num_heads)           # (1, S, d_model)
        cache = init_decoder_cache(memory, params, num_heads)
        live, live_log_p = [[]], np.zeros(1)                     # tokens after BOS; log P
        finished = []                                            # in the order of the tie rule
        for _ in range(max_len):
            last = np.array([h[-1] if h else bos_id for h in live])
            output, cache = decoder_step(last, cache, params, num_heads)
            total = live_log_p[:, None] + log_softmax(output @ E.T)    # (beam, V)
            ranked = np.argsort(-total.ravel(), kind="stable")[:beam_size]  # ties: earlier, lower id
            kept, origins = [], []
            for flat in ranked:
                origin, token = divmod(int(flat), E.shape[0])
                hypothesis, log_p = live[origin] + [token], total.ravel()[flat]
                if token == eos_id:
                    finished.append((log_p / length_penalty_of(len(hypothesis), length_penalty),
                                     hypothesis))
                else:
                    kept.append(hypothesis)
                    origins.append(origin)
            live = kept
            if not live:
                break
            live_log_p = total[origins, [h[-1] for h in live]]
            cache = [{key: value if key == "src_mask" else value[origins] for key, value in layer.items()}
                     for layer in cache]   # each kept hypothesis takes its origin's keys and values
        finished += [(log_p / length_penalty_of(len(h), length_penalty), h)
                     for h, log_p in zip(live, live_log_p)]
        best.append(max(finished, key=lambda item: item[0]))     # max keeps the first of equals
    length = max(len(tokens) for _, tokens in best)
    tokens = np.full((len(best), length), eos_id)
    for b, (_, hypothesis) in enumerate(best):
        tokens[b, :len(hypothesis)] = hypothesis
    return tokens, np.array([score for score, _ in best], dtype=float)


# -- a character-level model of the course's prose ----------------------------------------

def windows(ids, rng, batch_size, length):
    """``batch_size`` random windows of ``length`` consecutive ids of the 1-D array ``ids``: ``(B, length)``."""
    starts = rng.integers(0, len(ids) - length + 1, size=batch_size)
    return ids[starts[:, None] + np.arange(length)]


def train_language_model(ids, vocab_size, num_steps, seq_len=64, batch_size=16, d_model=32,
                         d_ff=128, num_layers=2, num_heads=4, warmup_steps=50, scale=1.0,
                         warmup=True, post_ln=False, seed=0, on_step=None):
    """Train a language model on random windows of ``ids``; returns its parameters.

    Every step: ``batch_size`` windows of ``seq_len + 1`` ids, the loss and
    gradients of next-token prediction, one ``adam_step`` at the rate
    ``noam_learning_rate(step, d_model, warmup_steps, scale)``. Without
    ``warmup`` the rate starts at that schedule's peak and decays as it does
    (``step`` replaced by ``max(step, warmup_steps)``): the same rates after
    the warm-up. ``post_ln=True`` trains the 2017 placement of the layer norm
    instead (``post_ln_loss_and_grads``). ``on_step(step, loss, params)`` is
    called after each step. The same seed gives the same model.
    """
    transformer = init_transformer(vocab_size, d_model, d_ff, num_layers, seed=seed)
    if post_ln:
        params = {"embedding": transformer["embedding"], "encoder_layers": transformer["encoder_layers"]}
        loss_and_grads = post_ln_loss_and_grads
    else:
        params = init_language_model(vocab_size, d_model, d_ff, num_layers, seed=seed)
        loss_and_grads = language_model_loss_and_grads
    rng, state = np.random.default_rng(seed), None
    for step in range(1, num_steps + 1):
        loss, grads = loss_and_grads(windows(ids, rng, batch_size, seq_len + 1), params, num_heads)
        lr = noam_learning_rate(step if warmup else max(step, warmup_steps), d_model, warmup_steps,
                                scale)
        params, state = adam_step(params, grads, state, lr=lr)
        if on_step is not None:
            on_step(step, loss, params)
    return params


def bits_per_token(params, ids, num_heads, seq_len=64):
    """The model's cross-entropy on ``ids`` in bits per token, over consecutive windows.

    The ids are cut into windows of ``seq_len + 1`` overlapping by one, so
    that every id but the first is predicted once, from at most ``seq_len``
    ids before it (those of its window).
    """
    total = 0.0
    for start in range(0, len(ids) - 1, seq_len):
        window = ids[start:start + seq_len + 1][None]          # at least 2 ids
        total += language_model_loss_and_grads(window, params, num_heads)[0] * (window.shape[1] - 1)
    return total / (len(ids) - 1) / math.log(2)


def bigram_bits_per_token(train_ids, test_ids, vocab_size, alpha=1.0):
    """A count-based bigram model's cross-entropy on ``test_ids``, in bits per token.

    ``P(b | a) = (count(a b) + alpha) / (count(a) + alpha · V)`` from the pairs
    of ``train_ids`` (add-``alpha`` smoothing, so an unseen pair costs a finite
    number of bits); every id of ``test_ids`` but the first is predicted.
    """
    counts = np.full((vocab_size, vocab_size), float(alpha))
    np.add.at(counts, (train_ids[:-1], train_ids[1:]), 1.0)
    log_p = np.log2(counts / counts.sum(axis=1, keepdims=True))
    return float(-log_p[test_ids[:-1], test_ids[1:]].mean())


# -- the chapter's model, saved by the build and loaded in one line ------------------------

# The standard-library modules of this part are imported where they are used: the
# exercise notebooks' given cells copy this module's imports, and need none of them.

def _course_path(*parts):
    """A path in the course's folder (where ``solutions/`` is)."""
    from pathlib import Path
    return Path(__file__).resolve().parent.parent.joinpath(*parts)


class CourseModel:
    """The character model of the language-model chapter: ``params``, its vocabulary, its heads.

    ``characters[i]`` is the character of token id ``i``; ``key`` names the
    code and text it was trained on (``course_model_key``).
    """

    def __init__(self, params, characters, num_heads, key):
        self.params, self.characters, self.num_heads, self.key = params, tuple(characters), num_heads, key

    def encode(self, text):
        """The token ids ``(len(text),)`` of ``text``; a ``ValueError`` names characters not in the vocabulary."""
        index = {c: i for i, c in enumerate(self.characters)}
        unknown = sorted(set(text) - set(index))
        if unknown:
            raise ValueError(f"the course model does not know the characters {unknown!r}")
        return np.array([index[c] for c in text], dtype=int)

    def decode(self, ids):
        return "".join(self.characters[i] for i in np.asarray(ids).ravel())

    def next_token_logits(self, prompt):
        """The logits ``(V,)`` of the character that follows the text ``prompt`` (at least one character)."""
        ids = self.encode(prompt)
        if len(ids) == 0:
            raise ValueError("the prompt must have at least one character")
        return language_model_logits(ids[None], self.params, self.num_heads)[0, -1]


def course_model_key(root=None):
    """What the chapter's model depends on, hashed: the code of ``solutions/`` and the text it learns from.

    The text is the frozen copy of the chapters' prose in ``book/data/*.txt``
    (editing a chapter does not change it); the language-model chapter's own
    source is in the key too, for its training settings.
    """
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256()
    root = _course_path() if root is None else Path(root)
    for path in sorted([*root.glob("solutions/*.py"), *root.glob("book/data/*.txt"),
                        *root.glob("book/language_model.md")]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _flatten(tree, prefix=""):
    """``{"layers/0/ffn/W1": array, ...}`` of nested dicts and lists of arrays."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    flat = {}
    for name, value in items:
        path = f"{prefix}{name}"
        if isinstance(value, (dict, list)):
            flat.update(_flatten(value, path + "/"))
        else:
            flat[path] = np.asarray(value)
    return flat


def _unflatten(flat):
    tree = {}
    for path, value in flat.items():
        *parents, leaf = path.split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value

    def lists(node):  # {"0": …, "1": …} back to a list
        if not isinstance(node, dict):
            return node
        node = {name: lists(child) for name, child in node.items()}
        if node and all(name.isdigit() for name in node):
            return [node[str(i)] for i in range(len(node))]
        return node
    return lists(tree)


def save_course_model(params, characters, num_heads, directory=None, key=None):
    """Save the chapter's model as ``course-model-<key>.npz`` in ``directory``; returns its path.

    ``directory`` defaults to ``_build/course_model`` of the course and
    ``key`` to ``course_model_key()``. The file holds the weights, the
    vocabulary and the number of heads (a few hundred kB). Models saved
    under other keys in that directory are removed: they were trained on
    other code or text. The file is written whole or not at all.
    """
    import os
    from pathlib import Path

    directory = _course_path("_build", "course_model") if directory is None else Path(directory)
    key = course_model_key() if key is None else key
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"course-model-{key}.npz"
    partial = directory / f".{path.name}.{os.getpid()}.tmp"
    with open(partial, "wb") as file:
        np.savez_compressed(file, **{f"params/{name}": value for name, value in _flatten(params).items()},
                            characters=np.array(list(characters)), num_heads=num_heads, key=key)
    os.replace(partial, path)
    for old in directory.glob("course-model-*.npz"):
        if old != path:
            old.unlink(missing_ok=True)
    return path


def load_course_model(directory=None, key=None):
    """The model that the language-model chapter trained, as ``make book`` saved it: a ``CourseModel``.

    It is found in ``directory`` (default ``_build/course_model``) under
    ``key`` (default ``course_model_key()``: today's ``solutions/`` and
    chapters). It is not trained here: when no model was saved for the
    current code and text, a ``FileNotFoundError`` says to run ``make book``,
    which executes the chapter again (it re-executes whenever that code or
    text changes) and saves the model it trains.
    """
    from pathlib import Path

    directory = _course_path("_build", "course_model") if directory is None else Path(directory)
    key = course_model_key() if key is None else key
    path = directory / f"course-model-{key}.npz"
    if not path.is_file():
        others = sorted(directory.glob("course-model-*.npz"))
        why = ("a model was saved for other code or text of the course" if others
               else "none has been saved")
        raise FileNotFoundError(f"no course model for the current code and text in {directory} ({why}): "
                                "run `make book`, which trains the language-model chapter's model and saves it")
    with np.load(path) as saved:
        params = _unflatten({name.removeprefix("params/"): saved[name]
                             for name in saved.files if name.startswith("params/")})
        return CourseModel(params, tuple(str(c) for c in saved["characters"]), int(saved["num_heads"]),
                           str(saved["key"]))


def write(prompt, max_new_tokens=200, temperature=1.0, top_k=None, top_p=None, seed=0, model=None):
    """The text ``prompt`` followed by ``max_new_tokens`` characters written by the course model.

    ``generate`` with the given sampling (``temperature=0`` is greedy;
    ``top_k``, ``top_p`` as in ``filter_logits``) and
    ``np.random.default_rng(seed)``: the same seed writes the same text.
    ``model`` defaults to ``load_course_model()``.
    """
    model = load_course_model() if model is None else model
    ids = model.encode(prompt)
    if len(ids) == 0:
        raise ValueError("the prompt must have at least one character")
    tokens = generate(ids[None], model.params, model.num_heads, max_new_tokens, np.random.default_rng(seed),
                      temperature, top_k, top_p)
    return prompt + model.decode(tokens[0, len(ids):])
