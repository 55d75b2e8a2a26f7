"""The command line: `python -m autograder [--course FILE] COMMAND ...`.

This module only dispatches: each command's parser and run are in its module
of `autograder.commands`.
"""

import argparse
from pathlib import Path

from . import course
from .commands import COMMANDS


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="Release the exercise notebooks and grade students' submissions.")
    parser.add_argument("--course", type=Path, default=None, metavar="FILE",
                        help=f"the course file, or an nbgrader course's folder (with nbgrader_config.py "
                             f"and source/) (default: {course.COURSE_FILE} of the current folder or "
                             "the nearest one above it)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # each module is named after its command (student_copy: student-copy)
    parsers = {module.__name__.rpartition(".")[2].replace("_", "-"): (module, module.add(commands)) for module in COMMANDS}
    args = parser.parse_args(argv)
    if args.course is not None:
        if not args.course.exists():
            parser.error(f"{args.course} does not exist")
        try:
            course.use(args.course)
        except course.CourseError as error:
            parser.error(str(error))
    module, command_parser = parsers[args.command]
    return module.run(args, command_parser)
