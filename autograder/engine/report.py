"""What every file the grader writes shares: the CSV grades, and the frame of every HTML page
(the student's feedback is in `feedback`, the instructor's summary in `summary`).

Pages are self-contained HTML (inline styles and SVG figures): they open
offline, from a file, in any browser.

Everything a student controls (cells, outputs, messages, ids, file names,
metadata) is data here: it is escaped in HTML (markdown cells are rendered
with raw HTML off, code is highlighted by Pygments, which escapes it), every
page carries a Content-Security-Policy that allows no script, no request and
no stylesheet but our own inline one, and a CSV cell that a spreadsheet would
read as a formula is neutralised as OWASP advises (a leading apostrophe).
"""

import csv
import html
import io

from pygments.formatters import HtmlFormatter

from . import deadlines

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


# -- the frame of every page ------------------------------------------------------------

def _page(title, body):
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<meta name='referrer' content='no-referrer'><title>{html.escape(title)}</title>"
            f"{STYLE}</head><body>{body}</body></html>\n")
