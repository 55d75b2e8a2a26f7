"""`python -m autograder similarity`: disguised copies rank above every honest pair, the released
notebook's code counts for nothing, and what students wrote stays inert (the pages are also
opened in Chromium by test_reports_safe.py)."""

import csv
import re
import subprocess
import sys

import nbformat
import pytest

from autograder.engine import similarity
from autograder.engine.report import FORMULA_START
from tests.support import COURSE
from autograder.samples.submissions import SLUG
from tests.engine.grading import run_grader
from autograder.samples.planted_class import B, CLASS, COPIES, book_copies, notebook, result, write_class


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = write_class(tmp_path_factory.mktemp("class"),
                      {student: notebook(answers, added) for student, (answers, added) in CLASS.items()})
    return out, similarity.run(COURSE, out, SLUG)


def similarities(pairs):
    return {frozenset((p.a.student_id, p.b.student_id)): p.similarity for p in pairs}


def test_every_disguised_copy_ranks_above_every_honest_pair(planted):
    _, (pairs, left_out) = planted
    scores = similarities(pairs)
    copies = {pair: score for pair, score in scores.items() if tuple(sorted(pair)) in COPIES}
    honest = {pair: score for pair, score in scores.items() if tuple(sorted(pair)) not in COPIES}
    assert len(copies) == len(COPIES) and len(honest) == 36 - len(COPIES) and left_out == []
    assert min(copies.values()) > max(honest.values()), (copies, max(honest.items(), key=lambda x: x[1]))
    # and by a margin a person sees: the default threshold lies between them
    assert min(copies.values()) >= similarity.THRESHOLD > max(honest.values())


def test_the_released_notebook_counts_for_nothing(tmp_path):
    """The untouched notebook, and a student who pastes the given code into cells of their own,
    have nothing of their own; pasting it does not make two students more alike."""
    released = nbformat.read(COURSE.exercises / f"{SLUG}.ipynb", as_version=4)
    given = [cell.source for cell in released.cells if cell.cell_type == "code"]
    students = {"untouched": notebook({}), "pasted": notebook({}, given),
                "b": notebook(B), "b-with-given": notebook(B, given)}
    pairs, left_out = similarity.run(COURSE, write_class(tmp_path, students), SLUG)
    assert dict(left_out) == {"untouched": "no code of their own beyond the released notebook",
                              "pasted": "no code of their own beyond the released notebook"}
    [pair] = pairs
    assert pair.similarity == 1.0
    assert pair.a.fingerprints.keys() == pair.b.fingerprints.keys()


def test_renaming_recommenting_and_respacing_change_no_fingerprint():
    given = similarity.boilerplate(COURSE, SLUG)
    original = similarity.fingerprint("x", [["softmax", B["softmax"]]], given)
    disguised = similarity.fingerprint("y", [["softmax", '''def softmax(x, axis=-1):
        # a comment of my own
        arr   =   np.asarray( x,dtype = float )   # here too
        moved = arr - np.max(arr,axis=axis,keepdims=True)
        e = np.exp(moved)
        """a docstring that was not there"""
        return e/np.sum(e, axis=axis, keepdims=True)
''']], given)
    assert original.fingerprints and original.fingerprints.keys() == disguised.fingerprints.keys()


def test_each_token_is_placed_on_its_own_line():
    source = "\n\n\r\n" + B["scaled_dot_product_attention"].replace("\n", "\r\n")
    code = similarity.fingerprint("x", [["scaled_dot_product_attention", source]], (set(), set()))
    words = [text for text, _ in similarity.normalised_tokens(source)]
    assert len(words) == len(code.token_lines) > 50
    for word, line in zip(words, code.token_lines):
        assert word in "VS" or word in code.lines[line][1], (word, code.lines[line])


def test_endless_repetitive_code_is_cut_and_said_to_be(tmp_path, monkeypatch):
    monkeypatch.setattr(similarity, "MAX_CHARACTERS", 2000)
    line = "x = np.exp(x - x.max(axis=-1, keepdims=True))\n"
    students = {name: notebook(B, [line * 10_000]) for name in ("b", "b-again")}
    [pair], _ = similarity.run(COURSE, write_class(tmp_path, students), SLUG)
    assert pair.similarity == 1.0 and len(pair.a.lines) < 60 and len(pair.passages()) < 10
    page = (tmp_path / "similarity" / f"{SLUG}.html").read_text()
    assert "only the first 2000 characters of their code were compared" in page


def test_winnowing_finds_every_passage_of_the_guaranteed_length():
    """Schleimer et al.'s guarantee: texts sharing K + W - 1 tokens share a fingerprint."""
    import random
    rng = random.Random(0)
    words = [str(rng.randrange(50)) for _ in range(400)]
    passage = similarity.K + similarity.W - 1
    for start in range(0, 400 - passage, 7):
        left = [str(rng.randrange(50, 100)) for _ in range(30)] + words[start:start + passage]
        right = words[start:start + passage] + [str(rng.randrange(100, 150)) for _ in range(30)]
        chosen = [{h for _, h in similarity.winnow(similarity.kgram_hashes(text))} for text in (left, right)]
        assert chosen[0] & chosen[1], start
    # a window picks its smallest hash, the rightmost one when tied, once while it stays smallest
    assert similarity.winnow([5, 3, 3, 7, 1, 2, 9, 8], window=3) == [(2, 3), (4, 1), (5, 2)]
    assert similarity.winnow([4, 2], window=3) == [(1, 2)]


def test_the_fingerprints_are_the_same_in_every_process():
    """The hash is not Python's salted hash(): the report does not change from run to run."""
    code = ("from autograder.engine import similarity; "
            "print(similarity.kgram_hashes(list('abcdefghijklmnop')))")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout for seed in ("1", "2")}
    assert len(outputs) == 1


def test_the_grader_keeps_the_students_own_code_and_nothing_of_the_course():
    handed_in = notebook(B, ["def helper():\n    return 1"])
    code = result("b", handed_in).code
    assert [cell_id for cell_id, _ in code] == [None, "softmax", "scaled_dot_product_attention",
                                                "causal_mask", "padding_mask"]
    assert code[1][1] == B["softmax"].strip()


HOSTILE_ID = "=HYPERLINK(\"evil.example\")<img src=x onerror=alert(1)>"  # a folder name: no slash
HOSTILE_CODE = '''def softmax(x, axis=-1):
    """</pre><script>window.__pwned=1</script>"""
    x = np.asarray(x, dtype=float)  # <img src=x onerror=window.__pwned=1>
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)  # </span><style>*{color:red}</style>
'''


def test_hostile_ids_and_code_stay_text(tmp_path):
    students = {"b": notebook(B), HOSTILE_ID: notebook({**B, "softmax": HOSTILE_CODE}),
                "-cmd": notebook({**B, "padding_mask": "def padding_mask(lengths, T):\n    return 0"})}
    similarity.run(COURSE, write_class(tmp_path, students), SLUG, threshold=0)
    page = (tmp_path / "similarity" / f"{SLUG}.html").read_text()
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page and "&lt;img src=x" in page
    lowered = re.sub(r"<svg.*?</svg>", "", page.lower(), flags=re.DOTALL)  # matplotlib's own <style>
    assert "<script" not in lowered and "<img" not in lowered and lowered.count("<style") == 1
    assert "http-equiv='Content-Security-Policy'" in page.split("</head>")[0]
    cells = [cell for row in csv.reader(open(tmp_path / "similarity" / f"{SLUG}.csv", newline=""))
             for cell in row]
    assert not [cell for cell in cells if cell.startswith(FORMULA_START)]
    assert "'" + HOSTILE_ID in cells and "'-cmd" in cells


def test_the_command_writes_the_report_and_links_it_from_the_summary(planted):
    out, _ = planted
    finished = run_grader("similarity", out, "--assignment", SLUG, "--threshold", "0.5", timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert "36 pairs compared, 4 at least 0.5 similar" in finished.stderr
    rows = list(csv.DictReader(open(out / "similarity" / f"{SLUG}.csv")))
    assert len(rows) == 36 and list(rows[0]) == similarity.CSV_COLUMNS
    assert [float(row["similarity"]) for row in rows] == sorted((float(r["similarity"]) for r in rows),
                                                                reverse=True)
    assert {tuple(sorted((row["student_a"], row["student_b"]))) for row in rows[:4]} == COPIES
    page = (out / "similarity" / f"{SLUG}.html").read_text()
    assert "It decides nothing" in page and page.count("<h3 id='pair-") == 4
    assert f"<a href='similarity/{SLUG}.html'>" in (out / "summary.html").read_text()
    for bad in (["similarity", out, "--assignment", "no_such_thing"],
                ["similarity", out / "nowhere", "--assignment", SLUG],
                ["similarity", out, "--assignment", SLUG, "--threshold", "2"]):
        finished = run_grader(*bad, timeout=120)
        assert finished.returncode == 2 and "error:" in finished.stderr, bad


def test_students_who_copied_the_book_have_the_reference_as_closest_source(tmp_path):
    """Three students copied the open edition's listings (one as printed, two disguised): each
    one's closest source is the course's reference, in the HTML and the CSV; no honest author
    (nor the copy of one) has the reference as closest source."""
    students = {**CLASS, **book_copies()}
    out = write_class(tmp_path, {student: notebook(answers, added) for student, (answers, added) in students.items()})
    similarity.run(COURSE, out, SLUG)
    with open(out / "similarity" / f"{SLUG}-sources.csv", newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert rows.keys() == students.keys()
    closest = {student: row["closest_source"] for student, row in rows.items()}
    assert {s for s, source in closest.items() if source == similarity.REFERENCE} == set(book_copies()), closest
    assert all(float(rows[s]["reference_share"]) >= 0.5 for s in book_copies())
    assert max(float(rows[s]["reference_share"]) for s in CLASS) < min(
        float(rows[s]["reference_share"]) for s in book_copies())
    page = (out / "similarity" / f"{SLUG}.html").read_text()
    assert "Closest source of each student" in page and f"<b>3 of {len(students)}</b>" in page
