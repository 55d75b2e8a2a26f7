"""The student's pages: points and reasons per check, the notebook as it was graded, and what
the deadline did (written after grading, from its results; `report` has their frame)."""

import functools
import html
import re
import urllib.parse

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.lexers import PythonLexer

from . import deadlines, tasks
from .assignment import grade_id
from .messages import failure_message
from .recorded import NOT_CHECKED
from .report import CODE, _page, _score, number
from .results import GRADER_ERROR


def render(course, graded):
    """(page, {notebook: page}) of one graded submission (a results.Graded): the student's page, and
    an nbgrader assignment's page per notebook."""
    if graded.notebooks is not None:
        pages = {name: feedback_html(course, page, cells, outputs, every_cell=True)
                 for name, (page, cells, outputs) in graded.notebooks.items()}
        return notebooks_html(course, graded.result, list(pages)), pages
    if graded.cells is None:
        return not_graded_html(course, graded.result, graded.reason), {}
    return feedback_html(course, graded.result, graded.cells, graded.outputs), {}


# Where a feedback page says what the deadline did: filled in by `with_deadline` whenever the
# reports are written (the policy may come after the page). Student text is escaped, so it
# cannot contain these comments.
DEADLINE_SLOT = "<!--deadline--><!--/deadline-->"
_FILLED_SLOT = re.compile(r"<!--deadline-->.*?<!--/deadline-->", re.DOTALL)


def with_deadline(page, result, policy):
    """The feedback `page` of `result` saying when it was handed in and what lateness cost."""
    note = ""
    if policy is not None and result.status != "missing":
        late = deadlines.assess(policy, result.student_id, result.submitted_at)
        if late.submitted_at is None:
            note = ("No time of handing in was recorded for this submission: your instructor "
                    "will decide about lateness.")
        elif late.late_days == 0:
            note = f"Handed in {late.submitted_at.isoformat()}, on time (due {late.due.isoformat()})."
        else:
            note = (f"Handed in {late.submitted_at.isoformat()}, {deadlines.describe(late.late_by)} after the "
                    f"deadline ({late.due.isoformat()}): {late.late_days} started day"
                    f"{'s' * (late.late_days != 1)} late, {number(round(100 * (1 - late.factor), 6))} % off. "
                    f"Your score: {number(_score(result, late))} / {number(result.max_score)}.")
    note = f"<p class='note'>{html.escape(note)}</p>" if note else ""
    return _FILLED_SLOT.sub(lambda _: f"<!--deadline-->{note}<!--/deadline-->", page, count=1)


def _task(course, assignment, check, link=True):
    """The task a check grades, by title, and the chapter section that explains it: a link once the
    site is published, its title in words before (a link would lead nowhere)."""
    title = html.escape(tasks.titles(course, assignment).get(check, check))
    if not link:
        return title
    url, where = tasks.section_url(course, assignment, check), tasks.section_name(course, assignment, check)
    if url:
        return f"{title} (<a href='{html.escape(url)}'>read the chapter</a>{html.escape(': ' + where) if where else ''})"
    return f"{title} (read the chapter {html.escape(where)})" if where else title


def _checks_table(course, result):
    """Points per check, and why points were lost: a column only where some were."""
    lost = any(c.score < c.max_score or c.message for c in result.checks)
    rows = "".join(f"<tr><td>{_task(course, result.assignment, c.name, link=c.score < c.max_score)}"
                   f"<br><small><code>{html.escape(c.label)}</code></small></td>"
                   f"<td>{number(c.score)} / {number(c.max_score)}</td>"
                   + (f"<td>{html.escape(c.message) or '✓'}</td>" if lost else "") + "</tr>"
                   for c in result.checks)
    return ("<table><tr><th>task</th><th>points</th>" + ("<th>why points were lost</th>" if lost else "")
            + f"</tr>{rows}</table>")


def _notes(result):
    if not result.notes:
        return ""
    items = "".join(f"<li>{html.escape(note)}</li>" for note in result.notes)
    return f"<p class='note'>What happened while grading (status <b>{result.status}</b>):</p><ul>{items}</ul>"


def feedback_html(course, result, cells, outputs, every_cell=False):
    """The student's page: points and reasons per check, then the notebook as it was graded.

    `cells` are the graded notebook's cells (check cells as released: the
    hidden checks were never in them), `outputs` the sandbox's output per cell.
    Of the notebook it shows the student's cells (answers and their own cells) with
    their outputs, and each check cell's result under its task's title: the course's
    cells (text, helpers, given code, the check cells' code) are the released
    notebook's, which the student has; only a course cell that failed shows, by its error. With
    `every_cell` (an nbgrader notebook's page), every cell shows, test cells too, as nbgrader's
    feedback does.
    """
    # a student's HTML stays text, and no image is fetched from anywhere (the CSP forbids it too)
    markdown = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")
    scores = {c.name: c for c in result.checks}
    parts = [f"<h1>{html.escape(result.assignment)}: {html.escape(result.student_id)}</h1>",
             f"<h2>Your checks: {number(result.score)} / {number(result.max_score)}</h2>", DEADLINE_SLOT,
             _checks_table(course, result), _notes(result), "<h2>Your notebook, as graded</h2>"]
    titles = tasks.titles(course, result.assignment)
    for index, cell in enumerate(cells):
        course_cell = not every_cell and _is_course_cell(cell)
        output = outputs.get(str(index)) or {}
        if cell.cell_type == "markdown":
            if not course_cell:
                parts.append(f"<div class='cell'>{markdown.render(cell.source)}</div>")
            else:  # of the course's text, the tasks' titles, to say where the cells below belong
                parts += [f"<h3>{html.escape(title)}</h3>" for title in tasks.HEADING.findall(cell.source)
                          if title in titles.values()]
            continue
        check = scores.get(grade_id(cell))
        if course_cell and check is None and not output.get("error"):
            continue  # helpers and given code, as released, that ran
        kind = "" if check is None else (" check pass" if check.score == check.max_score else " check fail")
        parts.append(f"<div class='cell{kind}'>")
        if not course_cell:
            parts.append(_highlighted(cell.source))
        elif check is not None:
            parts.append(f"<p>The checks of “{html.escape(titles.get(check.name, check.name))}”:</p>")
        else:
            parts.append("<p>A given cell of the notebook failed:</p>")
        full = check is not None and check.score == check.max_score
        # one story: beside full points, nothing of the notebook's that said the task could not be judged
        stdout = output.get("stdout") or ""
        if full:
            stdout = "".join(line for line in stdout.splitlines(keepends=True) if not line.startswith(NOT_CHECKED))
        if stdout:
            parts.append(f"<pre>{html.escape(stdout)}</pre>")
        if output.get("stderr"):
            parts.append(f"<pre class='err'>{html.escape(output['stderr'])}</pre>")
        parts += _figures(output)
        if output.get("error") and not full:
            parts.append(f"<pre class='err'>{html.escape(failure_message(output['error']))}</pre>")
        if check is not None:
            task = _task(course, result.assignment, check.name) if check.score < check.max_score else ""
            parts.append(f"<p><b>{number(check.score)} / {number(check.max_score)}</b> "
                         f"{html.escape(check.message)} {task}</p>")
        parts.append("</div>")
    return _page(f"{result.assignment}: {result.student_id}", "".join(parts))


def _is_course_cell(cell):
    """Whether `cell` is the course's as released (locked: text, helpers, given code, checks),
    not the student's (their answer cells and the cells they added)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("locked") or meta.get("grade")) and not meta.get("solution")


BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")


def _figures(output):
    """The cell's figures (PNG, JPEG) as images; data only, checked as base64 (an SVG, which is
    markup, is never shown)."""
    return [f"<img alt='a figure of the cell' src='data:{mime};base64,{''.join(value.split())}'>"
            for shown in output.get("outputs") or () for mime, value in shown.get("data", {}).items()
            if mime in ("image/png", "image/jpeg") and isinstance(value, str) and BASE64.fullmatch(value)]


def _highlighted(source):
    """A cell's code as HTML; the course's cells, the same in every notebook, once per worker."""
    return _highlighted_once(source) if len(source) <= 10_000 else highlight(source, PythonLexer(), CODE)


@functools.lru_cache(maxsize=1024)
def _highlighted_once(source):
    return highlight(source, PythonLexer(), CODE)


def notebooks_html(course, result, notebooks):
    """The page of an nbgrader assignment: its points per check and a link to the page of each
    of its `notebooks` (graded ones; the others are named in its notes)."""
    links = "".join(
        f"<li><a href='{html.escape(urllib.parse.quote(result.assignment, safe=''))}/"
        f"{html.escape(urllib.parse.quote(name, safe=''))}.html'>{html.escape(name)}.ipynb</a>: "
        f"{number(sum(c.score for c in result.checks if c.notebook in ('', name)))} / "
        f"{number(sum(c.max_score for c in result.checks if c.notebook in ('', name)))}</li>"
        for name in notebooks)
    manual = sum(c.max_score for c in result.checks if c.manual)
    return _page(f"{result.assignment}: {result.student_id}", (
        f"<h1>{html.escape(result.assignment)}: {html.escape(result.student_id)}</h1>"
        f"<h2>Autograded: {number(result.score)} / {number(result.max_score)}</h2>{DEADLINE_SLOT}"
        + (f"<p>{number(manual)} of these points need manual grading: a person grades them.</p>" if manual else "")
        + f"<ul>{links}</ul>" + _checks_table(course, result) + _notes(result)))


def not_graded_html(course, result, reason):
    """The page of a submission that was not graded: why, and whose fault it was (a `grader error`
    is the grader's own: the student is told so, the traceback is the instructor's)."""
    after = ("This is not your fault: the grader itself failed, and your instructor has its report."
             if result.status == GRADER_ERROR else "Ask your instructor if you believe this is a mistake.")
    return _page(f"{result.assignment}: {result.student_id}", (
        f"<h1>{html.escape(result.assignment)}: {html.escape(result.student_id)}</h1>{DEADLINE_SLOT}"
        f"<p>Your submission was not graded (<b>{html.escape(result.status)}</b>): "
        f"{html.escape(reason)}.</p><p>Score: 0 / {number(result.max_score)}. {after}</p>"
        + _checks_table(course, result)))
