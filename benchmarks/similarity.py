"""How fast `python -m autograder similarity` ranks a class (target: 300 students in <= 60 s on 2 cores).

    .venv/bin/python -m benchmarks.similarity [--students 300]

Writes the results of a class of the scaled dot-product exercise as the grader
keeps them (OUT/results/<student>/<assignment>.json with the student's own
code; nothing is graded), then times the command's steps and the whole run
(reports and the summary's link included) and prints the figures. Student k
takes each answer from one of the planted class's students
(autograder/samples/planted_class.py) and adds a cell of their own with three
of the sample wrong implementations, as students keep experiments: the class
has copies of every degree, as a real one might. The command runs in one
process (one core).
"""

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import inspect  # noqa: E402
import textwrap  # noqa: E402

from autograder.engine import reports, results, similarity  # noqa: E402
from autograder.samples.submissions import COURSE, SLUG, implementations  # noqa: E402
from autograder.samples.planted_class import CLASS, notebook, write_class  # noqa: E402



def make_class(students, seed=0):
    rng = random.Random(seed)
    experiments = [textwrap.dedent(inspect.getsource(wrong))
                   for _, wrong, _, _ in implementations(SLUG).MISTAKES.values()]
    sources = list(CLASS.values())
    handed_in = {}
    for k in range(students):
        answers = {task: rng.choice(sources)[0][task] for task in sources[0][0]}
        handed_in[f"student-{k + 1:03d}"] = notebook(answers, ["\n\n".join(rng.sample(experiments, 3))])
    return handed_in


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="similarity-") as folder:
        out = Path(folder)
        write_class(out, make_class(args.students))
        reports.write_reports(COURSE, out)  # the summary as `grade` leaves it

        started = time.perf_counter()
        given = similarity.boilerplate(COURSE, SLUG)
        graded = [r for r in results.load_results(COURSE, out) if r.assignment == SLUG]
        loaded = time.perf_counter()
        codes = [similarity.fingerprint(r.student_id, r.code, given) for r in graded]
        fingerprinted = time.perf_counter()
        pairs = similarity.compare(codes)
        compared = time.perf_counter()

        begun = time.perf_counter()
        pairs, left_out = similarity.run(COURSE, out, SLUG)
        total = time.perf_counter() - begun

        lines = [sum(header is None for header, _ in code.lines) for code in codes]
        sizes = [len(code.fingerprints) for code in codes]
        shown = sum(p.similarity >= similarity.THRESHOLD for p in pairs)
        page = out / "similarity" / f"{SLUG}.html"
        print(f"{len(codes)} students x 1 assignment ({SLUG}); {len(pairs)} pairs; "
              f"{len(left_out)} not compared")
        print(f"own code per student: {min(lines)}-{max(lines)} lines (mean {sum(lines) / len(lines):.0f}), "
              f"{min(sizes)}-{max(sizes)} fingerprints (mean {sum(sizes) / len(sizes):.0f})")
        print(f"pairs at least {similarity.THRESHOLD:g} similar: {shown} "
              f"({min(shown, similarity.MAX_SHOWN)} shown side by side)")
        print(f"read results + released notebook: {loaded - started:6.2f} s")
        print(f"fingerprint {len(codes)} students:       {fingerprinted - loaded:6.2f} s")
        print(f"compare {len(pairs)} pairs:          {compared - fingerprinted:6.2f} s")
        print(f"whole command (reports, summary):  {total:6.2f} s  (target <= 60 s)")
        print(f"report: {page.stat().st_size / 1e6:.1f} MB HTML, "
              f"{(out / 'similarity' / f'{SLUG}.csv').stat().st_size / 1e6:.1f} MB CSV; "
              f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
