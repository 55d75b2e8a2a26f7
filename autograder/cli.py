"""The command line: `python -m autograder release | grade | merge | slurm | export | validate | similarity`."""

import argparse
import re
import sys
from pathlib import Path

from . import deadlines, export, grade, release, slurm, timing
from .course import assignments
from .sandbox import Limits, SandboxUnavailable


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="Release the exercise notebooks and grade students' submissions.")
    commands = parser.add_subparsers(dest="command", required=True)

    release_parser = commands.add_parser(
        "release", help="regenerate exercises/ from the instructor notebooks in autograder/source/, "
                        "and measure the reference's times on them")
    release_parser.add_argument("assignments", nargs="*", help="default: every assignment")
    release_parser.add_argument("--no-timing", action="store_true",
                                help="keep the reference's times as they are (autograder/source/"
                                     "<name>/timing.json, from which grading derives its time limits)")

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
    defaults = Limits()
    grade_parser.add_argument("--cell-timeout", type=float, default=None, metavar="S",
                              help="seconds for every cell (default: --time-factor times the "
                                   "reference's time on that cell, at least --min-timeout, at most "
                                   f"{defaults.cell_seconds:g})")
    grade_parser.add_argument("--call-timeout", type=float, default=None, metavar="S",
                              help="seconds for every call of a student's function by a hidden check "
                                   "(default: derived like a cell's, at most "
                                   f"{defaults.call_seconds:g} or --cell-timeout)")
    grade_parser.add_argument("--time-factor", type=float, default=defaults.time_factor, metavar="F",
                              help="a cell or call may take F times the reference's time on it "
                                   f"(default {defaults.time_factor:g})")
    grade_parser.add_argument("--min-timeout", type=float, default=defaults.min_seconds, metavar="S",
                              help=f"the least time a cell or call gets (default {defaults.min_seconds:g})")
    grade_parser.add_argument("--submission-timeout", type=float, default=defaults.submission_seconds,
                              metavar="S", help="seconds for a whole submission "
                                                f"(default {defaults.submission_seconds:g})")
    grade_parser.add_argument("--memory", type=int, default=defaults.memory_bytes // 2 ** 20, metavar="MB",
                              help=f"memory of a notebook (default {defaults.memory_bytes // 2 ** 20})")
    grade_parser.add_argument("--due", type=_time, default=None, metavar="TIME",
                              help="the deadline, ISO 8601 with a zone (e.g. 2026-03-01T23:59:00+01:00); "
                                   "grades.csv then gains submitted_at,late_days,raw_score")
    grade_parser.add_argument("--extensions", type=Path, default=None, metavar="FILE",
                              help="a CSV student_id,due of students with their own deadline")
    grade_parser.add_argument("--late-penalty", type=float, default=0.0, metavar="F",
                              help="share of the score lost per started day late (default 0: lateness "
                                   "is reported, not penalised)")
    grade_parser.add_argument("--late-cap", type=float, default=1.0, metavar="F",
                              help="largest share of the score lost to lateness (default 1)")

    merge_parser = commands.add_parser("merge", help="combine the OUT folders of shards")
    merge_parser.add_argument("shards", nargs="+", type=Path, help="OUT folders of `grade --shard`")
    merge_parser.add_argument("--out", type=Path, required=True, help="folder for the combined results")

    validate_parser = commands.add_parser(
        "validate", help="run a notebook as the grader would and report its visible checks (for students)")
    validate_parser.add_argument("notebook", type=Path)
    validate_parser.add_argument("--assignment", default=None, metavar="NAME",
                                 help="the assignment (default: the notebook's file name)")

    export_parser = commands.add_parser("export", help="write the grades of OUT where instructors keep them")
    export_parser.add_argument("out", type=Path, help="the OUT folder of `grade`")
    export_parser.add_argument("--to", required=True, choices=sorted(export.FORMATS))
    export_parser.add_argument("--output", type=Path, required=True, metavar="FILE",
                               help="the file to write (for nbgrader: the gradebook, created or updated)")
    export_parser.add_argument("--roster", type=Path, default=None, metavar="FILE",
                               help="the LMS's own gradebook export: its students and columns")
    export_parser.add_argument("--match-column", default=None, metavar="NAME",
                               help="the roster column holding the grader's student ids (default: "
                                    + "; ".join(f"{k}: {v}" for k, v in export.MATCH_COLUMNS.items()) + ")")

    slurm_parser = commands.add_parser(
        "slurm", help="grade on a Slurm cluster: a job array of shards, then a merge job",
        allow_abbrev=False,  # --shard is grade's option, not an abbreviation of --shards
        description="Any other option is passed to `grade` in every shard (e.g. --memory 4096).")
    slurm_parser.add_argument("submissions", type=Path, help="as for `grade` (on a shared file system)")
    slurm_parser.add_argument("--out", type=Path, required=True,
                              help="folder for the results (on a shared file system); the shards "
                                   "write into OUT/shards/<i>")
    slurm_parser.add_argument("--shards", type=int, required=True, metavar="N", help="tasks of the job array")
    slurm_parser.add_argument("--sbatch-option", action="append", default=[], metavar="OPT",
                              help="an option for sbatch, e.g. --sbatch-option=--partition=short "
                                   "(repeat it for more; each shard gets one CPU and one grading "
                                   "worker unless --cpus-per-task says otherwise)")
    slurm_parser.add_argument("--wait", action="store_true",
                              help="return when the merge job has ended, with its exit status")

    similarity_parser = _similarity_parser(commands)

    args, passed_on = parser.parse_known_args(argv)
    if passed_on and args.command != "slurm":
        parser.error(f"unrecognized arguments: {' '.join(passed_on)}")
    if args.command == "release":
        for path in release.release(names=args.assignments or None):
            print(f"wrote {path}")
        if not args.no_timing:
            for name in args.assignments or assignments():
                print(f"wrote {timing.write(name)}")
        return 0
    if args.command == "validate":
        from .validate import validate
        if not args.notebook.is_file():
            parser.error(f"{args.notebook} is not a file")
        ok, lines = validate(args.notebook, args.assignment)
        print("\n".join(lines))
        print("ready to hand in" if ok else "not ready: see the lines above")
        return 0 if ok else 1
    if args.command == "export":
        try:
            export.export(args.out, args.to, args.output, args.roster, args.match_column)
        except (OSError, ValueError) as error:
            parser.error(str(error))
        print(f"wrote {args.output}", file=sys.stderr)
        return 0
    if args.command == "similarity":
        return _similarity(args, similarity_parser)
    if args.command == "merge":
        missing = [str(path) for path in args.shards if not (path / "results").is_dir()]
        if missing:
            parser.error(f"not the output of `grade`: {', '.join(missing)}")
        try:
            results = grade.merge(args.shards, args.out)
        except ValueError as error:
            parser.error(str(error))
        print(f"merged {len(results)} results into {args.out}", file=sys.stderr)
        return 0
    if not args.submissions.exists():
        parser.error(f"{args.submissions} does not exist")
    if args.command == "slurm":
        return _slurm(args, passed_on, grade_parser, slurm_parser)
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    if not args.due and (args.extensions or args.late_penalty or args.late_cap != 1.0):
        parser.error("--extensions, --late-penalty and --late-cap need --due")
    try:
        deadline = args.due and deadlines.Policy(
            args.due, args.late_penalty, args.late_cap,
            deadlines.read_extensions(args.extensions) if args.extensions else {})
    except (OSError, ValueError) as error:
        parser.error(str(error))
    limits = Limits(cell_seconds=args.cell_timeout or defaults.cell_seconds,
                    call_seconds=args.call_timeout or min(defaults.call_seconds,
                                                          args.cell_timeout or defaults.call_seconds),
                    fixed_cells=args.cell_timeout is not None, fixed_calls=args.call_timeout is not None,
                    time_factor=args.time_factor, min_seconds=args.min_timeout,
                    submission_seconds=args.submission_timeout, memory_bytes=args.memory * 2 ** 20)
    try:
        results = grade.grade(args.submissions, args.out, workers=args.workers, shard=args.shard,
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
    return 0


def _similarity_parser(commands):
    from .similarity import THRESHOLD
    parser = commands.add_parser(
        "similarity", help="rank the pairs of students by the code they share, for a person to read",
        description="Writes OUT/similarity/NAME.html (pairs ranked, shared lines side by side) and "
                    "NAME.csv (every pair), linked from OUT/summary.html. It decides nothing.")
    parser.add_argument("out", type=Path, help="the OUT folder of `grade`")
    parser.add_argument("--assignment", required=True, metavar="NAME")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, metavar="F",
                        help=f"pairs at least this similar (0 to 1) are shown side by side (default {THRESHOLD:g})")
    return parser


def _similarity(args, parser):
    from . import similarity
    if not (args.out / "results").is_dir():
        parser.error(f"not the output of `grade`: {args.out}")
    if args.assignment not in assignments():
        parser.error(f"no assignment {args.assignment!r}; the assignments are {', '.join(assignments())}")
    if not 0 <= args.threshold <= 1:
        parser.error("--threshold must be between 0 and 1")
    pairs, left_out = similarity.run(args.out, args.assignment, args.threshold)
    shown = sum(pair.similarity >= args.threshold for pair in pairs)
    print(f"{len(pairs)} pairs compared, {shown} at least {args.threshold:g} similar, {len(left_out)} "
          f"students not compared; wrote {args.out / 'similarity' / args.assignment}.html and .csv",
          file=sys.stderr)
    return 0


def _slurm(args, grade_args, grade_parser, slurm_parser):
    """Check the options meant for `grade` here, then submit the jobs."""
    if args.shards < 1:
        slurm_parser.error("--shards must be at least 1")
    if any(a.split("=")[0] in ("--shard", "--out") for a in grade_args):
        slurm_parser.error("--shard and --out are set by the slurm command for each shard")
    grade_parser.parse_args([str(args.submissions), "--out", str(args.out), *grade_args])  # exits if bad
    try:
        _, _, status = slurm.submit(args.submissions, args.out, args.shards, grade_args,
                                    args.sbatch_option, args.wait)
    except slurm.SlurmError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return status or 0


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
