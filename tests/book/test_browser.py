"""Every page of the website as a reader sees it, in a real headless Chromium
with no network but the site: no JavaScript error, math typeset and showing
no TeX source, images loaded, internal links that resolve, exercise notebooks
that download, and a screenshot of each page."""

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

from autograder.engine import course
from tests.support import COURSE
from tests.book.toc import pages

# TeX left as text: \( \) \[ \] $$ or $...$ (MathJax replaces typeset math).
RAW_TEX = re.compile(r"\\[()\[\]]|\$\$|\$[^$\s][^$]*\$")

UNTYPESET_MATH = """() => {
    const raw = [];
    for (const node of document.querySelectorAll(".math")) {
        if (!node.querySelector("mjx-container")) raw.push(node.textContent.trim());
    }
    const skip = "pre, code, script, style, textarea, mjx-container";
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
        acceptNode: node => node.parentElement.closest(skip) ? NodeFilter.FILTER_REJECT
                                                              : NodeFilter.FILTER_ACCEPT});
    while (walker.nextNode()) raw.push(walker.currentNode.textContent);
    return raw;
}"""

# The formulas that MathJax typeset but whose typeset text still shows TeX
# source: a backslash in a token (MathJax's text mode prints `\_` in \text{…}
# as it is, and unknown macros as their name) or an error node. Read from the
# MathML of each typeset formula, whatever MathJax's output (CSS or SVG) draws.
TEX_IN_TYPESET_MATH = r"""() => {
    const shown = [];
    for (const item of MathJax.startup.document.math) {
        const mml = new DOMParser().parseFromString(MathJax.startup.toMML(item.root), "application/xml");
        const tokens = ["mi", "mo", "mn", "mtext", "ms"].flatMap(
            name => Array.from(mml.getElementsByTagNameNS("*", name), node => node.textContent));
        if (tokens.some(text => text.includes("\\")) || mml.getElementsByTagNameNS("*", "merror").length)
            shown.push(item.math);
    }
    return shown;
}"""

TYPESET = r"""async formulas => {
    const spans = formulas.map(tex => {
        const span = document.createElement("span");
        span.className = "math";
        span.textContent = "\\(" + tex + "\\)";
        document.body.append(span);
        return span;
    });
    await MathJax.typesetPromise(spans);
}"""

MATHJAX_DONE = """async () => {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
}"""

BROKEN_IMAGES = """() => Array.from(document.images)
    .filter(image => !image.complete || image.naturalWidth === 0)
    .map(image => image.getAttribute("src"))"""

LINKS = "() => Array.from(document.querySelectorAll('a[href]'), a => a.href)"


@dataclass
class Visit:
    """A page opened in the browser, with what went wrong while it loaded."""
    page: object
    errors: list = field(default_factory=list)      # console errors, uncaught exceptions
    outside: list = field(default_factory=list)     # requests that would leave the site
    failed: list = field(default_factory=list)      # requests of the site that failed


def visit(browser, site_url, path, block=None):
    """Open `path` of the site. Requests that would leave it are refused and
    recorded; those whose URL contains `block` are refused too."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    seen = Visit(page)
    page.on("console", lambda message: message.type == "error" and seen.errors.append(message.text))
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    page.on("response", lambda response: response.status >= 400 and seen.failed.append(response.url))

    def handle(route):
        url = route.request.url
        if not url.startswith(site_url):
            seen.outside.append(url)
            route.abort()
        elif block and block in url:
            route.abort()
        else:
            route.continue_()

    page.route("**/*", handle)
    page.goto(site_url + path)
    page.evaluate(MATHJAX_DONE)
    return seen


def untypeset_math(page):
    """TeX that the reader sees as text, not as typeset math."""
    return [text.strip()[:80] for text in page.evaluate(UNTYPESET_MATH) if RAW_TEX.search(text)]


def tex_in_typeset_math(page):
    """The TeX of the typeset formulas that show some of their source."""
    return [tex.strip()[:80] for tex in page.evaluate(TEX_IN_TYPESET_MATH)]


class Ids(HTMLParser):
    def __init__(self, html):
        super().__init__()
        self.ids = set()
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.ids.update(value for name, value in attrs if name in ("id", "name") and value)


def unresolved_links(urls, site, site_url):
    """The internal links among `urls` whose file or fragment does not exist."""
    ids = {}
    broken = []
    for url in sorted(set(urls)):
        if not url.startswith(site_url):
            continue
        parts = urlsplit(url)
        path = site / unquote(parts.path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            broken.append(url)
        elif parts.fragment and path.suffix == ".html":
            if path not in ids:
                ids[path] = Ids(path.read_text(encoding="utf-8")).ids
            if unquote(parts.fragment) not in ids[path]:
                broken.append(url)
    return broken


@pytest.mark.parametrize("name", pages())
def test_page_as_a_reader_sees_it(name, browser, site, site_url, screenshots):
    seen = visit(browser, site_url, f"book/{name}.html")
    page = seen.page
    try:
        # first, so that a page that fails a check can be looked at
        page.screenshot(path=screenshots / f"{name}.jpg", full_page=True, type="jpeg", quality=70)
        assert seen.errors == [], f"JavaScript errors on {name}"
        assert seen.outside == [], f"{name} fetches from outside the site"
        assert seen.failed == [], f"{name} requests files that the site does not have"
        assert untypeset_math(page) == [], f"math of {name} is not typeset"
        assert tex_in_typeset_math(page) == [], f"typeset math of {name} shows TeX source"
        assert page.evaluate(BROKEN_IMAGES) == [], f"images of {name} do not load"
        assert unresolved_links(page.evaluate(LINKS), site, site_url) == [], f"broken links on {name}"
        if name in course.assignments(COURSE):
            assert downloaded_exercise(page, name) == nbformat.read(COURSE.exercises / f"{name}.ipynb", as_version=4)
    finally:
        page.close()


def downloaded_exercise(page, slug):
    """The notebook that the exercise button of chapter `slug` downloads, validated."""
    with page.expect_download() as download:
        page.click("a.exercise-download")
    assert download.value.suggested_filename == f"{slug}.ipynb"
    notebook = nbformat.read(download.value.path(), as_version=4)
    nbformat.validate(notebook)
    return notebook


def test_the_math_check_fails_without_mathjax(browser, site_url):
    seen = visit(browser, site_url, "book/scaled_dot_product.html", block="/mathjax/")
    try:
        raw = untypeset_math(seen.page)
    finally:
        seen.page.close()
    assert any(r"\sqrt{d_k}" in text for text in raw), raw


def test_the_tex_source_check_fails_on_source_left_in_typeset_math(browser, site_url):
    """`\\_` is an underscore in math mode but not in MathJax's text mode, where
    LaTeX reads it (the book's PDF is right either way); unknown macros show."""
    seen = visit(browser, site_url, "book/training.html")
    try:
        seen.page.evaluate(TYPESET, [r"\text{warmup\_steps}", r"\mathrm{warmup\_steps}", r"\nosuchmacro x",
                                     r"\frac{1}{\sqrt{d_k}}"])
        shown = tex_in_typeset_math(seen.page)
    finally:
        seen.page.close()
    assert shown == [r"\text{warmup\_steps}", r"\nosuchmacro x"]


def test_search_finds_the_chapters(browser, site_url):
    seen = visit(browser, site_url, "search.html?q=softmax")
    try:
        results = seen.page.locator("#search-results ul.search li a")
        # Sphinx's search shows its results one by one: wait for the one the test looks for
        seen.page.locator("#search-results ul.search li a[href*='scaled_dot_product']").first.wait_for()
        found = results.evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert seen.errors == []
    finally:
        seen.page.close()
    assert any("scaled_dot_product" in href for href in found), found
