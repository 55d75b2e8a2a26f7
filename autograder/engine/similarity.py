"""`python -m autograder similarity OUT --assignment NAME [--threshold F]`: who wrote like whom.

Ranks the pairs of students of one assignment by how much of their own code
they share, for a person to read. It decides nothing: two students may share
code because one copied, because both copied a third source, or because the
task leaves one natural way to write it; the report shows the lines so that
someone can tell.

Each student is also compared with the course's reference code: the
functions the assignment grades, as the reference packages hold them and the
open edition of the book prints them (`reference`). Per student,
the report gives the share of their fingerprints found in the reference and
their closest source: the reference, or the student whose code holds the
largest share of theirs that is not the reference's (the reference wins a tie). A class in which several
students copied the book shows as a group whose closest source is the
reference, not as pairs of students alike.

What is compared is the code the grader kept in each result (`Result.code`:
the student's answer cells and the cells they added, as graded), minus the
released notebook's code (given cells, stubs, their docstrings and comments,
the visible checks), which every student has.

How (Schleimer, Wilkerson & Aiken 2003, "Winnowing: local algorithms for
document fingerprinting", as in MOSS):

1. the code is split into tokens by Pygments; comments, docstrings and
   white space are dropped, every string becomes `S`, and every name the
   student could have chosen becomes `V` (a variable, a parameter, a
   function they define): renaming, re-commenting and re-spacing change
   nothing. Attribute names (`.sum`), keyword arguments (`axis=`), builtins
   and keywords stay, since they say what the code does;
2. a line that appears in the released notebook is dropped, and every
   K-gram of tokens is hashed (a stable hash: the same code gives the same
   report on every run);
3. robust winnowing keeps, of every W consecutive hashes, the rightmost
   smallest (the one kept for the window before when it is still the
   smallest): any passage of K + W - 1 tokens or more shared by two
   students yields a shared fingerprint, and reordering functions moves
   fingerprints without removing them;
4. fingerprints of the released notebook (all its K-grams) are removed;
5. a pair's similarity is 2·|A ∩ B| / (|A| + |B|) over the fingerprint
   sets A, B of the two students: high only when much of each one's code
   is in the other's. Each one's share |A ∩ B| / |A| is reported too.

Why not copydetect (0.5.0, the library for this), though it implements the
same method: it hashes K-grams with Python's `hash()`, which is salted per
process, so the fingerprints chosen, and the similarities, change from run to
run (PYTHONHASHSEED=1 and 2 give different scores for the same class); the
winnowing its wheel ships (the pure-Python fallback) compares the 64-bit
hashes as float64; its normaliser turns every name, `np.exp` as well as `x`,
into the same letter, which makes independent NumPy solutions look more
alike; and its HTML report loads Bootstrap from a CDN. Steps 1-5 take 100
lines here, with nothing new to pin.
"""

import bisect
import collections
import hashlib
import html
import io
from dataclasses import dataclass, field
from pathlib import Path

from pygments import token as tokens_
from pygments.lexers import PythonLexer

from . import kinds, report, reports, results

K = 10  # tokens per K-gram: shorter shared passages are noise (a call, a return)
W = 6  # window: a shared passage of K + W - 1 = 15 tokens (about a line) is always found
THRESHOLD = 0.4  # default: pairs at least this similar are shown side by side
MAX_SHOWN = 200  # pairs shown side by side at most (the CSV has every pair)
MAX_PLACES = 20  # places of one fingerprint in one student's code kept at most
MAX_CHARACTERS = 100_000  # of a student's code compared at most (about 2000 lines, seconds of Pygments)
SOURCE_COLUMNS = ["student", "closest_source", "reference_share", "closest_student", "closest_student_share"]
REFERENCE = "the reference"  # the closest source of a student whose code is mostly the reference's
CSV_COLUMNS = ["student_a", "student_b", "similarity", "share_a", "share_b", "shared_fingerprints",
               "fingerprints_a", "fingerprints_b", "lines_a", "lines_b"]
_KEPT_NAMES = (tokens_.Name.Builtin, tokens_.Name.Exception, tokens_.Name.Decorator)
_DROPPED = (tokens_.Comment, tokens_.Text, tokens_.String.Doc)
_LEXER = PythonLexer()  # its unprocessed tokens: offsets into the source as it is


@dataclass
class Code:
    """One student's own code: the lines shown, and its fingerprints {hash: [token position]}."""
    student_id: str
    lines: list  # (cell header or None, line of code)
    token_lines: list = field(default_factory=list)  # line index of each kept token
    fingerprints: dict = field(default_factory=dict)
    cut: bool = False  # longer than MAX_CHARACTERS: only the beginning was compared


@dataclass
class Pair:
    a: Code
    b: Code
    shared: set

    @property
    def similarity(self):
        return 2 * len(self.shared) / (len(self.a.fingerprints) + len(self.b.fingerprints))

    def share(self, code):
        return len(self.shared) / len(code.fingerprints)

    def lines(self, code):
        """The line indices of `code` inside a shared K-gram."""
        return sorted({code.token_lines[position + offset] for fingerprint in self.shared
                       for position in code.fingerprints[fingerprint] for offset in range(K)})

    def passages(self):
        """[(lines of a, lines of b)], in the order of a: chains of shared fingerprints that come in
        the same order in both (a chain that only repeats lines of a longer one is left out)."""
        matches = sorted((pa, pb) for fingerprint in self.shared
                         for pa in self.a.fingerprints[fingerprint] for pb in self.b.fingerprints[fingerprint])
        chains, open_ = [], []  # [first of a, last of a, first of b, last of b, matches]
        for pa, pb in matches:
            open_ = [c for c in open_ if pa - c[1] <= K + W]  # matches come in the order of a
            following = [c for c in open_ if 0 < pa - c[1] and 0 < pb - c[3] <= K + W]
            if following:
                chain = min(following, key=lambda c: pa - c[1] + pb - c[3])
                chain[1], chain[3], chain[4] = pa, pb, chain[4] + 1
            else:
                chains.append([pa, pa, pb, pb, 1])
                open_.append(chains[-1])
        shown, seen_a, seen_b = [], set(), set()
        for a_first, a_last, b_first, b_last, _ in sorted(chains, key=lambda c: -c[4]):
            lines_a = range(self.a.token_lines[a_first], self.a.token_lines[a_last + K - 1] + 1)
            lines_b = range(self.b.token_lines[b_first], self.b.token_lines[b_last + K - 1] + 1)
            if not (seen_a.issuperset(lines_a) or seen_b.issuperset(lines_b)):
                shown.append((lines_a, lines_b))
                seen_a.update(lines_a)
                seen_b.update(lines_b)
        return sorted(shown, key=lambda span: (span[0].start, span[1].start))


# -- fingerprints -------------------------------------------------------------------

def normalised_tokens(source):
    """[(token, offset in source)] of Python `source`, with names, strings and layout normalised."""
    raw = [(kind, text, offset) for offset, kind, text in _LEXER.get_tokens_unprocessed(source)
           if not any(kind in dropped for dropped in _DROPPED)]
    kept, depth = [], 0
    for index, (kind, text, offset) in enumerate(raw):
        if text in "([{" and kind in tokens_.Punctuation:
            depth += 1
        elif text in ")]}" and kind in tokens_.Punctuation:
            depth = max(depth - 1, 0)
        if kind in tokens_.String:
            if kept and kept[-1][0] == "S":
                continue  # one string, however many pieces Pygments makes of it
            text = "S"
        elif kind in tokens_.Name and not any(kind in name for name in _KEPT_NAMES):
            previous = raw[index - 1][1] if index else ""
            following = raw[index + 1][1] if index + 1 < len(raw) else ""
            attribute = previous == "."
            keyword_argument = depth > 0 and following == "="
            text = text if attribute or keyword_argument else "V"
        kept.append((text, offset))
    return kept


def _hash(gram):
    return int.from_bytes(hashlib.blake2b("\x1f".join(gram).encode(), digest_size=8).digest(), "big")


def kgram_hashes(words):
    return [_hash(words[i:i + K]) for i in range(len(words) - K + 1)]


def winnow(hashes, window=W):
    """[(position, hash)] chosen by robust winnowing (Schleimer et al. 2003): in every window of
    `window` consecutive hashes the smallest, the rightmost one if several, unless the one chosen
    for the window before is still among the smallest. A text shorter than a window gets its
    rightmost smallest hash."""
    if not hashes:
        return []
    window = min(window, len(hashes))
    chosen, smallest = [], -1
    for end in range(window - 1, len(hashes)):
        start = end - window + 1
        if smallest < start:  # the last choice left the window: the rightmost smallest hash
            smallest = min(range(start, end + 1), key=lambda i: (hashes[i], -i))
            chosen.append((smallest, hashes[smallest]))
        elif hashes[end] < hashes[smallest]:
            smallest = end
            chosen.append((smallest, hashes[smallest]))
    return chosen


def boilerplate(course, name):
    """(lines, hashes) of the released notebook of `name`: its stripped lines of code and every
    K-gram hash of its code cells."""
    lines, hashes = set(), set()
    for cell in kinds.kind(course).assignment(name).released_cells():
        if cell.cell_type == "code":
            lines.update(line.strip() for line in cell.source.splitlines() if line.strip())
            hashes.update(kgram_hashes([text for text, _ in normalised_tokens(cell.source)]))
    return lines, hashes


def fingerprint(student_id, cells, given):
    """The Code of one student from their cells [[grade_id, source]], without the `given` code."""
    given_lines, given_hashes = given
    code = Code(student_id, [])
    words = []
    budget = MAX_CHARACTERS
    for cell_id, source in cells:
        code.cut = code.cut or len(source) > budget
        source = source[:budget]
        budget -= len(source)
        code.lines.append((f"cell {cell_id}" if cell_id else "a cell the student added", ""))
        first = len(code.lines)
        starts = [0]
        for line in source.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
            code.lines.append((None, line.rstrip("\r\n")))
        for text, offset in normalised_tokens(source):
            line = first + bisect.bisect_right(starts, offset) - 1
            if code.lines[line][1].strip() not in given_lines:
                words.append(text)
                code.token_lines.append(line)
    hashes = kgram_hashes(words)
    code.fingerprints = {value: [] for _, value in winnow(hashes) if value not in given_hashes}
    # the places of each chosen hash, so that the lines it covers are shown (a few: code that
    # repeats one line ten thousand times must not make the comparison quadratic)
    for position, value in enumerate(hashes):
        places = code.fingerprints.get(value)
        if places is not None and len(places) < MAX_PLACES:
            places.append(position)
    return code


# -- the class ---------------------------------------------------------------------------

@dataclass
class Source:
    """Where one student's code is found most: in the reference, or in another student's."""
    student_id: str
    reference_share: float  # of their fingerprints, the part found in the reference
    closest_student: str    # the student whose code holds the largest part of theirs ("" if none)
    student_share: float    # that part, without what is also in the reference

    @property
    def closest(self):
        if not (self.reference_share or self.student_share):
            return ""
        return REFERENCE if self.reference_share >= self.student_share else self.closest_student


def reference_code(course, name, given):
    """The Code of the reference: the functions that assignment `name` of `course` grades, whole."""
    from .reference import graded
    return fingerprint(REFERENCE, [(f"{f.module}.{f.name}", f.source()) for f in graded(course, name)], given)


def sources(codes, pairs, reference):
    """The Source of each of `codes`, in their order."""
    best, printed = {}, reference.fingerprints.keys()
    for pair in pairs:
        beyond = len(pair.shared - printed)  # what two who both copied the reference share is the reference's
        for mine, other in ((pair.a, pair.b), (pair.b, pair.a)):
            share = beyond / len(mine.fingerprints)
            if share > best.get(mine.student_id, ("", 0.0))[1]:
                best[mine.student_id] = (other.student_id, share)
    return [Source(code.student_id, len(code.fingerprints.keys() & reference.fingerprints.keys())
                   / len(code.fingerprints), *best.get(code.student_id, ("", 0.0))) for code in codes]


def compare(codes):
    """Every pair of `codes` (students with fingerprints), most similar first."""
    codes = [code for code in codes if code.fingerprints]
    pairs = []
    for i, a in enumerate(codes):
        keys = a.fingerprints.keys()
        for b in codes[i + 1:]:
            pairs.append(Pair(a, b, keys & b.fingerprints.keys()))
    return sorted(pairs, key=lambda p: (-p.similarity, p.a.student_id, p.b.student_id))


def run(course, out, name, threshold=THRESHOLD):
    """Write OUT/similarity/<name>.html, .csv (pairs) and -sources.csv (each student's closest
    source) from the results in OUT; return (pairs, left out)
    where `left out` is [(student, why)] of the students not compared."""
    out = Path(out)
    given = boilerplate(course, name)
    codes, left_out, notes = [], [], []
    for result in results.load_results(course, out):
        if result.assignment != name:
            continue
        if not result.code:
            why = (f"nothing to compare (status {result.status})" if result.status != "graded"
                   else "no code of theirs was kept: graded before the grader kept it; grade again")
            left_out.append((result.student_id, why))
            continue
        code = fingerprint(result.student_id, result.code, given)
        if code.cut:
            notes.append((result.student_id, f"only the first {MAX_CHARACTERS} characters of their code "
                                             "were compared"))
        if code.fingerprints:
            codes.append(code)
        else:
            left_out.append((result.student_id, "no code of their own beyond the released notebook"))
    pairs = compare(codes)
    found = sources(codes, pairs, reference_code(course, name, given))
    folder = out / "similarity"
    results.write_atomic(folder / f"{name}.csv", _csv(pairs))
    results.write_atomic(folder / f"{name}-sources.csv", _sources_csv(found))
    results.write_atomic(folder / f"{name}.html",
                         _html(name, pairs, left_out + notes, len(codes), threshold, found))
    reports.write_reports(course, out)  # the summary links to the report
    return pairs, left_out


# -- reports ------------------------------------------------------------------------------

def _ranges(lines):
    """'3-5 9' from line indices [2, 3, 4, 8] (shown 1-based)."""
    runs = []
    for line in lines:
        if runs and line == runs[-1][1] + 1:
            runs[-1][1] = line
        else:
            runs.append([line, line])
    return " ".join(f"{a + 1}" if a == b else f"{a + 1}-{b + 1}" for a, b in runs)


def _csv(pairs):
    return report._csv(CSV_COLUMNS, [
        [p.a.student_id, p.b.student_id, f"{p.similarity:.3f}", f"{p.share(p.a):.3f}", f"{p.share(p.b):.3f}",
         len(p.shared), len(p.a.fingerprints), len(p.b.fingerprints), _ranges(p.lines(p.a)),
         _ranges(p.lines(p.b))] for p in pairs])


def _sources_csv(found):
    return report._csv(SOURCE_COLUMNS, [[f.student_id, f.closest, f"{f.reference_share:.3f}", f.closest_student,
                                         f"{f.student_share:.3f}"] for f in found])


def _sources_table(found):
    e = html.escape
    copied = sum(f.closest == REFERENCE for f in found)
    rows = "".join(f"<tr><td>{e(f.student_id)}</td><td>{e(f.closest)}</td><td>{f.reference_share:.2f}</td>"
                   f"<td>{e(f.closest_student)}</td><td>{f.student_share:.2f}</td></tr>"
                   for f in sorted(found, key=lambda f: (-f.reference_share, f.student_id)))
    return ("<h2>Closest source of each student</h2>"
            f"<p>Each student's code is also compared with the course's reference code (the functions "
            f"this assignment grades, as the open edition of the book prints them). <b>{copied} of "
            f"{len(found)}</b> students have the reference as their closest source. A share is the part "
            "of the student's fingerprints found in the reference, or found in the code of the student "
            "most like them and not in the reference; the reference wins a tie. Every student is in <code>-sources.csv</code>.</p>"
            "<table><tr><th>student</th><th>closest source</th><th>share in the reference</th>"
            "<th>closest student</th><th>share in theirs</th></tr>" + rows + "</table>")


def _listing(code, lines, marked=frozenset()):
    """The escaped lines of `code` with their numbers, `marked` ones highlighted."""
    rows = []
    for index in lines:
        header, text = code.lines[index]
        if header is not None:
            rows.append(f"<span class='hd'>{html.escape(header)}</span>")
            continue
        line = f"{index + 1:4d}  {html.escape(text)}"
        rows.append(f"<span class='m'>{line}</span>" if index in marked else line)
    return "<pre>" + "\n".join(rows) + "</pre>"


def _html(name, pairs, left_out, compared, threshold, found=()):
    shown = [p for p in pairs if p.similarity >= threshold][:MAX_SHOWN]
    e = html.escape
    ids = {}
    for pair in shown:
        for code in (pair.a, pair.b):
            ids.setdefault(code.student_id, (len(ids), code))
    parts = [
        f"<h1>Similarity of the students' code: {e(name)}</h1>",
        "<p>This report ranks pairs of students by how much of their own code they share, for you to "
        "read. <b>It decides nothing</b>: a pair may share code because one copied, because both "
        "copied a third source, or because the task leaves one natural way to write it. Read the "
        "lines before drawing any conclusion.</p>",
        f"<p>{compared} students compared ({len(pairs)} pairs). The released notebook's code (given "
        "cells, stubs, docstrings, its comments) is removed first; comments, layout and the names "
        "students choose do not count. Fingerprints: robust winnowing (Schleimer et al. 2003) of "
        f"{K}-token hashes in windows of {W}: a passage of {K + W - 1} tokens or more in common is "
        "always found. Similarity = 2 × shared fingerprints / (fingerprints of a + of b); a share "
        "is the part of one student's fingerprints found in the other's code.</p>",
    ]
    if pairs:
        parts.append(_distribution([p.similarity for p in pairs], threshold))
    if found:
        parts.append(_sources_table(found))
    parts.append(f"<h2>Pairs at least {threshold:g} similar ({len(shown)}"
                 + (f", the first {MAX_SHOWN}" if len(shown) == MAX_SHOWN else "") + ")</h2>"
                 f"<p>Every pair is in <code>{e(name)}.csv</code> beside this page.</p>")
    if shown:
        parts.append("<table><tr><th>#</th><th>student a</th><th>student b</th><th>similarity</th>"
                     "<th>share of a</th><th>share of b</th></tr>" + "".join(
                         f"<tr><td><a href='#pair-{i}'>{i}</a></td><td>{e(p.a.student_id)}</td>"
                         f"<td>{e(p.b.student_id)}</td><td>{p.similarity:.2f}</td><td>{p.share(p.a):.2f}</td>"
                         f"<td>{p.share(p.b):.2f}</td></tr>" for i, p in enumerate(shown, 1)) + "</table>")
    for i, pair in enumerate(shown, 1):
        marked_a, marked_b = set(pair.lines(pair.a)), set(pair.lines(pair.b))
        parts.append(f"<h3 id='pair-{i}'>{i}. {e(pair.a.student_id)} and {e(pair.b.student_id)}: "
                     f"{pair.similarity:.2f}</h3><p>The passages in common, side by side (whole code: "
                     f"<a href='#student-{ids[pair.a.student_id][0]}'>{e(pair.a.student_id)}</a>, "
                     f"<a href='#student-{ids[pair.b.student_id][0]}'>{e(pair.b.student_id)}</a>).</p>"
                     f"<table class='pair'><tr><th>{e(pair.a.student_id)}</th><th>{e(pair.b.student_id)}</th></tr>"
                     + "".join(f"<tr><td>{_listing(pair.a, lines_a, marked_a)}</td>"
                               f"<td>{_listing(pair.b, lines_b, marked_b)}</td></tr>"
                               for lines_a, lines_b in pair.passages()) + "</table>")
    if ids:
        parts.append("<h2>The code of each student above</h2><p>Their own cells as graded; the lines "
                     "they share with someone listed above are marked.</p>")
        marked = collections.defaultdict(set)
        for pair in shown:
            marked[pair.a.student_id].update(pair.lines(pair.a))
            marked[pair.b.student_id].update(pair.lines(pair.b))
        for student, (index, code) in ids.items():
            parts.append(f"<h3 id='student-{index}'>{e(student)}</h3>"
                         + _listing(code, range(len(code.lines)), marked[student]))
    parts.append(f"<h2>Not compared, or not all ({len(left_out)})</h2>")
    if left_out:
        parts.append("<table><tr><th>student</th><th>why</th></tr>" + "".join(
            f"<tr><td>{e(student)}</td><td>{e(why)}</td></tr>" for student, why in left_out) + "</table>")
    return report._page(f"Similarity: {name}", "".join(parts))


def _distribution(similarities, threshold):
    """A histogram of every pair's similarity, with the threshold marked."""
    from matplotlib import ticker
    figure, axes = _pyplot().subplots(figsize=(6, 2.4))
    axes.hist(similarities, bins=[i / 40 for i in range(41)], color="#4477aa")
    axes.axvline(threshold, color="#cc6677", linestyle="--")
    axes.set(xlim=(0, 1), xlabel="similarity", ylabel="pairs (log scale)", yscale="log",
             title="every pair's similarity (dashed: the threshold)")
    axes.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axes.yaxis.set_minor_formatter(ticker.NullFormatter())
    axes.spines[["top", "right"]].set_visible(False)
    return f"<figure role='img' aria-label='histogram of the pairs&#39; similarity'>{_svg(figure)}</figure>"


def _pyplot():
    """matplotlib's pyplot, drawing without a screen (imported only for this report)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _svg(figure):
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    _pyplot().close(figure)
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]
