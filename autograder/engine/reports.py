"""The reports of a batch, rendered from its results: grades.csv, details.csv and summary.html
rebuilt from every result in OUT (and what the deadline did, on each student's page), at the
end of every `grade`, by `merge` (which combines the OUT folders of shards) and by `similarity`.

`results` keeps the data; this module writes what `report`, `summary` and `feedback` render
from it.
"""

import shutil
from pathlib import Path

from . import deadlines, feedback, report, summary
from .results import feedback_path, load_results, write_atomic


def write_reports(course, out):
    """grades.csv, details.csv and summary.html from every result in OUT."""
    results, policy = load_results(course, out), deadlines.load(out)
    write_atomic(out / "grades.csv", report.grades_csv(results, policy))
    write_atomic(out / "details.csv", report.details_csv(results))
    similarity = {path.stem for path in (out / "similarity").glob("*.html")}  # `similarity` wrote them
    write_atomic(out / "summary.html", summary.summary_html(course, results, policy, similarity))
    for result in results:  # what the deadline did, on the student's page
        page = feedback_path(out, result.student_id, result.assignment)
        try:
            text = page.read_text(encoding="utf-8")
        except OSError:
            continue
        updated = feedback.with_deadline(text, result, policy)
        if updated != text:
            write_atomic(page, updated)


def merge(course, outs, out):
    """Combine the OUT folders of shards into `out` and rebuild its reports."""
    out = Path(out)
    policies = [policy for policy in map(deadlines.load, outs) if policy]
    if any(policy != policies[0] for policy in policies):
        raise ValueError("the shards were graded with different deadlines (their deadlines.json differ)")
    out.mkdir(parents=True, exist_ok=True)
    deadlines.save(out, policies[0] if policies else None)
    for source in map(Path, outs):
        for folder in ("feedback", "results"):
            for path in sorted((source / folder).rglob("*")):
                if path.is_file() and not path.is_symlink():
                    target = out / folder / path.relative_to(source / folder)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
    write_reports(course, out)
    return load_results(course, out)


