"""`python -m autograder merge OUT1 OUT2 ... --out OUT`."""

import sys
from pathlib import Path

from .. import reports


def add(commands):
    parser = commands.add_parser("merge", help="combine the OUT folders of shards")
    parser.add_argument("shards", nargs="+", type=Path, metavar="SHARD", help="OUT folders of `grade --shard`")
    parser.add_argument("--out", type=Path, required=True, help="folder for the combined results")
    return parser


def run(course, args, parser):
    missing = [str(path) for path in args.shards if not (path / "results").is_dir()]
    if missing:
        parser.error(f"not the output of `grade`: {', '.join(missing)}")
    try:
        merged = reports.merge(course, args.shards, args.out)
    except ValueError as error:
        parser.error(str(error))
    print(f"merged {len(merged)} results into {args.out}", file=sys.stderr)
    return 0
