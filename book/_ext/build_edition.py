"""jupyter-book's build of a book into BUILD/html, or BUILD/latex and its PDF.

    python book/_ext/build_edition.py SOURCE BUILD [--builder pdflatex] [--no-pdf] [-W] [-n] [--keep-going]

jupyter-book's command line always builds into <path-output>/_build/: this
does what its `build` does for a book (the same configuration, from
SOURCE/_config.yml and SOURCE/_toc.yml), into BUILD. `make class-book` builds
the class edition with it into _build/class (graded_code.py), and book_pdf.py
the PDF of either edition beside its website.

The class edition (COURSE_EDITION=class) is refused before any build work
when the term of the book's course would give an answer away (graded_code.py).
"""

import argparse
import os
from pathlib import Path

import click
from jupyter_book.cli.main import builder_specific_actions
from jupyter_book.sphinx import build_sphinx


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("build", type=Path)
    parser.add_argument("--builder", choices=["html", "pdflatex"], default="html")
    parser.add_argument("-W", "--warningiserror", action="store_true")
    parser.add_argument("-n", "--nitpick", action="store_true")
    parser.add_argument("--keep-going", action="store_true")
    parser.add_argument("--no-pdf", action="store_true", help="the website alone (book_pdf.py's book_pdf)")
    args = parser.parse_args(argv)
    source = args.source.resolve()
    if os.environ.get("COURSE_EDITION") == "class":
        from graded_code import term_refusals
        refusals = term_refusals(source)
        if refusals:
            parser.exit(1, "".join(f"error: {refusal}\n" for refusal in refusals))
    output = args.build.resolve() / ("latex" if args.builder == "pdflatex" else "html")
    overrides = {"external_toc_path": (source / "_toc.yml").as_posix(), "latex_individualpages": False}
    if args.nitpick:
        overrides["nitpicky"] = True
    if args.no_pdf:
        overrides["book_pdf"] = False
    result = build_sphinx(source, output, noconfig=True, path_config=str(source / "_config.yml"),
                          confoverrides=overrides, builder="latex" if args.builder == "pdflatex" else "html",
                          warningiserror=args.warningiserror, keep_going=args.keep_going)
    builder_specific_actions(result, args.builder, output, "book", None, click.echo)


if __name__ == "__main__":
    main()
