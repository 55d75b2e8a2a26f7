"""The book as one PDF (built with the website, book/_ext/book_pdf.py): every
page of the toc in order, each chapter with its number and a page of its own,
the table of contents as bookmarks, math typeset (no LaTeX or MathJax source
left in the text), the figures, the bibliography, and a link from the site.

Read back with Debian's poppler-utils (pdftotext, pdfinfo, pdfimages) and
qpdf (the bookmarks), which `make test` installs."""

import json
import re
import subprocess
import unicodedata
from pathlib import Path

import pytest
import yaml

from autograder import course
from tests.book.toc import numbered_chapters, pages, title

CONFIG = yaml.safe_load((course.ROOT / "_config.yml").read_text())
PDF_NAME = Path(CONFIG["latex"]["latex_documents"]["targetname"]).with_suffix(".pdf").name


def normal(text):
    """`text` with ligatures split and runs of white space made one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


@pytest.fixture(scope="session")
def pdf(site):
    path = site.parent / "pdf" / PDF_NAME
    assert path.is_file(), f"{path} was not built"
    return path


@pytest.fixture(scope="session")
def pdf_pages(pdf):
    """The text of each page (pdftotext separates pages with form feeds)."""
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True,
                          text=True, check=True).stdout
    return [normal(page) for page in text.split("\f")]


@pytest.fixture(scope="session")
def bookmarks(pdf):
    """[(depth, title, page)] of the PDF's outline, in order (qpdf's JSON)."""
    result = subprocess.run(["qpdf", "--json=2", "--json-key=outlines", str(pdf)],
                            capture_output=True, text=True, check=True)
    found = []

    def walk(outlines, depth):
        for outline in outlines:
            found.append((depth, normal(outline["title"]), outline["destpageposfrom1"]))
            walk(outline["kids"], depth + 1)

    walk(json.loads(result.stdout)["outlines"], 0)
    return found


def test_the_pdf_is_in_the_site_and_linked_from_every_page(site, pdf):
    assert (site / PDF_NAME).read_bytes() == pdf.read_bytes()
    for name in pages():
        page = (site / "book" / f"{name}.html").read_text(encoding="utf-8")
        assert f'href="../{PDF_NAME}"' in page, f"{name} does not link to the PDF"


def test_text_is_selectable_and_nothing_is_left_untypeset(pdf_pages):
    text = " ".join(pdf_pages)
    assert len(text) > 20_000, "the PDF holds little text: is it made of images?"
    for source in ("\\frac", "\\begin", "\\end{", "\\mathbf", "\\sqrt", "$$", "\\(", "\\[", "{eq}", "{glue",
                   "```", ":::"):
        assert source not in text, f"untypeset source {source!r} in the PDF's text"


def test_unicode_of_the_chapters_comes_out(pdf_pages):
    """Characters the chapters write as text (not math) survive XeLaTeX and its fonts."""
    text = " ".join(pdf_pages)
    chapters = " ".join((course.ROOT / "book" / f"{name}.md").read_text(encoding="utf-8") for name in pages())
    for character in "√⊙≤→αΔσ×":
        if character in chapters:
            assert character in text, f"{character!r} of the chapters is missing from the PDF"


def test_no_glyph_is_missing_from_the_fonts(site):
    log = (site.parent / "latex" / PDF_NAME).with_suffix(".log").read_text(encoding="utf-8", errors="replace")
    missing = re.findall(r"Missing character: There is no .*", log)
    assert missing == [], missing[:10]


def test_bookmarks_are_the_table_of_contents_in_order(bookmarks):
    """Every page of the toc (the introduction aside, which opens the book) is a
    bookmark, in the order of the toc, each on a page after the previous one;
    the chapters of the numbered parts carry their numbers."""
    top = [(title_, page) for depth, title_, page in bookmarks if depth <= 1]
    found = []
    for name in pages()[1:]:
        matches = [(title_, page) for title_, page in top if title_.endswith(normal(title(name)))]
        assert matches, f"no bookmark for {title(name)!r} in {[t for t, _ in top]}"
        found.append((name, *matches[0]))
    numbers = {name: i for i, name in enumerate(numbered_chapters(), start=1)}
    for name, bookmark, _ in found:
        if name in numbers:
            assert bookmark == f"{numbers[name]} {normal(title(name))}", bookmark
    chapter_pages = [page for _, _, page in found]
    assert chapter_pages == sorted(set(chapter_pages)), f"chapters share pages or are out of order: {found}"


def test_each_chapter_starts_a_page_with_its_number_and_title(pdf_pages, bookmarks):
    numbers = {name: i for i, name in enumerate(numbered_chapters(), start=1)}
    for name, number in numbers.items():
        page = next(page for depth, title_, page in bookmarks if title_ == f"{number} {normal(title(name))}")
        head = pdf_pages[page - 1][:300]
        assert normal(title(name)) in head, f"page {page} does not open with {title(name)!r}: {head!r}"
        assert f"Chapter {number}" in head or f"{number} {normal(title(name))}" in head, head


def test_the_figures_are_in_the_pdf(pdf):
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    images = listing.splitlines()[2:]  # two lines of header
    figures = sum(page.count("<figure") for page in
                  ((course.ROOT / "book" / f"{name}.md").read_text() for name in pages()))
    assert len(images) >= len(numbered_chapters()), listing


def test_the_bibliography_is_in_the_pdf(pdf_pages):
    keys = re.findall(r"^@\w+\{(\w+),", (course.ROOT / "book" / "references.bib").read_text(), re.M)
    start = next(i for i, page in enumerate(pdf_pages) if page.startswith("Bibliography")
                 or " Bibliography " in page[:80] and "Vaswani" in page)
    bibliography = " ".join(pdf_pages[start:])
    for author in ("Bahdanau", "Luong", "Vaswani", "Cho", "Sutskever", "Su"):
        assert author in bibliography, author
    assert bibliography.count("arXiv") + bibliography.count("doi") >= len(keys) // 2


def test_pdf_metadata(pdf):
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    assert fields["Title"].strip() == CONFIG["title"]
    assert int(fields["Pages"]) >= 2 * len(pages())
