"""Finding the submissions of a batch, in the layouts instructors have them.

- a folder `<student_id>/<assignment>.ipynb` (FLAT), or nbgrader's
  `<student_id>/<assignment>/<notebook>.ipynb` (NBGRADER: an nbgrader course's
  `submitted/` folder, or the course folder that holds it), or a `.zip` of
  either (with or without a top folder around the student folders);
- the flat export of a learning-management system: one file per student and
  assignment with the student's id in its name, recognised as nbgrader's
  `zip_collect` does, with its `FileNameCollectorPlugin` and a regular
  expression with the named groups `student_id` and `file_id` (optionally
  `timestamp`: of several attempts the latest is graded).

Nothing is followed or extracted outside its place: links, absolute paths,
`..`, control characters and absurd names are reported and skipped. A
notebook that is found but cannot be graded (a link, not a regular file,
too large) still becomes a Submission, with the `problem` (status, reason)
that its row in grades.csv gives.

A submission's time, for deadlines, is the `timestamp` of an export's file
name or the text of the layout's `timestamp.txt`: `<student_id>/timestamp.txt`
in the flat layout, `<student_id>/<assignment>/timestamp.txt` beside the
notebooks in nbgrader's (where nbgrader writes it).
"""

import logging
import os
import re
import string
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# Student ids become folder names: letters, digits and a few separators only.
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}$")
# nbgrader's documented example for exported attempts, e.g.
# `ps1_bitdiddle_attempt_2016-01-30-15-00-00_assignment_one.ipynb`.
LMS_PATTERN = r".*_(?P<student_id>\w+)_attempt_(?P<timestamp>[0-9\-]+)_(?P<file_id>\w+)"
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
MAX_ARCHIVE_BYTES = 4 * 1024 ** 3   # all extracted files together
MAX_ARCHIVE_FILES = 100_000
MAX_NAME = 255
# (status, reason) of notebooks found but never read
LINK = ("link", "the notebook is a symbolic link (links are not followed)")
NOT_A_FILE = ("not-a-file", "the notebook is not a regular file (a folder, a pipe or a device)")
TOO_LARGE = ("too-large", f"the notebook is larger than {MAX_NOTEBOOK_BYTES // 2 ** 20} MB")


@dataclass(frozen=True)
class Layout:
    """Where files are, as one pattern (`{student_id}/{assignment}.ipynb`) that builds the
    relative path of given fields and parses a relative path back into its fields."""
    pattern: str
    timestamp: str = ""     # where nbgrader's timestamp.txt is, if the layout has one

    def path(self, **fields):
        return PurePosixPath(self.pattern.format(**fields))

    def parse(self, relative):
        """{field: value} of the relative path `relative`, or None if it does not fit."""
        match = self._regex.fullmatch(PurePosixPath(relative).as_posix())
        return match.groupdict() if match else None

    @property
    def _regex(self):
        parts = [re.escape(text) + (f"(?P<{name}>[^/]+?)" if name else "")
                 for text, name, _, _ in string.Formatter().parse(self.pattern)]
        return re.compile("".join(parts))


FLAT = Layout("{student_id}/{assignment}.ipynb", timestamp="{student_id}/timestamp.txt")
NBGRADER = Layout("{student_id}/{assignment}/{notebook}.ipynb",
                  timestamp="{student_id}/{assignment}/timestamp.txt")
SUBMITTED = "submitted"  # nbgrader's folder of submissions in a course folder


@dataclass(frozen=True)
class Submission:
    student_id: str
    assignment: str
    path: Path | None           # the notebook (FLAT) or the assignment's folder of notebooks
                                # (NBGRADER); None: nothing to read (missing, or see `problem`)
    timestamp: str = ""         # when it was handed in, as the LMS or nbgrader wrote it
    problem: tuple | None = None  # (status, reason) of a notebook found but not gradable


def _problem(path, folder=False):
    """(status, reason) if the notebook (or nbgrader's folder of notebooks) at `path` must not
    be read, else None."""
    if path.is_symlink():
        return LINK
    if folder:
        return None
    if not path.is_file():
        return NOT_A_FILE
    return TOO_LARGE if path.stat().st_size > MAX_NOTEBOOK_BYTES else None


def unpack(path, destination, log, refused=None):
    """The folder of submissions: `path` itself, or a zip extracted safely into `destination`.

    Members not extracted are appended to `refused` as (path parts, status, reason)."""
    if path.is_dir():
        return path
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is neither a folder nor a .zip of submissions")
    destination.mkdir(parents=True)
    total = 0
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if len(members) > MAX_ARCHIVE_FILES:
            raise ValueError(f"{path} holds {len(members)} files, more than {MAX_ARCHIVE_FILES}")
        for member in members:
            if member.is_dir():
                continue
            status, problem = "unreadable", _unsafe(member.filename)
            if problem is None and stat.S_ISLNK(member.external_attr >> 16):
                status, problem = LINK
            elif problem is None and member.file_size > MAX_NOTEBOOK_BYTES:
                status, problem = TOO_LARGE
            total += member.file_size
            if problem is None and total > MAX_ARCHIVE_BYTES:
                problem = f"the archive unpacks to more than {MAX_ARCHIVE_BYTES} bytes"
            if problem:
                log(f"skipped {member.filename!r} in {path.name}: {problem}")
                if refused is not None:
                    refused.append((PurePosixPath(member.filename).parts, status, problem))
                continue
            target = destination.joinpath(*PurePosixPath(member.filename).parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(target, "wb") as sink:
                # read at most the declared size plus one byte: a lying header cannot flood the disk
                sink.write(source.read(MAX_NOTEBOOK_BYTES + 1))
    entries = list(destination.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not any(entries[0].glob("*.ipynb")):
        return entries[0]  # a zip of the folder itself: one top folder around the students
    return destination


def _unsafe(name):
    """Why a path from an archive must not be extracted, or None."""
    if len(name) > 4 * MAX_NAME or any(ord(c) < 32 or c == "\\" for c in name):
        return "an absurd name"
    parts = PurePosixPath(name).parts
    if name.startswith("/") or not parts or ".." in parts or any(len(p) > MAX_NAME for p in parts):
        return "not a plain relative path"
    return None


def collect(folder, known, log, lms_pattern=LMS_PATTERN, submitted=SUBMITTED):
    """[Submission] under `folder` (or its `submitted` folder, if it has one) for the assignments
    `known`; the rest is reported."""
    if submitted and (folder / submitted).is_dir() and not (folder / submitted).is_symlink():
        folder = folder / submitted  # an nbgrader course's folder
    batch = []
    lms, attempts = None, {}
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() and entry.suffix == ".ipynb":
            lms = lms or _lms_plugin(lms_pattern)
            found = _lms_file(entry, lms, known, log)
            if found:  # a linked export file: its row says so
                batch.append(Submission(found[0], found[1], None, found[2], _problem(entry)))
        elif entry.is_symlink():
            log(f"skipped {entry.name!r}: a link (not followed)")
        elif entry.is_dir():
            batch += _student_folder(entry, known, log)
        elif entry.is_file() and entry.suffix == ".ipynb":
            lms = lms or _lms_plugin(lms_pattern)
            found = _lms_file(entry, lms, known, log)
            if found:
                key = found[:2]
                if key not in attempts or found[2] > attempts[key][2]:
                    attempts[key] = found
        else:
            log(f"skipped {entry.name!r}: neither a student folder nor a notebook")
    for (student, assignment), (_, _, timestamp, path) in sorted(attempts.items()):
        if any(s.student_id == student and s.assignment == assignment for s in batch):
            log(f"skipped {path.name!r}: {student} also has a folder with {assignment}.ipynb")
            continue
        problem = _problem(path)
        batch.append(Submission(student, assignment, None if problem else path, timestamp, problem))
    return sorted(batch, key=lambda s: (s.student_id, s.assignment))


def refused_rows(refused, known, batch):
    """Submissions for notebooks of either layout that `unpack` refused (a link, too large...), so
    that they get their row; others were reported by `unpack`."""
    taken = {(s.student_id, s.assignment) for s in batch}
    rows = []
    for parts, status, reason in refused:
        nested = NBGRADER.parse("/".join(parts[-3:])) if len(parts) >= 3 else None
        fields = nested if nested and nested["assignment"] in known else FLAT.parse("/".join(parts[-2:]))
        if fields:
            student, assignment = fields["student_id"], fields["assignment"]
            if STUDENT_ID.match(student) and assignment in known and (student, assignment) not in taken:
                taken.add((student, assignment))
                rows.append(Submission(student, assignment, None, "", (status, reason)))
    return rows


def _lms_plugin(pattern):
    # nbgrader takes seconds to import: only for exports
    from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
    return FileNameCollectorPlugin(named_regexp=pattern, log=logging.getLogger("autograder.collect"))


def _student_folder(folder, known, log):
    """The Submissions of one student's folder, in either layout (FLAT or NBGRADER)."""
    if not STUDENT_ID.match(folder.name):
        log(f"skipped {folder.name!r}: not a valid student id")
        return []
    student, root = folder.name, folder.parent
    found = []
    for path in sorted(folder.iterdir()):
        relative = path.relative_to(root)
        flat = FLAT.parse(relative)
        if path.name == "timestamp.txt":
            continue
        if flat and flat["assignment"] in known:
            problem = _problem(path)
            timestamp = _timestamp(root / FLAT.timestamp.format(student_id=student))
            found.append(Submission(student, flat["assignment"], None if problem else path, timestamp, problem))
        elif path.name in known and (path.is_dir() or path.is_symlink()):  # NBGRADER: notebooks inside
            problem = _problem(path, folder=True)
            timestamp = _timestamp(root / NBGRADER.timestamp.format(student_id=student, assignment=path.name))
            found.append(Submission(student, path.name, None if problem else path, timestamp, problem))
        elif path.is_symlink() or not path.is_file():
            log(f"skipped {student}/{path.name}: not a plain file (links and folders are not followed)")
        else:
            log(f"skipped {student}/{path.name}: not <assignment>.ipynb for one of {sorted(known)}")
    return found


def notebooks(submission, names):
    """{notebook name: path} of the notebooks `names` of the assignment in `submission`: in its
    folder (NBGRADER), or its one notebook (FLAT, an assignment of one notebook)."""
    path = submission.path
    if path is None:
        return {}
    if path.is_dir():
        return {name: path / f"{name}.ipynb" for name in names}
    return {names[0]: path} if len(names) == 1 else {}


def problem_of(path, missing="no notebook was handed in"):
    """(status, reason) if the notebook at `path` (None: not there) cannot be read, else None."""
    if path is None or not (path.exists() or path.is_symlink()):
        return "missing", missing
    return _problem(path)


def _timestamp(path):
    """The text of nbgrader's timestamp.txt ('' if absent, a link or absurdly long)."""
    try:
        if path.is_file() and not path.is_symlink() and path.stat().st_size < 1000:
            return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        pass
    return ""


def _lms_file(path, lms, known, log):
    """(student, assignment, timestamp, path) of an exported file, or None (reported)."""
    match = lms.collect(str(path))
    if not match or not match.get("student_id") or not match.get("file_id"):
        log(f"skipped {path.name!r}: its name does not say whose it is (expected e.g. "
            "`ps1_<student_id>_attempt_<timestamp>_<assignment>.ipynb`)")
        return None
    student, assignment = match["student_id"], os.path.basename(match["file_id"]).removesuffix(".ipynb")
    if not STUDENT_ID.match(student) or assignment not in known:
        log(f"skipped {path.name!r}: not a known assignment of a valid student id")
        return None
    return student, assignment, match.get("timestamp") or "", path

