"""Clean pages (issue 30): the chapters show the ideas, not the build's
plumbing; printed output comes in one box; every display equation and code
block fits its column or scrolls on its own, on a laptop and on a phone; and
the figure check of book/_ext/figure_check.py knows the page it checks for."""

import re
import sys

import pytest
from bs4 import BeautifulSoup

from tests.support import COURSE
from tests.book.test_browser import visit
from tests.book.toc import pages

sys.path.insert(0, str(COURSE.root / "book" / "_ext"))
import figure_check  # noqa: E402

# What only the build needs: glued numbers, checks of the text's claims, saved files.
PLUMBING = re.compile(r"\bglue\(|^\s*assert\b|\.savefig\(", re.M)

# The display equations and code blocks that reach past their column and do
# not scroll on their own: a reader would find them cut off.
CLIPPED = """() => {
    const column = document.querySelector("article.bd-article").getBoundingClientRect();
    const clipped = [];
    for (const block of document.querySelectorAll('div.math, mjx-container[display="true"], pre')) {
        const box = block.getBoundingClientRect();
        if (box.width === 0) continue;                       // folded away
        const style = getComputedStyle(block);
        const scrolls = ["auto", "scroll"].includes(style.overflowX);
        const wider = block.scrollWidth > block.clientWidth + 1;
        if ((wider && !scrolls) || box.right > column.right + 1 || box.left < column.left - 1)
            clipped.push(`${block.tagName.toLowerCase()}.${block.className}: ${block.textContent.trim().slice(0, 60)}`);
    }
    return clipped;
}"""

# The width that an image may take in a chapter's cell output, and the body's font size.
COLUMN = """() => {
    const output = document.querySelector("div.cell_output");
    const probe = document.createElement("div");
    probe.style.width = "100000px";
    probe.style.maxWidth = "100%";
    output.append(probe);
    const width = probe.getBoundingClientRect().width;
    probe.remove();
    return [width, parseFloat(getComputedStyle(document.querySelector("article p")).fontSize)];
}"""


def soup(site, name):
    return BeautifulSoup((site / "book" / f"{name}.html").read_text(encoding="utf-8"), "html.parser")


@pytest.mark.parametrize("name", pages())
def test_no_plumbing_is_shown(site, name):
    """Glue, asserts and saving files live in removed cells: not even folded code shows them."""
    shown = [cell.get_text() for cell in soup(site, name).select("div.cell div.cell_input")]
    assert [code[:200] for code in shown if PLUMBING.search(code)] == [], f"{name} shows plumbing"


@pytest.mark.parametrize("name", pages())
def test_printed_output_is_one_box(site, name):
    for cell in soup(site, name).select("div.cell_output"):
        streams = [output for output in cell.find_all("div", recursive=False)
                   if {"stream", "stderr"} & set(output.get("class", []))]
        kinds = [tuple(sorted(output["class"])) for output in streams]
        assert len(kinds) == len(set(kinds)), f"{name}: printed output cut into boxes: {cell.get_text()[:200]}"


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("name", pages())
def test_equations_and_code_stay_within_reach(browser, site_url, name, width):
    seen = visit(browser, site_url, f"book/{name}.html")
    try:
        seen.page.set_viewport_size({"width": width, "height": 900})
        seen.page.wait_for_timeout(200)                     # MathJax re-lays out on resize
        assert seen.page.evaluate(CLIPPED) == [], f"{name} at {width} px"
    finally:
        seen.page.close()


def test_the_clipping_check_finds_a_wide_equation_that_does_not_scroll(browser, site_url):
    """Section 12.7's equation, wider than a phone, once it no longer scrolls on its own."""
    seen = visit(browser, site_url, "book/efficient_attention.html")
    try:
        seen.page.set_viewport_size({"width": 390, "height": 900})
        seen.page.add_style_tag(content="div.math, div.math mjx-container { overflow: visible !important }")
        clipped = seen.page.evaluate(CLIPPED)
    finally:
        seen.page.close()
    assert any("dV+=P⊤dO" in block for block in clipped), clipped


def test_the_figure_check_measures_the_column_of_the_site(browser, site_url):
    seen = visit(browser, site_url, "book/scaled_dot_product.html")
    try:
        column, body = seen.page.evaluate(COLUMN)
    finally:
        seen.page.close()
    assert abs(column - figure_check.COLUMN_PX) <= 2 and body == figure_check.BODY_PX, (column, body)
