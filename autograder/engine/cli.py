"""The command line: `python -m autograder.engine [--course FILE] COMMAND ...`.

This module builds the course (the one Course value every command is given) and
dispatches: each command's parser and run are in its module of
`autograder.engine.commands`. A course may launch the engine under its own name
(`python -m autograder`, with its course file as the default).
"""

import argparse
from pathlib import Path

from . import course
from .commands import COMMANDS


def main(argv=None, prog="python -m autograder.engine", default_course=None):
    """Run the command of `argv` on the course of --course, else the course.toml of the current
    folder or the nearest one above it, else `default_course` (a course's launcher gives its own)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Release the exercise notebooks and grade students' submissions.")
    parser.add_argument("--course", type=Path, default=None, metavar="FILE",
                        help=f"the course file, or an nbgrader course's folder (with nbgrader_config.py "
                             f"and source/) (default: {course.COURSE_FILE} of the current folder or "
                             "the nearest one above it)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # each module is named after its command (student_copy: student-copy)
    parsers = {module.__name__.rpartition(".")[2].replace("_", "-"): (module, module.add(commands))
               for module in COMMANDS}
    args = parser.parse_args(argv)
    if args.course is not None and not args.course.exists():
        parser.error(f"{args.course} does not exist")
    try:
        this = course.load(args.course or course.find(default_course))
    except course.CourseError as error:
        parser.error(str(error))
    module, command_parser = parsers[args.command]
    return module.run(this, args, command_parser)
