"""The book as one PDF, built with the website and offered on it.

When the website has been built (Sphinx's HTML builder), the same book is
built again with jupyter-book's ``pdflatex`` builder (Sphinx's LaTeX builder,
then latexmk with the engine set in ``_config.yml``: XeLaTeX) into the
``latex`` folder beside ``html``. That build reads the chapters' outputs from
the jupyter cache that the website's build has just filled: nothing is
executed twice. The PDF, named after ``latex_documents`` (``_config.yml``), is
copied to ``<build>/pdf/`` and into the website's root, where every page's
download menu and the ``book-pdf`` role (on the introduction) link to it.

In the PDF, jupyter-book's LaTeX extension (sphinx-jupyterbook-latex) leaves
out the code that the website folds (``hide-input``, ``hide-cell``: the code
that draws the figures, the set-up); the figures stay. Setting ``book_pdf:
false`` (Sphinx configuration) builds the website alone.
"""

import hashlib
import resource
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxRole

logger = logging.getLogger(__name__)
BUILD_EDITION = str(Path(__file__).parent / "build_edition.py")  # jupyter-book's build, into a folder
LATEX_FILES = Path(__file__).parent / "latex"


def pdf_name(config):
    """The PDF's file name: latexmk names it after the .tex file."""
    return Path(config.latex_documents[0][1]).with_suffix(".pdf").name


class BookPdfLink(SphinxRole):
    """:book-pdf:`text`, a link to the book's PDF from the page it is on."""

    def run(self):
        url = "../" * self.env.docname.count("/") + pdf_name(self.config)
        return [nodes.reference(self.rawtext, self.text, refuri=url, classes=["book-pdf-download"])], []


# LaTeX numbers every chapter; the website numbers those of the toc's numbered
# parts only (not Notation and Bibliography): secnumdepth -1 numbers nothing.
UNNUMBERED = r"\ifdefined\coursesecnumdepth\else\edef\coursesecnumdepth{\arabic{secnumdepth}}\fi" \
             r"\setcounter{secnumdepth}{-1}"
NUMBERED = r"\ifdefined\coursesecnumdepth\setcounter{secnumdepth}{\coursesecnumdepth}\fi"


def number_parts_as_the_site(app, doctree, docname):
    """In the PDF, number the chapters of the toc's numbered parts only."""
    site_map = getattr(app.config, "external_site_map", None)
    if app.builder.format != "latex" or site_map is None:
        return
    numbered = {str(part.items[0]): bool(part.numbered) for part in site_map.root.subtrees if part.items}
    for start in list(doctree.findall(addnodes.start_of_file)):
        if start["docname"] in numbered:
            latex = NUMBERED if numbered[start["docname"]] else UNNUMBERED
            start.parent.insert(start.parent.index(start), nodes.raw("", latex + "\n", format="latex"))


def add_to_download_menu(app, pagename, templatename, context, doctree):
    """Offer the book's PDF in every page's download menu."""
    menu = next((button for button in context.get("header_buttons", [])
                 if button.get("label") == "download-buttons"), None)
    if menu is None:
        return
    menu["buttons"].append({
        "type": "link",
        "url": context["pathto"](pdf_name(app.config), 1),
        "text": "course .pdf",
        "tooltip": "Download the whole course as one PDF",
        "icon": "fas fa-book",
        "label": "download-book-pdf-button",
    })


def cpu_of_children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def count_documents_read(app, env, docnames):
    app.book_pdf_documents_read = len(docnames)


def fingerprint(app):
    """What the PDF depends on that the website's build may leave unread: the
    LaTeX settings, the toc, these extensions and their LaTeX files. (The
    chapters, and the code they import, are re-read whenever they change.)"""
    digest = hashlib.sha256()
    for name in sorted(app.config.values):
        if name.startswith(("latex", "jblatex")):
            digest.update(f"{name}={getattr(app.config, name)!r}\n".encode())
    site_map = getattr(app.config, "external_site_map", None)
    digest.update(repr(site_map and site_map.as_json()).encode())
    for path in sorted(Path(__file__).parent.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".sty"):
            digest.update(path.read_bytes())
    return digest.hexdigest()


@contextmanager
def own_doctrees(build):
    """jupyter-book keeps the doctrees of every builder in <build>/.doctrees,
    and an environment saved by another builder makes Sphinx read every
    document again: the LaTeX build gets a folder of its own, swapped in
    while it runs, so that neither build re-reads what has not changed."""
    shared, latex, html = build / ".doctrees", build / ".doctrees-latex", build / ".doctrees-html"
    shared.rename(html)
    if latex.is_dir():
        latex.rename(shared)
    try:
        yield
    finally:
        if shared.is_dir():
            shared.rename(latex)
        html.rename(shared)


def build_pdf(app, exception):
    """After the website, build the PDF from the same sources and cache,
    unless the website's build read no document and nothing else the PDF
    depends on has changed since the last PDF."""
    if exception is not None or app.builder.name != "html" or not app.config.book_pdf:
        return
    html = Path(app.outdir)
    target = html.parent / "pdf" / pdf_name(app.config)
    stamp = target.with_suffix(".sha256")
    if (getattr(app, "book_pdf_documents_read", None) == 0 and target.is_file() and stamp.is_file()
            and stamp.read_text() == fingerprint(app)):
        shutil.copyfile(target, html / target.name)
        logger.info(f"PDF up to date: {target}")
        return
    # into <build>/latex beside <build>/html (either edition's: graded_code.py)
    command = [sys.executable, BUILD_EDITION, str(app.srcdir), str(html.parent), "--builder", "pdflatex"]
    if app.warningiserror:
        command.append("--warningiserror")
    if app.config.nitpicky:
        command.append("--nitpick")
    if app.keep_going:
        command.append("--keep-going")
    logger.info("building the PDF (jupyter-book's pdflatex builder)...")
    stamp.unlink(missing_ok=True)
    start, cpu_before = time.perf_counter(), cpu_of_children()
    with own_doctrees(html.parent):
        # latexmk stops on errors instead of waiting for an answer on stdin
        result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, cpu_of_children() - cpu_before
    latex = html.parent / "latex"
    built = latex / pdf_name(app.config)
    if result.returncode or not built.is_file():
        raise ExtensionError(f"the PDF build failed (log in {latex}):\n"
                             + result.stdout[-4000:] + result.stderr[-4000:])
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(built, target)
    shutil.copyfile(built, html / target.name)
    stamp.write_text(fingerprint(app))
    logger.info(f"PDF built in {elapsed:.1f} s ({cpu:.1f} s CPU): {target}")


def add_latex_files(app, config):
    """LaTeX packages of our own (latex/*.sty), for the LaTeX build."""
    config.latex_additional_files = [*config.latex_additional_files,
                                     *map(str, sorted(LATEX_FILES.glob("*.sty")))]


def setup(app):
    app.add_config_value("book_pdf", True, "", bool)  # False: the website only
    app.connect("config-inited", add_latex_files)
    app.add_role("book-pdf", BookPdfLink())
    app.connect("doctree-resolved", number_parts_as_the_site)
    app.connect("html-page-context", add_to_download_menu, priority=502)
    app.connect("env-before-read-docs", count_documents_read)
    app.connect("build-finished", build_pdf)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
