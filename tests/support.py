"""What tests share that is neither a fixture nor a test: this course as the engine's one Course value."""

from pathlib import Path

from autograder.engine import course

ROOT = Path(__file__).resolve().parent.parent
COURSE = course.load(ROOT / "course.toml")  # this course, as the command line builds it
