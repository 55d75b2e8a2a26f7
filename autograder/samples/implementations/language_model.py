"""What students write for the language-model exercise.

`CORRECT` holds correct implementations written unlike the reference (a
partition for top-k, a loop over rows with `searchsorted`, the attention
written out with `split_heads`, a beam kept as a list of tuples and a decoder
step per hypothesis); the hidden checks must accept them. Each takes a
keyword `mistake` (None by default) that switches on one plausible mistake:
`MISTAKES` holds those, each of one task, which the hidden checks must
reject, and say why. The mistakes graded end to end (GRADED_MISTAKES) are
self-contained functions; the others are the correct ones with a mistake
switched on, given to the hidden checks directly.
"""

import math

import numpy as np

from solutions.language_model import log_softmax  # noqa: F401 - the notebook's given names
from solutions.multi_head import merge_heads, split_heads  # noqa: F401
from solutions.positional_encoding import sinusoidal_encoding_at  # noqa: F401
from solutions.scaled_dot_product import scaled_dot_product_attention, softmax  # noqa: F401
from solutions.transformer_decoder import decoder_step, init_decoder_cache  # noqa: F401
from solutions.transformer_encoder import encoder, layer_norm, position_wise_ffn  # noqa: F401

# -- correct, by other means ------------------------------------------------------------------


def correct_filter_logits(logits, top_k=None, top_p=None, mistake=None):
    if top_k is not None and (int(top_k) != top_k or top_k < 1) and mistake != "no-validation":
        raise ValueError("top_k must be a positive integer")
    if top_p is not None and not 0 < top_p <= 1 and mistake != "no-validation":
        raise ValueError("top_p must lie in (0, 1]")
    out = logits if mistake == "in-place" else np.array(logits, dtype=float)
    dropped = -1e9 if mistake == "minus-1e9" else -np.inf
    V = out.shape[-1]
    nucleus_input = np.array(out)
    if top_k is not None and (top_k < V or mistake == "index-error"):
        if mistake == "exactly-k":
            order = np.argsort(-out, axis=-1, kind="stable")[..., top_k:]
            np.put_along_axis(out, order, dropped, axis=-1)
        elif mistake == "index-error":
            kth = np.sort(out, axis=-1)[..., -int(top_k)][..., None]  # "the k-th from the end"
            out[out < kth] = dropped
        else:
            kth = np.partition(out, V - int(top_k), axis=-1)[..., V - int(top_k)][..., None]
            out[out < kth] = dropped
    if mistake != "nucleus-before-top-k":
        nucleus_input = out
    if top_p is not None and top_p < 1:
        flat_out, flat_in = out.reshape(-1, V), nucleus_input.reshape(-1, V)
        for row, source in zip(flat_out, flat_in):
            p = np.exp(source - source.max())
            p = p / p.sum()
            ids = np.arange(V)
            ranking = np.lexsort((-ids if mistake == "higher-id-first" else ids, -p))  # by -p, then id
            total, keep = 0.0, []
            for token in ranking:
                if mistake == "strict":
                    if total + p[token] >= top_p and keep:
                        break
                    keep.append(token)
                    total += p[token]
                else:
                    keep.append(token)
                    total += p[token]
                    if total >= top_p:
                        break
            gone = np.setdiff1d(ids, keep)
            row[gone] = dropped
    if mistake == "probabilities":
        shifted = np.exp(out - out.max(axis=-1, keepdims=True))
        return shifted / shifted.sum(axis=-1, keepdims=True)
    return out


def correct_sample_next(logits, rng, temperature=1.0, top_k=None, top_p=None, mistake=None):
    logits = np.asarray(logits, dtype=float)
    if temperature == 0 and mistake != "tiny-temperature":
        return np.array([int(np.flatnonzero(row == row.max())[0]) for row in logits])
    if mistake == "tiny-temperature" and temperature == 0:
        temperature = 1e-8
    scaled = logits * temperature if mistake == "multiplied" else logits / temperature
    if mistake == "filter-first":
        scaled = filter_logits(logits, top_k, top_p) / temperature
    elif mistake != "no-filters":
        scaled = filter_logits(scaled, top_k, top_p)
    if mistake is None and np.isfinite(scaled).all():     # rng.choice draws the same numbers
        p = softmax(scaled, axis=-1)
        return np.array([rng.choice(len(row), p=row) for row in p])
    u = rng.random(len(logits))
    tokens = []
    for row, draw in zip(scaled, u):
        p = np.exp(row - row.max())
        p = p / p.sum()
        if mistake == "decreasing":
            order = np.argsort(-p, kind="stable")
            index = min(int(np.searchsorted(np.cumsum(p[order]), draw, side="right")), len(p) - 1)
            tokens.append(int(order[index]))
            continue
        index = int(np.searchsorted(np.cumsum(p), draw, side="right"))
        tokens.append(min(index, int(np.flatnonzero(p > 0)[-1])))
    return np.array(tokens)


def correct_language_model_step(token, cache, params, num_heads, mistake=None):
    E = params["embedding"]
    d_model = E.shape[1]
    t = 0 if mistake in ("no-cache", "position-0") else cache[0]["k"].shape[2]
    scale = 1.0 if mistake == "no-scale" else math.sqrt(d_model)
    x = E[np.asarray(token)][:, None, :] * scale + sinusoidal_encoding_at(t, d_model)
    new_cache = cache if mistake == "in-place" else []
    for i, (block, layer_cache) in enumerate(zip(params["layers"], cache)):
        attn = block["self_attn"]
        n = x if mistake == "post-ln" else layer_norm(x, **block["norm1"])
        source = x if mistake == "unnormed-keys" else n
        k_new = split_heads(source @ attn["W_k"] + attn["b_k"], num_heads)
        v_new = split_heads(source @ attn["W_v"] + attn["b_v"], num_heads)
        if mistake == "no-cache":
            k, v = k_new, v_new
        else:
            k = np.concatenate([layer_cache["k"], k_new], axis=2)
            v = np.concatenate([layer_cache["v"], v_new], axis=2)
        q = split_heads(n @ attn["W_q"] + attn["b_q"], num_heads)
        if mistake == "unscaled-scores":  # softmax(q kᵀ) v, without the division by √d_head
            context = softmax(q @ np.swapaxes(k, -1, -2), axis=-1) @ v
        else:
            context, _ = scaled_dot_product_attention(q, k, v)
        x = x + merge_heads(context) @ attn["W_o"] + attn["b_o"]
        if mistake == "post-ln":
            x = layer_norm(x, **block["norm1"])
            x = layer_norm(x + position_wise_ffn(x, block["ffn"]), **block["norm2"])
        else:
            x = x + position_wise_ffn(layer_norm(x, **block["norm2"]), block["ffn"])
        if mistake == "in-place":
            layer_cache["k"], layer_cache["v"] = k, v
        elif mistake == "cache-not-extended":
            new_cache.append(layer_cache)
        else:
            new_cache.append({"k": k, "v": v})
    final = x if mistake == "no-final-norm" else layer_norm(x, **params["final_norm"])
    return (final @ E.T)[:, 0, :], new_cache


def correct_beam_search(src_tokens, params, num_heads, bos_id, eos_id, max_len, beam_size=4,
                        length_penalty=0.6, mistake=None):
    E = params["embedding"]

    def penalty(n):
        n = n - 1 if mistake == "n-without-eos" else n
        return 1.0 if mistake == "no-penalty" else ((5 + n) / 6) ** length_penalty

    answers = []
    for source in np.asarray(src_tokens):
        memory = encoder(source[None], params, num_heads)
        fresh = init_decoder_cache(memory, params, num_heads)
        beam = [((), 0.0, fresh)]                   # (tokens after BOS, log P, cache)
        done = []                                   # (score, order, tokens, log P)
        for step in range(max_len):
            if not beam:
                break
            extensions = []
            for rank, (tokens, log_p, cache) in enumerate(beam):
                previous = tokens[-1] if tokens else bos_id
                output, cache = decoder_step(np.array([previous]), cache, params, num_heads)
                step_log_p = log_softmax(output @ E.T)[0]
                for token, value in enumerate(step_log_p):
                    key = -(log_p + value)
                    tie = -token if mistake == "higher-id-first" else token
                    extensions.append((key, rank, tie, tokens + (token,), log_p + value, cache))
            extensions.sort(key=lambda e: e[:3])
            beam = []
            for _, _, _, tokens, log_p, cache in extensions:
                finished_now = 0 if mistake == "live-slots" else len(done) if mistake == "keep-slots" \
                    else sum(d[1][0] == step for d in done)
                if len(beam) + finished_now >= beam_size:
                    break
                if tokens[-1] == eos_id:
                    done.append((log_p / penalty(len(tokens)), (step, len(done)), tokens, log_p))
                else:
                    beam.append((tokens, log_p, cache))
            if mistake == "greedy":
                beam = beam[:1]
        for tokens, log_p, _ in beam:
            done.append((log_p / penalty(len(tokens)), (max_len, len(done)), tokens, log_p))
        best = max(done, key=lambda d: (d[0], -d[1][0], -d[1][1]))
        answers.append((best[3] if mistake == "score-log-p" else best[0], best[2]))
    length = max(len(tokens) for _, tokens in answers)
    pad = 0 if mistake == "pad-0" else eos_id
    out = np.full((len(answers), length), pad)
    for row, (_, tokens) in zip(out, answers):
        row[:len(tokens)] = tokens
    if mistake == "with-bos":
        out = np.concatenate([np.full((len(out), 1), bos_id), out], axis=1)
    return out, np.array([score for score, _ in answers])


filter_logits = correct_filter_logits   # the name sample_next calls, as in the notebook


# -- mistakes graded end to end: self-contained ----------------------------------------------

def filter_logits_exactly_k(logits, top_k=None, top_p=None):
    if top_k is not None and top_k < 1 or top_p is not None and not 0 < top_p <= 1:
        raise ValueError("bad filter")
    out = np.array(logits, dtype=float)
    if top_k is not None:
        order = np.argsort(-out, axis=-1, kind="stable")[..., top_k:]
        np.put_along_axis(out, order, -np.inf, axis=-1)
    if top_p is not None and top_p < 1:
        p = softmax(out, axis=-1)
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        keep = np.zeros(out.shape, dtype=bool)
        np.put_along_axis(keep, order, np.cumsum(sorted_p, axis=-1) - sorted_p < top_p, axis=-1)
        out = np.where(keep, out, -np.inf)
    return out


def filter_logits_cumsum_across_rows(logits, top_k=None, top_p=None):
    # np.cumsum without an axis (reshaped back): the nucleus's running sum goes on across the rows
    if top_k is not None and top_k < 1 or top_p is not None and not 0 < top_p <= 1:
        raise ValueError("bad filter")
    out = np.array(logits, dtype=float)
    if top_k is not None and top_k < out.shape[-1]:
        kth = np.sort(out, axis=-1)[..., -top_k][..., None]
        out = np.where(out >= kth, out, -np.inf)
    if top_p is not None and top_p < 1:
        p = softmax(out, axis=-1)
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        kept_sorted = np.cumsum(sorted_p).reshape(sorted_p.shape) - sorted_p < top_p
        kept_sorted[..., 0] = True
        keep = np.zeros(out.shape, dtype=bool)
        np.put_along_axis(keep, order, kept_sorted, axis=-1)
        out = np.where(keep, out, -np.inf)
    return out


def filter_logits_kth_of_all_rows(logits, top_k=None, top_p=None):
    # the k-th largest taken over the whole array (np.sort without an axis), one threshold for every row
    if top_k is not None and top_k < 1 or top_p is not None and not 0 < top_p <= 1:
        raise ValueError("bad filter")
    out = np.array(logits, dtype=float)
    if top_k is not None and top_k < out.shape[-1]:
        out = np.where(out >= np.sort(out, axis=None)[-top_k], out, -np.inf)
    if top_p is not None and top_p < 1:
        p = softmax(out, axis=-1)
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        keep = np.zeros(out.shape, dtype=bool)
        np.put_along_axis(keep, order, np.cumsum(sorted_p, axis=-1) - sorted_p < top_p, axis=-1)
        out = np.where(keep, out, -np.inf)
    return out


def sample_next_filter_first(logits, rng, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return np.argmax(logits, axis=-1)
    p = softmax(filter_logits(logits, top_k, top_p) / temperature, axis=-1)
    u = rng.random(len(p))
    return np.array([int(np.searchsorted(np.cumsum(row), draw, side="right")) for row, draw in zip(p, u)])


def _with(function, mistake):
    def wrong(*args, **kwargs):
        return function(*args, **kwargs, mistake=mistake)
    wrong.__name__ = function.__name__.replace("correct_", "")
    return wrong


CORRECT = {"filter_logits": correct_filter_logits, "sample_next": correct_sample_next,
           "language_model_step": correct_language_model_step, "beam_search": correct_beam_search}

CHECKS_OF_TASK = {"filter_logits": ["check_filter_logits"], "sample_next": ["check_sample_next"],
                  "language_model_step": ["check_language_model_step"],
                  "beam_search": ["check_beam_search"]}

_WORDS = {
    "filter_logits": {
        "exactly-k": "ties at the boundary are all kept",
        "index-error": "raised IndexError",
        "strict": "the token whose probability makes the sum reach top_p",
        "higher-id-first": "the lower id comes first",
        "nucleus-before-top-k": "top_p applies to the probabilities of what top_k kept",
        "minus-1e9": "should set the tokens it drops to -inf",
        "no-validation": "should raise ValueError",
        "in-place": "modified its input",
        "probabilities": "returns probabilities",
    },
    "sample_next": {
        "multiplied": "multiplies the logits by the temperature",
        "filter-first": "it filters before dividing by the temperature",
        "decreasing": "sums the probabilities in decreasing order",
        "tiny-temperature": "rng=None",
        "no-filters": "it draws from every token",
    },
    "language_model_step": {
        "post-ln": "of the whole prefix at position",
        "no-final-norm": "of the whole prefix at position",
        "no-cache": "the token alone at position 0",
        "position-0": "of the whole prefix at position",
        "unnormed-keys": "of the whole prefix at position",
        "no-scale": "of the whole prefix at position",
        "in-place": "modified its input",
        "cache-not-extended": "one position longer",
        "unscaled-scores": "not divided by √d_head",
    },
    "beam_search": {
        "no-penalty": "those of length_penalty=0",
        "n-without-eos": "n counts the tokens after BOS with EOS",
        "higher-id-first": "the beam search of the task gives",
        "greedy": "the beam search of the task gives",
        "with-bos": "start with BOS",
        "pad-0": "padded with 0",
        "score-log-p": "log P without the length penalty",
        "live-slots": "finished hypotheses take no slot in its beam",
        "keep-slots": "the beam search of the task gives",
    },
}

MISTAKES = {
    f"{task.replace('_', '-')}-{mistake}": (task, _with(CORRECT[task], mistake), CHECKS_OF_TASK[task][0], words)
    for task, mistakes in _WORDS.items() for mistake, words in mistakes.items()
}
MISTAKES["filter-logits-exactly-k-alone"] = ("filter_logits", filter_logits_exactly_k, "check_filter_logits",
                                             "ties at the boundary are all kept")
MISTAKES["filter-logits-cumsum-across-rows"] = ("filter_logits", filter_logits_cumsum_across_rows,
                                                "check_filter_logits", "the running sum of the nucleus goes on "
                                                "across the rows")
MISTAKES["filter-logits-kth-of-all-rows"] = ("filter_logits", filter_logits_kth_of_all_rows, "check_filter_logits",
                                             "the k-th largest is taken over all the rows")
MISTAKES["sample-next-filter-first-alone"] = ("sample_next", sample_next_filter_first, "check_sample_next",
                                              "it filters before dividing by the temperature")

# Mistakes also graded end to end by nbgrader, in tests/engine/test_grade.py.
GRADED_MISTAKES = ["filter-logits-exactly-k-alone", "sample-next-filter-first-alone"]


# -- two mistakes at once: self-contained, pasted into the notebook by test_double_mistakes.py ----

def filter_logits_drops_kth_and_nucleus_of_all(logits, top_k=None, top_p=None):
    # top-k keeps the logits > the k-th largest (so drops the k-th itself), and the nucleus is
    # taken from the softmax of all the logits, not renormalised over what top_k kept
    if top_k is not None and top_k < 1 or top_p is not None and not 0 < top_p <= 1:
        raise ValueError("top_k must be at least 1 and top_p lie in (0, 1]")
    logits = np.asarray(logits, dtype=float)
    out = logits.copy()
    if top_k is not None and top_k < logits.shape[-1]:
        kth = np.sort(logits, axis=-1)[..., -top_k][..., None]
        out = np.where(logits > kth, out, -np.inf)
    if top_p is not None and top_p < 1:
        p = softmax(logits, axis=-1)
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        keep = np.zeros(logits.shape, dtype=bool)
        np.put_along_axis(keep, order, np.cumsum(sorted_p, axis=-1) - sorted_p < top_p, axis=-1)
        out = np.where(keep, out, -np.inf)
    return out


def sample_next_multiplied_and_not_renormalised(logits, rng, temperature=1.0, top_k=None, top_p=None):
    # logits * temperature, and the filtered probabilities not renormalised (softmax before filtering)
    logits = np.asarray(logits, dtype=float)
    if temperature == 0:
        return np.argmax(logits, axis=-1)
    scaled = logits * temperature
    p = softmax(scaled, axis=-1) * np.isfinite(filter_logits(scaled, top_k, top_p))
    u = rng.random(len(logits))
    return np.minimum(np.sum(np.cumsum(p, axis=-1) <= u[:, None], axis=-1), logits.shape[-1] - 1)


def language_model_step_unscaled_without_final_norm(token, cache, params, num_heads):
    # the embedding not multiplied by √d_model, and no final layer norm before the output projection
    E = params["embedding"]
    t = cache[0]["k"].shape[2]
    x = E[np.asarray(token)][:, None, :] + sinusoidal_encoding_at(t, E.shape[1])
    new_cache = []
    for block, layer_cache in zip(params["layers"], cache):
        attn = block["self_attn"]
        n = layer_norm(x, **block["norm1"])
        k = np.concatenate([layer_cache["k"], split_heads(n @ attn["W_k"] + attn["b_k"], num_heads)], axis=2)
        v = np.concatenate([layer_cache["v"], split_heads(n @ attn["W_v"] + attn["b_v"], num_heads)], axis=2)
        context, _ = scaled_dot_product_attention(split_heads(n @ attn["W_q"] + attn["b_q"], num_heads), k, v)
        x = x + merge_heads(context) @ attn["W_o"] + attn["b_o"]
        x = x + position_wise_ffn(layer_norm(x, **block["norm2"]), block["ffn"])
        new_cache.append({"k": k, "v": v})
    return (x @ E.T)[:, 0, :], new_cache


def beam_search_no_penalty_padded_with_0(src_tokens, params, num_heads, bos_id, eos_id, max_len, beam_size=4,
                                         length_penalty=0.6):
    # hypotheses ranked by log P alone (length_penalty ignored), and the rows padded with 0
    E = params["embedding"]
    answers = []
    for source in np.asarray(src_tokens):
        memory = encoder(source[None], params, num_heads)
        beam, done = [((), 0.0, init_decoder_cache(memory, params, num_heads))], []
        for step in range(max_len):
            if not beam:
                break
            extensions = []
            for rank, (tokens, log_p, cache) in enumerate(beam):
                output, cache = decoder_step(np.array([tokens[-1] if tokens else bos_id]), cache, params, num_heads)
                for token, value in enumerate(log_softmax(output @ E.T)[0]):
                    extensions.append((-(log_p + value), rank, token, tokens + (token,), log_p + value, cache))
            extensions.sort(key=lambda e: e[:3])
            beam = []
            for _, _, _, tokens, log_p, cache in extensions:
                if len(beam) + sum(d[1] == step for d in done) == beam_size:
                    break
                if tokens[-1] == eos_id:
                    done.append((log_p, step, len(done), tokens))
                else:
                    beam.append((tokens, log_p, cache))
        done += [(log_p, max_len, len(done), tokens) for tokens, log_p, _ in beam]
        answers.append(max(done, key=lambda d: (d[0], -d[1], -d[2])))
    out = np.zeros((len(answers), max(len(a[3]) for a in answers)), dtype=int)
    for row, answer in zip(out, answers):
        row[:len(answer[3])] = answer[3]
    return out, np.array([answer[0] for answer in answers])


# name -> ({task: implementation with two mistakes}, the check cell to run, the words a message may name)
DOUBLE_MISTAKES = {
    "filter-drops-kth-and-nucleus-of-all": (
        {"filter_logits": filter_logits_drops_kth_and_nucleus_of_all}, "test_filter_logits",
        ("top_p applies to the probabilities of what top_k kept",)),
    "sample-multiplied-and-not-renormalised": (
        {"sample_next": sample_next_multiplied_and_not_renormalised}, "test_sample_next",
        ("multiplies the logits by the temperature", "instead of")),
    "step-unscaled-without-final-norm": (
        {"language_model_step": language_model_step_unscaled_without_final_norm}, "test_language_model_step",
        ("of the whole prefix at position",)),
    "beam-no-penalty-padded-with-0": (
        {"beam_search": beam_search_no_penalty_padded_with_0}, "test_beam_search",
        ("those of length_penalty=0", "padded with 0", "log P without the length penalty",
         "the beam search of the task gives")),
}
