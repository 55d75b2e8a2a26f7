"""`python -m autograder ...`: this course's launcher of the grading engine (autograder/engine),
which names no course: `python -m autograder.engine --course <this repository's course.toml> ...`
unless --course is given (or the current folder, or one above it, has a course.toml of its own)."""
from pathlib import Path

from autograder.engine.cli import main

raise SystemExit(main(prog="python -m autograder",
                      default_course=Path(__file__).resolve().parent.parent / "course.toml"))
