"""The engine's command line, its version and its release, apart from any course's content."""

import argparse
import csv
import dataclasses
import os
import tomllib
from pathlib import Path

import pytest

from autograder.engine import grade, tasks
from autograder.engine.commands import grade as grade_command
from autograder.engine.commands import slurm as slurm_command
from autograder.engine.release import _names_defined
from tests.support import COURSE
from autograder.samples.submissions import SLUG, write
from tests.engine.grading import run_grader


def test_the_version_covers_what_decides_a_grade():
    """Every file of the engine counts (test_pipeline): a change anywhere in it grades again."""
    files = grade.graded_files(COURSE)
    names = {path.name for path in files}
    assert {"grade.py", "session.py", "loop.py", "protocol.py", "standins.py", "harness.py", "checking.py",
            "assignment.py",
            "report.py", "feedback.py", "cases.py"} <= names
    assert {path.relative_to(grade.ENGINE) for path in files if path.parent.name in ("runner", "sandbox")} >= {
        Path("runner") / name for name in os.listdir(grade.ENGINE / "runner") if name.endswith(".py")}
    ours = COURSE
    assert set(ours.package_files(ours.checks)) <= set(files)  # the course's checks
    assert set(ours.package_files(ours.references[0])) <= set(files)  # its reference
    assert ours.notebook(SLUG) in files and ours.exercises / f"{SLUG}.ipynb" in files
    assert ours.source / SLUG / "timing.json" in files


def test_release_reads_a_cell_with_ipython_magics_without_them():
    cells = ["%matplotlib inline\nimport numpy as np\n\ndef shown(x):\n    return x",
             "%%time\nTABLE = {}",
             "!pip list\nclass Model:\n    pass"]
    assert _names_defined(cells) == {"shown", "TABLE", "Model"}


@pytest.mark.parametrize("args, usage", [
    (["grade", "nowhere", "--out", "x"], "usage: python -m autograder grade"),
    (["merge", "nowhere", "--out", "x"], "usage: python -m autograder merge"),
    (["export", "nowhere", "--to", "canvas", "--output", "x.csv"], "usage: python -m autograder export"),
    (["validate", "nowhere.ipynb"], "usage: python -m autograder validate"),
    (["release", "no_such_assignment", "--no-timing"], "usage: python -m autograder release"),
])
def test_each_command_shows_its_own_usage_on_its_errors(args, usage):
    result = run_grader(*args)
    assert result.returncode == 2 and result.stderr.startswith(usage), result.stderr
    assert "COMMAND ..." not in result.stderr  # not the usage of the whole program


def test_validate_help_describes_its_argument():
    result = run_grader("validate", "--help")
    assert result.returncode == 0
    assert "NOTEBOOK" in result.stdout and "your exercise notebook" in result.stdout


def test_a_rerun_keeps_the_saved_deadline_unless_told_otherwise(tmp_path):
    batch, out = tmp_path / "class", tmp_path / "out"
    write(batch, "alice", "not a notebook")  # graded at once: unreadable

    def late_columns():
        with open(out / "grades.csv") as handle:
            return "late_days" in next(csv.reader(handle))

    first = run_grader("grade", batch, "--out", out, "--due", "2026-03-01T23:59:00+00:00", "--late-penalty", "0.1")
    assert first.returncode == 0, first.stderr
    assert late_columns() and (out / "deadlines.json").is_file()
    again = run_grader("grade", batch, "--out", out)
    assert again.returncode == 0, again.stderr
    assert late_columns() and "keeping the deadline" in again.stderr and "--no-due" in again.stderr
    forgotten = run_grader("grade", batch, "--out", out, "--no-due")
    assert forgotten.returncode == 0, forgotten.stderr
    assert not late_columns() and not (out / "deadlines.json").exists()
    both = run_grader("grade", batch, "--out", out, "--no-due", "--due", "2026-03-01T23:59:00+00:00")
    assert both.returncode == 2 and "contradict" in both.stderr


def test_grade_warns_once_while_the_site_address_is_the_placeholder(tmp_path):
    """The template's address warns, once; the address an instructor sets does not: the check
    reads the course's own site configuration, not the template as it ships."""
    write(tmp_path / "class", "alice", "not a notebook")
    for address, warnings in ((COURSE.placeholder_baseurl, 1), ("https://teach.example.edu/attention/", 0)):
        config = tmp_path / address.split("/")[2] / "_config.yml"
        config.parent.mkdir()
        config.write_text(f"html:\n  baseurl: {address}\n")
        configured = dataclasses.replace(COURSE, book_config=config)
        assert tasks.placeholder_base_url(configured) == bool(warnings)
        said = []
        grade.grade(configured, tmp_path / "class", config.parent / "out", workers=1, log=said.append)
        assert sum("html.baseurl" in line for line in said) == warnings, said
        assert not warnings or any("before publishing" in line for line in said)


def test_slurm_hands_the_grade_options_to_its_shards_as_parsed_once():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    slurm_command.add(commands)
    grade_parser = grade_command.add(commands)
    options = ["--memory", "512", "--due", "2026-03-01T23:59:00+01:00", "--extensions", "ext.csv",
               "--late-penalty", "0.1", "--no-due"]
    args = parser.parse_args(["slurm", "in", "--out", "o", "--shards", "2", *options])
    arguments = grade_command.shard_arguments(args, args.shard_options)
    assert arguments == ["--memory", "512", "--due", "2026-03-01T23:59:00+01:00", "--no-due",
                         "--extensions", str(Path("ext.csv").resolve()), "--late-penalty", "0.1"]
    shard = grade_parser.parse_args(["in", "--out", "o", *arguments])
    for action in args.shard_options:  # the shard's grade gets the values slurm parsed
        expected = getattr(args, action.dest)
        assert getattr(shard, action.dest) == (expected.resolve() if isinstance(expected, Path) else expected)


def test_the_readme_asks_for_the_site_address_and_describes_the_course_file():
    readme = (COURSE.root / "README.md").read_text(encoding="utf-8")
    settings = readme.split("fills in before")[1].split("```")[1]  # the settings to fill in
    assert "baseurl:" in settings
    assert "## Reusing the grader for your course" in readme
    data = tomllib.loads(COURSE.file.read_text())
    fields = [f"{key}.{field}" if isinstance(value, dict) else key for key, value in data.items()
              for field in (value if isinstance(value, dict) else [None])]
    for field in fields:  # the course file, field by field (a table's as table.field)
        assert f"| `{field}` |" in readme, field
