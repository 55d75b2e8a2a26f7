"""`python -m autograder release [NAME ...] [--no-timing]`."""

from .. import release as releasing
from .. import timing
from ..course import assignments


def add(commands):
    parser = commands.add_parser(
        "release", help="regenerate the exercises from the instructor notebooks (the course file's "
                        "`source`), and measure the reference's times on them")
    parser.add_argument("assignments", nargs="*", metavar="NAME", help="default: every assignment")
    parser.add_argument("--no-timing", action="store_true",
                        help="keep the reference's times as they are (<source>/<name>/timing.json, "
                             "from which grading derives its time limits)")
    return parser


def run(course, args, parser):
    if course.nbgrader:
        parser.error("`release` is for a course file's course; an nbgrader course is released with "
                     "`nbgrader generate_assignment` and checked with `nbgrader validate`")
    unknown = sorted(set(args.assignments) - set(assignments(course)))
    if unknown:
        parser.error(f"not an assignment of this course: {', '.join(unknown)} "
                     f"(one of: {', '.join(assignments(course))})")
    for path in releasing.release(course, names=args.assignments or None):
        print(f"wrote {path}")
    if not args.no_timing:
        for name in args.assignments or assignments(course):
            print(f"wrote {timing.write(course, name)}")
    return 0
