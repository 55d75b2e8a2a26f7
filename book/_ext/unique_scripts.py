"""Write each script of a page once.

Sphinx 7.4 writes twice a body-only script that an extension registers once
the builder has started (fixed upstream by sphinx-doc/sphinx#13402, in a
Sphinx 8 release; jupyter-book 1.x requires Sphinx 7). sphinx-thebe's script
declares a ``const``, so every page raised a JavaScript error.
"""


def drop_duplicate_scripts(app, pagename, templatename, context, doctree):
    unique = {}
    for script in context.get("script_files", []):
        key = (script.filename or "", script.priority, tuple(sorted(script.attributes.items())))
        unique.setdefault(key, script)
    context["script_files"] = list(unique.values())


def setup(app):
    app.connect("html-page-context", drop_duplicate_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
