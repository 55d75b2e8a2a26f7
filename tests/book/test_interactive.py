"""The figures to play with (book/_ext/interactive.py), in a headless Chromium
with no network but the site: each renders from the site's own Vega bundle,
has its alt text and labelled controls, and answers the keyboard; the
sampling figure keeps the characters that ``filter_logits`` keeps; and each
is as legible as the static figures must be (book/_ext/figure_check.py), read
from the chart the browser drew, in the light and the dark theme."""

import re
import subprocess
import sys

import numpy as np
import pytest
from bs4 import BeautifulSoup

from solutions.language_model import filter_logits, load_course_model
from tests.book.test_browser import visit
from tests.book.test_pdf import letters, normal, pdf, pdf_pages  # noqa: F401 (fixtures)
from tests.support import COURSE

sys.path.insert(0, str(COURSE.root / "book" / "_ext"))
import figure_check  # noqa: E402

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


# -- legibility: the rules of the static figures (book/_ext/figure_check.py), on the drawn chart ------

MIN_TEXT_PX = figure_check.MIN_TEXT_SHARE * figure_check.BODY_PX   # as the static figures' text
MIN_GRAPHIC_CONTRAST = 3.0   # WCAG 1.4.11: a series' line, point or bar, a legend's symbol
MIN_TEXT_CONTRAST = 4.5      # WCAG 1.4.3: axis, legend and title text

# What a figure draws, as the reader's browser drew it: each colour an [r, g, b, alpha] with the
# opacities of the element and its groups folded into alpha; sizes in CSS pixels on the page.
LEGIBILITY = """figure => {
    const svg = figure.querySelector("svg");
    const scale = svg.getBoundingClientRect().width / svg.width.baseVal.value;
    const rgba = text => {
        const found = text && text.match(/rgba?\\(([^)]+)\\)/);
        if (!found) return null;
        const [r, g, b, a = 1] = found[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
        return a > 0 ? [r, g, b, a] : null;
    };
    const opacity = element => {
        let product = 1;
        for (let node = element; node && node !== svg.parentElement; node = node.parentElement)
            product *= Number(getComputedStyle(node).opacity);
        return product;
    };
    // The chart's background (Vega-Embed's on the <svg>), the page's under it if it has none.
    const background = [];
    for (let node = svg; node; node = node.parentElement) {
        const colour = rgba(getComputedStyle(node).backgroundColor);
        if (colour) { background.unshift(colour); if (colour[3] === 1) break; }
    }
    background.unshift([255, 255, 255, 1]);   // the canvas, under everything
    const paints = element => {
        const style = getComputedStyle(element), alpha = opacity(element), found = [];
        const stroke = rgba(style.stroke), fill = rgba(style.fill);
        if (stroke && parseFloat(style.strokeWidth) > 0)
            found.push([...stroke.slice(0, 3), stroke[3] * Number(style.strokeOpacity) * alpha]);
        if (fill && element.tagName !== "line")
            found.push([...fill.slice(0, 3), fill[3] * Number(style.fillOpacity) * alpha]);
        return found;
    };
    const drawn = element => {   // what the reader sees (Vega hides overlapping labels with opacity 0)
        const box = element.getBBox();
        return getComputedStyle(element).display !== "none" && opacity(element) > 0 && (box.width > 0 || box.height > 0);
    };
    const items = selector => Array.from(svg.querySelectorAll(selector)).filter(drawn)
        .map(element => ({where: element.parentElement.getAttribute("class"), paints: paints(element)}));
    return {
        background,
        series: items(".role-mark:not(.mark-text) > :is(path, line, rect)"),
        symbols: items(".role-legend-symbol path"),
        texts: Array.from(svg.querySelectorAll("text")).filter(drawn).map(text => ({
            text: text.textContent, role: text.parentElement.getAttribute("class"),
            px: parseFloat(getComputedStyle(text).fontSize) * scale, paints: paints(text)})),
        axes: Array.from(svg.querySelectorAll(".role-axis"), axis => ({
            title: (axis.querySelector(".role-axis-title text") || {}).textContent || "",
            labels: Array.from(axis.querySelectorAll(".role-axis-label text")).filter(drawn).map(label => label.textContent),
        })).filter(axis => axis.labels.length),
    };
}"""


def composite(layers):
    """The colour that [r, g, b, alpha] layers give, drawn in order over one another."""
    r, g, b = 0.0, 0.0, 0.0
    for *colour, alpha in layers:
        r, g, b = (alpha * c + (1 - alpha) * under for c, under in zip(colour, (r, g, b)))
    return r, g, b


def luminance(rgb):
    """WCAG 2's relative luminance of an sRGB colour (0–255 channels)."""
    linear = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(paint, background):
    """WCAG 2's contrast ratio of `paint` ([r, g, b, alpha]) drawn over the `background` layers."""
    under = composite(background)
    lighter, darker = sorted((luminance(composite([*background, paint])), luminance(under)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def tick_format(label):
    """How a tick label writes its number: scientific (1e-8), plain (0.000001, 20) or not a number."""
    label = label.replace("−", "-").strip()
    if re.fullmatch(r"[-+]?\d+(\.\d+)?[eE][-+]?\d+", label):
        return "scientific"
    return "plain" if re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)%?", label.replace(",", "")) else "text"


def legibility_problems(drawn):
    """What makes a drawn chart (LEGIBILITY's answer) hard to read, in sentences."""
    found = []
    background = drawn["background"]
    for kind, items in (("series", drawn["series"]), ("legend symbol", drawn["symbols"])):
        for item in items:
            best = max((contrast(paint, background) for paint in item["paints"]), default=0)
            if best < MIN_GRAPHIC_CONTRAST:
                found.append(f"a {kind} ({item['where']}) has a contrast of {best:.2f} with the background, "
                             f"less than {MIN_GRAPHIC_CONTRAST:g}")
    for text in drawn["texts"]:
        if text["px"] < MIN_TEXT_PX - 1e-6:
            found.append(f"text {text['text']!r} is {text['px']:.1f} px, less than {MIN_TEXT_PX:.1f} px")
        if "role-mark" not in text["role"]:   # a mark's own text may sit on a mark (the alignment's cells)
            best = max((contrast(paint, background) for paint in text["paints"]), default=0)
            if best < MIN_TEXT_CONTRAST:
                found.append(f"text {text['text']!r} has a contrast of {best:.2f} with the background, "
                             f"less than {MIN_TEXT_CONTRAST:g}")
    for axis in drawn["axes"]:
        formats = {tick_format(label) for label in axis["labels"]}
        if {"scientific", "plain"} <= formats:
            found.append(f"the axis {axis['title']!r} writes its ticks in two formats: {', '.join(axis['labels'])}")
    return found


def set_theme(page, theme):
    page.emulate_media(color_scheme=theme)
    page.wait_for_function("theme => document.documentElement.dataset.theme === theme", arg=theme)


@pytest.mark.parametrize("name", FIGURES)
def test_the_figure_is_legible_in_both_themes(name, browser, site_url):
    """Every series and legend symbol stands out from the background, its text is as large as the
    static figures' and stands out too, and each axis writes its ticks in one format."""
    seen = open_figures(browser, site_url, name)
    found = {}
    try:
        for theme in ("light", "dark"):
            set_theme(seen.page, theme)
            drawn = seen.page.locator("div.interactive-figure").evaluate(LEGIBILITY)
            assert drawn["series"] and drawn["texts"] and drawn["axes"], drawn
            found[theme] = legibility_problems(drawn)
    finally:
        seen.page.close()
    assert found == {"light": [], "dark": []}


# The FlashAttention stepper as issue 38 found it: the blocks ahead faded (and the legend's symbols with
# them), a fourth query in light grey, the distance axis in d3's default format, and small text.
ILLEGIBLE = {
    "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
    "config": {"background": "white", "axis": {"labelFontSize": 9}},
    "data": {"values": [{"block": b, "query": q, "value": 10.0 ** -(2 * b) * (i + 1)}
                        for b in range(1, 9) for i, q in enumerate(["q1", "q2", "q3", "q4"])]},
    "layer": [{"mark": {"type": "line", "strokeDash": [2, 3], "opacity": 0.35}},
              {"mark": {"type": "line", "point": True}, "transform": [{"filter": "datum.block <= 2"}]}],
    "encoding": {"x": {"field": "block", "type": "quantitative"},
                 "y": {"field": "value", "type": "quantitative", "scale": {"type": "log"},
                       "title": "distance to exact output"},
                 "color": {"field": "query", "type": "nominal",
                           "scale": {"range": ["#006BA4", "#FF800E", "#595959", "#ABABAB"]}}},
}
DRAW = """async ([spec, rules]) => {
    const figure = document.createElement("div");
    figure.className = "illegible-figure";
    document.querySelector("div.interactive-figure").after(figure);
    await vegaEmbed(figure, spec, {actions: false, renderer: "svg", mode: "vega-lite"});
    return eval(rules)(figure);
}"""


def test_the_legibility_check_finds_what_issue_38_found(browser, site_url):
    seen = open_figures(browser, site_url, "efficient_attention")
    try:
        found = legibility_problems(seen.page.evaluate(DRAW, [ILLEGIBLE, LEGIBILITY]))
        set_theme(seen.page, "dark")
        # a chart without a background of its own is read against the page's, which the theme sets
        transparent = seen.page.evaluate(DRAW, [{**ILLEGIBLE, "config": {"background": "transparent"}}, LEGIBILITY])
        page_background = seen.page.evaluate(
            "() => getComputedStyle(document.querySelector('div.interactive-figure').closest('.output')).backgroundColor")
    finally:
        seen.page.close()
    text = "\n".join(found)
    assert re.search(r"a legend symbol .* contrast of 1\.\d\d", text), text          # faded symbols
    assert re.search(r"a series \(mark-line role-mark.*contrast of 1\.\d\d", text), text   # grey q4, faded lines
    assert re.search(r"the axis 'distance to exact output' .*1e-8, 0\.000001", text), text
    assert re.search(r"text '[^']+' is 9\.0 px, less than 12\.8 px", text), text
    assert composite(transparent["background"]) == tuple(map(float, re.findall(r"\d+", page_background)))
    assert composite(transparent["background"]) != (255, 255, 255)   # the dark theme's, not white
