"""The subcommands of `python -m autograder`: one module each, with its parser (`add`) and its
run (`run(args, parser)`, which reports errors on its own parser: its own usage)."""

from . import export, grade, merge, release, similarity, slurm, student_copy, validate

COMMANDS = (release, grade, merge, slurm, validate, export, similarity, student_copy)
