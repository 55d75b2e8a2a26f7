"""Grading nbgrader's quickstart course: stock `nbgrader autograde` against the engine.

    .venv/bin/python -m benchmarks.nbgrader_course [--students 40] [--workers N]

Makes the quickstart course (autograder/samples/nbgrader_quickstart.py), hands in STUDENTS
submissions in nbgrader's layout (the kinds of students in turn: right, blank,
partly wrong, crashing, tampered with, noisy), grades them with one stock
`nbgrader autograde ps1` and with `python -m autograder --course DIR grade`, and
prints both times, their ratio (the target is at least 5x) and whether every
cell scored the same. Put `.venv/bin` on PATH (nbgrader runs alembic from it).
"""

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.samples import nbgrader_quickstart as quickstart


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nbgrader-course-") as tmp:
        tmp = Path(tmp)
        course = quickstart.make_course(tmp)
        released = quickstart.generate(course)
        submitted = tmp / "handed-in" / "submitted"
        for index in range(args.students):
            kind = quickstart.KINDS[index % len(quickstart.KINDS)]
            quickstart.write_submitted(submitted, f"{kind}{index:03d}",
                                       quickstart.submission(course, released, kind))
        stock, stock_seconds = quickstart.autograde(course, submitted)
        out = tmp / "out"
        started = time.perf_counter()
        process = subprocess.run([sys.executable, "-m", "autograder", "--course", str(course), "grade",
                                  str(submitted.parent), "--out", str(out), "--workers", str(args.workers)],
                                 capture_output=True, text=True)
        ours_seconds = time.perf_counter() - started
        if process.returncode != 0:
            sys.exit(f"the engine failed:\n{process.stderr}")
        ours = {}
        with open(out / "details.csv", newline="") as file:
            for row in csv.DictReader(file):
                ours.setdefault(row["student_id"], {})[row["check"]] = (
                    float(row["score"]), row["message"].startswith("needs manual grading"))
    differing = sorted(student for student in stock if ours.get(student) != stock[student])
    cells = sum(len(cells) for cells in stock.values())
    print(f"nbgrader quickstart course101/ps1 (2 notebooks), {args.students} students, {cells} graded cells")
    print(f"stock nbgrader autograde:        {stock_seconds:7.1f} s  ({stock_seconds / args.students:.2f} s a student)")
    print(f"python -m autograder ({args.workers} workers): {ours_seconds:7.1f} s  "
          f"({ours_seconds / args.students:.2f} s a student, with its start and reports)")
    print(f"ratio: {stock_seconds / ours_seconds:.1f}x faster (target: at least 5x)")
    print("every cell scored as stock nbgrader scores it" if not differing else
          f"scores differ for {len(differing)} students: {', '.join(differing[:10])}")


if __name__ == "__main__":
    main()
