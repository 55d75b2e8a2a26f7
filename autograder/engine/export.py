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

Export never loses a grade silently. Students of the roster with no result
get an empty cell; but a result whose student has no roster row (matched
exactly, or ignoring case when that is unambiguous), a Moodle export whose
`email` column would hold ids that are not e-mail addresses, or a roster
column whose points possible differ from the assignment's maximum refuses
the export (`Refused`: nothing is written, the command exits 1 naming the
students or columns), unless `allow_unmatched` (write the others, list the
unmatched) or `rescale` (score × the roster's points / ours) says otherwise.
Cells that come from the grader (student ids, scores) are written
spreadsheet-safe; the roster's own cells are the LMS's and go back
unchanged, as its import matches on them.
"""

import collections
import csv
import io
import math
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path

import nbformat

from . import deadlines, nbgrader_course
from .course import assignments, make_course_dir, nbgrader
from .report import number, plural, spreadsheet_safe
from .results import load_results

MATCH_COLUMNS = {"canvas": "SIS Login ID", "moodle": "email", "blackboard": "Username"}
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Root Account", "Section"]
POINTS_POSSIBLE = "Points Possible"


def read_grades(course, out):
    """({(student_id, assignment): score}, {assignment: max_score}, [assignments in order]) of OUT
    (in the order of `course`)."""
    path = Path(out) / "grades.csv"
    if not path.is_file():
        raise ValueError(f"{path} does not exist: is {out} the OUT folder of `grade`?")
    scores, maxima = {}, {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            scores[row["student_id"], row["assignment"]] = float(row["score"])
            maxima[row["assignment"]] = float(row["max_score"])
    order = {name: i for i, name in enumerate(assignments(course))}
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


class Refused(Exception):
    """The export would leave a result without its grade or misstate one: nothing was written."""


@dataclass
class Grade:
    """A grade cell of a sheet, filled in once the export is known to be safe."""
    student: str  # the result's student id, or None (a roster row with no result: an empty cell)
    name: str


@dataclass
class Sheet:
    """What a format writes: cells are text or Grade."""
    header: list
    rows: list
    matched: set  # the student ids of the results that have a row
    points: dict  # assignment -> the points possible of the roster's column for it, where it says
    why: str = "no row in the roster"  # what a result not matched lacks
    hint: str = ""  # what the ids must be, for the message on unmatched results
    note: str = ""  # for the instructor, once written
    quoting: int = csv.QUOTE_MINIMAL


def export(course, out, to, output, roster=None, match_column=None, allow_unmatched=False, rescale=False, log=None):
    """Write the grades of `out` in the format `to` into `output`; return the students written.

    Raises Refused, writing nothing, when a result would get no row (unless
    `allow_unmatched`) or a roster column's points possible differ from the
    assignment's maximum (unless `rescale`: score × the roster's points / ours)."""
    log = log or (lambda message: print(message, file=sys.stderr))
    if to not in FORMATS:
        raise ValueError(f"unknown format {to!r}: one of {', '.join(sorted(FORMATS))}")
    scores, maxima, names = read_grades(course, out)
    if to == "nbgrader":  # every result gets its student, and the maxima are ours
        return to_nbgrader(course, out, Path(output), scores, names)
    sheet = FORMATS[to](scores, maxima, names, roster, match_column or MATCH_COLUMNS[to])
    unmatched = sorted({student for student, _ in scores} - sheet.matched)
    differ = {name: points for name, points in sheet.points.items() if not math.isclose(points, maxima[name])}
    problems = []
    if unmatched and not allow_unmatched:
        problems.append(f"{_unmatched(unmatched, sheet.why)}. {sheet.hint} (or --allow-unmatched to export "
                        "the others)")
    if differ and not rescale:
        problems.append(f"{_differ(differ, maxima)}. Set the points possible in the LMS to ours, or give "
                        "--rescale to scale each score to the roster's (score × its points / ours)")
    if rescale and any(maxima[name] <= 0 for name in differ):
        problems.append("an assignment with 0 points cannot be rescaled")
    if problems:
        raise Refused("\n".join(problems) + f"\nNothing was written to {output}.")
    if unmatched:
        log(f"{_unmatched(unmatched, sheet.why + ' (left out)')}")
    if differ:
        log(f"{_differ(differ, maxima)}: scores rescaled to the roster's points")
    factors = {name: points / maxima[name] for name, points in differ.items()}

    def text(cell):
        if not isinstance(cell, Grade):
            return cell
        score = scores.get((cell.student, cell.name))
        return "" if score is None else number(round(score * factors.get(cell.name, 1.0), 4))

    _write(Path(output), sheet.header, [[text(cell) for cell in row] for row in sheet.rows], sheet.quoting)
    if sheet.note:
        log(sheet.note)
    return sorted(sheet.matched)


def _unmatched(students, why):
    return f"{plural(len(students), 'student')} {'has' if len(students) == 1 else 'have'} a result but {why}: " \
           f"{', '.join(students)}"


def _differ(differ, maxima):
    return "points possible differ: " + "; ".join(
        f"{name} has {number(points)} in the roster, {number(maxima[name])} here" for name, points in differ.items())


def _write(path, header, rows, quoting=csv.QUOTE_MINIMAL):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, quoting=quoting, lineterminator="\r\n")
        writer.writerow(header)
        writer.writerows(rows)


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


def _matcher(scores):
    """roster id -> the student id of the results it is (the same, or the same ignoring case
    when only one is), or None."""
    ids = {student for student, _ in scores}
    folded = collections.defaultdict(list)
    for student in ids:
        folded[student.casefold()].append(student)

    def match(value):
        value = value.strip()
        found = [value] if value in ids else folded.get(value.casefold(), [])
        return found[0] if len(found) == 1 else None
    return match


def _hint(column, values):
    """What the student ids must be to match the roster's `column` (with one of its values)."""
    example = next((value.strip() for value in values if value.strip()), None)
    return (f"Students are matched on the roster's column {column!r}"
            + (f" (e.g. {example!r})" if example else "")
            + ": the grader's student ids (the submission folders' names) must be what it holds; "
              "give --match-column for another column")


def _points(text):
    try:
        return float(text)
    except ValueError:
        return None  # Canvas's "(read only)", an empty cell


def to_canvas(scores, maxima, names, roster, match_column):
    if roster is None:
        raise ValueError("--to canvas needs --roster: the course's gradebook exported from Canvas")
    header, rows = read_roster(roster)
    column = _match_index(header, match_column, roster)
    identity = [header.index(title) for title in CANVAS_IDENTITY if title in header]
    if not {"Student", "ID", "Section"} <= {header[i] for i in identity}:
        raise ValueError(f"{roster} is not a Canvas gradebook export (it needs Student, ID and Section)")
    columns = [_column(header, name, r"(\s*\(\d+\))?") for name in names]
    titles = [header[i] if i is not None else name for i, name in zip(columns, names)]
    match, points, matched, out_rows, students = _matcher(scores), {}, set(), [], []
    for row in rows:
        if row[0].strip() == POINTS_POSSIBLE:  # the row under the header: each column's maximum
            for i, name in zip(columns, names):
                if i is not None and _points(row[i]) is not None:
                    points[name] = _points(row[i])
            out_rows.append([row[i] for i in identity] + [
                row[i] if i is not None and row[i].strip() else number(maxima[name])
                for i, name in zip(columns, names)])
        elif row[header.index("ID")].strip():  # a student (other rows are Canvas's settings)
            students.append(row)
            student = match(row[column])
            matched.add(student)
            out_rows.append([row[i] for i in identity] + [Grade(student, name) for name in names])
    if not any(row[0].strip() == POINTS_POSSIBLE for row in rows):
        out_rows.insert(0, [POINTS_POSSIBLE] + [""] * (len(identity) - 1) + [number(maxima[n]) for n in names])
    return Sheet([header[i] for i in identity] + titles, out_rows, matched - {None}, points,
                 hint=_hint(match_column, [row[column] for row in students]))


def _students(scores, roster, match_column, alias=None):
    """([(id as written, student id of the results or None)], roster header, hint): the roster's
    rows by its `match_column` (or `alias`, the LMS's own name for it), or without a roster the
    students of the results."""
    if roster is None:
        return [(student, student) for student in sorted({student for student, _ in scores})], [], ""
    header, rows = read_roster(roster)
    column = alias if match_column not in header and alias in header else match_column
    index = _match_index(header, column, roster)
    match = _matcher(scores)
    return ([(row[index].strip(), match(row[index])) for row in rows], header,
            _hint(column, [row[index] for row in rows]))


def _sheet(header, students, names, points=None, **fields):
    """The Sheet of one row per student: the id as written, then a grade per assignment."""
    rows = [[spreadsheet_safe(written), *(Grade(student, name) for name in names)] for written, student in students]
    return Sheet(header, rows, {student for _, student in students} - {None}, points or {}, **fields)


def to_moodle(scores, maxima, names, roster, match_column):
    # Moodle's own grade export calls the column "Email address"
    students, _, hint = _students(scores, roster, match_column, "Email address" if match_column == "email" else None)
    why = Sheet.why
    if roster is None and match_column == "email":  # Moodle would find no user for the others
        students = [(written, student) for written, student in students if "@" in student]
        why = "an id that is not an e-mail address"
        hint = ("Moodle matches the column email with its users' e-mail addresses: name the submission "
                "folders by e-mail address, or give --match-column with the user field the ids are "
                "(username, idnumber) and map it to that field on import")
    # Moodle's grade export says no grade item's maximum: the instructor checks them
    note = ("Moodle imports the scores as they are: each grade item's maximum grade must be the "
            "assignment's (" + ", ".join(f"{name} {number(maxima[name])}" for name in names) + ")")
    return _sheet([match_column, *names], students, names, why=why, hint=hint, note=note)


def to_blackboard(scores, maxima, names, roster, match_column):
    students, header, hint = _students(scores, roster, match_column)
    titles, points = [], {}
    for name in names:  # an existing Grade Center column keeps its header, with its id; else a new one
        index = _column(header, name, r"\s*\[Total Pts:[^\]]*\](\s*\|\s*\d+)?")
        if index is None:
            titles.append(f"{name} [Total Pts: {number(maxima[name])}]")
            continue
        titles.append(header[index])
        given = re.search(r"\[Total Pts:\s*([0-9.]+)", header[index])
        if given and _points(given[1]) is not None:
            points[name] = _points(given[1])
    return _sheet(["Username", *titles], students, names, points, hint=hint, quoting=csv.QUOTE_ALL)


def to_nbgrader(course, out, output, scores, names, regraded=None, autograded=None):
    """Write the results of `out` into the nbgrader gradebook `output` (created or updated): into a
    copy beside it, which replaces it only once complete (a failed export leaves `output` as it was,
    or absent).

    What a person entered in the formgrader stays, as it does under `nbgrader autograde`: every
    manual score and comment. `regraded` ({(student, assignment)}: those graded in this run, None
    for all) are recorded as autograde records a submission it grades (`_record_grades`); the
    others keep their grades as recorded, as autograde skips a submission it graded before, unless
    the gradebook has none of theirs yet. `autograded`: the folder whose autograded notebooks give
    the answer cells' automatic comments (an nbgrader course graded in place), or None."""
    output = Path(output).resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".partial", dir=output.parent)
    os.close(handle)
    temporary = Path(temporary)
    try:
        if output.is_file():
            shutil.copyfile(output, temporary)
        else:
            temporary.unlink()  # nbgrader creates its database
        written = _write_gradebook(course, out, temporary, scores, names, regraded, autograded)
        os.replace(temporary, output)
    finally:
        temporary.unlink(missing_ok=True)
    return written


def _write_gradebook(course, out, output, scores, names, regraded=None, autograded=None):
    from nbgrader.api import Gradebook, MissingEntry

    url = f"sqlite:///{output}"
    _generate(course, names, url)
    policy = deadlines.load(out)
    written = []
    # nbgrader's course id, as its own commands open the gradebook (an nbgrader course's
    # CourseDirectory.course_id; our course's id is the one its nbgrader_config.py gives)
    course_id = nbgrader_course.course_directory(course.root).course_id if course.nbgrader else course.id
    with Gradebook(url, course_id) as gradebook:
        for name in names if policy else ():  # nbgrader keeps times in UTC, without a zone
            gradebook.update_or_create_assignment(
                name, duedate=policy.due.astimezone(timezone.utc).replace(tzinfo=None))
        for result in load_results(course, out):
            if result.assignment not in names or result.status == "missing":
                continue  # no submission: nbgrader counts it as zero, as we do
            student = result.student_id
            gradebook.update_or_create_student(student)
            written.append(student)
            try:
                submission = gradebook.find_submission(result.assignment, student)
                graded_now = regraded is None or (student, result.assignment) in regraded
            except MissingEntry:
                submission = gradebook.add_submission(result.assignment, student)
                graded_now = True
            late = policy and deadlines.assess(policy, student, result.submitted_at)
            moment = _time(result.submitted_at)
            if moment is not None:  # as autograde records timestamp.txt (the formgrader compares them)
                submission.timestamp = moment.astimezone(timezone.utc).replace(tzinfo=None)
            if graded_now:
                _record_grades(gradebook, result, autograded)
            # the penalty in points, on each notebook's own score as nbgrader's AssignLatePenalties
            # puts it: nbgrader's score is the sum of the checks minus it
            factor = scores[student, result.assignment] / result.score if late and result.score else 1.0
            for name in {check.notebook or result.assignment for check in result.checks}:
                notebook = gradebook.find_submission_notebook(name, result.assignment, student)
                own = sum(c.score for c in result.checks if (c.notebook or result.assignment) == name)
                notebook.late_submission_penalty = own - own * factor if late else None
            gradebook.db.commit()
    return written


def _record_grades(gradebook, result, autograded=None):
    """Record the checks of `result` as nbgrader's SaveAutoGrades records a submission it grades
    (with --force too): the autograded score (none for what a person grades), the manual score and
    comment kept (a task left to a person untouched), and the cell flagged for a person when it
    has no autograded score or a person scored it before (the new grade needs a new look); each
    answer cell's automatic comment "No response." when it was left as released, from the
    notebook autograded in `autograded`."""
    from nbgrader.api import TaskCell

    for check in result.checks:
        grade = gradebook.find_grade(check.name, check.notebook or result.assignment, result.assignment,
                                     result.student_id)
        if check.manual and isinstance(grade.cell, TaskCell):
            continue  # autograde scores grade cells only: a task keeps what a person gave it
        grade.auto_score = None if check.manual else check.score
        grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
    if autograded is not None:
        _record_comments(gradebook, result, autograded)


def _record_comments(gradebook, result, autograded):
    """SaveAutoGrades's automatic comments of the answer cells and tasks of each notebook of
    `result` autograded under `autograded` (a notebook not handed in has none: autograde leaves its
    comments as they are)."""
    from nbgrader.api import MissingEntry
    from nbgrader.utils import compute_checksum

    folder = nbgrader_course.autograded_folder(autograded, result.student_id, result.assignment)
    for name in sorted({check.notebook or result.assignment for check in result.checks}):
        path = folder / f"{name}.ipynb"
        if not path.is_file():
            continue
        for cell in nbformat.read(path, as_version=4).cells:
            meta = nbgrader_course.nbgrader_meta(cell)
            if not (nbgrader_course.is_solution(cell) or nbgrader_course.is_task(cell)) or "grade_id" not in meta:
                continue
            try:
                comment = gradebook.find_comment(meta["grade_id"], name, result.assignment, result.student_id)
            except MissingEntry:
                continue
            untouched = meta.get("checksum") == compute_checksum(cell) and not nbgrader_course.is_task(cell)
            comment.auto_comment = "No response." if untouched else None


def _time(text):
    """The aware datetime of a submission's time (text, may be ''), or None."""
    try:
        return deadlines.parse_time(text, assume_utc=True) if text else None
    except ValueError:
        return None


def _generate(course, names, url):
    """Record each assignment in the gradebook `url` as `nbgrader generate_assignment` does, by
    running it on the instructor sources in a temporary course directory."""
    with tempfile.TemporaryDirectory(prefix="nbgrader-export-") as tmp:
        make_course_dir(course, tmp, names)
        for name in names:
            process = nbgrader(course, tmp, "generate_assignment", name, "--force", f"--db={url}", timeout=600)
            if process.returncode != 0:
                raise ValueError(f"nbgrader generate_assignment {name} failed: {process.stderr[-2000:]}")


FORMATS = {"canvas": to_canvas, "moodle": to_moodle, "blackboard": to_blackboard, "nbgrader": to_nbgrader}
