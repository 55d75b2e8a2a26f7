"""The website for readers who use assistive technology (WCAG 2.1 AA): axe-core
finds no serious or critical violation on any page, in the light and the dark
theme; the math is readable by screen readers; a chapter's exercise notebook
can be reached and downloaded with the keyboard alone, with the focus visible;
the figures' colours can be told apart by colour-blind readers."""

import re
from pathlib import Path

import nbformat
import pydata_sphinx_theme
import pytest

from autograder.engine import course
from tests.support import COURSE
from tests.book.test_browser import visit
from tests.book.toc import code_cells, pages

AXE = COURSE.root / "tests" / "book" / "node_modules" / "axe-core" / "axe.min.js"
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING_IMPACTS = {"serious", "critical"}

# Colours change with a transition (buttons) after the theme switches or the
# focus moves: what is checked is where they end.
TRANSITIONS_ENDED = """() => Promise.all(document.getAnimations()
    .filter(animation => animation instanceof CSSTransition).map(animation => animation.finished))"""

RUN_AXE = """async tags => {
    const results = await axe.run(document, {runOnly: {type: "tag", values: tags},
                                             resultTypes: ["violations"]});
    return results.violations.map(v => ({rule: v.id, impact: v.impact, help: v.help,
                                         targets: v.nodes.map(node => node.target.join(" "))}));
}"""


def axe_violations(page):
    """axe-core's serious and critical WCAG 2.0/2.1 A and AA violations on `page`."""
    assert AXE.is_file(), f"{AXE} is missing: `make test` installs it (npm ci --prefix tests/book)"
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=AXE)
    return [v for v in page.evaluate(RUN_AXE, WCAG_AA) if v["impact"] in FAILING_IMPACTS]


def report(violations, where):
    lines = [f"{v['rule']} ({v['impact']}) on {where} ({v['theme']} theme): {v['help']}; "
             + ", ".join(v["targets"][:5]) + (" ..." if len(v["targets"]) > 5 else "")
             for v in violations]
    return "accessibility violations:\n" + "\n".join(lines)


@pytest.mark.parametrize("name", pages())
def test_page_has_no_serious_accessibility_violation(name, browser, site_url):
    """Checked in the light theme, then in the dark one, which the site takes
    from the reader's system (as the page is loaded once, the switch is quicker)."""
    seen = visit(browser, site_url, f"book/{name}.html")
    violations = []
    try:
        for theme in ("light", "dark"):
            seen.page.emulate_media(color_scheme=theme)
            seen.page.wait_for_function("theme => document.documentElement.dataset.theme === theme", arg=theme)
            seen.page.evaluate(TRANSITIONS_ENDED)
            violations += [dict(v, theme=theme) for v in axe_violations(seen.page)]
    finally:
        seen.page.close()
    assert violations == [], report(violations, f"book/{name}.html")


def test_axe_reports_what_it_should(browser, site_url):
    """The check can fail: a page given an image without alt text and a
    low-contrast paragraph fails it, with the rules named."""
    seen = visit(browser, site_url, "book/intro.html")
    try:
        seen.page.evaluate("""() => {
            const article = document.querySelector("article");
            article.insertAdjacentHTML("afterbegin",
                '<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">'
                + '<p style="color: #bbb; background: #fff">faint text</p>');
        }""")
        violations = [dict(v, theme="light") for v in axe_violations(seen.page)]
    finally:
        seen.page.close()
    assert {"image-alt", "color-contrast"} <= {v["rule"] for v in violations}, violations
    message = report(violations, "book/intro.html")
    assert re.search(r"^image-alt \(critical\) on book/intro\.html \(light theme\): .+; img$", message, re.M), message


def test_math_is_readable_by_screen_readers(browser, site_url):
    """MathJax adds MathML beside each typeset formula, which screen readers read."""
    seen = visit(browser, site_url, "book/scaled_dot_product.html")
    try:
        containers = seen.page.locator("mjx-container").count()
        assistive = seen.page.locator("mjx-container mjx-assistive-mml > math").count()
        sqrt = seen.page.locator("mjx-assistive-mml msqrt").count()
    finally:
        seen.page.close()
    assert containers > 10 and assistive == containers and sqrt > 0, (containers, assistive, sqrt)


# The focused element, and whether an outline or a shadow that is not
# transparent marks it.
FOCUSED = """() => {
    const element = document.activeElement;
    const style = getComputedStyle(element);
    const seen = colour => !/^rgba\\(.*, 0\\)$|^transparent$/.test(colour);
    const outline = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0 && seen(style.outlineColor);
    const shadows = style.boxShadow === "none" ? [] : style.boxShadow.match(/rgba?\\([^)]*\\)/g) || [];
    return {classes: Array.from(element.classList), text: element.textContent.trim(),
            marked: outline || shadows.some(seen)};
}"""


@pytest.mark.parametrize("slug", course.assignments(COURSE)[:1])
def test_keyboard_alone_reaches_and_downloads_the_exercise(slug, browser, site_url):
    """From the top of a chapter, Tab reaches the exercise button, every
    focused element is visibly marked, and Enter downloads the notebook."""
    seen = visit(browser, site_url, f"book/{slug}.html")
    page = seen.page
    try:
        path = []
        for _ in range(400):
            page.keyboard.press("Tab")
            page.evaluate(TRANSITIONS_ENDED)
            focused = page.evaluate(FOCUSED)
            path.append(focused)
            if "exercise-download" in focused["classes"]:
                break
        else:
            pytest.fail(f"Tab never reaches the exercise button of {slug}: {[f['text'][:30] for f in path[-10:]]}")
        invisible = [f["text"][:40] or f["classes"] for f in path if not f["marked"]]
        assert invisible == [], f"focus not visible on {invisible}"
        with page.expect_download() as download:
            page.keyboard.press("Enter")
        assert download.value.suggested_filename == f"{slug}.ipynb"
        got = nbformat.read(download.value.path(), as_version=4)
    finally:
        page.close()
    assert got == nbformat.read(COURSE.exercises / f"{slug}.ipynb", as_version=4)


# Colour maps that colour-blind readers read: perceptually uniform, grey, or
# the diverging RdBu; each with a colour bar or the values written in the
# cells, except grey (masks, whose caption says what dark means).
READABLE_MAPS = {"viridis", "cividis", "Greys", "RdBu_r"}


def test_figures_use_colours_that_colour_blind_readers_tell_apart():
    for chapter in sorted((COURSE.root / "book").glob("*.md")):
        text = chapter.read_text(encoding="utf-8")
        if "matplotlib" in text:
            assert 'plt.style.use("tableau-colorblind10")' in text, f"{chapter.name}: default colour cycle"
        for cell in code_cells(text):
            for cmap in re.findall(r"cmap=\"([^\"]+)\"", cell):
                assert cmap in READABLE_MAPS, f"{chapter.name}: colour map {cmap}"
                if cmap != "Greys":
                    assert "colorbar(" in cell or "ax.text(" in cell, f"{chapter.name}: {cmap} without values"


# What book/_templates removes from pydata-sphinx-theme's templates of the same name.
REMOVED_FROM_THEME = {
    "search-button-field.html": r""" aria-label="\{\{ _\('Search'\) \}\}\"""",
    "theme-switcher.html": r"""\s+title="\{\{ _\('(Light|Dark|System Settings)'\) \}\}\"""",
}


def test_the_overridden_theme_templates_differ_from_the_theme_only_there():
    """So that an upgrade of the theme that changes them fails here, not silently."""
    components = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "components"

    def markup(text):
        return " ".join(re.sub(r"\{#.*?#\}", "", text, flags=re.S).split())

    for name, removed in REMOVED_FROM_THEME.items():
        theme = (components / name).read_text(encoding="utf-8")
        ours = (COURSE.root / "book" / "_templates" / name).read_text(encoding="utf-8")
        assert re.search(removed, theme), f"{name}: the theme no longer has what we remove"
        assert markup(ours) == markup(re.sub(removed, "", theme)), name
