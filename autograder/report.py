"""What the grader writes: CSV grades, feedback pages, the instructor's summary, progress.

Pages are self-contained HTML (inline styles and SVG figures): they open
offline, from a file, in any browser.

Everything a student controls (cells, outputs, messages, ids, file names,
metadata) is data here: it is escaped in HTML (markdown cells are rendered
with raw HTML off, code is highlighted by Pygments, which escapes it), every
page carries a Content-Security-Policy that allows no script, no request and
no stylesheet but our own inline one, and a CSV cell that a spreadsheet would
read as a formula is neutralised as OWASP advises (a leading apostrophe).
"""

import collections
import csv
import functools
import html
import io
import math
import re
import sys
import urllib.parse

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from . import deadlines, tasks
from .assignment import grade_id
from .messages import failure_message

GRADES_COLUMNS = ["student_id", "assignment", "score", "max_score", "status"]
LATE_COLUMNS = ["submitted_at", "late_days", "raw_score"]  # after `status`, with --due
DETAILS_COLUMNS = ["student_id", "assignment", "check", "score", "max_score", "message"]
# No script, no request of any kind (images only as data: URIs), no form, no <base>;
# styles only inline, from us (student text is escaped, so it cannot add any).
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
       "form-action 'none'")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list for CSV injection
CODE = HtmlFormatter(cssclass="highlight")

STYLE = """<style>
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left;vertical-align:top}
pre{background:#f6f6f6;padding:.6rem;overflow-x:auto;white-space:pre-wrap}
.cell{margin:1rem 0}.check{border-left:4px solid #999;padding-left:.6rem}
.pass{border-color:#2a7}.fail{border-color:#c33}.err{color:#a00}.note{color:#a60}
.highlight pre{background:#f6f6f6}
.pair td{width:50%}.m{background:#fde68a}.hd{color:#777}
""" + CODE.get_style_defs(".highlight") + "</style>"


def number(x):
    return f"{x:g}"


def plural(count, noun):
    """'1 student', '2 students'."""
    return f"{count} {noun}{'s' * (count != 1)}"


# -- CSV -------------------------------------------------------------------------

def grades_csv(results, policy=None):
    """grades.csv; with a deadline policy, `score` is after the penalty and the columns
    submitted_at, late_days and raw_score follow `status`."""
    if policy is None:
        return _csv(GRADES_COLUMNS, [[r.student_id, r.assignment, number(r.score), number(r.max_score),
                                      r.status] for r in results])
    rows = []
    for r in results:
        late = late_status = None
        if r.status != "missing":
            late = deadlines.assess(policy, r.student_id, r.submitted_at)
            late_status = deadlines.NO_TIME if late.submitted_at is None and r.status == "graded" else None
        rows.append([r.student_id, r.assignment, number(_score(r, late)), number(r.max_score),
                     late_status or r.status,
                     late.submitted_at.isoformat() if late and late.submitted_at else "",
                     "" if late is None or late.late_days is None else late.late_days, number(r.score)])
    return _csv(GRADES_COLUMNS + LATE_COLUMNS, rows)


def _score(result, late):
    return result.score if late is None else round(result.score * late.factor, 6)


def details_csv(results):
    return _csv(DETAILS_COLUMNS, [[r.student_id, r.assignment, c.label, number(c.score), number(c.max_score),
                                   c.message] for r in results for c in r.checks])


def _csv(columns, rows):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([[spreadsheet_safe(value) for value in row] for row in rows])
    return buffer.getvalue()


def spreadsheet_safe(value):
    """`value` as CSV text that no spreadsheet reads as a formula (OWASP: a leading apostrophe)."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


# -- feedback --------------------------------------------------------------------

def _page(title, body):
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<meta name='referrer' content='no-referrer'><title>{html.escape(title)}</title>"
            f"{STYLE}</head><body>{body}</body></html>\n")


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


def _task(assignment, check, link=True):
    """The task a check grades, by title, and a link to the chapter section that explains it."""
    title = html.escape(tasks.titles(assignment).get(check, check))
    url = tasks.section_url(assignment, check) if link else ""
    return f"{title} (<a href='{html.escape(url)}'>read the chapter</a>)" if url else title


def _checks_table(result):
    rows = "".join(f"<tr><td>{_task(result.assignment, c.name, link=c.score < c.max_score)}"
                   f"<br><small><code>{html.escape(c.label)}</code></small></td>"
                   f"<td>{number(c.score)} / {number(c.max_score)}</td>"
                   f"<td>{html.escape(c.message) or '✓'}</td></tr>" for c in result.checks)
    return ("<table><tr><th>task</th><th>points</th><th>why points were lost</th></tr>"
            f"{rows}</table>")


def _notes(result):
    if not result.notes:
        return ""
    items = "".join(f"<li>{html.escape(note)}</li>" for note in result.notes)
    return f"<p class='note'>What happened while grading (status <b>{result.status}</b>):</p><ul>{items}</ul>"


def feedback_html(result, cells, outputs):
    """The student's page: points and reasons per check, then the notebook as it was graded.

    `cells` are the graded notebook's cells (check cells as released: the
    hidden checks were never in them), `outputs` the sandbox's output per cell.
    """
    # a student's HTML stays text, and no image is fetched from anywhere (the CSP forbids it too)
    markdown = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")
    scores = {c.name: c for c in result.checks}
    parts = [f"<h1>{html.escape(result.assignment)}: {html.escape(result.student_id)}</h1>",
             f"<h2>Your checks: {number(result.score)} / {number(result.max_score)}</h2>", DEADLINE_SLOT,
             _checks_table(result), _notes(result), "<h2>Your notebook, as graded</h2>"]
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            parts.append(f"<div class='cell'>{markdown.render(cell.source)}</div>")
            continue
        check = scores.get(grade_id(cell))
        kind = "" if check is None else (" check pass" if check.score == check.max_score else " check fail")
        parts.append(f"<div class='cell{kind}'>{_highlighted(cell.source)}")
        output = outputs.get(str(index)) or {}
        if output.get("stdout"):
            parts.append(f"<pre>{html.escape(output['stdout'])}</pre>")
        if output.get("stderr"):
            parts.append(f"<pre class='err'>{html.escape(output['stderr'])}</pre>")
        if output.get("error"):
            parts.append(f"<pre class='err'>{html.escape(failure_message(output['error']))}</pre>")
        if check is not None:
            task = _task(result.assignment, check.name) if check.score < check.max_score else ""
            parts.append(f"<p><b>{number(check.score)} / {number(check.max_score)}</b> "
                         f"{html.escape(check.message)} {task}</p>")
        parts.append("</div>")
    return _page(f"{result.assignment}: {result.student_id}", "".join(parts))


def _highlighted(source):
    """A cell's code as HTML; the course's cells, the same in every notebook, once per worker."""
    return _highlighted_once(source) if len(source) <= 10_000 else highlight(source, PythonLexer(), CODE)


@functools.lru_cache(maxsize=1024)
def _highlighted_once(source):
    return highlight(source, PythonLexer(), CODE)


def notebooks_html(result, notebooks):
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
        + f"<ul>{links}</ul>" + _checks_table(result) + _notes(result)))


def not_graded_html(result, reason):
    return _page(f"{result.assignment}: {result.student_id}", (
        f"<h1>{html.escape(result.assignment)}: {html.escape(result.student_id)}</h1>{DEADLINE_SLOT}"
        f"<p>Your submission was not graded (<b>{html.escape(result.status)}</b>): "
        f"{html.escape(reason)}.</p><p>Score: 0 / {number(result.max_score)}. Ask your instructor "
        "if you believe this is a mistake.</p>" + _checks_table(result)))


# -- the instructor's summary -------------------------------------------------------------

def summary_html(results, policy=None, similarity=()):
    """Every student's scores, linked to their feedback; per assignment: score histogram, share
    failing each check with its commonest reasons, and the submissions that were not simply
    graded; with a deadline, who was late and by how much. `similarity`: the assignments with a
    similarity report (OUT/similarity/<name>.html), linked."""
    parts = ["<h1>Grading summary</h1>",
             f"<p>{plural(len(results), 'submission')} of {plural(len({r.student_id for r in results}), 'student')}."
             "</p>", _students_table(results, policy)]
    by_assignment = collections.defaultdict(list)
    for result in results:
        by_assignment[result.assignment].append(result)
    for name, group in by_assignment.items():
        handed_in = [r for r in group if r.status != "missing"]
        statuses = collections.Counter(r.status for r in group)
        parts.append(f"<h2>{html.escape(name)}</h2><p>" + ", ".join(
            f"{count} {html.escape(status)}" for status, count in statuses.most_common()) + "</p>")
        if name in similarity:
            parts.append(f"<p><a href='similarity/{html.escape(name)}.html'>Similarity of the students' "
                         "code</a>: pairs ranked for you to read (it decides nothing).</p>")
        if not handed_in:
            continue
        parts.append(_histogram([r.score for r in handed_in], group[0].max_score, name))
        names = [c.label for c in handed_in[0].checks]
        failed = {check: [c for r in handed_in for c in r.checks if c.label == check and c.score < c.max_score]
                  for check in names}
        parts.append(_bars(names, [len(failed[n]) / len(handed_in) for n in names], name))
        rows = []
        for check in names:
            common = collections.Counter(c.message for c in failed[check]).most_common(3)
            reasons = "<br>".join(f"{count} × {html.escape(message)}" for message, count in common)
            rows.append(f"<tr><td>{_task(name, check, link=False)} (<code>{html.escape(check)}</code>)</td>"
                        f"<td>{len(failed[check])} / {len(handed_in)}</td><td>{reasons}</td></tr>")
        parts.append("<table><tr><th>check</th><th>failed</th><th>most common reasons</th></tr>"
                     + "".join(rows) + "</table>")
    trouble = [r for r in results if r.status != "graded"]
    parts.append(f"<h2>Not simply graded ({len(trouble)})</h2>")
    if trouble:
        parts.append("<table><tr><th>student</th><th>assignment</th><th>status</th><th>what happened</th></tr>"
                     + "".join(f"<tr><td>{html.escape(r.student_id)}</td><td>{html.escape(r.assignment)}</td>"
                               f"<td>{html.escape(r.status)}</td><td>{html.escape('; '.join(r.notes))}</td></tr>"
                               for r in trouble) + "</table>")
    if policy is not None:
        parts.append(_lateness(results, policy))
    flagged = [r for r in results if r.flags]
    parts.append(f"<h2>Flagged for a look ({len(flagged)})</h2><p>Code that reaches for the grader, "
                 "the reference or the interpreter's hooks. Scores are decided outside the student's "
                 "process, so this changes no point; it says where to look.</p>")
    if flagged:
        parts.append("<table><tr><th>student</th><th>assignment</th><th>what the code does</th></tr>"
                     + "".join(f"<tr><td>{html.escape(r.student_id)}</td><td>{html.escape(r.assignment)}</td>"
                               f"<td>{'<br>'.join(map(html.escape, r.flags))}</td></tr>" for r in flagged)
                     + "</table>")
    return _page("Grading summary", "".join(parts))


def _students_table(results, policy):
    """Every student with their score on each assignment (after any late penalty), linked to
    the feedback page that explains it."""
    names = list(dict.fromkeys(r.assignment for r in results))
    by_student = collections.defaultdict(dict)
    for r in results:
        by_student[r.student_id][r.assignment] = r

    def cell(r):
        if r is None:
            return "<td></td>"
        late = policy and r.status != "missing" and deadlines.assess(policy, r.student_id, r.submitted_at)
        status = "" if r.status == "graded" else f" ({html.escape(r.status)})"
        # ids and names are the grader's (collect.STUDENT_ID), quoted and escaped all the same
        url = f"feedback/{urllib.parse.quote(r.student_id, safe='')}/{urllib.parse.quote(r.assignment, safe='')}.html"
        return (f"<td><a href='{html.escape(url)}'>{number(_score(r, late or None))} / "
                f"{number(r.max_score)}</a>{status}</td>")

    return ("<h2>Students</h2><table><tr><th>student</th>"
            + "".join(f"<th>{html.escape(name)}</th>" for name in names) + "</tr>"
            + "".join(f"<tr><td>{html.escape(student)}</td>" + "".join(cell(row.get(name)) for name in names)
                      + "</tr>" for student, row in sorted(by_student.items())) + "</table>")


def _cells(*values):
    return "".join(f"<td>{html.escape(str(value))}</td>" for value in values)


def _lateness(results, policy):
    """Who handed in late and by how much, and whose time is unknown."""
    late, untimed = [], []
    for r in results:
        if r.status == "missing":
            continue
        lateness = deadlines.assess(policy, r.student_id, r.submitted_at)
        if lateness.submitted_at is None:
            untimed.append(r)
        elif lateness.late_days:
            late.append((r, lateness))
    parts = [f"<h2>Late ({plural(len(late), 'submission')} of {plural(len({r.student_id for r, _ in late}), 'student')})"
             f"</h2><p>Due {html.escape(policy.due.isoformat())} "
             f"({plural(len(policy.extensions), 'extension')}); {number(100 * policy.penalty)} % off per started day "
             f"late, at most {number(100 * policy.cap)} %.</p>"]
    if late:
        parts.append("<table><tr><th>student</th><th>assignment</th><th>handed in</th><th>due</th>"
                     "<th>late by</th><th>days</th><th>score (raw)</th></tr>" + "".join(
                         "<tr>" + _cells(r.student_id, r.assignment, x.submitted_at.isoformat(), x.due.isoformat(),
                                        deadlines.describe(x.late_by), x.late_days,
                                        f"{number(_score(r, x))} ({number(r.score)})") + "</tr>"
                         for r, x in late) + "</table>")
    parts.append(f"<h2>No submission time ({len(untimed)})</h2><p>Neither the export's file name nor "
                 "timestamp.txt gave a readable time: no penalty was applied (status <b>no-time</b>).</p>")
    if untimed:
        parts.append("<table><tr><th>student</th><th>assignment</th><th>time given</th></tr>" + "".join(
            "<tr>" + _cells(r.student_id, r.assignment, r.submitted_at or "none") + "</tr>" for r in untimed)
            + "</table>")
    return "".join(parts)


def _histogram(scores, max_score, name):
    """The scores' histogram, one column per whole point, as inline SVG (no plotting library:
    the summary is drawn at the end of every batch, and matplotlib cost more than the grading
    of a small class)."""
    top = int(max_score)
    # column k holds the scores in [k − 0.5, k + 0.5), as before (round() would send 0.5 to 0 and 1.5 to 2)
    counts = collections.Counter(min(max(math.floor(score + 0.5), 0), top) for score in scores)
    step = -(-(top + 1) // 12)  # at most about 12 labelled scores
    svg = _columns([counts[k] for k in range(top + 1)], range(0, top + 1, step), "score", "students",
                   f"{name}: scores (out of {number(max_score)})")
    return f"<figure role='img' aria-label='histogram of the scores of {html.escape(name)}'>{svg}</figure>"


def _bars(names, shares, name):
    """The share of submissions failing each check, one horizontal bar per check, as inline SVG."""
    label = min(260, 7 * max(map(len, names)) + 10)  # room for the checks' names
    width, row, top, bottom = 520, 18, 28, 34
    height = top + row * len(names) + bottom
    scale = (width - label - 16) / 100
    parts = [_svg_text(width / 2, 16, f"{name}: checks failed", "middle", "title")]
    for i, (check, share) in enumerate(zip(names, shares)):
        y = top + i * row
        parts.append(_svg_text(label - 6, y + row / 2 + 4, check, "end", "label"))
        parts.append(f"<rect x='{label}' y='{y + 2}' width='{100 * share * scale:.1f}' height='{row - 4}' "
                     "fill='#cc6677'/>")
    axis = top + row * len(names)
    parts.append(f"<line x1='{label}' y1='{axis}' x2='{label + 100 * scale:.1f}' y2='{axis}' stroke='#444'/>")
    for percent in range(0, 101, 20):
        x = label + percent * scale
        parts.append(f"<line x1='{x:.1f}' y1='{axis}' x2='{x:.1f}' y2='{axis + 4}' stroke='#444'/>")
        parts.append(_svg_text(x, axis + 15, str(percent), "middle", "tick-x"))
    parts.append(_svg_text(label + 50 * scale, axis + 29, "% of submissions failing", "middle", "axis"))
    svg = _svg_chart(width, height, parts)
    return f"<figure role='img' aria-label='share of students failing each check of {html.escape(name)}'>{svg}</figure>"


def _columns(counts, ticks, x_label, y_label, title):
    """Vertical bars, `counts[k]` at x = k, whole-number ticks at `ticks` and on the y axis."""
    width, height, left, right, top, bottom = 520, 210, 46, 12, 28, 40
    plot_width, plot_height = width - left - right, height - top - bottom
    column = plot_width / len(counts)
    y_step = -(-max(max(counts), 1) // 5)  # whole numbers of students, about five ticks
    y_top = y_step * -(-max(max(counts), 1) // y_step)
    parts = [_svg_text(width / 2, 16, title, "middle", "title")]
    for k, count in enumerate(counts):
        bar = count / y_top * plot_height
        parts.append(f"<rect x='{left + (k + 0.05) * column:.1f}' y='{top + plot_height - bar:.1f}' "
                     f"width='{0.9 * column:.1f}' height='{bar:.1f}' fill='#4477aa'/>")
    base = top + plot_height
    parts.append(f"<line x1='{left}' y1='{base}' x2='{width - right}' y2='{base}' stroke='#444'/>")
    parts.append(f"<line x1='{left}' y1='{top}' x2='{left}' y2='{base}' stroke='#444'/>")
    for k in ticks:
        x = left + (k + 0.5) * column
        parts.append(f"<line x1='{x:.1f}' y1='{base}' x2='{x:.1f}' y2='{base + 4}' stroke='#444'/>")
        parts.append(_svg_text(x, base + 15, str(k), "middle", "tick-x"))
    for count in range(0, y_top + 1, y_step):
        y = base - count / y_top * plot_height
        parts.append(f"<line x1='{left - 4}' y1='{y:.1f}' x2='{left}' y2='{y:.1f}' stroke='#444'/>")
        parts.append(_svg_text(left - 7, y + 4, str(count), "end", "tick-y"))
    parts.append(_svg_text(left + plot_width / 2, height - 6, x_label, "middle", "axis"))
    parts.append(f"<text x='12' y='{top + plot_height / 2:.1f}' transform='rotate(-90 12 {top + plot_height / 2:.1f})' "
                 f"text-anchor='middle' class='axis'>{html.escape(y_label)}</text>")
    return _svg_chart(width, height, parts)


def _svg_text(x, y, text, anchor, kind):
    return f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}' class='{kind}'>{html.escape(str(text))}</text>"


def _svg_chart(width, height, parts):
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='11' fill='#222'>"
            + "".join(parts) + "</svg>")


# -- progress ------------------------------------------------------------------------

class Progress:
    """A progress bar on a terminal, a plain line per submission otherwise."""

    def __init__(self, total, log):
        self.total, self.done, self.log = total, 0, log
        self.bar = None
        if total and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="submission", file=sys.stderr)

    def update(self, result):
        self.done += 1
        line = (f"[{self.done}/{self.total}] {result.student_id} {result.assignment}: {result.status} "
                f"{number(result.score)}/{number(result.max_score)}")
        if self.bar is not None:
            self.bar.set_postfix_str(line, refresh=False)
            self.bar.update()
        else:
            self.log(line)

    def close(self):
        if self.bar is not None:
            self.bar.close()
