"""Hidden checks for the language-model exercise.

Each check compares the student's function with the reference on secret
inputs built to hit the rules the task fixes: ties at the top-k boundary and
between equal probabilities, ``top_k ≥ V``, ``top_p = 1`` with a token of
probability 0, seeded generators (sent to the sandbox as the numbers of
their state, so that the student's ``rng.random(B)`` draws known numbers),
temperature 0 with ``rng=None``, caches of several lengths, rows that
finish at different steps, a model whose every extension ties. A message
names a cause only when that one mistake alone gives the student's values (it
is recomputed here and compared, and no other known mistake gives them);
otherwise it shows what was expected and what came back.
"""

import math

import numpy as np

from solutions import language_model as reference
from solutions.training import init_transformer
from solutions.transformer_decoder import decoder_step, greedy_decode, init_decoder_cache
from solutions.transformer_encoder import encoder

from autograder.engine.checking import check, check_close, check_shape, close
from autograder.engine.harness import call, compare, quietly, seeded

SEED = 19042751  # arXiv 1904.09751, Holtzman et al., "The curious case of neural text degeneration"
# The graded functions: each check calls the student's function with the reference's others
GRADED = (reference.filter_logits, reference.sample_next, reference.language_model_step, reference.beam_search)


def _kept(logits):
    return np.isfinite(logits)


def _ids(mask):
    """The kept token ids of each row, as lists (for messages)."""
    return [np.flatnonzero(row).tolist() for row in np.reshape(mask, (-1, mask.shape[-1]))]


# -- filter_logits -----------------------------------------------------------------------------

def _filter_cases(rng):
    """(logits, top_k, top_p, description) with the ties and edges the task fixes."""
    V = int(rng.integers(7, 11))
    base = np.round(rng.normal(size=(3, V)), 1)
    tied = base.copy()
    top = np.sort(tied[0])[::-1]
    tied[0, tied[0] == top[2]] = top[1]            # the 2nd and 3rd largest tie: top_k=2 keeps 3
    tied[1, :3] = tied[1].max() + 1.0              # three equal maxima
    equal_p = np.log(np.array([0.3, 0.1, 0.3, 0.2, 0.1] + [0.0] * (V - 5)) + 1e-300)
    equal_p = np.stack([equal_p, equal_p[::-1]])   # equal probabilities, in both orders of ids
    underflow = base.copy()
    underflow[:, 1] = -1e4                          # probability exactly 0
    cube = np.round(rng.normal(size=(2, 2, V)), 1)
    return [
        (tied, 2, None, f"top_k=2 on logits whose 2nd and 3rd largest are equal (V={V})"),
        (tied, 1, None, "top_k=1 on a row with three equal maxima"),
        (base, V, None, f"top_k=V={V}"),
        (base, V + 3, None, f"top_k={V + 3} > V={V}"),
        (equal_p, None, 0.25, "top_p=0.25 on probabilities [0.3, 0.1, 0.3, 0.2, 0.1, 0, …] and "
                              "their mirror image"),
        (equal_p, None, 0.85, "top_p=0.85 on probabilities [0.3, 0.1, 0.3, 0.2, 0.1, 0, …] and "
                              "their mirror image"),
        (base, None, float(rng.uniform(0.5, 0.8)), "top_p between 0.5 and 0.8"),
        (underflow, None, 1.0, "top_p=1 on logits with one of -1e4 (probability 0)"),
        (base, 3, 0.6, "top_k=3 and top_p=0.6 together"),
        (base, None, 1e-6, "top_p=1e-6 (one token must stay)"),
        (base, None, None, "top_k=None and top_p=None"),
        (cube, 2, 0.7, f"logits of shape {cube.shape}"),
    ]


def _top_k_exactly_k(logits, k):
    """The top-k filter that keeps exactly k entries (ties broken by position)."""
    order = np.argsort(-logits, axis=-1, kind="stable")[..., :k]
    keep = np.zeros(logits.shape, bool)
    np.put_along_axis(keep, order, True, axis=-1)
    return keep


def _nucleus(logits, top_p, strict=False, higher_id_first=False):
    """Which tokens the nucleus keeps; variants: ``strict`` (the sum must stay below ``top_p``),
    ``higher_id_first`` (ties of probability ordered the other way)."""
    p = reference.softmax(logits, axis=-1)
    if higher_id_first:
        order = logits.shape[-1] - 1 - np.argsort(-p[..., ::-1], axis=-1, kind="stable")
    else:
        order = np.argsort(-p, axis=-1, kind="stable")
    sorted_p = np.take_along_axis(p, order, axis=-1)
    cumulative = np.cumsum(sorted_p, axis=-1)
    kept_sorted = cumulative - sorted_p < top_p if not strict else cumulative < top_p
    kept_sorted[..., 0] = True
    keep = np.zeros(logits.shape, bool)
    np.put_along_axis(keep, order, kept_sorted, axis=-1)
    return keep


def _only_cause(actual, expected, variants):
    """The reason of ``variants`` (pairs (what one mistake alone gives, reason)) whose value
    ``actual`` is, when exactly one reason fits and its value is not ``expected``; else None."""
    reasons = {why for variant, why in variants
               if np.array_equal(actual, variant) and not np.array_equal(variant, expected)}
    return reasons.pop() if len(reasons) == 1 else None


def _filter_diagnosis(keep, logits, top_k, top_p):
    """Why the kept tokens are wrong, when one mistake alone gives them."""
    variants = []
    if top_k is not None and top_k < logits.shape[-1] and top_p is None:
        variants.append((_top_k_exactly_k(logits, top_k),
                         "it keeps exactly top_k tokens, but ties at the boundary are all kept: keep "
                         "every logit ≥ the k-th largest"))
    if top_p is not None and top_p < 1 and top_k is None:
        variants += [
            (_nucleus(logits, top_p, strict=True),
             "it drops the token whose probability makes the sum reach top_p, but the nucleus is the "
             "shortest prefix whose sum is ≥ top_p, so that token is kept"),
            (_nucleus(logits, top_p, higher_id_first=True),
             "of two equal probabilities it takes the higher token id first, but the lower id comes "
             "first"),
        ]
    if top_p is not None and top_p < 1 and top_k is not None:
        unfiltered = _nucleus(logits, top_p) & _kept(reference.filter_logits(logits, top_k))
        variants.append((unfiltered, "it computes the nucleus from the softmax of all the logits, but "
                                     "top_p applies to the probabilities of what top_k kept"))
    return _only_cause(keep, _kept(reference.filter_logits(logits, top_k, top_p)), variants)


def check_filter_logits(filter_logits):
    rng = seeded(SEED)
    for logits, top_k, top_p, description in _filter_cases(rng):
        on = description
        got = call(filter_logits, logits, top_k=top_k, top_p=top_p, on=on)
        expected = reference.filter_logits(logits, top_k, top_p)
        check_shape(got, logits.shape, f"filter_logits on {on}")
        got = np.asarray(got, dtype=float)
        if np.array_equal(got, expected):
            continue
        keep, want = _kept(got), _kept(expected)
        check(not close(got, reference.softmax(expected, axis=-1)),
              f"filter_logits returns probabilities on {on}, but it should return the logits, the kept "
              "ones unchanged and -inf elsewhere.")
        replaced = got[~want] != logits[~want]
        if np.array_equal(got[want], logits[want]) and replaced.all() and not np.isneginf(got[~want]).all():
            check(False, f"filter_logits should set the tokens it drops to -inf, but on {on} it gives "
                         f"{got[~want & ~np.isneginf(got)][0]:.4g} for one of them.")
        if not np.array_equal(keep, want):
            why = _filter_diagnosis(keep, logits, top_k, top_p)
            check(False, f"filter_logits on {on} keeps the tokens {_ids(keep)} instead of {_ids(want)}"
                         + (f": {why}." if why else "."))
        differ = got[keep] != logits[keep]
        check(False, f"filter_logits should return the kept logits unchanged, but on {on} they differ from "
                     f"the input (e.g. {got[keep][differ][0]:.4g} instead of {logits[keep][differ][0]:.4g}).")
    for kwargs in ({"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}, {"top_k": -2}):
        setting = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        try:
            filter_logits(np.zeros((2, 5)), **kwargs)
        except ValueError:
            continue
        except Exception as error:  # noqa: BLE001 - student code
            check(False, f"filter_logits({setting}) should raise ValueError, not {type(error).__name__}.")
        check(False, f"filter_logits({setting}) should raise ValueError: top_k must be at least 1 and "
                     "top_p lie in (0, 1].")


# -- sample_next -------------------------------------------------------------------------------

def _inverse_transform(p, u, decreasing=False):
    """Tokens by inverse transform; variant: cumulated in decreasing probability instead of token-id order."""
    order = np.argsort(-p, axis=-1, kind="stable") if decreasing else np.tile(np.arange(p.shape[1]), (len(p), 1))
    cumulative = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
    index = np.minimum((cumulative <= u[:, None]).sum(axis=-1), p.shape[1] - 1)
    return np.take_along_axis(order, index[:, None], axis=-1)[:, 0]


SAMPLING_MISTAKES = {
    "no-filters": "it draws from every token, but from those filter_logits(logits / temperature, top_k, top_p) "
                  "keeps",
    "decreasing": "it sums the probabilities in decreasing order, but the cumulative probability is summed in "
                  "token-id order",
    "multiplied": "it multiplies the logits by the temperature, but divides them",
    "filter-first": "it filters before dividing by the temperature, but the filters apply to logits / temperature",
}


def _sampling_mistakes(logits, u, temperature, top_k, top_p, filter_logits=reference.filter_logits):
    """[(the tokens one mistake of SAMPLING_MISTAKES alone draws with ``u``, what is wrong)], with
    the filter ``filter_logits``."""
    def drawn(compute, decreasing=False):
        p = quietly(compute)
        if p is None or np.shape(p) != logits.shape:
            return None
        return _inverse_transform(np.asarray(p, dtype=float), u, decreasing)

    def softmax_of(x):
        return reference.softmax(np.asarray(x, dtype=float), axis=-1)
    tokens = {
        "no-filters": drawn(lambda: softmax_of(logits / temperature)),
        "decreasing": drawn(lambda: softmax_of(filter_logits(logits / temperature, top_k, top_p)), True),
        "multiplied": drawn(lambda: softmax_of(filter_logits(logits * temperature, top_k, top_p))),
        "filter-first": drawn(lambda: softmax_of(np.asarray(filter_logits(logits, top_k, top_p), dtype=float)
                                                 / temperature)),
    }
    return [(drawn_tokens, SAMPLING_MISTAKES[name]) for name, drawn_tokens in tokens.items()
            if drawn_tokens is not None]


def _sampling_cases(rng, V):
    """(logits, temperature, top_k, top_p, seed, description). The last two: rows with one large
    logit, whose nucleus keeps fewer tokens at temperature 1 than at 3 (more than at 0.5), with a
    generator chosen so that each mistake of SAMPLING_MISTAKES draws other tokens than the task
    and than each other (at 3), and so that filtering before dividing by the temperature does
    (at 0.5)."""
    noisy = rng.normal(scale=1.5, size=(5, V))
    peaked = rng.normal(scale=0.5, size=(8, V))
    peaked[np.arange(8), rng.integers(0, V, size=8)] += 3.0
    cases = [(noisy, temperature, top_k, top_p, int(rng.integers(2 ** 32)), f"random logits (5, {V})")
             for temperature, top_k, top_p in ((1.0, None, None), (0.6, None, None), (1.7, 3, None),
                                               (3.0, None, 0.5), (0.4, None, 0.9), (1.3, V + 2, 1.0))]
    for temperature, top_p, all_apart in ((3.0, 0.8, True), (0.5, 0.8, False)):
        for _ in range(1000):
            seed = int(rng.integers(2 ** 32))
            drawn = [reference.sample_next(peaked, np.random.default_rng(seed), temperature, None, top_p)]
            drawn += [tokens for tokens, _ in _sampling_mistakes(
                peaked, np.random.default_rng(seed).random(len(peaked)), temperature, None, top_p)]
            if all(not np.array_equal(a, b) for i, a in enumerate(drawn) for b in drawn[i + 1:]) \
                    if all_apart else not np.array_equal(drawn[0], drawn[-1]):
                break
        cases.append((peaked, temperature, None, top_p, seed,
                      f"logits (8, {V}) with one large logit per row"))
    return cases


def check_sample_next(sample_next):
    """Real generators, seeded: the grader sends them to the sandbox as the numbers of their state,
    so the student's ``rng.random(B)`` draws exactly the ``u`` computed here. sample_next is judged
    with the reference's filter_logits standing in for the student's (``GRADED``)."""
    rng = seeded(SEED + 1)
    wrong = []  # (no cause named, message) of each case whose tokens are wrong
    cases = _sampling_cases(rng, int(rng.integers(6, 10)))
    cases += [(np.log(np.array([[0.25, 0.25, 0.5], [0.5, 0.25, 0.25], [0.1, 0.1, 0.8]])), 1.0, None, None, 0,
               "the task's logits (3, 3)"),
              (np.log(np.array([[0.15, 0.55, 0.05, 0.25]] * 6)), 2.0, None, 0.7, 0, "the task's logits (6, 4)")]
    for logits, temperature, top_k, top_p, seed, description in cases:
        B = len(logits)
        on = (f"{description} at temperature={temperature}, top_k={top_k}, top_p={top_p}, "
              f"rng = np.random.default_rng({seed})")
        got = call(sample_next, logits, np.random.default_rng(seed), temperature=temperature,
                   top_k=top_k, top_p=top_p, on=on, stand_ins=GRADED)
        check(isinstance(got, np.ndarray) and got.shape == (B,) and np.issubdtype(got.dtype, np.integer),
              f"sample_next should return an int array of shape ({B},) on {on}, got "
              f"{type(got).__name__} {getattr(got, 'dtype', '')} {getattr(got, 'shape', '')}.")
        expected = reference.sample_next(logits, np.random.default_rng(seed), temperature, top_k, top_p)
        if np.array_equal(got, expected):
            continue
        u = np.random.default_rng(seed).random(B)
        reasons = {why for tokens, why in _sampling_mistakes(logits, u, temperature, top_k, top_p)
                   if np.array_equal(got, tokens) and not np.array_equal(tokens, expected)}
        why = reasons.pop() if len(reasons) == 1 else None
        wrong.append((why is None, f"sample_next gives the tokens {got.tolist()} instead of "
                                   f"{expected.tolist()} on {on}, whose one call rng.random({B}) draws "
                                   f"u = {np.round(u, 4).tolist()}" + (f": {why}." if why else ".")))
    # The first case whose tokens one mistake alone explains, else the first that is wrong.
    check(not wrong, min(wrong, key=lambda case: case[0])[1] if wrong else "")
    # Temperature 0: the argmax, lowest id on ties, without drawing anything.
    logits = np.round(rng.normal(size=(4, 7)), 1)
    logits[0, [2, 5]] = logits[0].max() + 1.0
    logits[1, [0, 6]] = logits[1].max() + 1.0
    on = "temperature=0 with rng=None (greedy decoding draws nothing) and two equal maxima in some rows"
    for logits in (logits, np.array([[1.0, 4.0, 4.0], [2.0, 0.0, 1.0]])):  # and the task's example
        got = call(sample_next, logits, None, temperature=0.0, on=on, stand_ins=GRADED)
        expected = np.argmax(logits, axis=-1)
        check(isinstance(got, np.ndarray) and np.array_equal(got, expected),
              f"at temperature 0 sample_next should give the argmax {expected.tolist()} (lowest id on ties) "
              f"on {on}, got {np.asarray(got).tolist()}.")


# -- language_model_step -------------------------------------------------------------------------

def _perturbed_model(rng, V, d, d_ff, num_layers):
    params = reference.init_language_model(V, d, d_ff, num_layers, seed=int(rng.integers(10 ** 6)))

    def perturb(tree):
        if isinstance(tree, dict):
            return {k: perturb(v) for k, v in tree.items()}
        if isinstance(tree, list):
            return [perturb(v) for v in tree]
        return tree + 0.3 * rng.normal(size=tree.shape)
    return perturb(params)


def _prefix_cache(params, prefix, num_heads):
    cache = reference.init_language_model_cache(params, prefix.shape[0], num_heads)
    for t in range(prefix.shape[1]):
        _, cache = reference.language_model_step(prefix[:, t], cache, params, num_heads)
    return cache


def _scaled_queries(params, num_heads):
    """``params`` with every query multiplied by √d_head: its attention scores are q·k, not divided
    by √d_head."""
    factor = math.sqrt(params["embedding"].shape[1] / num_heads)
    layers = [{**block, "self_attn": {**block["self_attn"], "W_q": factor * block["self_attn"]["W_q"],
                                      "b_q": factor * block["self_attn"]["b_q"]}} for block in params["layers"]]
    return {**params, "layers": layers}


def check_language_model_step(language_model_step):
    rng = seeded(SEED + 2)
    V, d, num_heads = int(rng.integers(9, 14)), 12, 3
    params = _perturbed_model(rng, V, d, 20, 2)
    B = 3
    tokens = rng.integers(0, V, size=(B, 6))
    full = reference.language_model_logits(tokens, params, num_heads)
    for t in (0, 1, 5):
        cache = _prefix_cache(params, tokens[:, :t], num_heads)
        on = f"a cache of {t} position(s) (batch {B}, 2 blocks, {num_heads} heads, d_model={d})"
        result = call(language_model_step, tokens[:, t], cache, params, num_heads, on=on, stand_ins=GRADED)
        check(isinstance(result, tuple) and len(result) == 2,
              "language_model_step should return a tuple (logits, new_cache).")
        logits, new_cache = result
        check_shape(logits, (B, V), f"the logits on {on}")
        compare(logits, full[:, t], f"the logits on {on}",
                lambda: [(reference.language_model_logits(tokens[:, t:t + 1], params, num_heads)[:, 0],
                          "they are the logits of the token alone at position 0: it uses neither the "
                          "cache nor the position t")] * (t > 0)
                + [(reference.language_model_logits(tokens[:, :t + 1], _scaled_queries(params, num_heads),
                                                    num_heads)[:, t],
                    "the attention scores are not divided by √d_head: scaled_dot_product_attention divides "
                    "them, d_head = d_model / num_heads")],
                hint=f"they should equal language_model_logits of the whole prefix at position {t}")
        check(isinstance(new_cache, list) and len(new_cache) == 2,
              f"the new cache should be a list with one dict per block (2) on {on}.")
        expected = reference.language_model_step(tokens[:, t], cache, params, num_heads)[1]
        for layer, (got_layer, want_layer) in enumerate(zip(new_cache, expected)):
            for key in ("k", "v"):
                value = got_layer.get(key) if isinstance(got_layer, dict) else None
                check(isinstance(value, np.ndarray) and value.shape == want_layer[key].shape,
                      f'the new cache\'s block {layer} should hold "{key}" of shape '
                      f'{want_layer[key].shape} (one position longer) on {on}, got '
                      f'{getattr(value, "shape", type(value).__name__)}.')
                compare(value, want_layer[key], f'the new cache\'s "{key}" of block {layer} on {on}',
                        hint=f"it should hold the {'keys' if key == 'k' else 'values'} of the normed "
                             "input of each position so far, split into heads")


# -- beam_search -------------------------------------------------------------------------------------

BOS, EOS = 1, 2


def _beam_model(rng, V=7):
    params = init_transformer(V, 8, 16, 1, seed=int(rng.integers(10 ** 6)))
    params["embedding"] = params["embedding"] * 2.0    # sharper distributions
    params["embedding"][EOS] *= 1.6                    # and EOS likely enough to end rows early
    return params


def beam_variant(src_tokens, params, num_heads, bos_id, eos_id, max_len, beam_size, length_penalty, mistake):
    """``reference.beam_search`` (same ties, scores and padding) with one mistake: "live-slots",
    finished hypotheses take no slot, so that each step keeps ``beam_size`` live ones; "one-live",
    only the best live hypothesis goes on to the next step."""
    E, best = params["embedding"], []
    for row in src_tokens:
        cache = init_decoder_cache(encoder(row[None], params, num_heads), params, num_heads)
        live, live_log_p, finished = [[]], np.zeros(1), []
        for _ in range(max_len):
            output, cache = decoder_step(np.array([h[-1] if h else bos_id for h in live]), cache, params,
                                         num_heads)
            total = live_log_p[:, None] + reference.log_softmax(output @ E.T)     # (beam, V)
            kept, origins, taken = [], [], 0
            for flat in np.argsort(-total.ravel(), kind="stable"):
                if taken == beam_size:
                    break
                origin, token = divmod(int(flat), E.shape[0])
                hypothesis = live[origin] + [token]
                if token == eos_id:
                    finished.append((total.ravel()[flat] / reference.length_penalty_of(len(hypothesis),
                                                                                       length_penalty),
                                     hypothesis))
                    taken += mistake != "live-slots"
                else:
                    kept.append(hypothesis)
                    origins.append(origin)
                    taken += 1
            if mistake == "one-live":
                kept, origins = kept[:1], origins[:1]
            if not kept:
                break
            live, live_log_p = kept, total[origins, [h[-1] for h in kept]]
            cache = [{key: value if key == "src_mask" else value[origins] for key, value in layer.items()}
                     for layer in cache]
        else:
            finished += [(log_p / reference.length_penalty_of(len(h), length_penalty), h)
                         for h, log_p in zip(live, live_log_p)]
        best.append(max(finished, key=lambda item: item[0]))
    tokens = np.full((len(best), max(len(h) for _, h in best)), eos_id)
    for b, (_, hypothesis) in enumerate(best):
        tokens[b, :len(hypothesis)] = hypothesis
    return tokens, np.array([score for score, _ in best])


BEAM_MISTAKES = {
    "live-slots": "finished hypotheses take no slot in its beam, but the beam_size best extensions are kept, "
                  "those ending with eos_id included (they leave the beam, which shrinks)",
    "one-live": "only its best live hypothesis goes on to the next step, but every kept extension that does "
                "not end with eos_id does",
}


def _rows_differ(a, b):
    """The rows of two token arrays (B, L) and (B, L') that differ, each padded with EOS."""
    width = max(a.shape[1], b.shape[1])
    a, b = (np.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=EOS) for x in (a, b))
    return [i for i in range(len(a)) if not np.array_equal(a[i], b[i])]


def _beam_settings(rng):
    """(params, sources, max_len, beam_size, length_penalty, description). The model and the
    sources are drawn until the rows finish at different steps (some at max_len), the beam
    beats greedy decoding on a row, and the length penalty and keeping only the best live
    hypothesis each change the answer of one; a second model and its sources, until a finished
    hypothesis taking its slot in the beam changes the answer of a row (one row in about 25 at
    beam_size=2, length_penalty=3)."""
    settings = []
    for _ in range(100):
        params = _beam_model(rng)
        pool = rng.integers(3, 7, size=(16, 4))
        plain = reference.beam_search(pool, params, 2, BOS, EOS, 6, 3, 0.0)[0]
        penalised = reference.beam_search(pool, params, 2, BOS, EOS, 6, 3, 1.0)[0]
        greedy = greedy_decode(pool, params, 2, BOS, EOS, 6)
        lengths = [int(np.argmax(row == EOS)) if (row == EOS).any() else 99 for row in penalised]
        conditions = [_rows_differ(plain, penalised), _rows_differ(greedy, penalised),
                      [i for i in range(len(pool)) if lengths[i] < 99],
                      [i for i in range(len(pool)) if lengths[i] == 99]]
        if all(conditions):
            conditions.append(_rows_differ(beam_variant(pool, params, 2, BOS, EOS, 6, 3, 1.0, "one-live")[0],
                                           penalised))
            if conditions[-1]:
                break
    pick = []
    for rows in conditions:
        pick += [next((i for i in rows if i not in pick), rows[0] if rows else 0)]
    sources = pool[sorted(set(pick))]
    settings.append((params, sources, 6, 3, 1.0, "beam_size=3, length_penalty=1.0, max_len=6"))
    settings.append((params, pool, 6, 4, 1.5, "beam_size=4, length_penalty=1.5, max_len=6"))
    settings.append((params, sources, 6, 3, 0.6, "beam_size=3, length_penalty=0.6, max_len=6"))
    settings.append((params, sources, 6, 1, 0.0, "beam_size=1, length_penalty=0 (greedy)"))
    settings.append((params, sources[:2], 3, 7 ** 3, 0.6, "a beam as large as all sequences, max_len=3"))
    settings.append((params, sources[:2], 2, 2, 0.6, "max_len=2 (hypotheses cut off at max_len)"))
    for _ in range(100):
        slots_params = init_transformer(7, 8, 16, 1, seed=int(rng.integers(10 ** 6)))
        slots_params["embedding"][EOS] *= 1.6
        pool = rng.integers(3, 7, size=(16, 4))
        rows = _rows_differ(beam_variant(pool, slots_params, 2, BOS, EOS, 4, 2, 3.0, "live-slots")[0],
                            reference.beam_search(pool, slots_params, 2, BOS, EOS, 4, 2, 3.0)[0])
        if rows:
            break
    same = [i for i in range(len(pool)) if i not in rows]
    settings.append((slots_params, pool[rows[:1] + same[:1]], 4, 2, 3.0,   # one row the mistake changes
                     "beam_size=2, length_penalty=3.0, max_len=4"))
    uniform = init_transformer(5, 8, 16, 1, seed=0)
    uniform["embedding"] = np.zeros((5, 8))            # every extension ties
    settings.append((uniform, np.array([[3, 4]]), 3, 3, 0.6,
                     "a model whose every distribution is uniform (all extensions tie), EOS = 2"))
    settings.append((uniform, np.array([[3, 4]]), 3, 3, 5.0,
                     "a model whose every distribution is uniform and length_penalty=5 (the longest win)"))
    return settings


def _beam_variant_scores(tokens, scores, length_penalty):
    """The scores with n counted without EOS, from the reference's (same tokens)."""
    out = []
    for row, score in zip(tokens, scores):
        n = int(np.argmax(row == EOS)) + 1 if (row == EOS).any() else len(row)
        log_p = score * ((5 + n) / 6) ** length_penalty
        out.append(log_p / ((5 + n - 1) / 6) ** length_penalty)
    return np.array(out)


def check_beam_search(beam_search):
    rng = seeded(SEED + 3)
    for params, sources, max_len, beam_size, alpha, setting in _beam_settings(rng):
        on = f"{setting}, {len(sources)} source rows"
        result = call(beam_search, sources, params, 2, BOS, EOS, max_len, beam_size=beam_size,
                      length_penalty=alpha, on=on, stand_ins=GRADED)
        check(isinstance(result, tuple) and len(result) == 2,
              "beam_search should return a tuple (tokens, scores).")
        tokens, scores = result
        want_tokens, want_scores = reference.beam_search(sources, params, 2, BOS, EOS, max_len,
                                                         beam_size, alpha)
        check(isinstance(tokens, np.ndarray) and tokens.ndim == 2 and len(tokens) == len(sources),
              f"tokens should be an int array (B, L) = ({len(sources)}, L) on {on}, got "
              f"{getattr(tokens, 'shape', type(tokens).__name__)}.")
        if tokens.shape[1] == want_tokens.shape[1] + 1 and (tokens[:, 0] == BOS).all() \
                and np.array_equal(tokens[:, 1:], want_tokens):
            check(False, f"tokens start with BOS on {on}: return them without BOS.")
        if tokens.shape == want_tokens.shape and not np.array_equal(tokens, want_tokens):
            ends = [int(np.argmax(row == EOS)) if (row == EOS).any() else len(row) for row in want_tokens]
            same_until_end = all(np.array_equal(a[:e + 1], b[:e + 1]) for a, b, e in zip(tokens, want_tokens, ends))
            check(not same_until_end, f"the rows are padded with {tokens[tokens != want_tokens][0]} on {on}, "
                                      "but each row must be padded with eos_id after its end.")
        if tokens.shape != want_tokens.shape or not np.array_equal(tokens, want_tokens):
            row = next((b for b in range(len(sources)) if tokens.shape != want_tokens.shape
                        or not np.array_equal(tokens[b], want_tokens[b])), 0)
            variants = [(beam_variant(sources, params, 2, BOS, EOS, max_len, beam_size, alpha, mistake)[0], why)
                        for mistake, why in BEAM_MISTAKES.items()]
            if alpha:
                variants.append((reference.beam_search(sources, params, 2, BOS, EOS, max_len, beam_size, 0.0)[0],
                                 "its answers are those of length_penalty=0: the answer is the finished "
                                 "hypothesis of highest log P / ((5 + n) / 6) ** length_penalty"))
            why = _only_cause(tokens, want_tokens, variants)
            check(False, f"beam_search gives {np.asarray(tokens[row] if row < len(tokens) else tokens).tolist()} "
                         f"for source row {row} on {on}, but the beam search of the task gives "
                         f"{want_tokens[row].tolist()}" + (f": {why}." if why else "."))
        check(np.shape(scores) == (len(sources),),
              f"scores should have shape ({len(sources)},) on {on}, got {np.shape(scores)}.")
        scores = np.asarray(scores, dtype=float)
        mistakes = []
        if alpha:
            log_p = [s * ((5 + (int(np.argmax(r == EOS)) + 1 if (r == EOS).any() else len(r))) / 6) ** alpha
                     for r, s in zip(want_tokens, want_scores)]
            mistakes = [(np.array(log_p), "they are log P without the length penalty: divide by "
                                          "((5 + n) / 6) ** length_penalty"),
                        (_beam_variant_scores(want_tokens, want_scores, alpha),
                         "n leaves EOS out, but n counts the tokens after BOS with EOS")]
        check_close(scores, want_scores, f"beam_search's scores on {on}",
                    "each is log P / ((5 + n) / 6) ** length_penalty of its answer, n its length "
                    "after BOS with EOS", mistakes)
