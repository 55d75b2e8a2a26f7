"""`python -m autograder export OUT --to FORMAT --output FILE [--roster FILE] [--match-column NAME]`.

Writes the scores of OUT/grades.csv (after any late penalty) where instructors
keep grades, one column per assignment:

- `canvas`: the instructor's own Canvas gradebook export (`--roster`) with the
  columns Canvas needs to import it back (Student, ID, SIS User ID, SIS Login
  ID, Section, and Integration ID / Root Account when present), its
  "Points Possible" row, and one column per assignment: the existing
  `<assignment> (<canvas id>)` column if the gradebook has one, else a new
  `<assignment>` column, which Canvas creates on import (its points possible
  are the assignment's maximum). Students are matched on `SIS Login ID`.
- `moodle`: `email` (or `--match-column`) and one column per assignment, for
  Moodle's "Import grades: CSV file" (map "email" to "Email address", each
  assignment column to its grade item). With `--roster` (Moodle's grade export,
  whose column is "Email address"), its students, matched on that column.
- `blackboard`: Blackboard Learn's Grade Center upload, comma-delimited with
  every field quoted: `Username` and one column per assignment titled
  `<assignment> [Total Pts: <max>]` (a new column), or, when `--roster` is a
  Grade Center download holding that assignment, its own header with the
  column id (`... |12345`), so that the upload updates that column.
- `nbgrader`: the gradebook `--output` (SQLite) through nbgrader's own
  `Gradebook` API, with each assignment as `nbgrader generate_assignment`
  records it; each check's score is the check cell's autograded score, a late
  penalty the notebook's `late_submission_penalty`, so `nbgrader export` and
  the formgrader show our scores.

Students of the roster with no result get an empty cell; results with no
roster row are listed on stderr. Cells that come from the grader (student
ids, scores) are written spreadsheet-safe; the roster's own cells are the
LMS's and go back unchanged, as its import matches on them.
"""

import csv
import io
import re
import sys
import tempfile
from datetime import timezone
from pathlib import Path

from . import course, deadlines
from .report import number, spreadsheet_safe

MATCH_COLUMNS = {"canvas": "SIS Login ID", "moodle": "email", "blackboard": "Username"}
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Root Account", "Section"]
POINTS_POSSIBLE = "Points Possible"


def read_grades(out):
    """({(student_id, assignment): score}, {assignment: max_score}, [assignments in order]) of OUT."""
    path = Path(out) / "grades.csv"
    if not path.is_file():
        raise ValueError(f"{path} does not exist: is {out} the OUT folder of `grade`?")
    scores, maxima = {}, {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            scores[row["student_id"], row["assignment"]] = float(row["score"])
            maxima[row["assignment"]] = float(row["max_score"])
    order = {name: i for i, name in enumerate(course.assignments())}
    return scores, maxima, sorted(maxima, key=lambda name: order.get(name, len(order)))


def read_roster(path):
    """(header, rows) of an LMS export: UTF-8 (with or without BOM) or UTF-16 (Blackboard's
    downloads), comma- or tab-delimited."""
    data = Path(path).read_bytes()
    text = data.decode("utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else data.decode("utf-8-sig")
    first = text.split("\n", 1)[0]
    rows = list(csv.reader(io.StringIO(text), delimiter="\t" if first.count("\t") > first.count(",") else ","))
    if not rows:
        raise ValueError(f"{path} is empty")
    return rows[0], [row + [""] * (len(rows[0]) - len(row)) for row in rows[1:] if any(row)]


def export(out, to, output, roster=None, match_column=None, log=None):
    """Write the grades of `out` in the format `to` into `output`."""
    log = log or (lambda message: print(message, file=sys.stderr))
    if to not in FORMATS:
        raise ValueError(f"unknown format {to!r}: one of {', '.join(sorted(FORMATS))}")
    scores, maxima, names = read_grades(out)
    match_column = match_column or MATCH_COLUMNS.get(to)
    written = FORMATS[to](out, Path(output), scores, maxima, names, roster, match_column)
    unmatched = sorted({student for student, _ in scores} - set(written))
    if unmatched:
        log(f"{len(unmatched)} students have results but no row in the roster: {', '.join(unmatched)}")
    return written


def _write(path, header, rows, quoting=csv.QUOTE_MINIMAL):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, quoting=quoting, lineterminator="\r\n")
        writer.writerow(header)
        writer.writerows(rows)


def _cell(scores, student, name):
    score = scores.get((student, name))
    return "" if score is None else number(score)


def _column(header, name, pattern):
    """The index of the roster's column for assignment `name`, or None."""
    for index, title in enumerate(header):
        if re.fullmatch(re.escape(name) + pattern, title.strip()):
            return index
    return None


def _match_index(header, match_column, path):
    if match_column not in header:
        raise ValueError(f"{path} has no column {match_column!r} (its columns: {', '.join(header)}); "
                         "give the one holding the grader's student ids with --match-column")
    return header.index(match_column)


def to_canvas(out, output, scores, maxima, names, roster, match_column):
    if roster is None:
        raise ValueError("--to canvas needs --roster: the course's gradebook exported from Canvas")
    header, rows = read_roster(roster)
    match = _match_index(header, match_column, roster)
    identity = [header.index(title) for title in CANVAS_IDENTITY if title in header]
    if not {"Student", "ID", "Section"} <= {header[i] for i in identity}:
        raise ValueError(f"{roster} is not a Canvas gradebook export (it needs Student, ID and Section)")
    columns = [_column(header, name, r"(\s*\(\d+\))?") for name in names]
    titles = [header[i] if i is not None else name for i, name in zip(columns, names)]
    out_rows, written = [], []
    for row in rows:
        if row[0].strip() == POINTS_POSSIBLE:  # the row under the header: each column's maximum
            out_rows.append([row[i] for i in identity] + [
                row[i] if i is not None and row[i].strip() else number(maxima[name])
                for i, name in zip(columns, names)])
        elif row[header.index("ID")].strip():  # a student (other rows are Canvas's settings)
            student = row[match].strip()
            written.append(student)
            out_rows.append([row[i] for i in identity] + [_cell(scores, student, name) for name in names])
    if not any(row[0].strip() == POINTS_POSSIBLE for row in rows):
        out_rows.insert(0, [POINTS_POSSIBLE] + [""] * (len(identity) - 1) + [number(maxima[n]) for n in names])
    _write(output, [header[i] for i in identity] + titles, out_rows)
    return written


def _students(scores, roster, match_column, alias=None):
    """(ids, roster header): the roster's `match_column` (or `alias`, the LMS's own name for it),
    or without a roster the students of the results."""
    if roster is None:
        return sorted({student for student, _ in scores}), []
    header, rows = read_roster(roster)
    match = _match_index(header, alias if match_column not in header and alias in header else match_column, roster)
    return [row[match].strip() for row in rows], header


def to_moodle(out, output, scores, maxima, names, roster, match_column):
    # Moodle's own grade export calls the column "Email address"
    ids, _ = _students(scores, roster, match_column, "Email address" if match_column == "email" else None)
    _write(output, [match_column, *names],
           [[spreadsheet_safe(student), *(_cell(scores, student, name) for name in names)] for student in ids])
    return ids


def to_blackboard(out, output, scores, maxima, names, roster, match_column):
    ids, header = _students(scores, roster, match_column)
    titles = []
    for name in names:  # an existing Grade Center column keeps its header, with its id; else a new one
        index = _column(header, name, r"\s*\[Total Pts:[^\]]*\](\s*\|\s*\d+)?")
        titles.append(header[index] if index is not None else f"{name} [Total Pts: {number(maxima[name])}]")
    _write(output, ["Username", *titles],
           [[spreadsheet_safe(student), *(_cell(scores, student, name) for name in names)] for student in ids],
           quoting=csv.QUOTE_ALL)
    return ids


def to_nbgrader(out, output, scores, maxima, names, roster, match_column):
    """Write the results of `out` into the nbgrader gradebook `output` (created or updated)."""
    from nbgrader.api import Gradebook, MissingEntry

    from .grade import load_results

    output = Path(output).resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{output}"
    _generate(names, url)
    policy = deadlines.load(out)
    written = []
    with Gradebook(url) as gradebook:
        for name in names if policy else ():  # nbgrader keeps times in UTC, without a zone
            gradebook.update_or_create_assignment(
                name, duedate=policy.due.astimezone(timezone.utc).replace(tzinfo=None))
        for result in load_results(out):
            if result.assignment not in names or result.status == "missing":
                continue  # no submission: nbgrader counts it as zero, as we do
            student = result.student_id
            gradebook.update_or_create_student(student)
            written.append(student)
            try:
                submission = gradebook.find_submission(result.assignment, student)
            except MissingEntry:
                submission = gradebook.add_submission(result.assignment, student)
            late = policy and deadlines.assess(policy, student, result.submitted_at)
            if late and late.submitted_at is not None:
                submission.timestamp = late.submitted_at.astimezone(timezone.utc).replace(tzinfo=None)
            for check in result.checks:
                grade = gradebook.find_grade(check.name, result.assignment, result.assignment, student)
                # as nbgrader's SaveAutoGrades records an autograded check cell
                grade.auto_score, grade.manual_score, grade.needs_manual_grade = check.score, None, False
            notebook = gradebook.find_submission_notebook(result.assignment, result.assignment, student)
            # the penalty in points: nbgrader's score is the sum of the checks minus it
            notebook.late_submission_penalty = (result.score - scores[student, result.assignment]
                                                if late else None)
            gradebook.db.commit()
    return written


def _generate(names, url):
    """Record each assignment in the gradebook `url` as `nbgrader generate_assignment` does, by
    running it on the instructor sources in a temporary course directory."""
    with tempfile.TemporaryDirectory(prefix="nbgrader-export-") as tmp:
        course.make_course_dir(tmp, names)
        for name in names:
            process = course.nbgrader(tmp, "generate_assignment", name, "--force", f"--db={url}", timeout=600)
            if process.returncode != 0:
                raise ValueError(f"nbgrader generate_assignment {name} failed: {process.stderr[-2000:]}")


FORMATS = {"canvas": to_canvas, "moodle": to_moodle, "blackboard": to_blackboard, "nbgrader": to_nbgrader}
