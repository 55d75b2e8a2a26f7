"""How fast `python -m autograder grade` grades a batch, against plain `nbgrader autograde`.

    .venv/bin/python -m benchmarks.grading [--students 40] [--assignments NAME ...] [--workers N]
                                           [--before REV]

Generates S students x A assignments of honest submissions (autograder/samples/submissions.py),
grades them with our command (N workers, default: the number of cores), with
the same command of an earlier version of the repository (`--before`, default
7342131: the last commit before the runner stopped importing IPython and
`site`; run from a `git archive` of it, on the same batch, right after ours,
so that both see the same load; `--before none` skips it) and
with plain nbgrader (one `nbgrader autograde NAME` per assignment, as an
instructor runs it; only those commands are timed), checks that both give every
check cell of every submission the same score, and prints the wall times, the
throughputs and their ratio, and where our time per notebook goes (sandbox
start, imports, cells, hidden checks; then CPU seconds, which other work on the
machine does not lengthen: the notebook's process, its calls by the hidden
checks, the grader's hidden checks). Then it prints what the bubblewrap sandbox costs
per submission: the same notebooks run by the same runner with and without it
(without it the runner also runs `site`, whose .pth files our own
unsandboxed code needs, and compiles itself, about 0.015 s more on an idle
machine, which the difference absorbs: it can come out negative).

Exit status 1 when a score differs (that is a bug of one of the graders).
Plain nbgrader takes about 3 s per submission on 2 cores: the defaults (320
submissions) take about half an hour; `--students 3 --assignments
scaled_dot_product` takes about a minute.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nbformat  # noqa: E402

from autograder.engine import course  # noqa: E402
from autograder.engine.sandbox import Sandbox  # noqa: E402
from autograder.samples import plain_nbgrader  # noqa: E402
from autograder.samples.submissions import COURSE, write_batch  # noqa: E402
from benchmarks.batch import time_per_notebook  # noqa: E402


BEFORE = "7342131"  # the last commit whose sandbox runner imported IPython and `site` for every notebook


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grading", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=40, help="students in the batch (default 40)")
    parser.add_argument("--assignments", nargs="+", default=course.assignments(COURSE), metavar="NAME",
                        help="assignments each student hands in (default: all)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="workers of our command (default: the number of cores)")
    parser.add_argument("--sandbox-notebooks", type=int, default=20, metavar="K",
                        help="notebooks run with and without the sandbox (default 20)")
    parser.add_argument("--before", default=BEFORE, metavar="REV",
                        help=f"the earlier version to compare with (default {BEFORE}; none: skip)")
    args = parser.parse_args(argv)
    if min(args.students, args.workers, args.sandbox_notebooks) < 1:
        parser.error("--students, --workers and --sandbox-notebooks must be at least 1")
    unknown = sorted(set(args.assignments) - set(course.assignments(COURSE)))
    if unknown:
        parser.error(f"unknown assignments {unknown}; known: {course.assignments(COURSE)}")
    names = [name for name in course.assignments(COURSE) if name in args.assignments]

    with tempfile.TemporaryDirectory(prefix="benchmark-") as tmp:
        tmp = Path(tmp)
        batch = tmp / "batch"
        labels = write_batch(batch, args.students, names)
        count = len(labels)
        print(f"batch: {args.students} students x {len(names)} assignments = {count} honest submissions "
              f"({len(set(labels.values()))} variants: correct, unchanged, graded mistakes, an earlier task unfinished); "
              f"{os.cpu_count()} cores")

        ours, ours_seconds = _grade("ours:  ", COURSE.root, batch, tmp / "out", args.workers, count)
        if args.before != "none":
            tree = tmp / "before"
            tree.mkdir()
            archive = subprocess.run(["git", "archive", args.before], cwd=COURSE.root, capture_output=True,
                                     check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            before, _ = _grade(f"before ({args.before}): ", tree, batch, tmp / "out-before", args.workers, count)
            different = plain_nbgrader.differences(before, ours, ("before", "ours"))
            print(f"scores: before and ours {'DIFFER' if different else 'agree on every check cell'}"
                  + "".join(f"\n  {line}" for line in different))

        load = os.getloadavg()[0]
        plain, plain_seconds = plain_nbgrader.autograde(COURSE, batch, tmp / "course", names)
        print(f"plain: nbgrader autograde, one call per assignment: {plain_seconds:.1f} s, "
              f"{count / plain_seconds:.2f} submissions/s ({_load(load)})")
        print(f"ratio: ours grades {plain_seconds / ours_seconds:.2f}x as many submissions per second "
              f"as plain nbgrader")

        different = plain_nbgrader.differences(ours, plain)
        cells = sum(len(checks) for checks in plain.values())
        if different:
            print(f"scores: {len(different)} DIFFERENCES between the graders:")
            print("\n".join("  " + line for line in different))
        else:
            print(f"scores: identical for all {len(plain)} submissions and {cells} check cells")

        notebooks = sorted(batch.glob("*/*.ipynb"))[:args.sandbox_notebooks]
        load = os.getloadavg()[0]
        bare, isolated, cost = sandbox_seconds(notebooks)
        print(f"sandbox: {len(notebooks)} notebooks x 3 run serially by the runner, medians: {isolated:.3f} s "
              f"in bubblewrap, {bare:.3f} s without; cost {cost:+.3f} s per submission "
              f"({cost / bare:+.0%}; {_load(load)})")
    return 1 if different else 0


def _grade(label, root, batch, out, workers, count):
    """Grade `batch` into `out` with the `autograder` package of the repository at `root`
    (run from there, it comes before the installed one): its scores and wall time; prints both lines."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    process = subprocess.run([sys.executable, "-m", "autograder", "grade", str(batch), "--out", str(out),
                              "--workers", str(workers)], cwd=root, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        sys.exit(f"{label}python -m autograder grade failed:\n{process.stderr}")
    with open(out / "grades.csv", newline="") as grades:
        statuses = Counter(row["status"] for row in csv.DictReader(grades))
    print(f"{label}python -m autograder grade --workers {workers}: {seconds:.1f} s, "
          f"{count / seconds:.2f} submissions/s (statuses: {dict(statuses)}; {_load(load)})")
    print(f"{label}{time_per_notebook(out)}")
    return plain_nbgrader.our_scores(out), seconds


def _load(before):
    """The machine's 1-minute load average before and after a measurement: other work skews it."""
    return f"load average {before:.1f} -> {os.getloadavg()[0]:.1f}"


def sandbox_seconds(notebooks, rounds=3):
    """Median seconds to start, run and close a notebook's runner: (without, with bubblewrap, their difference).

    Each notebook runs `rounds` times each way, alternately, so that other work
    on the machine weighs on both alike; medians, because it comes in bursts.
    """
    seconds = {False: [], True: []}
    cells_of = {}
    for path in notebooks:
        notebook = nbformat.read(path, as_version=4)
        cells_of[path] = [(str(i), cell.source) for i, cell in enumerate(notebook.cells)
                          if cell.cell_type == "code"]
    first = notebooks[0]
    runs = [(first, False), (first, True)]  # only warm the disk cache
    runs += [(path, isolate) for _ in range(rounds) for path in notebooks for isolate in (False, True)]
    for index, (path, isolate) in enumerate(runs):
        started = time.perf_counter()
        with Sandbox(cells_of[path], isolate=isolate) as sandbox:
            sandbox.run()
        if index >= 2:
            seconds[isolate].append(time.perf_counter() - started)
    differences = [isolated - bare for bare, isolated in zip(seconds[False], seconds[True])]
    return statistics.median(seconds[False]), statistics.median(seconds[True]), statistics.median(differences)


if __name__ == "__main__":
    sys.exit(main())
