"""The instructor's command line: `python -m autograder release | grade`."""

import argparse
import sys
from pathlib import Path

from . import grade, release


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="Release the exercise notebooks and grade students' submissions.")
    commands = parser.add_subparsers(dest="command", required=True)

    release_parser = commands.add_parser(
        "release", help="regenerate exercises/ from the instructor notebooks in autograder/source/")
    release_parser.add_argument("assignments", nargs="*", help="default: every assignment")

    grade_parser = commands.add_parser("grade", help="grade a batch of submissions")
    grade_parser.add_argument("submissions", type=Path,
                              help="a folder <student_id>/<assignment>.ipynb, or a .zip of one")
    grade_parser.add_argument("--out", type=Path, required=True, help="folder for the results")
    grade_parser.add_argument("--workers", type=int, default=None,
                              help="submissions graded at once (default: the number of cores)")

    args = parser.parse_args(argv)
    if args.command == "release":
        for path in release.release(names=args.assignments or None):
            print(f"wrote {path}")
        return 0
    if not args.submissions.exists():
        parser.error(f"{args.submissions} does not exist")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    try:
        results = grade.grade(args.submissions, args.out, workers=args.workers)
    except ValueError as error:
        parser.error(str(error))
    graded = sum(r.status == "graded" for r in results)
    print(f"graded {graded} of {len(results)} submissions; results in {args.out}", file=sys.stderr)
    return 0
