"""The code that an exercise grades, folded in the open edition, left out of the class edition.

The chapters show the reference code with ``literalinclude :pyobject:``. When
the object is a function that an exercise grades (the course's instructor
notebooks say which: ``autograder.engine.reference``), the listing keeps its
signature and docstring, and its body

- in the open edition (``make book``) sits in a dropdown, "Try the exercise
  first", that a reader opens with a click or the keyboard (sphinx-design's,
  a ``<details>`` element); in the PDF it goes to a section "Reference
  solutions" at the end of the chapter;
- in the class edition (``make class-book``, ``course_edition = "class"``,
  which the environment variable COURSE_EDITION also sets) is not written at
  all: a line says which task of the exercise asks for it. Any graded body
  that still reaches a page of the class edition another way (a code cell, an
  output, a listing without ``:pyobject:``) is a build warning, an error
  under ``--warningiserror``. The class edition reads the open edition's
  execution cache (``<build>/.jupyter_cache`` beside ``<build>/class``): the
  same executed chapters, nothing executed again. Its launch buttons open no
  repository but the student repository (``class_edition_repository``), whose
  exercise notebooks the Colab links open; without one, there are none. It
  offers only the exercises that the term releases (``[term] released`` of the
  course file: exercise_notebook.py), and refuses to start when one of them
  would give away an answer of an assignment that is not closed
  (``student-copy``'s rule).

The chapters' sources (``_sources``, the executed notebooks offered for
download) hold the directive, never the body.
"""

import ast
import os
import re
import shutil
import textwrap
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.directives.code import LiteralInclude
from sphinx.errors import ConfigError
from sphinx.util import logging
from sphinx_design.shared import create_component, is_component

logger = logging.getLogger(__name__)
EDITIONS = ("open", "class")
POINTS = re.compile(r"\s*\([^()]*\bpoints?\b[^()]*\)\s*$")


def book_course(srcdir):
    """The book's own course: the course file that AUTOGRADER_COURSE names (as for nbgrader), else
    the one beside the book's configuration."""
    from autograder.engine import course
    return course.load(os.environ.get(course.ENVIRONMENT) or Path(srcdir, course.COURSE_FILE))


def term_refusals(srcdir):
    """Why the term of the book's course may not be published (student-copy's rule, or a term that
    names no assignment of the course), or []."""
    from autograder.engine.commands.student_copy import term_refusals
    from autograder.engine.course import CourseError
    try:
        return term_refusals(book_course(srcdir))
    except CourseError as error:
        return [str(error)]


def graded_functions(app):
    """{(file, name): Graded} of every function that an exercise of the course grades."""
    if not hasattr(app, "graded_functions"):
        from autograder.engine import reference
        this = book_course(app.srcdir)
        app.graded_functions = {(f.file, f.name): f for f in reference.all_graded(this)}
        app.graded_lines = reference.distinctive_lines(this, list(app.graded_functions.values()))
    return app.graded_functions


def task_words(function):
    return f"task “{POINTS.sub('', function.task)}” of the exercise {function.assignment}.ipynb"


def split_function(text):
    """(signature and docstring, body) of a function's listing."""
    from autograder.engine.reference import body_start
    text = text.rstrip("\n")
    lines = text.splitlines()
    cut = body_start(ast.parse(textwrap.dedent(text)).body[0]) - 1
    return "\n".join(lines[:cut]), "\n".join(lines[cut:])


def copy_block(block, text):
    new = nodes.literal_block(text, text)
    for name in ("language", "highlight_args", "source", "force", "linenos", "classes"):
        if name in block:
            new[name] = block[name]
    return new


class GradedLiteralInclude(LiteralInclude):
    """``literalinclude``: a graded function's body folded (open) or left out (class)."""

    def run(self):
        result = super().run()
        if "pyobject" not in self.options or "lines" in self.options:
            return result
        _, filename = self.env.relfn2path(self.arguments[0])
        function = graded_functions(self.env.app).get((Path(filename).resolve(), self.options["pyobject"]))
        block = next(iter(n for node in result for n in node.findall(nodes.literal_block)), None)
        if function is None or block is None:
            return result
        signature, body = split_function(block.astext())
        if self.config.course_edition == "class":
            indent = re.match(r"\s*", body.strip("\n").splitlines()[0]).group() if body.strip() else "    "
            stub = copy_block(block, f"{signature}\n{indent}...")
            note = nodes.paragraph("", "", nodes.emphasis(
                text=f"The body of {function.name} is yours to write: {task_words(function)}."),
                classes=["graded-body-left-out"])
            return self.replace(result, block, [stub, note])
        dropdown = create_component(
            "dropdown", opened=False, type="dropdown", has_title=True, icon=None, chevron=None,
            container_classes=["sd-mb-3", "graded-body"], title_classes=[], body_classes=[])
        dropdown["graded_function"] = f"{function.module}.{function.name}"
        dropdown["graded_source"] = block.astext()
        dropdown += nodes.rubric("", f"Try the exercise first: the body of {function.name} "
                                     f"({task_words(function)})")
        dropdown += copy_block(block, body)
        return self.replace(result, block, [copy_block(block, signature), dropdown])

    @staticmethod
    def replace(result, block, new):
        if block in result:
            index = result.index(block)
            return result[:index] + new + result[index + 1:]
        block.replace_self(new)  # inside a captioned container
        return result


def is_graded_dropdown(node):
    return is_component(node, "dropdown") and "graded_function" in node


def chapter_of(node):
    """The section of the chapter that holds `node` in the PDF's doctree: the outermost section of
    the document of its nearest section (sphinx-jupyterbook-latex marks each with its docname)."""
    sections = []
    while node.parent is not None:
        node = node.parent
        if isinstance(node, nodes.section):
            sections.append(node)
    docname = next((section["docname"] for section in sections if section.get("docname")), None)
    return [section for section in sections if not docname or section.get("docname") == docname][-1]


def move_bodies_to_appendix(app, doctree, docname):
    """In the PDF, each chapter's graded bodies go to its last section, "Reference solutions"."""
    if app.builder.format != "latex":
        return
    chapters = {}  # {id of a chapter's section: (section, its dropdowns)}
    for dropdown in list(doctree.findall(is_graded_dropdown)):
        chapter = chapter_of(dropdown)
        chapters.setdefault(id(chapter), (chapter, []))[1].append(dropdown)
    for chapter, dropdowns in chapters.values():
        appendix = nodes.section("", nodes.title(text="Reference solutions"),
                                 ids=[f"reference-solutions-{'-'.join(chapter['ids'][:1])}"])
        appendix += nodes.paragraph(text="The functions of this chapter that its exercise grades, "
                                         "whole: try the exercise before you read them.")
        for dropdown in dropdowns:
            name = dropdown["graded_function"].rpartition(".")[2]
            appendix += nodes.rubric(text=name)
            appendix += copy_block(next(iter(dropdown.findall(nodes.literal_block))), dropdown["graded_source"])
            dropdown.replace_self(nodes.paragraph("", "", nodes.emphasis(
                text=f"The body of {name} is in the Reference solutions at the end of this chapter.")))
        chapter += appendix


def check_no_graded_body(app, doctree):
    """In the class edition, a graded body that reaches a page is a warning (an error with -W)."""
    if app.config.course_edition != "class":
        return
    from autograder.engine.reference import leaked
    graded_functions(app)
    for function, lines in leaked(doctree.astext(), app.graded_lines):
        logger.warning(f"the class edition must not print the body of {function.name} (graded in "
                       f"{function.assignment}), and this page has {len(lines)} of its lines, e.g. "
                       f"{lines[0]!r}", location=app.env.docname)


def offer_executed_chapter(app, pagename, templatename, context, doctree):
    """The theme offers the executed chapter (.ipynb) for download only beside launch buttons,
    which the class edition may not have: there, offer it here (before the theme, priority 501)."""
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if app.config.course_edition != "class" or doctree is None or not executed.is_file():
        return
    target = Path(app.outdir, "_sources", f"{pagename}.ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def set_edition(app, config):
    edition = os.environ.get("COURSE_EDITION") or config.course_edition
    if edition not in EDITIONS:
        raise ValueError(f"course_edition (or COURSE_EDITION) is {edition!r}, not one of {EDITIONS}")
    config.course_edition = edition
    if edition != "class":
        return
    refusals = term_refusals(app.srcdir)
    if refusals:
        raise ConfigError("the class edition gives no answer away: " + "; ".join(refusals))
    config.exercises_offered = list(book_course(app.srcdir).released)
    # the open edition's executed chapters: <build>/.jupyter_cache beside <build>/class/html
    config.nb_execution_cache_path = str(Path(app.outdir).resolve().parent.parent / ".jupyter_cache")
    options = config.html_theme_options
    launch = options.get("launch_buttons", {})
    repository = config.class_edition_repository
    options["repository_url"] = repository
    options["launch_buttons"] = {"colab_url": launch["colab_url"]} if repository and "colab_url" in launch else {}
    if not repository:
        options.pop("repository_branch", None)
    elif config.class_edition_branch:
        options["repository_branch"] = config.class_edition_branch


def setup(app):
    app.add_config_value("course_edition", "open", "env", [str])
    # The class edition's student repository (a GitHub URL) and branch, or "".
    app.add_config_value("class_edition_repository", "", "env", [str])
    app.add_config_value("class_edition_branch", "main", "env", [str])
    app.setup_extension("sphinx_design")
    app.add_directive("literalinclude", GradedLiteralInclude, override=True)
    # before exercise_notebook takes the Colab URL out of the launch buttons (priority 500)
    app.connect("config-inited", set_edition, priority=400)
    app.connect("doctree-read", check_no_graded_body)
    app.connect("doctree-resolved", move_bodies_to_appendix)
    app.connect("html-page-context", offer_executed_chapter, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
