"""`python -m autograder validate NOTEBOOK [--assignment NAME]`, for students."""

from pathlib import Path



def add(commands):
    parser = commands.add_parser(
        "validate", help="run a notebook as the grader would and report its visible checks (for students)",
        description="Run a notebook as the grader would (same sandbox, same limits) and say, one line "
                    "per check cell, whether its visible checks pass. Exits 0 when the notebook is "
                    "ready to hand in.")
    parser.add_argument("notebook", type=Path, metavar="NOTEBOOK",
                        help="your exercise notebook, <assignment>.ipynb (e.g. the file you hand in)")
    parser.add_argument("--assignment", default=None, metavar="NAME",
                        help="the assignment (default: the notebook's file name without .ipynb)")
    return parser


def run(course, args, parser):
    if course.nbgrader:
        parser.error("`validate` is for a course file's course; an nbgrader course is released with "
                     "`nbgrader generate_assignment` and checked with `nbgrader validate`")
    from ..validate import validate  # starts nothing until asked
    if not args.notebook.is_file():
        parser.error(f"{args.notebook} is not a file")
    ok, lines = validate(course, args.notebook, args.assignment)
    print("\n".join(lines))
    print("ready to hand in" if ok else "not ready: see the lines above")
    return 0 if ok else 1
