"""The website builds with every chapter executed, and a failing cell fails it."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

from autograder import course

JUPYTER_BOOK = str(Path(sys.executable).parent / "jupyter-book")
BUILD = [JUPYTER_BOOK, "build", "--warningiserror", "--nitpick", "--keep-going"]  # as `make book`


def chapters():
    toc = yaml.safe_load((course.ROOT / "_toc.yml").read_text())
    return [Path(toc["root"]).stem] + [Path(entry["file"]).stem
                                       for part in toc["parts"] for entry in part["chapters"]]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run([*BUILD, str(course.ROOT), "--path-output", str(out)],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return out / "_build" / "html"


def test_every_page_of_the_toc_is_built(site):
    for name in chapters():
        assert (site / "book" / f"{name}.html").is_file(), name


def test_each_exercise_is_downloadable_from_its_chapter(site):
    for slug in course.assignments():
        page = (site / "book" / f"{slug}.html").read_text()
        downloads = list((site / "_downloads").glob(f"*/{slug}.ipynb"))
        assert len(downloads) == 1, f"{slug}.ipynb is not in the site's downloads"
        assert f"_downloads/{downloads[0].parent.name}/{slug}.ipynb" in page
        nbformat.validate(nbformat.read(downloads[0], as_version=4))


def test_chapter_figures_and_computed_numbers_are_in_the_page(site):
    page = (site / "book" / "scaled_dot_product.html").read_text()
    assert page.count("<img") >= 3  # the saturation plot, the masks, the heatmaps
    # numbers in the text are glued from the computation
    assert re.search(r"measured variance: \d{3,4}\)", re.sub(r"<[^>]+>", "", page))


def test_a_cell_error_fails_the_build(tmp_path):
    book = tmp_path / "book"
    (book / "book").mkdir(parents=True)
    shutil.copy(course.ROOT / "_config.yml", book / "_config.yml")
    shutil.copy(course.ROOT / "book" / "references.bib", book / "book" / "references.bib")
    (book / "_toc.yml").write_text("format: jb-book\nroot: broken\n")
    (book / "broken.md").write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\n---\n"
        "# Broken\n\n```{code-cell} ipython3\n1 / 0\n```\n")
    result = subprocess.run([*BUILD, str(book)], capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    assert "ZeroDivisionError" in result.stdout + result.stderr
