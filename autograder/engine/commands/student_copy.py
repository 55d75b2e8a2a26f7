"""`python -m autograder student-copy DIR [NAME ...]`: what an instructor may publish for students.

Writes into DIR (new or empty) the exercise notebooks that the term releases
(the course file's `[term] released`, from its `exercises`; all of them, or the
assignments NAME), the files of the course
file's `[student_copy] include` (the class edition's sources: chapters that
show the graded functions' signatures, never their bodies) and, as its
README.md, the section `[student_copy] readme_section` of `readme`. Never the
reference packages, the hidden checks' package, the instructor notebooks
(`source`) or the other private packages: an include that holds any of them
is refused. An exercise's given cells hand the student earlier assignments'
functions (the reference's own code), whose bodies are those assignments'
answers: a term that releases an exercise whose given cells hold an answer of
an assignment that is not closed (`[term] closed`: released and graded) is
refused before anything is written, naming the exercise, the functions and
the assignment. The copy is then read back: a file that holds a line of a
hidden check, or of a graded function's body (other than those given cells'),
stops the command, and DIR is left for the instructor to inspect.
"""

import re
import shutil
import sys
from pathlib import Path

from .. import reference
from ..course import assignments


def add(commands):
    parser = commands.add_parser(
        "student-copy", help="write a copy of the course for students: exercises and the class edition's "
                             "sources, without the reference code or hidden checks",
        description=__doc__.partition("\n\n")[2])
    parser.add_argument("dir", type=Path, metavar="DIR", help="the folder to write (new or empty)")
    parser.add_argument("assignments", nargs="*", metavar="NAME",
                        help="the exercises to copy (default: all that the term releases)")
    return parser


def private_paths(course):
    """The folders and files a student copy of `course` never holds."""
    packages = [*course.references, course.checks, *course.private]
    paths = [course.source.resolve()]
    for package in packages:
        folder = course.root / Path(*package.split("."))
        paths += [folder.resolve(), folder.with_suffix(".py").resolve()]
    return paths


def included_files(course, patterns):
    private = private_paths(course)
    files = []
    for pattern in patterns:
        matches = sorted(course.root.glob(pattern))
        if not matches:
            raise ValueError(f"[student_copy] include: {pattern!r} matches nothing")
        for match in matches:
            for path in ([match] if match.is_file() else sorted(p for p in match.rglob("*") if p.is_file())):
                resolved = path.resolve()
                if any(resolved == p or p in resolved.parents or resolved in p.parents for p in private):
                    raise ValueError(f"[student_copy] include: {pattern!r} holds {path}, which is private")
                if "__pycache__" not in path.parts:
                    files.append(path)
    return files


def readme_section(path, heading):
    """The section of Markdown file `path` under the heading `heading` (to the next heading of
    its level or above), as its own document."""
    text = path.read_text(encoding="utf-8")
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
    if not match:
        raise ValueError(f"{path} has no section {heading!r}")
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, match.end())
    return f"# {heading}\n" + text[match.end():end.start() if end else len(text)].rstrip() + "\n"


def term_refusals(course):
    """[message] for each (released exercise, assignment) where the exercise's given cells hold
    answers of that assignment while it is open (released, not closed) or not released:
    releasing the exercise would give those answers away."""
    refusals = []
    for name in course.released:
        answers = {}  # {assignment: names of its graded functions that the given cells hold}
        for function in reference.given(course, name):
            if function.assignment not in course.closed:
                answers.setdefault(function.assignment, []).append(function.name)
        for other, functions in answers.items():
            state, remedy = ("open (released, not closed)", f"close {other} once it is graded") \
                if other in course.released else ("not released", f"release {other} and close it once it is graded")
            refusals.append(f"the exercise {name} is released, but its given cells hold the bodies of "
                            f"{', '.join(functions)}, the answers of the assignment {other}, which is {state}: "
                            f"{remedy} ([term] in {course.file.name}), or take {name} out of [term] released")
    return refusals


def leaks(course, folder):
    """[(file, what)] of the files under `folder` that hold a hidden check or a graded body
    (other than the bodies that an exercise's given cells hold, by design)."""
    from ..assignment import load
    hidden = {line.strip() for name in assignments(course) for test in load(course, name).tests
              for line in test.hidden.splitlines() if len(line.strip()) >= 20}
    answers = reference.distinctive_lines(course)
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        given = reference.given(course, path.stem) if path.suffix == ".ipynb" and path.stem in assignments(course) else []
        if "BEGIN HIDDEN TESTS" in text or any(line in text for line in hidden):
            found.append((path, "a hidden check"))
        found += [(path, f"the body of {function.name}, graded in {function.assignment} ({lines[0]!r})")
                  for function, lines in reference.leaked(text, {f: answers[f] for f in answers if f not in given})]
    return found


def run(course, args, parser):
    if course.nbgrader:
        parser.error("an nbgrader course has no released exercises or book to copy: release it with nbgrader")
    unknown = sorted(set(args.assignments) - set(assignments(course)))
    if unknown:
        parser.error(f"not an assignment of this course: {', '.join(unknown)}")
    unreleased = [name for name in args.assignments if name not in course.released]
    if unreleased:
        parser.error(f"not released this term ([term] released in {course.file.name}): {', '.join(unreleased)}")
    refusals = term_refusals(course)
    for refusal in refusals:
        print(f"error: {refusal}", file=sys.stderr)
    if refusals:
        return 1
    if args.dir.exists() and (not args.dir.is_dir() or any(args.dir.iterdir())):
        parser.error(f"{args.dir} exists and is not an empty folder")
    names = args.assignments or [name for name in assignments(course) if name in course.released]
    try:
        files = included_files(course, course.student_copy_include)
        heading = course.student_copy_readme_section
        text = readme_section(course.student_copy_readme, heading) if heading else None
    except (OSError, ValueError) as error:
        parser.error(str(error))
    exercises = args.dir / course.exercises.relative_to(course.root)
    exercises.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(course.exercises / f"{name}.ipynb", exercises / f"{name}.ipynb")
    for path in files:
        target = args.dir / path.relative_to(course.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    if text is not None:
        (args.dir / "README.md").write_text(text, encoding="utf-8")
    found = leaks(course, args.dir)
    for path, what in found:
        print(f"error: {path} holds {what}", file=sys.stderr)
    if found:
        return 1
    print(f"wrote {args.dir}: {len(names)} exercises and {len(files)} files", file=sys.stderr)
    for name in names:
        earlier = list(dict.fromkeys(function.assignment for function in reference.given(course, name)))
        if earlier:
            print(f"note: the given cells of {name}.ipynb hold answers of {', '.join(earlier)}, "
                  "closed this term", file=sys.stderr)
    return 0
