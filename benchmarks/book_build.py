"""Time the website's build: from clean, again with nothing changed, and after
a change to solutions/, which must re-execute the chapters that import it.
Each build ends with the book's PDF (book/_ext/book_pdf.py), whose own time
is printed apart.

    .venv/bin/python benchmarks/book_build.py [--changed solutions/positional_encoding.py]

Builds as `make book` does, into a temporary folder (the book's own _build is
left alone). The change is a comment appended to the module, removed at the
end. Prints wall-clock and CPU seconds (CPU time varies less when the machine
is busy) and which chapters each build executed. Targets, on a 2-core
machine: the website's clean build ≤ 60 s and no-change rebuild ≤ 10 s
(without the PDF step); a clean build with its PDF (`make book`) ≤ 180 s.
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JUPYTER_BOOK = str(Path(sys.executable).parent / "jupyter-book")
EXECUTED = re.compile(r"^(\S+): executed in", re.M)
PDF = re.compile(r"PDF built in ([\d.]+) s \(([\d.]+) s CPU\)")


def build(out):
    """Build the book into `out`; return (wall s, CPU s, chapters executed, PDF step wall s, CPU s)."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]}
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([JUPYTER_BOOK, "build", str(ROOT), "--path-output", str(out),
                             "--warningiserror", "--nitpick", "--keep-going"],
                            capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        sys.exit(result.stdout[-3000:] + result.stderr[-3000:])
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    log = result.stdout + result.stderr
    pdf = PDF.search(log)  # none when the PDF was up to date
    return wall, cpu, EXECUTED.findall(log), *(map(float, pdf.groups()) if pdf else (0.0, 0.0))


def report(name, wall, cpu, executed, pdf_wall, pdf_cpu):
    chapters = ", ".join(chapter.removeprefix("book/") for chapter in executed) or "none"
    print(f"{name:<28} {wall:6.1f} s wall {cpu:6.1f} s CPU, of which the PDF step {pdf_wall:5.1f} s wall "
          f"{pdf_cpu:5.1f} s CPU   executed: {chapters}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changed", default="solutions/positional_encoding.py",
                        help="the module to change for the third build (relative to the course)")
    changed = ROOT / parser.parse_args().changed
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory() as out:
        report("clean build", *build(out))
        report("no-change rebuild", *build(out))
        original = changed.read_bytes()
        try:
            changed.write_bytes(original + b"\n# A change: the chapters that import this module run again.\n")
            report(f"after changing {changed.relative_to(ROOT)}", *build(out))
        finally:
            changed.write_bytes(original)
    print(f"load average {os.getloadavg()[0]:.1f} at the end; targets (without the PDF step): "
          "clean ≤ 60 s, no-change ≤ 10 s; with it, clean ≤ 180 s")


if __name__ == "__main__":
    main()
