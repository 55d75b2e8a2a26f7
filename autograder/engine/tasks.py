"""Which task a check grades, by its title, and where the chapter explains it.

Both come from the course's instructor notebook: the title is the heading of
the task the check cell follows ("## 1. A decoder layer (3 points)" -> "A
decoder layer"); the section is the label in the check cell's metadata
(`"course": {"section": "transformer-decoder-sublayers"}`), a MyST target
`(name)=` of the chapter (the course file's `book.chapter`); a check cell
without one links to its chapter's first label. The page's address is the
course file's `book.url` under the site's `html.baseurl`; while that is still
the template's placeholder, nothing is published there, so messages name the
chapter and its section by their titles instead of linking to a dead address.
"""

import functools
import re

import nbformat
import yaml

from .assignment import grade_id, load

HEADING = re.compile(r"^#{2,4}\s+(?:\d+[a-z]?\.\s+)?(?P<title>.+?)(?:\s*\([^()]*\bpoints?\b[^()]*\))?\s*$",
                     re.MULTILINE)
LABEL = re.compile(r"^\((?P<label>[A-Za-z0-9_-]+)\)=\s*$", re.MULTILINE)


@functools.cache
def titles(course, name):
    """{grade_id of a check cell: the title of the task it grades} for the assignment `name`
    (none in an nbgrader course: its checks go by their grade_id)."""
    if course.nbgrader:
        return {}
    found, title = {}, None
    for cell in load(course, name).cells:
        if cell.cell_type == "markdown":
            headings = HEADING.findall(cell.source)
            title = headings[-1] if headings else title
        elif cell.metadata.get("nbgrader", {}).get("grade") and title:
            found[grade_id(cell)] = title
    return found


@functools.cache
def sections(course, name):
    """{grade_id of a check cell: the label of its chapter section} as the check cells'
    metadata `course.section` of the instructor notebook of `name` gives them."""
    return {grade_id(cell): cell.metadata["course"]["section"]
            for cell in nbformat.read(course.notebook(name), as_version=4).cells
            if cell.metadata.get("nbgrader", {}).get("grade") and "section" in cell.metadata.get("course", {})}


def places(course, name, cells):
    """{cell id (index in `cells`, a fitted notebook of `name`): where that code cell is, in words
    for a message}: by the title of the task it belongs to, never by a cell number (numbers count
    Markdown cells and are shown nowhere). Only the released headings count: a student's own
    Markdown cannot rename a task."""
    spec = load(course, name)
    released, tasks = {grade_id(c) for c in spec.cells} - {None}, set(titles(course, name).values())
    found, task = {}, None
    for index, cell in enumerate(cells):
        mine = grade_id(cell) not in released
        if cell.cell_type == "markdown":
            task = next((t for t in reversed(HEADING.findall(cell.source)) if t in tasks and not mine), task)
            continue
        kind = ("a cell of your own" if mine else "the check cell" if cell.metadata["nbgrader"].get("grade")
                else "your answer cell" if grade_id(cell) in spec.solutions else "a given cell")
        found[str(index)] = (f"{kind} {'after' if mine else 'of'} task “{task}”" if task
                             else f"{kind} before the first task")
    return found


def chapter_labels(course, name):
    """The MyST labels `(name)=` of the chapter of `name`, in order ([] without a chapter)."""
    path = course.root / course.chapter.format(slug=name)
    return LABEL.findall(path.read_text(encoding="utf-8")) if path.is_file() else []


def section_label(course, name, check):
    """The label of the section that explains `check`, or '' when the chapter has none."""
    return sections(course, name).get(check) or next(iter(chapter_labels(course, name)), "")


@functools.cache
def base_url(course):
    """The site's address (`html.baseurl` of the course's site config), ending with '/', or ''."""
    path = course.book_config
    config = (yaml.safe_load(path.read_text(encoding="utf-8")) if path and path.is_file() else None) or {}
    url = str((config.get("html") or {}).get("baseurl") or "")
    return url if not url or url.endswith("/") else url + "/"


def placeholder_base_url(course):
    """Whether the site's address is still the placeholder the course's template ships."""
    placeholder = course.placeholder_baseurl
    return bool(placeholder) and base_url(course).rstrip("/") == placeholder.rstrip("/")


def section_url(course, name, check):
    """The address of the chapter section that explains `check`, or '' without a published site
    (no base URL, or the template's placeholder: an address that leads nowhere)."""
    if not base_url(course) or placeholder_base_url(course):
        return ""
    label = section_label(course, name, check)
    return f"{base_url(course)}{course.chapter_url.format(slug=name)}" + (f"#{label}" if label else "")


@functools.cache
def _headings(course, name):
    """{label: the title of the heading under it} of the chapter of `name`, and its first heading
    under the key None (the chapter's title)."""
    path = course.root / course.chapter.format(slug=name)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    found = {label: title for label, title in SECTION.findall(text)}
    first = re.search(r"^#\s+(.+?)\s*$", text, re.MULTILINE)
    found[None] = first.group(1) if first else ""
    return found


SECTION = re.compile(r"^\(([A-Za-z0-9_-]+)\)=\s*\n+#{1,6}\s+(.+?)\s*$", re.MULTILINE)


def section_name(course, name, check):
    """The chapter section that explains `check`, in words: “chapter”, section “section” (the
    chapter's own title alone for its first label), or '' without a chapter."""
    headings = _headings(course, name)
    chapter = headings.get(None)
    if not chapter:  # no chapter (an nbgrader course has none): nothing to name
        return ""
    section = headings.get(section_label(course, name, check), "")
    return f"“{chapter}”" + (f", section “{section}”" if section and section != chapter else "")


def explained_in(course, name, check):
    """" (the chapter explains it: “chapter”, section “section”, address)" for a failed `check`; the
    address only once the site is published, the titles always (so no link leads nowhere)."""
    where = ", ".join(part for part in (section_name(course, name, check), section_url(course, name, check))
                      if part)
    return f" (the chapter explains it: {where})" if where else ""
