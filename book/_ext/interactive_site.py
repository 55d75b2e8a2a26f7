"""Serve the interactive figures' JavaScript from the site itself (no CDN: the site works offline).

vl-convert-python ships Vega, Vega-Lite and Vega-Embed bundled in one
script. It is written once into ``_build/.interactive`` (again when
vl-convert changes), copied with the site's ``_static`` files, and loaded,
with ``_static/interactive.js`` which draws the figures, by the pages that
have an interactive figure (``book/_ext/interactive.py``) and no others.
"""

from pathlib import Path

from interactive import MARKER

BUNDLE = "vega-bundle.js"


def write_bundle(app):
    import vl_convert

    folder = Path(app.outdir).parent / ".interactive"
    stamp, made_by = folder / "made-by", f"wrapped, vl-convert {vl_convert.__version__}"
    if not (folder / BUNDLE).is_file() or not stamp.is_file() or stamp.read_text() != made_by:
        folder.mkdir(parents=True, exist_ok=True)
        # In a function of its own: its top-level names (const _ …) would clash with the page's (Sphinx's _).
        bundle = "(() => {\n" + vl_convert.javascript_bundle() + "\n})();\n"
        (folder / BUNDLE).write_text(bundle, encoding="utf-8")
        stamp.write_text(made_by)
    app.config.html_static_path.append(str(folder))


def load_scripts(app, pagename, templatename, context, doctree):
    if MARKER in (context.get("body") or ""):
        app.add_js_file(BUNDLE, priority=600)
        app.add_js_file("interactive.js", priority=601)


def setup(app):
    app.connect("builder-inited", write_bundle)
    app.connect("html-page-context", load_scripts, priority=400)  # before unique_scripts drops doubles
    return {"parallel_read_safe": True, "parallel_write_safe": True}
