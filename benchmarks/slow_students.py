"""How much a few endless loops slow down the grading of a class.

    .venv/bin/python -m benchmarks.slow_students [--students 40] [--workers N]

Grades the same class of honest `scaled_dot_product` submissions
(autograder/samples/submissions.py) as it is, then with 1, 2 and 4 students whose
`scaled_dot_product_attention` loops forever, then with 2 whose function
sleeps for an hour, each batch into a fresh OUT with the default limits
(which follow the reference's time: autograder/engine/timing.py), and prints each
wall time against the honest class's. Target: 5% looping students (2 of 40)
cost at most 1.5x the honest time. Then it prints where the time of an
honest notebook goes (medians): sandbox start (bubblewrap and the
interpreter), imports (NumPy), the notebook's cells, the hidden
checks, as the grader records them in OUT/results/*/*.json.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.samples.submissions import COURSE, SLUG, implementations, submission, write, write_batch  # noqa: E402
from benchmarks.batch import time_per_notebook  # noqa: E402


LOOPING = '''def scaled_dot_product_attention(Q, K, V, mask=None):
    while True:  # an honest bug: the loop's condition never changes
        pass
'''
SLEEPING = '''def scaled_dot_product_attention(Q, K, V, mask=None):
    import time
    time.sleep(3600)
'''
CASES = [("honest class", 0, 0), ("1 looping", 1, 0), ("2 looping (5%)", 2, 0), ("4 looping", 4, 0),
         ("2 sleeping", 0, 2)]


def stuck(source):
    """A correct submission whose scaled_dot_product_attention is `source`."""
    notebook = submission(SLUG, implementations(SLUG).CORRECT)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "scaled_dot_product_attention":
            cell.source = source
    return notebook


def grade(batch, out, workers):
    started = time.perf_counter()
    process = subprocess.run([sys.executable, "-m", "autograder", "grade", str(batch), "--out", str(out),
                              "--workers", str(workers)], cwd=COURSE.root, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        sys.exit(f"python -m autograder grade failed:\n{process.stderr}")
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.slow_students",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=40, help="students in the class (default 40)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="workers of the grader (default: the number of cores)")
    args = parser.parse_args(argv)
    if args.students < 4 or args.workers < 1:
        parser.error("--students must be at least 4 and --workers at least 1")
    print(f"class: {args.students} students x {SLUG}, --workers {args.workers}, {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    notebooks = {"looping": stuck(LOOPING), "sleeping": stuck(SLEEPING)}
    with tempfile.TemporaryDirectory(prefix="benchmark-") as tmp:
        tmp = Path(tmp)
        honest = None
        for label, looping, sleeping in CASES:
            batch = tmp / label.replace(" ", "-")
            write_batch(batch, args.students, [SLUG])
            students = sorted(p.name for p in batch.iterdir())
            # the stuck students are spread over the class, as in a real one
            spread = students[::max(len(students) // max(looping + sleeping, 1), 1)][:looping + sleeping]
            for index, student in enumerate(spread):
                write(batch, student, notebooks["looping" if index < looping else "sleeping"])
            out = tmp / f"out-{batch.name}"
            seconds = grade(batch, out, args.workers)
            honest = honest or seconds
            target = "  (target <= 1.50x)" if looping and looping / args.students == 0.05 else ""
            print(f"{label:>16}: {seconds:6.1f} s = {seconds / honest:.2f}x the honest class{target}; "
                  f"load average {os.getloadavg()[0]:.1f}")
            if label == "honest class":
                print(f"{'':>16}  {time_per_notebook(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
