"""Where a graded batch's time went, as the grader records it (OUT/results/*/*.json)."""

import json
import statistics
from pathlib import Path


def time_per_notebook(out):
    """One line: where a notebook's time went, medians over OUT/results:
    sandbox start (bubblewrap, the interpreter), imports (NumPy; IPython only for a notebook that
    needs it, in its cells), cells, hidden checks (the clock's seconds: other work on the machine
    lengthens them), then the means of CPU seconds, which it does not: the notebook's process up to the end of
    its cells (its start and imports included), its calls by the hidden checks, and the grader's
    for the hidden checks (the references, the stand-ins' answers, the messages)."""
    phases = {}
    for path in sorted(Path(out).glob("results/*/*.json")):
        for phase, seconds in json.loads(path.read_text()).get("seconds", {}).items():
            phases.setdefault(phase, []).append(seconds)
    clock = {phase: statistics.median(values) for phase, values in phases.items() if not phase.endswith("CPU")}
    cpu = {phase: statistics.mean(values) for phase, values in phases.items() if phase.endswith("CPU")}
    line = "time per notebook (medians): " + ", ".join(
        f"{phase} {seconds:.3f} s ({seconds / (sum(clock.values()) or 1.0):.0%})" for phase, seconds in clock.items())
    if cpu:  # means: what a batch costs is their sum
        line += "; CPU per notebook (means): " + ", ".join(
            f"{phase[:-4]} {seconds:.3f} s" for phase, seconds in cpu.items()) + f", in all {sum(cpu.values()):.3f} s"
    return line
