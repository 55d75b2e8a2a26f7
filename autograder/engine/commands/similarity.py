"""`python -m autograder similarity OUT --assignment NAME [--threshold F]`."""

import sys
from pathlib import Path

from ..course import assignments


def add(commands):
    from ..similarity import THRESHOLD
    parser = commands.add_parser(
        "similarity", help="rank the pairs of students by the code they share, for a person to read",
        description="Writes OUT/similarity/NAME.html (pairs ranked, shared lines side by side) and "
                    "NAME.csv (every pair), linked from OUT/summary.html. It decides nothing.")
    parser.add_argument("out", type=Path, metavar="OUT", help="the OUT folder of `grade`")
    parser.add_argument("--assignment", required=True, metavar="NAME")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, metavar="F",
                        help=f"pairs at least this similar (0 to 1) are shown side by side (default {THRESHOLD:g})")
    return parser


def run(course, args, parser):
    from .. import similarity
    if not (args.out / "results").is_dir():
        parser.error(f"not the output of `grade`: {args.out}")
    if args.assignment not in assignments(course):
        parser.error(f"no assignment {args.assignment!r}; the assignments are {', '.join(assignments(course))}")
    if not 0 <= args.threshold <= 1:
        parser.error("--threshold must be between 0 and 1")
    pairs, left_out = similarity.run(course, args.out, args.assignment, args.threshold)
    shown = sum(pair.similarity >= args.threshold for pair in pairs)
    print(f"{len(pairs)} pairs compared, {shown} at least {args.threshold:g} similar, {len(left_out)} "
          f"students not compared; wrote {args.out / 'similarity' / args.assignment}.html and .csv",
          file=sys.stderr)
    return 0
