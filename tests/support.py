"""What tests share that is neither a fixture nor a test: this course as the engine's one Course value."""

import atexit
import dataclasses
import functools
import shutil
import tempfile
from pathlib import Path

import yaml

from autograder.engine import course

ROOT = Path(__file__).resolve().parent.parent
COURSE = course.load(ROOT / "course.toml")  # this course, as the command line builds it

PUBLISHED = "https://teach.example.edu/attention/"


@functools.cache
def published(address=PUBLISHED):
    """This course with its site's address set (a copy of its site config, `html.baseurl` changed)."""
    folder = Path(tempfile.mkdtemp(prefix="published-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    config = yaml.safe_load(COURSE.book_config.read_text())
    config["html"]["baseurl"] = address
    (folder / "_config.yml").write_text(yaml.safe_dump(config))
    return dataclasses.replace(COURSE, book_config=folder / "_config.yml")
