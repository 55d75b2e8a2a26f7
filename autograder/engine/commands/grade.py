"""`python -m autograder grade SUBMISSIONS --out OUT [options]`.

The options after SUBMISSIONS and --out are also `slurm`'s, which hands them
to every shard (`shard_arguments`): they are defined, and checked, once here.
"""

import argparse
import re
import sys
from pathlib import Path

from .. import deadlines, grade
from ..results import GRADER_ERROR
from ..sandbox import Limits, SandboxUnavailable

DEFAULTS = Limits()


def add(commands):
    parser = commands.add_parser("grade", help="grade a batch of submissions")
    parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS",
                        help="a folder <student_id>/<assignment>.ipynb, or nbgrader's submitted/ "
                             "<student_id>/<assignment>/<notebook>.ipynb, a .zip of either, or a "
                             "learning-management system's export (see --lms-pattern); for an nbgrader "
                             "course, its folder: its CourseDirectory.submitted_directory, graded as "
                             "nbgrader autograde grades it, into its autograded_directory and gradebook")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for the results (re-running into it grades only what changed)")
    parser.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                        help="grade only share I of N of the students (combine with `merge`)")
    add_options(parser)
    return parser


def add_options(parser):
    """Add the options of `grade` that `slurm` passes on to every shard; return their actions."""
    return [
        parser.add_argument("--workers", type=int, default=None,
                            help="submissions graded at once (default: the number of cores)"),
        parser.add_argument("--secret", type=Path, default=None, metavar="FILE",
                            help="the key the checks' inputs are drawn from (default OUT/secret.key, "
                                 "created on first use; give shards the same file)"),
        parser.add_argument("--lms-pattern", default=None, metavar="REGEX",
                            help="regular expression with the groups student_id and file_id (and "
                                 "optionally timestamp) for the file names of an LMS export, as for "
                                 "nbgrader zip_collect (default: "
                                 "ps1_<student>_attempt_<timestamp>_<assignment>.ipynb)"),
        parser.add_argument("--cell-timeout", type=float, default=None, metavar="S",
                            help="seconds for every cell (default: --time-factor times the "
                                 "reference's time on that cell, at least --min-timeout, at most "
                                 f"{DEFAULTS.cell_seconds:g})"),
        parser.add_argument("--call-timeout", type=float, default=None, metavar="S",
                            help="seconds for every call of a student's function by a hidden check "
                                 "(default: derived like a cell's, at most "
                                 f"{DEFAULTS.call_seconds:g} or --cell-timeout)"),
        parser.add_argument("--time-factor", type=float, default=DEFAULTS.time_factor, metavar="F",
                            help="a cell or call may take F times the reference's time on it "
                                 f"(default {DEFAULTS.time_factor:g})"),
        parser.add_argument("--min-timeout", type=float, default=DEFAULTS.min_seconds, metavar="S",
                            help=f"the least time a cell or call gets (default {DEFAULTS.min_seconds:g})"),
        parser.add_argument("--submission-timeout", type=float, default=DEFAULTS.submission_seconds,
                            metavar="S", help="seconds for a whole submission "
                                              f"(default {DEFAULTS.submission_seconds:g})"),
        parser.add_argument("--memory", type=int, default=DEFAULTS.memory_bytes // 2 ** 20, metavar="MB",
                            help=f"memory of a notebook (default {DEFAULTS.memory_bytes // 2 ** 20})"),
        parser.add_argument("--due", type=_time, default=None, metavar="TIME",
                            help="the deadline, ISO 8601 with a zone (e.g. 2026-03-01T23:59:00+01:00); "
                                 "grades.csv then gains submitted_at,late_days,raw_score. OUT keeps it "
                                 "(deadlines.json): grading into OUT again applies it unless --due or "
                                 "--no-due says otherwise"),
        parser.add_argument("--no-due", action="store_true",
                            help="grade without a deadline, forgetting the one OUT kept"),
        parser.add_argument("--extensions", type=Path, default=None, metavar="FILE",
                            help="a CSV student_id,due of students with their own deadline"),
        parser.add_argument("--late-penalty", type=float, default=0.0, metavar="F",
                            help="share of the score lost per started day late (default 0: lateness "
                                 "is reported, not penalised)"),
        parser.add_argument("--late-cap", type=float, default=1.0, metavar="F",
                            help="largest share of the score lost to lateness (default 1)"),
    ]


def check_options(args, parser):
    """Refuse option values that parse but make no sense together (parser.error exits)."""
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.due and args.no_due:
        parser.error("--due and --no-due contradict each other")
    if not args.due and (args.extensions or args.late_penalty or args.late_cap != 1.0):
        parser.error("--extensions, --late-penalty and --late-cap need --due")


def shard_arguments(args, options):
    """The command line of the `options` (add_options' actions) that `args` sets, as a shard's
    `grade` gets them: written from the parsed values, paths made absolute (no argument is
    parsed twice)."""
    arguments = []
    for action in options:
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            arguments.append(action.option_strings[0])
            continue
        if isinstance(value, Path):
            value = value.resolve()
        arguments += [action.option_strings[0], value.isoformat() if hasattr(value, "isoformat") else str(value)]
    return arguments


def run(course, args, parser):
    if not args.submissions.exists():
        parser.error(f"{args.submissions} does not exist")
    check_options(args, parser)
    try:
        deadline = _deadline(args)
    except (OSError, ValueError) as error:
        parser.error(str(error))
    limits = Limits(cell_seconds=args.cell_timeout or DEFAULTS.cell_seconds,
                    call_seconds=args.call_timeout or min(DEFAULTS.call_seconds,
                                                          args.cell_timeout or DEFAULTS.call_seconds),
                    fixed_cells=args.cell_timeout is not None, fixed_calls=args.call_timeout is not None,
                    time_factor=args.time_factor, min_seconds=args.min_timeout,
                    submission_seconds=args.submission_timeout, memory_bytes=args.memory * 2 ** 20)
    try:
        results = grade.grade(course, args.submissions, args.out, workers=args.workers, shard=args.shard,
                               secret=args.secret, limits=limits, lms_pattern=args.lms_pattern,
                               deadline=deadline)
    except SandboxUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        parser.error(str(error))
    graded = sum(r.status == "graded" for r in results)
    print(f"graded {graded} of {len(results)} submissions without a problem; results in {args.out} "
          f"(summary: {args.out / 'summary.html'})", file=sys.stderr)
    failed = sum(r.status == GRADER_ERROR for r in results)
    if failed:
        print(f"the grader itself failed on {failed} of them (status `{GRADER_ERROR}`, its tracebacks above and in "
              "their results' `errors`): not the students' doing", file=sys.stderr)
    return 0


def _deadline(args):
    """The batch's deadlines.Policy: --due's, none with --no-due, else the one OUT kept."""
    if args.due:
        return deadlines.Policy(args.due, args.late_penalty, args.late_cap,
                                deadlines.read_extensions(args.extensions) if args.extensions else {})
    kept = None if args.no_due else deadlines.load(args.out)
    if kept:
        print(f"keeping the deadline of {args.out / deadlines.POLICY_FILE} (due {kept.due.isoformat()}): "
              "give --due to change it or --no-due to grade without one", file=sys.stderr)
    return kept


def _shard(text):
    match = re.fullmatch(r"(\d+)/(\d+)", text)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise argparse.ArgumentTypeError("expected I/N with 1 <= I <= N, e.g. 2/8")
    return int(match[1]), int(match[2])


def _time(text):
    try:
        return deadlines.parse_time(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
