"""The figures to play with (book/_ext/interactive.py), in a headless Chromium
with no network but the site: each renders from the site's own Vega bundle,
has its alt text and labelled controls, and answers the keyboard; the
sampling figure keeps the characters that ``filter_logits`` keeps."""

import re
import subprocess

import numpy as np
import pytest
from bs4 import BeautifulSoup

from solutions.language_model import filter_logits, load_course_model
from tests.book.test_browser import visit
from tests.book.test_pdf import letters, normal, pdf, pdf_pages  # noqa: F401 (fixtures)

# Each interactive figure: its page, and the names of its controls.
FIGURES = {
    "bahdanau": ["Target word"],
    "scaled_dot_product": ["log₂ d_k"],
    "positional_encoding": ["offset k"],
    "language_model": ["temperature τ", "top-k: k", "nucleus: p"],
    "efficient_attention": ["key blocks seen"],
}
PROMPT = "The attention weights "   # the language-model chapter's prompt

DRAWN = """() => Array.from(document.querySelectorAll("div.interactive-figure"), figure => ({
    ready: figure.classList.contains("interactive-ready"),
    alt: (figure.querySelector("[role=graphics-document]") || {}).ariaLabel || "",
    marks: figure.querySelectorAll("svg .role-mark path, svg .role-mark rect, svg .role-mark line").length,
    names: Array.from(figure.querySelectorAll(".vega-bind-name"), name => name.textContent.trim()),
    controls: Array.from(figure.querySelectorAll("input, select"), input => ({
        type: input.type,
        label: Array.from(input.labels, label => label.textContent).join(" ").trim(),
        group: (input.closest("[role=radiogroup]") || {}).ariaLabel || "",
    })),
}))"""


def open_figures(browser, site_url, name):
    seen = visit(browser, site_url, f"book/{name}.html")
    seen.page.wait_for_function("""() => {
        const figures = document.querySelectorAll("div.interactive-figure");
        return figures.length && Array.from(figures).every(f => f.classList.contains("interactive-ready"));
    }""", timeout=30_000)
    return seen


def drawing(page):
    return page.locator("div.interactive-figure svg").first.inner_html()


@pytest.mark.parametrize("name", FIGURES)
def test_the_figure_renders_offline_with_alt_text_and_labelled_controls(name, browser, site_url):
    seen = open_figures(browser, site_url, name)
    try:
        figures = seen.page.evaluate(DRAWN)
        scripts = seen.page.evaluate("() => Array.from(document.scripts, s => s.src).filter(Boolean)")
        assert seen.errors == [] and seen.outside == [] and seen.failed == []
    finally:
        seen.page.close()
    assert len(figures) == 1, figures
    figure = figures[0]
    assert figure["marks"] > 5, "the chart drew nothing"
    assert figure["alt"].startswith("Interactive") and len(figure["alt"]) > 60, figure["alt"]
    assert figure["names"] == FIGURES[name], figure["names"]
    for control in figure["controls"]:   # a slider's label: its name, then its value
        assert control["label"], figure["controls"]
        if control["type"] == "range":
            assert re.sub(r"[\d.]+$", "", control["label"]).strip() in FIGURES[name], control
        else:
            assert control["group"] in FIGURES[name], control
    assert any(src.startswith(site_url) and src.split("?")[0].endswith("/_static/vega-bundle.js")
               for src in scripts), scripts


@pytest.mark.parametrize("name", FIGURES)
def test_each_control_changes_the_figure_from_the_keyboard(name, browser, site_url):
    seen = open_figures(browser, site_url, name)
    page = seen.page
    try:
        controls = page.locator("div.interactive-figure input")
        kinds = set()
        for i in range(controls.count()):
            control = controls.nth(i)
            kinds.add(control.get_attribute("type"))
            if control.get_attribute("type") == "radio" and i > 0:
                continue  # one group: arrows move between its buttons
            before = drawing(page)
            control.focus()
            assert page.evaluate("() => document.activeElement.closest('.interactive-figure') !== null")
            # a range slider starts at either end: one of the two directions moves it
            page.keyboard.press("ArrowRight" if control.get_attribute("type") == "radio" else "Home")
            page.keyboard.press("ArrowRight")
            page.wait_for_timeout(200)
            assert drawing(page) != before, f"{name}: control {i} did not change the figure"
        assert seen.errors == []
    finally:
        page.close()
    assert kinds <= {"range", "radio"}, kinds


def kept_count(page):
    text = page.locator("div.interactive-figure svg text", has_text="characters kept").text_content()
    return int(text.rsplit(":", 1)[1])


def set_slider(page, name, steps_from_start):
    slider = page.locator(f"div.interactive-figure input[name={name}]")
    slider.focus()
    page.keyboard.press("Home")
    for _ in range(steps_from_start):
        page.keyboard.press("ArrowRight")
    return float(slider.input_value())


def test_the_sampling_figure_keeps_what_filter_logits_keeps(browser, site_url):
    """Its filters run in the browser, in Vega expressions: they must be the course's."""
    logits = load_course_model().next_token_logits(PROMPT)
    seen = open_figures(browser, site_url, "language_model")
    page = seen.page
    shown = {}
    try:
        for steps in ((0, 4, 19), (18, 94, 11), (8, 9, 17), (38, 2, 19), (4, 94, 8)):
            temperature, top_k, top_p = (set_slider(page, name, n)
                                         for name, n in zip(("temperature", "top_k", "top_p"), steps))
            page.wait_for_timeout(100)
            shown[temperature, top_k, top_p] = kept_count(page)
    finally:
        page.close()
    expected = {(t, k, p): int(np.isfinite(filter_logits(logits / t, int(k), p)).sum()) for t, k, p in shown}
    assert shown == expected
    assert len(set(expected.values())) > 2, expected  # settings that keep different numbers


def test_each_interactive_figure_is_a_captioned_figure_and_a_frame_in_the_pdf(site, pdf, pdf_pages):
    """On the site, in a numbered <figure> with its caption; in the PDF, its caption on a page with an image."""
    captions = []
    for name in FIGURES:
        page = BeautifulSoup((site / "book" / f"{name}.html").read_text(encoding="utf-8"), "html.parser")
        figures = page.select("div.interactive-figure")
        assert len(figures) == 1, name
        figure = figures[0].find_parent("figure")
        assert figure is not None and figure.figcaption is not None, name
        caption = normal(figure.figcaption.get_text(" ", strip=True))
        assert "Interactive:" in caption, caption
        captions.append(caption.split("Interactive:", 1)[1].strip()[:30])
        assert not page.select("div.interactive-figure img"), "the PNG frame is for the PDF only"
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    image_pages = {int(line.split()[0]) for line in listing.splitlines()[2:]}
    for caption in captions:
        found = [number for number, text in enumerate(pdf_pages, start=1)
                 if letters(f"Interactive: {caption}") in letters(text)]   # line breaks, hyphens aside
        assert found, f"no caption {caption!r} in the PDF"
        assert set(found) & image_pages, f"no image on the page of {caption!r} in the PDF"
