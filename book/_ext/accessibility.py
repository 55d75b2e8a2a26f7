"""Two fixes to the HTML of the pages' bodies, for readers who use assistive
technology (WCAG 2.1 AA; tests/book/test_accessibility.py runs axe-core on
every page):

- myst-nb names the summary of a folded cell "Toggle hidden content", which
  is not its visible text ("Show code cell source"): a reader who says what
  they see to voice control cannot click it (WCAG 2.5.3, label in name). The
  summary's name becomes its visible text.
- docutils marks each entry of the bibliography's list with the deprecated
  role ``doc-biblioentry``, which is not a list item, so the list is broken
  for screen readers. Each entry becomes a ``listitem``.

(The theme's search and colour-mode buttons are fixed in book/_templates.)
"""

FIXES = {
    '<summary aria-label="Toggle hidden content">': "<summary>",
    ' role="doc-biblioentry"': ' role="listitem"',
}


def fix_body(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if body:
        for old, new in FIXES.items():
            body = body.replace(old, new)
        context["body"] = body


def setup(app):
    app.connect("html-page-context", fix_body)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
