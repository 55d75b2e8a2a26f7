"""The instructor's summary page: every student's scores, and per assignment its histogram, the
checks failed most with their commonest reasons and the submissions that were not simply graded
(SVG charts drawn here, inline)."""

import collections
import html
import math
import urllib.parse

from . import deadlines
from .feedback import _task
from .report import _page, _score, number, plural


def summary_html(course, results, policy=None, similarity=()):
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
            rows.append(f"<tr><td>{_task(course, name, check, link=False)} (<code>{html.escape(check)}</code>)</td>"
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
