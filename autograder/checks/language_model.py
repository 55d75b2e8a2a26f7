"""Hidden checks for the language-model exercise: filter_logits, sample_next and language_model_step as case tables
(`engine.cases`) on secret cases (ties at the top-k boundary and between equal probabilities, a token of probability
0, seeded generators, temperature 0 with rng=None, caches of several lengths); beam_search, a search, in plain
Python beside them (rows that finish at different steps, a model whose every extension ties)."""

import copy

import numpy as np

from solutions import language_model as reference
from solutions.training import _map, init_transformer
from solutions.transformer_decoder import decoder_step, greedy_decode, init_decoder_cache
from solutions.transformer_encoder import encoder

from autograder.engine.cases import Exercise, Fact, Mistake, Output, case
from autograder.engine.checking import CheckFailed, check, check_close, named_cause
from autograder.engine.harness import call, seeded

SEED = 19042751  # arXiv 1904.09751, Holtzman et al., "The curious case of neural text degeneration"
FILTER = reference.filter_logits


def _filtered(exactly_k=False, strict=False, higher_id_first=False, across_rows=False, kth_of_all=False):
    """filter_logits with one step changed: top-k keeps ``exactly_k`` entries (ties broken by position) or takes the
    k-th largest of the whole array (``kth_of_all``), the nucleus is ``strict`` (its sum stays below top_p), takes the
    ``higher_id_first`` of equal probabilities, or sums ``across_rows`` (np.cumsum without an axis)."""
    def gives(logits, top_k, top_p):
        if kth_of_all:
            keep = logits >= np.sort(logits, axis=None)[-top_k]
        elif exactly_k:  # the rank of each logit, in decreasing order, ties by position
            keep = np.argsort(np.argsort(-logits, axis=-1, kind="stable"), axis=-1, kind="stable") < top_k
        else:
            p = reference.softmax(logits, axis=-1)
            order = logits.shape[-1] - 1 - np.argsort(-p[..., ::-1], axis=-1, kind="stable") if higher_id_first \
                else np.argsort(-p, axis=-1, kind="stable")
            sorted_p = np.take_along_axis(p, order, axis=-1)
            running = np.cumsum(sorted_p).reshape(sorted_p.shape) if across_rows else np.cumsum(sorted_p, axis=-1)
            kept_sorted = running - (0 if strict else sorted_p) < top_p
            kept_sorted[..., 0] = True
            keep = np.take_along_axis(kept_sorted, np.argsort(order, axis=-1), axis=-1)
        return np.where(keep, logits, -np.inf)
    return gives


def _drops_to_finite(actual, logits, top_k, top_p):
    """Whether `actual` keeps the right logits unchanged and replaces the others, not all by -inf."""
    want = np.isfinite(FILTER(logits, top_k, top_p))
    return np.array_equal(actual[want], logits[want]) and np.all(actual[~want] != logits[~want]) \
        and not np.all(np.isneginf(actual[~want]))


def _drawn(message, scores, decreasing=False):
    """The sampling mistake that draws, by inverse transform with the case's u, from softmax(`scores(logits,
    temperature, top_k, top_p)`) cumulated in token-id order (or in ``decreasing`` probability)."""
    def gives(logits, rng, temperature, top_k, top_p):
        p = reference.softmax(np.asarray(scores(logits, temperature, top_k, top_p), dtype=float), axis=-1)
        order = np.argsort(-p, axis=-1, kind="stable") if decreasing else np.tile(np.arange(p.shape[1]), (len(p), 1))
        cumulative = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
        index = np.minimum((cumulative <= copy.deepcopy(rng).random(len(p))[:, None]).sum(axis=-1), p.shape[1] - 1)
        return np.take_along_axis(order, index[:, None], axis=-1)[:, 0]
    return Mistake(message, gives, when=lambda temperature, **_: temperature > 0)


def _scaled_queries(params, num_heads):
    """``params`` with every query multiplied by √d_head: its attention scores are q·k, not divided by √d_head."""
    factor = np.sqrt(params["embedding"].shape[1] / num_heads)
    return {**params, "layers": [{**block, "self_attn": {**block["self_attn"], **{
        key: factor * block["self_attn"][key] for key in ("W_q", "b_q")}}} for block in params["layers"]]}


exercise = Exercise(reference)
filter_logits = exercise.task(
    "filter_logits", hint="it should be the logits that top_k, then top_p, keep, and -inf elsewhere", mistakes=[
        Mistake("it returns probabilities, but it should return the logits, the kept ones unchanged and -inf elsewhere",
                lambda logits, top_k, top_p: reference.softmax(FILTER(logits, top_k, top_p), axis=-1)),
        Mistake("it keeps exactly top_k tokens, but ties at the boundary are all kept: keep every logit ≥ the k-th "
                "largest", _filtered(exactly_k=True),
                when=lambda logits, top_k, top_p: top_k is not None and top_k < logits.shape[-1] and top_p is None),
        Mistake("the k-th largest is taken over all the rows, but each row keeps the entries ≥ its own k-th largest "
                "(sort along the last axis)", _filtered(kth_of_all=True),
                when=lambda logits, top_k, top_p: top_k is not None and top_k < logits.shape[-1] and top_p is None),
        Mistake("the running sum of the nucleus goes on across the rows, but each row has its own nucleus "
                "(np.cumsum along the last axis)", _filtered(across_rows=True),
                when=lambda logits, top_k, top_p: top_k is None and (top_p or 1) < 1
                and logits.size > logits.shape[-1]),
        Mistake("it drops the token whose probability makes the sum reach top_p, but the nucleus is the shortest "
                "prefix whose sum is ≥ top_p, so that token is kept", _filtered(strict=True),
                when=lambda top_k, top_p, **_: top_k is None and (top_p or 1) < 1),
        Mistake("of two equal probabilities it takes the higher token id first, but the lower id comes first",
                _filtered(higher_id_first=True), when=lambda top_k, top_p, **_: top_k is None and (top_p or 1) < 1),
        Mistake("it computes the nucleus from the softmax of all the logits, but top_p applies to the probabilities "
                "of what top_k kept", lambda logits, top_k, top_p: FILTER(FILTER(logits, None, top_p), top_k),
                when=lambda top_k, top_p, **_: top_k is not None and (top_p or 1) < 1)],
    facts=[Fact("{name}: filter_logits should set the tokens it drops to -inf, not to a finite number.",
                lambda actual, **given: not _drops_to_finite(actual, **given))])
sample_next = exercise.task(
    "sample_next", hint="at temperature 0 the argmax (lowest id on ties); else, with u = rng.random(B), the first "
    "token id whose cumulative probability of softmax(filter_logits(logits / temperature, top_k, top_p)) exceeds u",
    requires=[Fact("{name}: sample_next should return an int array of shape ({logits.shape[0]},), one token per row.",
                   lambda actual, logits, **_: isinstance(actual, np.ndarray) and actual.shape == (len(logits),)
                   and np.issubdtype(actual.dtype, np.integer))],
    mistakes=[_drawn("it draws from every token, but from those filter_logits(logits / temperature, top_k, top_p) "
                     "keeps", lambda logits, temperature, top_k, top_p: logits / temperature),
              _drawn("it sums the probabilities in decreasing order, but the cumulative probability is summed in "
                     "token-id order", lambda logits, temperature, top_k, top_p: FILTER(
                         logits / temperature, top_k, top_p), decreasing=True),
              _drawn("it multiplies the logits by the temperature, but divides them",
                     lambda logits, temperature, top_k, top_p: FILTER(logits * temperature, top_k, top_p)),
              _drawn("it filters before dividing by the temperature, but the filters apply to logits / temperature",
                     lambda logits, temperature, top_k, top_p: FILTER(logits, top_k, top_p) / temperature)])
language_model_step = exercise.task("language_model_step", outputs=[
    Output("logits", "they should equal language_model_logits of the whole prefix at position t", mistakes=[
        Mistake("they are the logits of the token alone at position 0: it uses neither the cache nor the position t",
                lambda token, cache, params, num_heads: reference.language_model_logits(
                    token[:, None], params, num_heads)[:, 0], when=lambda cache, **_: cache[0]["k"].shape[2] > 0),
        Mistake("the attention scores are not divided by √d_head: scaled_dot_product_attention divides them, "
                "d_head = d_model / num_heads", lambda token, cache, params, num_heads: reference.language_model_step(
                    token, cache, _scaled_queries(params, num_heads), num_heads)[0])]),
    Output("new_cache", "it should hold the keys and values of the normed input of each position so far, split into "
           "heads", leaves=True, requires=[Fact(
               "{name} should be one position longer than the cache it was given.",
               lambda actual, cache, **_: np.shape(actual)[2:3] == (cache[0]["k"].shape[2] + 1,))])])
exercise.task("beam_search")


def check_filter_logits(function):
    rng = seeded(SEED)
    V = int(rng.integers(7, 11))
    base = np.round(rng.normal(size=(3, V)), 1)
    tied, underflow = base.copy(), base.copy()
    top = np.sort(tied[0])[::-1]
    tied[0, tied[0] == top[2]] = top[1]            # the 2nd and 3rd largest tie: top_k=2 keeps 3
    tied[1, :3] = tied[1].max() + 1.0              # three equal maxima
    equal_p = np.log(np.array([0.3, 0.1, 0.3, 0.2, 0.1] + [0.0] * (V - 5)) + 1e-300)
    equal_p = np.stack([equal_p, equal_p[::-1]])   # equal probabilities, in both orders of ids
    underflow[:, 1] = -1e4                          # probability exactly 0
    cube = np.round(rng.normal(size=(2, 2, V)), 1)
    mirrored = "on probabilities [0.3, 0.1, 0.3, 0.2, 0.1, 0, …] and their mirror image"
    distinct = rng.normal(size=(int(rng.integers(3, 6)), V))      # rows that differ, no ties
    filter_logits.check(function, [case(text, logits, top_k=top_k, top_p=top_p) for logits, top_k, top_p, text in [
        (distinct, 3, None, f"top_k=3 on {len(distinct)} rows of distinct logits (V={V})"),
        (distinct, None, 0.6, f"top_p=0.6 on {len(distinct)} rows of distinct logits (V={V})"),
        (tied, 2, None, f"top_k=2 on logits whose 2nd and 3rd largest are equal (V={V})"),
        (tied, 1, None, "top_k=1 on a row with three equal maxima"),
        (base, V, None, f"top_k=V={V}"),
        (base, V + 3, None, f"top_k={V + 3} > V={V}"),
        (equal_p, None, 0.25, f"top_p=0.25 {mirrored}"),
        (equal_p, None, 0.85, f"top_p=0.85 {mirrored}"),
        (base, None, float(rng.uniform(0.5, 0.8)), "top_p between 0.5 and 0.8"),
        (underflow, None, 1.0, "top_p=1 on logits with one of -1e4 (probability 0)"),
        (base, 3, 0.6, "top_k=3 and top_p=0.6 together"),
        (base, None, 1e-6, "top_p=1e-6 (one token must stay)"),
        (base, None, None, "top_k=None and top_p=None"),
        (cube, 2, 0.7, f"logits of shape {cube.shape}")]] + [
        case(", ".join(f"{k}={v}" for k, v in kwargs.items()), np.zeros((2, 5)), **kwargs).rejected(
            "top_k must be at least 1 and top_p lie in (0, 1]")
        for kwargs in ({"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}, {"top_k": -2})])


def check_sample_next(function):
    """Seeded generators (the student's ``rng.random(B)`` draws the case's u); the last random ones chosen so that
    each mistake draws other tokens than the task and than each other (at 3), and filtering first does (at 0.5)."""
    rng = seeded(SEED + 1)
    V = int(rng.integers(6, 10))
    noisy, peaked = rng.normal(scale=1.5, size=(5, V)), rng.normal(scale=0.5, size=(8, V))
    peaked[np.arange(8), rng.integers(0, V, size=8)] += 3.0
    cases = [(noisy, temperature, top_k, top_p, int(rng.integers(2 ** 32)), f"random logits (5, {V})")
             for temperature, top_k, top_p in ((1.0, None, None), (0.6, None, None), (1.7, 3, None),
                                               (3.0, None, 0.5), (0.4, None, 0.9), (1.3, V + 2, 1.0))]
    for temperature, top_p, all_apart in ((3.0, 0.8, True), (0.5, 0.8, False)):
        for _ in range(1000):
            seed = int(rng.integers(2 ** 32))
            drawn = [reference.sample_next(peaked, np.random.default_rng(seed), temperature, None, top_p)]
            drawn += [mistake.gives(peaked, np.random.default_rng(seed), temperature, None, top_p)
                      for mistake in sample_next.outputs[0].mistakes]
            if all(not np.array_equal(a, b) for i, a in enumerate(drawn) for b in drawn[i + 1:]) \
                    if all_apart else not np.array_equal(drawn[0], drawn[-1]):
                break
        cases.append((peaked, temperature, None, top_p, seed, f"logits (8, {V}) with one large logit per row"))
    cases += [(np.log(np.array([[0.25, 0.25, 0.5], [0.5, 0.25, 0.25], [0.1, 0.1, 0.8]])), 1.0, None, None, 0,
               "the task's logits (3, 3)"),
              (np.log(np.array([[0.15, 0.55, 0.05, 0.25]] * 6)), 2.0, None, 0.7, 0, "the task's logits (6, 4)")]
    cases = [case(f"{text} at temperature={temperature}, top_k={top_k}, top_p={top_p}, rng = np.random.default_rng("
                  f"{seed}), whose one call rng.random({len(logits)}) draws u = "
                  f"{np.round(np.random.default_rng(seed).random(len(logits)), 4).tolist()}", logits,
                  np.random.default_rng(seed), temperature=temperature, top_k=top_k, top_p=top_p).copying()
             for logits, temperature, top_k, top_p, seed, text in cases]
    greedy = np.round(rng.normal(size=(4, 7)), 1)  # temperature 0: the argmax, lowest id on ties, nothing drawn
    greedy[0, [2, 5]] = greedy[0].max() + 1.0
    greedy[1, [0, 6]] = greedy[1].max() + 1.0
    cases += [case("temperature=0 with rng=None (greedy decoding draws nothing) and two equal maxima in some rows",
                   logits, None, temperature=0.0) for logits in (greedy, np.array([[1.0, 4.0, 4.0], [2.0, 0.0, 1.0]]))]
    sample_next.check(function, cases, prefer_named=True)


def check_language_model_step(function):
    rng = seeded(SEED + 2)
    V, d, num_heads = int(rng.integers(9, 14)), 12, 3
    params = reference.init_language_model(V, d, 20, 2, seed=int(rng.integers(10 ** 6)))
    params = _map(lambda leaf: leaf + 0.3 * rng.normal(size=leaf.shape), params)  # no symmetry left
    tokens, caches = rng.integers(0, V, size=(3, 6)), [reference.init_language_model_cache(params, 3, num_heads)]
    for t in range(5):
        caches.append(reference.language_model_step(tokens[:, t], caches[-1], params, num_heads)[1])
    language_model_step.check(function, [
        case(f"a cache of {t} position(s) (batch 3, 2 blocks, {num_heads} heads, d_model={d})", tokens[:, t], caches[t],
             params, num_heads) for t in (0, 1, 5)])


# -- beam_search: plain Python beside the tables (its known mistakes are other searches) ---------------------

BOS, EOS = 1, 2
BEAM_MISTAKES = {
    "live-slots": "finished hypotheses take no slot in its beam, but the beam_size best extensions are kept, "
                  "those ending with eos_id included (they leave the beam, which shrinks)",
    "keep-slots": "finished hypotheses keep their place in its beam at later steps, but a finished hypothesis "
                  "takes one of the beam_size places only at the step it finishes",
    "one-live": "only its best live hypothesis goes on to the next step, but every kept extension that does "
                "not end with eos_id does"}


def _beam_model(rng, V=7):
    params = init_transformer(V, 8, 16, 1, seed=int(rng.integers(10 ** 6)))
    params["embedding"] = params["embedding"] * 2.0    # sharper distributions
    params["embedding"][EOS] *= 1.6                    # and EOS likely enough to end rows early
    return params


def beam_variant(src_tokens, params, num_heads, bos_id, eos_id, max_len, beam_size, length_penalty, mistake):
    """``reference.beam_search`` (same ties, scores and padding) with one mistake of ``BEAM_MISTAKES``, or none."""
    E, best = params["embedding"], []
    for row in src_tokens:
        cache = init_decoder_cache(encoder(row[None], params, num_heads), params, num_heads)
        live, live_log_p, finished = [[]], np.zeros(1), []
        for _ in range(max_len):
            output, cache = decoder_step(np.array([h[-1] if h else bos_id for h in live]), cache, params, num_heads)
            total = live_log_p[:, None] + reference.log_softmax(output @ E.T)     # (beam, V)
            kept, origins = [], []
            taken = len(finished) if mistake == "keep-slots" else 0
            for flat in np.argsort(-total.ravel(), kind="stable"):
                if taken >= beam_size:
                    break
                origin, token = divmod(int(flat), E.shape[0])
                hypothesis = live[origin] + [token]
                if token == eos_id:
                    finished.append((total.ravel()[flat] / reference.length_penalty_of(len(hypothesis), length_penalty),
                                     hypothesis))
                    taken += mistake != "live-slots"
                else:
                    kept.append(hypothesis)
                    origins.append(origin)
                    taken += 1
            kept, origins = (kept[:1], origins[:1]) if mistake == "one-live" else (kept, origins)
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


def _rows_differ(a, b):
    """The rows of two token arrays (B, L) and (B, L') that differ, each padded with EOS."""
    width = max(a.shape[1], b.shape[1])
    a, b = (np.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=EOS) for x in (a, b))
    return [i for i in range(len(a)) if not np.array_equal(a[i], b[i])]


def _beam_settings(rng):
    """(params, sources, max_len, beam_size, length_penalty, description). A model and sources drawn until the
    rows finish at different steps (some at max_len), the beam beats greedy decoding on a row, and the length
    penalty and keeping only the best live hypothesis each change the answer of one; a second model and its
    sources, until a finished hypothesis taking its slot changes the answer of a row (one in about 25)."""
    for _ in range(100):
        params = _beam_model(rng)
        pool = rng.integers(3, 7, size=(16, 4))
        penalised = reference.beam_search(pool, params, 2, BOS, EOS, 6, 3, 1.0)[0]
        lengths = [int(np.argmax(row == EOS)) if (row == EOS).any() else 99 for row in penalised]
        conditions = [_rows_differ(reference.beam_search(pool, params, 2, BOS, EOS, 6, 3, 0.0)[0], penalised),
                      _rows_differ(greedy_decode(pool, params, 2, BOS, EOS, 6), penalised),
                      [i for i, n in enumerate(lengths) if n < 99], [i for i, n in enumerate(lengths) if n == 99]]
        if all(conditions):
            conditions.append(_rows_differ(beam_variant(pool, params, 2, BOS, EOS, 6, 3, 1.0, "one-live")[0],
                                           penalised))
            if conditions[-1]:
                break
    pick = []
    for rows in conditions:
        pick += [next((i for i in rows if i not in pick), rows[0] if rows else 0)]
    sources = pool[sorted(set(pick))]
    settings = [(params, sources, 6, 3, 1.0, "beam_size=3, length_penalty=1.0, max_len=6"),
                (params, pool, 6, 4, 1.5, "beam_size=4, length_penalty=1.5, max_len=6"),
                (params, sources, 6, 3, 0.6, "beam_size=3, length_penalty=0.6, max_len=6"),
                (params, sources, 6, 1, 0.0, "beam_size=1, length_penalty=0 (greedy)"),
                (params, sources[:2], 3, 7 ** 3, 0.6, "a beam as large as all sequences, max_len=3"),
                (params, sources[:2], 2, 2, 0.6, "max_len=2 (hypotheses cut off at max_len)")]
    for _ in range(100):
        slots_params = init_transformer(7, 8, 16, 1, seed=int(rng.integers(10 ** 6)))
        slots_params["embedding"][EOS] *= 1.6
        pool = rng.integers(3, 7, size=(16, 4))
        rows = _rows_differ(beam_variant(pool, slots_params, 2, BOS, EOS, 4, 2, 3.0, "live-slots")[0],
                            reference.beam_search(pool, slots_params, 2, BOS, EOS, 4, 2, 3.0)[0])
        if rows:
            break
    same = [i for i in range(len(pool)) if i not in rows]  # one row the mistake changes, one it does not
    settings.append((slots_params, pool[rows[:1] + same[:1]], 4, 2, 3.0, "beam_size=2, length_penalty=3.0, max_len=4"))
    uniform = init_transformer(5, 8, 16, 1, seed=0)
    uniform["embedding"] = np.zeros((5, 8))            # every extension ties
    return settings + [(uniform, np.array([[3, 4]]), 3, 3, alpha, text) for alpha, text in (
        (0.6, "a model whose every distribution is uniform (all extensions tie), EOS = 2"),
        (5.0, "a model whose every distribution is uniform and length_penalty=5 (the longest win)"))]


def check_beam_search(function):
    for params, sources, max_len, beam_size, alpha, setting in _beam_settings(seeded(SEED + 3)):
        on = f"{setting}, {len(sources)} source rows"
        result = call(function, sources, params, 2, BOS, EOS, max_len, beam_size=beam_size, length_penalty=alpha,
                      on=on, stand_ins=exercise.graded)
        check(isinstance(result, tuple) and len(result) == 2, "beam_search should return a tuple (tokens, scores).")
        (tokens, scores), (want, want_scores) = result, reference.beam_search(sources, params, 2, BOS, EOS, max_len,
                                                                              beam_size, alpha)
        check(isinstance(tokens, np.ndarray) and tokens.ndim == 2 and len(tokens) == len(sources),
              f"tokens should be an int array (B, L) = ({len(sources)}, L) on {on}, got "
              f"{getattr(tokens, 'shape', type(tokens).__name__)}.")
        n = np.array([int(np.argmax(row == EOS)) + 1 if (row == EOS).any() else len(row) for row in want])  # with EOS
        if tokens.shape == want.shape and not np.array_equal(tokens, want):
            check(not all(np.array_equal(a[:k], b[:k]) for a, b, k in zip(tokens, want, n)),
                  f"the rows are padded with {tokens[tokens != want][0]} on {on}, but each row must be "
                  "padded with eos_id after its end.")
        if not np.array_equal(tokens, want):
            variants = [(beam_variant(sources, params, 2, BOS, EOS, max_len, beam_size, alpha, mistake)[0], why)
                        for mistake, why in BEAM_MISTAKES.items()]
            variants.append((np.concatenate([np.full((len(sources), 1), BOS), want], axis=1),
                             "the tokens start with BOS: return them without BOS"))
            if alpha:
                variants.append((reference.beam_search(sources, params, 2, BOS, EOS, max_len, beam_size, 0.0)[0],
                                 "its answers are those of length_penalty=0: the answer is the finished hypothesis "
                                 "of highest log P / ((5 + n) / 6) ** length_penalty"))
            cause = named_cause(tokens, want, variants, same=np.array_equal)
            row = next((b for b in range(len(sources)) if tokens.shape != want.shape
                        or not np.array_equal(tokens[b], want[b])), 0)
            raise CheckFailed(f"beam_search gives {tokens[row].tolist()} for source row {row} on {on}, but the beam "
                              f"search of the task gives {want[row].tolist()}" + (f": {cause}." if cause else "."),
                              cause=cause)
        check(np.shape(scores) == (len(sources),), f"scores should have shape ({len(sources)},) on {on}, got "
                                                   f"{np.shape(scores)}.")
        log_p = want_scores * ((5 + n) / 6) ** alpha
        check_close(np.asarray(scores, dtype=float), want_scores, f"beam_search's scores on {on}",
                    "each is log P / ((5 + n) / 6) ** length_penalty of its answer, n its length after BOS with EOS",
                    [(log_p, "they are log P without the length penalty: divide by ((5 + n) / 6) ** length_penalty"),
                     (log_p / ((4 + n) / 6) ** alpha, "n leaves EOS out, but n counts the tokens after BOS with EOS")])
