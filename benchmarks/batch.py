"""Where a graded batch's time went, as the grader records it (OUT/results/*/*.json)."""

import json
import statistics
from pathlib import Path


def time_per_notebook(out):
    """One line: where a notebook's time went, medians over OUT/results:
    sandbox start (bubblewrap, the interpreter), imports (NumPy; IPython only for a notebook that
    needs it, in its cells), cells, hidden checks."""
    phases = {}
    for path in sorted(Path(out).glob("results/*/*.json")):
        for phase, seconds in json.loads(path.read_text()).get("seconds", {}).items():
            phases.setdefault(phase, []).append(seconds)
    medians = {phase: statistics.median(values) for phase, values in phases.items()}
    total = sum(medians.values()) or 1.0
    return "time per notebook (medians): " + ", ".join(
        f"{phase} {seconds:.3f} s ({seconds / total:.0%})" for phase, seconds in medians.items())
