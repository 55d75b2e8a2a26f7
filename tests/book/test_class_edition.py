"""Issue 29: the class edition prints no graded function's body anywhere a student can reach
(its pages' text, their sources, the search index, the notebooks offered for download, the
PDF), while the open edition prints every body it lists, folded, and in the PDF's appendices:
the same search finds them there, so it can fail. The class edition is built from the open
edition's execution cache (the site of conftest.py), which it must not need to fill again.

Issue 40: the class edition offers only the exercises that the term releases (course.toml's
[term]); with the default term, none, and no exercise notebook is in the site. A term that
would give away an answer of an assignment that is not closed is refused before any build work;
one that closes it builds, from the same cache, and offers the exercises it releases."""

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from sphinx.errors import ConfigError

from autograder.engine import course, reference
from tests.support import COURSE, EARLIER, GIVER, TAKER, course_file

BUILD_EDITION = COURSE.root / "book" / "_ext" / "build_edition.py"
sys.path.insert(0, str(BUILD_EDITION.parent))
import build_edition  # noqa: E402  (the book's extensions)
import graded_code  # noqa: E402

UNRELEASED = "released by your instructor"


def build_class_edition(build, *options, term_file=None):
    """The class edition built into `build` (beside the open edition's, whose execution cache it
    reads), with the term of this course's file, or of the course file `term_file`."""
    env = {key: value for key, value in os.environ.items() if key != course.ENVIRONMENT}
    env |= {"COURSE_EDITION": "class", **({course.ENVIRONMENT: str(term_file)} if term_file else {})}
    result = subprocess.run([sys.executable, BUILD_EDITION, str(COURSE.root), str(build), "-W", "-n", "--keep-going",
                             *options], capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    assert "Executing" not in result.stdout, "the class edition executed chapters: it should reuse the cache"
    return build


@pytest.fixture(scope="session")
def class_site(site):
    """The class edition's build folder (…/_build/class), beside the open edition's: the default
    term, nothing released."""
    return build_class_edition(site.parent / "class")


@pytest.fixture(scope="session")
def term_site(site, tmp_path_factory):
    """The class edition's website (…/_build/term) in a term that has released multi_head and the
    assignments whose answers it gives, and closed those."""
    term = course_file(tmp_path_factory.mktemp("term"), [*EARLIER, GIVER, TAKER], [*EARLIER, GIVER])
    return build_class_edition(site.parent / "term", "--no-pdf", term_file=term)


@pytest.fixture(scope="session")
def bodies():
    return reference.distinctive_lines(COURSE)


def listed():
    """{chapter: the graded functions it lists with `literalinclude :pyobject:`}, for the chapters
    that list one."""
    graded, found = reference.all_graded(COURSE), {}
    for chapter in sorted((COURSE.root / "book").glob("*.md")):
        names = set(re.findall(r"^:pyobject:\s*(\S+)", chapter.read_text(encoding="utf-8"), re.M))
        functions = {function for function in graded if function.name in names}
        if functions:
            found[chapter.stem] = functions
    return found


def squeezed(text):
    """`text` with each run of spaces made one: pdftotext's layout spaces code as it can."""
    return re.sub(r"[ \t]+", " ", text)


def text_of(path):
    """What a reader gets of a built file: an HTML page's text, a PDF's text (squeezed), any other
    text file."""
    if path.suffix == ".pdf":
        return squeezed(subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True,
                                       text=True, check=True).stdout)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return ""
    return BeautifulSoup(text, "html.parser").get_text() if path.suffix == ".html" else text


def leaks(folder, bodies, closed=()):
    """{file: names of the graded bodies it holds} under `folder`. An exercise notebook offered
    for download may hold those its given cells hand the student (student-copy says which) of
    the assignments `closed`, and no other."""
    found = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".doctrees" not in p.parts):
        exercise = path.suffix == ".ipynb" and "_downloads" in path.parts and path.stem in course.assignments(COURSE)
        given = {f for f in reference.given(COURSE, path.stem) if f.assignment in closed} if exercise else set()
        searched = {function: [squeezed(line) for line in lines] if path.suffix == ".pdf" else lines
                    for function, lines in bodies.items() if function not in given}
        names = {f"{function.module}.{function.name}" for function, _ in reference.leaked(text_of(path), searched)}
        if names:
            found[path.relative_to(folder)] = names
    return found


def test_the_class_edition_prints_no_graded_body(class_site, bodies):
    assert (class_site / "html" / "book" / "luong.html").is_file() and (class_site / "pdf").is_dir()
    for name in course.assignments(COURSE):  # the chapter's source and executed notebook, offered for download
        assert {f"{name}.md", f"{name}.ipynb"} <= {p.name for p in (class_site / "html" / "_sources" / "book").iterdir()}
    assert leaks(class_site, bodies) == {}


def exercise_offer(page):
    """(the download link's file name or None, whether the download menu offers it, the sentence
    said instead or None) of a chapter's page."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    link = soup.select_one("a.exercise-download")
    sentence = soup.select_one(".exercise-unreleased")
    return (link["href"].rpartition("/")[2] if link else None, bool(soup.select(".btn-download-exercise-button")),
            sentence.get_text(" ", strip=True) if sentence else None)


def test_the_default_term_offers_no_exercise(class_site):
    """No exercise notebook in the site (downloads, sources, anywhere), no button, no Colab link, no
    menu entry: a sentence instead."""
    exercises = {(COURSE.exercises / f"{name}.ipynb").read_bytes() for name in course.assignments(COURSE)}
    assert not [p for p in class_site.rglob("*.ipynb") if p.read_bytes() in exercises]
    for name in course.assignments(COURSE):
        link, in_menu, sentence = exercise_offer(class_site / "html" / "book" / f"{name}.html")
        assert link is None and not in_menu and UNRELEASED in sentence and f"{name}.ipynb" in sentence, name


def test_the_open_edition_offers_every_exercise(site):
    for name in course.assignments(COURSE):
        link, in_menu, sentence = exercise_offer(site / "book" / f"{name}.html")
        assert (link, in_menu, sentence) == (f"{name}.ipynb", True, None), name


def test_a_term_that_would_give_an_open_answer_away_is_refused_before_any_build(tmp_path, monkeypatch, capsys):
    """scaled_dot_product open (or not released) and multi_head released: refused, naming them."""
    for released in ([*EARLIER, GIVER, TAKER], [*EARLIER, TAKER]):
        monkeypatch.setenv("COURSE_EDITION", "class")
        monkeypatch.setenv(course.ENVIRONMENT, str(course_file(tmp_path, released, EARLIER)))
        with pytest.raises(SystemExit) as exit:
            build_edition.main([str(COURSE.root), str(tmp_path / "build")])
        said = capsys.readouterr().err
        assert exit.value.code == 1 and not (tmp_path / "build").exists()
        assert f"the exercise {TAKER} is released" in said and f"of the assignment {GIVER}," in said, said
        assert all(f.name in said for f in reference.given(COURSE, TAKER) if f.assignment == GIVER)
        # and a build of the class edition by jupyter-book itself stops at its configuration
        with pytest.raises(ConfigError, match=f"the exercise {TAKER} is released"):
            graded_code.set_edition(SimpleNamespace(outdir=str(tmp_path / "html"), srcdir=str(COURSE.root)),
                                    SimpleNamespace(course_edition="class"))


def test_a_term_that_closed_the_giver_offers_what_it_released(term_site, bodies):
    released = [*EARLIER, GIVER, TAKER]
    downloads = sorted(p.stem for p in (term_site / "html" / "_downloads").rglob("*.ipynb"))
    assert downloads == sorted(released)
    for name in course.assignments(COURSE):
        link, in_menu, sentence = exercise_offer(term_site / "html" / "book" / f"{name}.html")
        if name in released:
            assert (link, in_menu, sentence) == (f"{name}.ipynb", True, None), name
        else:
            assert link is None and not in_menu and UNRELEASED in sentence, name
    # multi_head.ipynb and bahdanau.ipynb hand over answers of closed assignments; nothing else does
    assert {path.stem for path in leaks(term_site, bodies)} == {TAKER, "bahdanau"}
    assert leaks(term_site, bodies, closed=[*EARLIER, GIVER]) == {}


def test_the_open_edition_prints_every_listed_body_folded_and_in_the_pdf(site, bodies):
    """The search above finds every listed body in the open edition: in the page's folded code
    and in the PDF, whose running text points to its chapter's appendix."""
    expected = {f"{f.module}.{f.name}" for functions in listed().values() for f in functions}
    assert len(expected) > 30
    pages = set().union(*leaks(site / "book", bodies).values())
    assert expected <= pages, expected - pages
    pdf = text_of(next((site.parent / "pdf").glob("*.pdf")))
    in_pdf = {f"{function.module}.{function.name}" for function, _ in reference.leaked(
        pdf, {function: list(map(squeezed, lines)) for function, lines in bodies.items()})}
    assert expected <= in_pdf, expected - in_pdf
    # one appendix in each of those chapters (the contents list it as section N.M)
    assert len(set(re.findall(r"^\s*(\d+)\.\d+ Reference solutions\b", pdf, re.M))) == len(listed())


def test_each_graded_body_is_behind_try_the_exercise_first(site, class_site):
    """Open edition: each body in a <details> (a click or the keyboard opens it) after its
    signature; class edition: the signature, `...` and the task that asks for it."""
    page = BeautifulSoup((site / "book" / "luong.html").read_text(encoding="utf-8"), "html.parser")
    folds = page.select("details.graded-body")
    assert len(folds) >= 6
    for fold in folds:
        assert fold.find("summary").get_text(" ", strip=True).startswith("Try the exercise first")
        assert not fold.has_attr("open")
        assert "def " in fold.find_previous("pre").get_text()  # the signature, outside the fold
    page = BeautifulSoup((class_site / "html" / "book" / "luong.html").read_text(encoding="utf-8"), "html.parser")
    assert not page.select("details.graded-body")
    notes = [p.get_text(" ", strip=True) for p in page.select(".graded-body-left-out")]
    assert any("dot_score" in note and "luong.ipynb" in note and "The dot score" in note for note in notes), notes


def test_the_class_edition_launches_no_repository(class_site):
    """No launch menu, repository or Colab link to the repository that holds solutions/."""
    config = COURSE.root / "_config.yml"
    repository = re.search(r"^\s+url:\s*(\S+)", config.read_text(), re.M).group(1)
    for page in (class_site / "html" / "book").glob("*.html"):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        links = [a["href"] for a in soup.find_all("a", href=True)]
        assert not [href for href in links if "mybinder" in href or "jupyterhub" in href or repository in href
                    or "colab" in href], page.name


def test_a_student_repository_is_the_only_one_the_class_edition_opens():
    launch = {"binderhub_url": "https://mybinder.org", "jupyterhub_url": "https://hub.example.org",
              "colab_url": "https://colab.research.google.com"}

    def configured(repository):
        config = SimpleNamespace(course_edition="class", class_edition_repository=repository,
                                 class_edition_branch="spring", nb_execution_cache_path="",
                                 html_theme_options={"repository_url": "https://github.com/x/course",
                                                     "repository_branch": "main", "launch_buttons": dict(launch)})
        graded_code.set_edition(SimpleNamespace(outdir="/b/_build/class/html", srcdir=str(COURSE.root)), config)
        return config

    config = configured("https://github.com/x/students")
    assert config.html_theme_options == {"repository_url": "https://github.com/x/students",
                                         "repository_branch": "spring",
                                         "launch_buttons": {"colab_url": launch["colab_url"]}}
    assert config.nb_execution_cache_path == str(Path("/b/_build/.jupyter_cache"))
    assert config.exercises_offered == list(COURSE.released) == []
    assert configured("").html_theme_options == {"repository_url": "", "launch_buttons": {}}
