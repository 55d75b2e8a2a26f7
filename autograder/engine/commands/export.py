"""`python -m autograder export OUT --to FORMAT --output FILE [--roster FILE] [--match-column NAME]
[--allow-unmatched] [--rescale]`."""

import sys
from pathlib import Path

from .. import export


def add(commands):
    parser = commands.add_parser("export", help="write the grades of OUT where instructors keep them")
    parser.add_argument("out", type=Path, metavar="OUT", help="the OUT folder of `grade`")
    parser.add_argument("--to", required=True, choices=sorted(export.FORMATS))
    parser.add_argument("--output", type=Path, required=True, metavar="FILE",
                        help="the file to write (for nbgrader: the gradebook, created or updated)")
    parser.add_argument("--roster", type=Path, default=None, metavar="FILE",
                        help="the LMS's own gradebook export: its students and columns")
    parser.add_argument("--match-column", default=None, metavar="NAME",
                        help="the roster column holding the grader's student ids (default: "
                             + "; ".join(f"{k}: {v}" for k, v in export.MATCH_COLUMNS.items()) + ")")
    parser.add_argument("--allow-unmatched", action="store_true",
                        help="export even if some results have no roster row (listed; default: exit 1)")
    parser.add_argument("--rescale", action="store_true",
                        help="where the roster's points possible differ from ours, scale each score "
                             "to them (default: exit 1)")
    return parser


def run(course, args, parser):
    try:
        export.export(course, args.out, args.to, args.output, args.roster, args.match_column,
                       args.allow_unmatched, args.rescale)
    except export.Refused as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as error:
        parser.error(str(error))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
