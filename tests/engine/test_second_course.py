"""The engine grades another course unchanged: the tiny course of second_course/.

Its course file names its own notebooks, reference package (`tiny_reference`),
checks package (`tiny_checks`), book and site; every command of
`python -m autograder --course FILE` handles it, and no engine file names it.
"""

import csv
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

from autograder.engine import course
from tests.support import COURSE

SECOND = Path(__file__).parent / "second_course"
SLUGS = ("averages", "norms")
CORRECT = {"center": "def center(x):\n    return x - x.mean()",
           "standardise": "def standardise(x):\n    return (x - x.mean()) / x.std()",
           "normalise": "def normalise(x):\n    return x / np.sqrt(squared_norm(x))"}
# The sample std (ddof=1) where the population std is meant: standardise fails, center passes.
WRONG = {**CORRECT, "standardise": "def standardise(x):\n    return (x - x.mean()) / x.std(ddof=1)"}
# The course's packages are nowhere in the student's sandbox: center and normalise fail (flagged).
CHEAT = {**CORRECT, "center": "from tiny_reference.averages import center",
         "normalise": "import tiny_checks\ndef normalise(x):\n    return x / np.sqrt(squared_norm(x))"}


def engine_files():
    """The engine: every file of its folder, autograder/engine/."""
    return [path for path in sorted(course.ENGINE.rglob("*"))
            if path.is_file() and path.suffix in (".py", ".md", ".yaml", ".toml") and "__pycache__" not in path.parts]


def test_no_engine_file_names_the_second_course():
    data = tomllib.loads((SECOND / "course.toml").read_text())
    names = {data["id"], *data["references"], data["checks"], *SLUGS}
    assert engine_files()
    for path in engine_files():
        text = path.read_text(encoding="utf-8")
        for name in names:
            assert not re.search(rf"\b{re.escape(name)}\b", text), f"{path} names {name!r}"


def test_no_engine_file_names_this_course_either():
    """This course's slugs, reference and test packages are named by its course file only."""
    ours = COURSE
    for path in engine_files():
        code = path.read_text(encoding="utf-8")
        for slug in course.assignments(COURSE):
            assert slug not in code, f"{path} names the assignment {slug!r}"
        for package in (*ours.references, *ours.private):
            named = re.search(rf"(?:from|import)\s+{package}\b|\b{package}/|[\"']{package}[\"']", code)
            assert not named, f"{path} names the package {package!r}: {named.group(0)}"


def run(tiny, *args, cwd=None):
    """`python -m autograder --course tiny/course.toml ARGS`, from another folder."""
    return subprocess.run([sys.executable, "-m", "autograder", "--course", str(tiny / "course.toml"),
                           *map(str, args)], cwd=cwd or tiny.parent, capture_output=True, text=True,
                          timeout=600)


def notebook(tiny, slug, implementations):
    released = nbformat.read(tiny / "exercises" / f"{slug}.ipynb", as_version=4)
    for cell in released.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in implementations and cell.metadata["nbgrader"].get("solution"):
            cell.source = implementations[grade_id]
    return released


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A copy of the second course, released afresh (its notebooks and the reference's times)."""
    tiny = tmp_path_factory.mktemp("second") / "course"
    shutil.copytree(SECOND, tiny, ignore=shutil.ignore_patterns("exercises", "timing.json", "__pycache__"))
    result = run(tiny, "release")
    assert result.returncode == 0, result.stderr
    for slug in SLUGS:
        assert (tiny / "exercises" / f"{slug}.ipynb").is_file()
        assert (tiny / "source" / slug / "timing.json").is_file()
    return tiny


def test_the_committed_exercises_of_the_second_course_are_current(tiny):
    for slug in SLUGS:
        assert (tiny / "exercises" / f"{slug}.ipynb").read_bytes() == \
            (SECOND / "exercises" / f"{slug}.ipynb").read_bytes(), f"run release on {SECOND}"


def test_release_stamps_the_courses_own_cells(tiny):
    cells = nbformat.read(tiny / "exercises" / "norms.ipynb", as_version=4).cells
    given = next(c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == "given")
    assert "generated from tiny_reference/norms.py" in given.source and "def squared_norm" in given.source
    assert "hand in `norms.ipynb`" in cells[-1].source  # the course's own closing cell
    generated = nbformat.read(tiny / "exercises" / "norms.ipynb", as_version=4).metadata["autograder"]["generated"]
    assert "from source/norms/norms.ipynb" in generated  # for its authors, where Jupyter shows it not
    assert cells[0].source.startswith("# Exercise: norms")


@pytest.fixture(scope="module")
def graded(tiny, tmp_path_factory):
    batch = tmp_path_factory.mktemp("batch")
    for student, implementations in (("ada", CORRECT), ("bob", WRONG), ("cy", {}), ("eve", CHEAT)):
        for slug in SLUGS:
            path = batch / student / f"{slug}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook(tiny, slug, implementations), path)
    out = tmp_path_factory.mktemp("out")
    result = run(tiny, "grade", batch, "--out", out, "--workers", 2)
    assert result.returncode == 0, result.stderr
    return batch, out, result


def read_grades(out):
    return {(r["student_id"], r["assignment"]): (float(r["score"]), float(r["max_score"]), r["status"])
            for r in csv.DictReader(open(out / "grades.csv"))}


def test_grade_scores_the_second_course(graded):
    _, out, result = graded
    assert read_grades(out) == {
        ("ada", "averages"): (3.0, 3.0, "graded"), ("ada", "norms"): (2.0, 2.0, "graded"),
        ("bob", "averages"): (1.0, 3.0, "graded"), ("bob", "norms"): (2.0, 2.0, "graded"),
        ("cy", "averages"): (0.0, 3.0, "graded"), ("cy", "norms"): (0.0, 2.0, "graded"),
        ("eve", "averages"): (2.0, 3.0, "graded"), ("eve", "norms"): (0.0, 2.0, "graded")}
    flagged = json.loads((out / "results" / "eve" / "averages.json").read_text())["flags"]
    assert any("tiny_reference" in flag for flag in flagged), flagged
    assert "html.baseurl" not in result.stderr  # the course's site address is no placeholder


def test_feedback_links_to_the_courses_own_chapters(graded):
    _, out, _ = graded
    chapter = "https://tiny.example.org/stats/chapters/averages.html"
    untouched = (out / "feedback" / "cy" / "averages.html").read_text()
    assert f"Centring (<a href='{chapter}#averages-center'>" in untouched  # the check cell's section
    wrong = (out / "feedback" / "bob" / "averages.html").read_text()
    # a check cell without a section links to its chapter's first label
    assert f"Standardising (<a href='{chapter}#averages'>" in wrong


def test_merge_of_shards_equals_one_run(tiny, graded, tmp_path):
    batch, out, _ = graded
    shards = [tmp_path / "1", tmp_path / "2"]
    for i, shard in enumerate(shards, 1):
        result = run(tiny, "grade", batch, "--out", shard, "--shard", f"{i}/2", "--secret", out / "secret.key")
        assert result.returncode == 0, result.stderr
    result = run(tiny, "merge", *shards, "--out", tmp_path / "merged")
    assert result.returncode == 0, result.stderr
    assert read_grades(tmp_path / "merged") == read_grades(out)


def test_validate_runs_the_second_courses_visible_checks(tiny, graded):
    batch, _, _ = graded
    good = run(tiny, "validate", batch / "ada" / "averages.ipynb")
    assert good.returncode == 0 and "ready to hand in" in good.stdout, good.stdout + good.stderr
    bad = run(tiny, "validate", batch / "bob" / "averages.ipynb")
    assert bad.returncode == 1, bad.stdout
    assert "Standardising [test_standardise, 2 points]: FAIL" in bad.stdout
    assert "https://tiny.example.org/stats/chapters/averages.html" in bad.stdout
    assert "tiny_checks" not in bad.stdout and "HIDDEN" not in bad.stdout


def test_export_writes_the_second_courses_grades(tiny, graded, tmp_path):
    _, out, _ = graded
    result = run(tiny, "export", out, "--to", "blackboard", "--output", tmp_path / "bb.csv")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "bb.csv").read_text(encoding="utf-8-sig", errors="replace")
    assert "averages" in text and "norms" in text
    result = run(tiny, "export", out, "--to", "nbgrader", "--output", tmp_path / "gradebook.db")
    assert result.returncode == 0, result.stderr
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}", course_id="tiny-statistics") as gradebook:
        assert gradebook.find_submission("averages", "ada").score == 3.0
        assert gradebook.find_submission("norms", "bob").score == 2.0


def test_slurm_jobs_grade_the_second_course(tiny):
    script = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; from autograder.engine import course, slurm; "
         "print(slurm.scripts(course.load(sys.argv[1]), Path('in'), Path('out'), 2, [])[0])",
         str(tiny / "course.toml")], capture_output=True, text=True, check=True).stdout
    assert f"cd {tiny}" in script and f"--course {tiny / 'course.toml'}" in script


def test_the_course_file_is_found_from_the_current_folder(tiny, graded):
    """Without --course, the course.toml of the current folder (or one above) is the course."""
    batch, _, _ = graded
    result = subprocess.run([sys.executable, "-m", "autograder", "validate", batch / "ada" / "norms.ipynb"],
                            cwd=tiny / "source", capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
