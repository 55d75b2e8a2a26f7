"""Which task a check grades, by its title, and where the chapter explains it.

Both come from the course's instructor notebook: the title is the heading of
the task the check cell follows ("## 1. A decoder layer (3 points)" -> "A
decoder layer"); the section is the label in the check cell's metadata
(`"course": {"section": "transformer-decoder-sublayers"}`), a MyST target
`(name)=` of the chapter (the course file's `book.chapter`); a check cell
without one links to its chapter's first label. The page's address is the
course file's `book.url` under the site's `html.baseurl`.
"""

import functools
import re

import nbformat
import yaml

from .assignment import grade_id, load
from .course import current

HEADING = re.compile(r"^#{2,4}\s+(?:\d+[a-z]?\.\s+)?(?P<title>.+?)(?:\s*\([^()]*\bpoints?\b[^()]*\))?\s*$",
                     re.MULTILINE)
LABEL = re.compile(r"^\((?P<label>[A-Za-z0-9_-]+)\)=\s*$", re.MULTILINE)


@functools.cache
def titles(name):
    """{grade_id of a check cell: the title of the task it grades} for the assignment `name`."""
    found, title = {}, None
    for cell in load(name).cells:
        if cell.cell_type == "markdown":
            headings = HEADING.findall(cell.source)
            title = headings[-1] if headings else title
        elif cell.metadata.get("nbgrader", {}).get("grade") and title:
            found[grade_id(cell)] = title
    return found


@functools.cache
def sections(name):
    """{grade_id of a check cell: the label of its chapter section} as the check cells'
    metadata `course.section` of the instructor notebook of `name` gives them."""
    return {grade_id(cell): cell.metadata["course"]["section"]
            for cell in nbformat.read(current().notebook(name), as_version=4).cells
            if cell.metadata.get("nbgrader", {}).get("grade") and "section" in cell.metadata.get("course", {})}


def chapter_labels(name):
    """The MyST labels `(name)=` of the chapter of `name`, in order ([] without a chapter)."""
    path = current().root / current().chapter.format(slug=name)
    return LABEL.findall(path.read_text(encoding="utf-8")) if path.is_file() else []


def section_label(name, check):
    """The label of the section that explains `check`, or '' when the chapter has none."""
    return sections(name).get(check) or next(iter(chapter_labels(name)), "")


@functools.cache
def base_url():
    """The site's address (`html.baseurl` of the course's site config), ending with '/', or ''."""
    path = current().book_config
    config = (yaml.safe_load(path.read_text(encoding="utf-8")) if path and path.is_file() else None) or {}
    url = str((config.get("html") or {}).get("baseurl") or "")
    return url if not url or url.endswith("/") else url + "/"


def placeholder_base_url():
    """Whether the site's address is still the placeholder the course's template ships."""
    placeholder = current().placeholder_baseurl
    return bool(placeholder) and base_url().rstrip("/") == placeholder.rstrip("/")


def section_url(name, check):
    """The address of the chapter section that explains `check`, or '' without a base URL."""
    if not base_url():
        return ""
    label = section_label(name, check)
    return f"{base_url()}{current().chapter_url.format(slug=name)}" + (f"#{label}" if label else "")
