"""The instructor's command line: `python -m autograder release | grade | merge`."""

import argparse
import re
import sys
from pathlib import Path

from . import grade, release
from .sandbox import Limits, SandboxUnavailable


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="Release the exercise notebooks and grade students' submissions.")
    commands = parser.add_subparsers(dest="command", required=True)

    release_parser = commands.add_parser(
        "release", help="regenerate exercises/ from the instructor notebooks in autograder/source/")
    release_parser.add_argument("assignments", nargs="*", help="default: every assignment")

    defaults = Limits()
    grade_parser = commands.add_parser("grade", help="grade a batch of submissions")
    grade_parser.add_argument("submissions", type=Path,
                              help="a folder <student_id>/<assignment>.ipynb, a .zip of one, or a "
                                   "learning-management system's export (see --lms-pattern)")
    grade_parser.add_argument("--out", type=Path, required=True,
                              help="folder for the results (re-running into it grades only what changed)")
    grade_parser.add_argument("--workers", type=int, default=None,
                              help="submissions graded at once (default: the number of cores)")
    grade_parser.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                              help="grade only share I of N of the students (combine with `merge`)")
    grade_parser.add_argument("--secret", type=Path, default=None, metavar="FILE",
                              help="the key the checks' inputs are drawn from (default OUT/secret.key, "
                                   "created on first use; give shards the same file)")
    grade_parser.add_argument("--lms-pattern", default=None, metavar="REGEX",
                              help="regular expression with the groups student_id and file_id (and "
                                   "optionally timestamp) for the file names of an LMS export, as for "
                                   "nbgrader zip_collect (default: "
                                   "ps1_<student>_attempt_<timestamp>_<assignment>.ipynb)")
    grade_parser.add_argument("--cell-timeout", type=float, default=defaults.cell_seconds, metavar="S",
                              help=f"seconds for one cell (default {defaults.cell_seconds:g})")
    grade_parser.add_argument("--submission-timeout", type=float, default=defaults.submission_seconds,
                              metavar="S", help="seconds for a whole submission "
                                                f"(default {defaults.submission_seconds:g})")
    grade_parser.add_argument("--memory", type=int, default=defaults.memory_bytes // 2 ** 20, metavar="MB",
                              help=f"memory of a notebook (default {defaults.memory_bytes // 2 ** 20})")

    merge_parser = commands.add_parser("merge", help="combine the OUT folders of shards")
    merge_parser.add_argument("shards", nargs="+", type=Path, help="OUT folders of `grade --shard`")
    merge_parser.add_argument("--out", type=Path, required=True, help="folder for the combined results")

    args = parser.parse_args(argv)
    if args.command == "release":
        for path in release.release(names=args.assignments or None):
            print(f"wrote {path}")
        return 0
    if args.command == "merge":
        missing = [str(path) for path in args.shards if not (path / "results").is_dir()]
        if missing:
            parser.error(f"not the output of `grade`: {', '.join(missing)}")
        results = grade.merge(args.shards, args.out)
        print(f"merged {len(results)} results into {args.out}", file=sys.stderr)
        return 0
    if not args.submissions.exists():
        parser.error(f"{args.submissions} does not exist")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    limits = Limits(cell_seconds=args.cell_timeout, call_seconds=min(defaults.call_seconds, args.cell_timeout),
                    submission_seconds=args.submission_timeout, memory_bytes=args.memory * 2 ** 20)
    try:
        results = grade.grade(args.submissions, args.out, workers=args.workers, shard=args.shard,
                              secret=args.secret, limits=limits, lms_pattern=args.lms_pattern)
    except SandboxUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        parser.error(str(error))
    graded = sum(r.status == "graded" for r in results)
    print(f"graded {graded} of {len(results)} submissions without a problem; results in {args.out} "
          f"(summary: {args.out / 'summary.html'})", file=sys.stderr)
    return 0


def _shard(text):
    match = re.fullmatch(r"(\d+)/(\d+)", text)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise argparse.ArgumentTypeError("expected I/N with 1 <= I <= N, e.g. 2/8")
    return int(match[1]), int(match[2])
