"""The book as one PDF (built with the website, book/_ext/book_pdf.py): every
page of the toc in order, each chapter with its number and a page of its own,
the table of contents as bookmarks, math typeset (no LaTeX or MathJax source
left in the text), the figures, the bibliography, and a link from the site.

Read back with Debian's poppler-utils (pdftotext, pdfinfo, pdfimages) and
qpdf (the bookmarks), which `make test` installs."""

import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

from tests.support import COURSE
from tests.book.conftest import BUILD
from tests.book.test_build import mini_book
from tests.book.toc import numbered_chapters, pages, title

CONFIG = yaml.safe_load((COURSE.root / "_config.yml").read_text())
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
    for source in ("\\frac", "\\begin", "\\end{", "\\mathbf", "\\sqrt", "\\_", "$$", "\\(", "\\[", "{eq}", "{glue",
                   "```", ":::"):
        assert source not in text, f"untypeset source {source!r} in the PDF's text"


def test_the_unicode_that_the_site_shows_comes_out(site, pdf_pages):
    """Every non-ASCII character a page shows as text (Greek, ⊙, √, ≤, arrows,
    quotes, accents) is in the PDF's text too: XeLaTeX and its fonts keep them."""
    text = " ".join(pdf_pages)
    for name in pages():
        article = BeautifulSoup((site / "book" / f"{name}.html").read_text(encoding="utf-8"),
                                "html.parser").select_one("article")
        # what the PDF leaves out (folded code) or writes otherwise (math, the site's buttons)
        for hidden in article.select("div.tag_hide-input div.cell_input, div.tag_hide-cell, .math, "
                                     "a.headerlink, script, style, button"):
            hidden.decompose()
        shown = {character for character in normal(article.get_text()) if ord(character) > 127}
        missing = sorted(character for character in shown if character not in text)
        assert not missing, f"{name}: {missing} are not in the PDF"


def test_no_glyph_is_missing_from_the_fonts(site):
    log = (site.parent / "latex" / PDF_NAME).with_suffix(".log").read_text(encoding="utf-8", errors="replace")
    missing = re.findall(r"Missing character: There is no .*", log)
    assert missing == [], missing[:10]


def chapter_pages(bookmarks):
    """{name: (first page, last page)} of every page of the toc but the
    introduction (which opens the book), from its bookmark."""
    top = [(title_, page) for depth, title_, page in bookmarks if depth <= 1]
    starts = {}
    for name in pages()[1:]:
        matches = [page for title_, page in top if title_.endswith(normal(title(name)))]
        assert matches, f"no bookmark for {title(name)!r} in {[t for t, _ in top]}"
        starts[name] = matches[0]
    ends = [page - 1 for page in list(starts.values())[1:]] + [sys.maxsize]  # the last runs to the end
    return {name: (start, end) for (name, start), end in zip(starts.items(), ends)}


def test_bookmarks_are_the_table_of_contents_in_order(bookmarks):
    """Every page of the toc is a bookmark, in the order of the toc, each on a
    page after the previous one; the chapters of the numbered parts carry
    their numbers, the others (Notation, Bibliography) none, as on the website."""
    starts = [start for start, _ in chapter_pages(bookmarks).values()]
    assert starts == sorted(set(starts)), f"chapters share pages or are out of order: {bookmarks}"
    top = {title_ for depth, title_, _ in bookmarks if depth <= 1}
    for number, name in enumerate(numbered_chapters(), start=1):
        assert f"{number} {normal(title(name))}" in top, (name, top)
    for name in set(pages()[1:]) - set(numbered_chapters()):  # unnumbered, as on the website
        assert normal(title(name)) in top, (name, top)


def test_each_chapter_opens_a_page_and_carries_its_number(pdf_pages, bookmarks):
    chapters = chapter_pages(bookmarks)
    for number, name in enumerate(numbered_chapters(), start=1):
        first, last = chapters[name]
        assert normal(title(name)).lower() in pdf_pages[first - 1][:300].lower(), \
            f"page {first} does not open {title(name)!r}: {pdf_pages[first - 1][:300]!r}"
        # the running head of the chapter's pages: "Chapter 3. Luong attention"
        assert any(f"Chapter {number}. {normal(title(name))}" in page for page in pdf_pages[first - 1:last]), name


def test_each_chapter_has_its_figures(pdf, bookmarks):
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    image_pages = [int(line.split()[0]) for line in listing.splitlines()[2:]]  # after two lines of header
    for name, (first, last) in chapter_pages(bookmarks).items():
        if name in numbered_chapters():
            assert any(first <= page <= last for page in image_pages), f"{name} has no figure in the PDF"


def letters(text):
    """Lower-case letters and digits only: line breaks and hyphenation aside."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def test_the_bibliography_lists_every_paper(pdf, bookmarks):
    first, _ = chapter_pages(bookmarks)["bibliography"]
    # In the order LaTeX wrote it (-raw): pdftotext's layout order sets a wide label's lines apart
    # ("[KimiTeam25]" split a title around the next entry's lines).
    raw = subprocess.run(["pdftotext", "-raw", "-enc", "UTF-8", "-f", str(first), str(pdf), "-"],
                         capture_output=True, text=True, check=True).stdout
    bibliography = letters(normal(raw))
    titles = re.findall(r"^\s*title\s*=\s*[{\"](.+?)[}\"],?\s*$", (COURSE.root / "book" / "references.bib").read_text(),
                        re.M | re.I)
    assert titles
    for paper in titles:
        assert letters(paper) in bibliography, paper


def test_title_and_fonts(pdf):
    """The PDF's title is the course's; the math is set in a math font (TeX,
    not MathJax); every font is embedded, so the PDF prints anywhere."""
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    assert fields["Title"].strip() == CONFIG["title"]
    assert int(fields["Pages"]) >= 2 * len(pages())
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in fonts.splitlines()[2:]]  # after two lines of header
    assert any("Math" in row[0] for row in rows), fonts
    # columns: name, type (one or two words), encoding, emb, sub, uni, object, ID
    assert all(row[-5] == "yes" for row in rows), fonts


def test_a_latex_error_fails_the_build(tmp_path):
    book = mini_book(tmp_path, "print(1)", pdf=True)
    with (book / "chapter.md").open("a") as chapter:
        chapter.write("\n```{raw} latex\n\\UndefinedCommandOfTheTest\n```\n")
    result = subprocess.run([*BUILD, str(book)], capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "the PDF build failed" in output, output[-3000:]
    assert "UndefinedCommandOfTheTest" in output
    assert not (book / "_build" / "pdf").exists()
