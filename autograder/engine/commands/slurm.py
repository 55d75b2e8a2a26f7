"""`python -m autograder slurm SUBMISSIONS --out OUT --shards N [--sbatch-option OPT ...] [--wait]
[grade options]`: its parser has `grade`'s options, parsed once, and written out for the shards."""

import argparse
import sys
from pathlib import Path

from .. import slurm
from . import grade


def add(commands):
    parser = commands.add_parser(
        "slurm", help="grade on a Slurm cluster: a job array of shards, then a merge job",
        allow_abbrev=False,  # --shard is grade's option, not an abbreviation of --shards
        description="The options of `grade` are passed to `grade` in every shard (e.g. --memory 4096).")
    parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS",
                        help="as for `grade` (on a shared file system)")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for the results (on a shared file system); the shards "
                             "write into OUT/shards/<i>")
    parser.add_argument("--shards", type=int, required=True, metavar="N", help="tasks of the job array")
    parser.add_argument("--sbatch-option", action="append", default=[], metavar="OPT",
                        help="an option for sbatch, e.g. --sbatch-option=--partition=short "
                             "(repeat it for more; each shard gets one CPU and one grading "
                             "worker unless --cpus-per-task says otherwise)")
    parser.add_argument("--wait", action="store_true",
                        help="return when the merge job has ended, with its exit status")
    parser.add_argument("--shard", type=_set_by_slurm, help=argparse.SUPPRESS)
    parser.set_defaults(shard_options=grade.add_options(
        parser.add_argument_group("options of `grade`, for every shard")))
    return parser


def run(course, args, parser):
    if not args.submissions.exists():
        parser.error(f"{args.submissions} does not exist")
    if args.shards < 1:
        parser.error("--shards must be at least 1")
    grade.check_options(args, parser)
    try:
        _, _, status = slurm.submit(course, args.submissions, args.out, args.shards,
                                     grade.shard_arguments(args, args.shard_options), args.sbatch_option, args.wait)
    except slurm.SlurmError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return status or 0


def _set_by_slurm(text):
    raise argparse.ArgumentTypeError("--shard and --out are set by the slurm command for each shard")
