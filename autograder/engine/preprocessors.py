"""The course's nbgrader preprocessors (registered in nbgrader_config.py).

- `StderrIsNotFailure` (autograde): nbgrader scores a check cell zero when
  anything reaches stderr; a correct function that warns or prints a debug
  line there deserves its points, so such output is kept as stdout.
- `HideHiddenTests` (generate_feedback): removes the hidden test code from the
  check cells, reduces every error in them to one line (no traceback through
  hidden code) and puts a table of the checks, their points and the reason
  for each failure at the top of the feedback.
"""

from nbformat.v4 import new_markdown_cell
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor

from .messages import failure_message


def cell_message(cell):
    """Why a check cell lost its points ("" when nothing in its output says so)."""
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            return failure_message(output)
        if output.output_type == "stream" and output.name == "stderr":
            text = output.text.strip()
            return f"the cell wrote to stderr: {text.splitlines()[0] if text else ''}"
    return ""


class StderrIsNotFailure(NbGraderPreprocessor):
    """Turn stderr output of check cells into stdout, before nbgrader scores them."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "stream" and output.name == "stderr":
                    output.name = "stdout"
        return cell, resources


class HideHiddenTests(ClearHiddenTests):
    """Feedback without hidden tests, with a summary of the checks on top."""

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        rows = []
        for cell in nb.cells:
            if cell.cell_type == "code" and utils.is_grade(cell):
                meta = cell.metadata.nbgrader
                score, points = float(meta.get("score") or 0), float(meta["points"])
                reason = cell_message(cell) if score < points else ""
                rows.append(f"| `{meta['grade_id']}` | {score:g} / {points:g} | "
                            f"{_escape(reason) or '✓'} |")
        total = resources.get("nbgrader", {})
        summary = [f"## Your checks: {total.get('score', 0):g} / {total.get('max_score', 0):g}",
                   "", "| check | points | why points were lost |", "|---|---|---|", *rows]
        nb.cells.insert(0, new_markdown_cell("\n".join(summary)))
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if cell.cell_type == "code" and utils.is_grade(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {failure_message(output)}"]
        return cell, resources


def _escape(text):
    return text.replace("|", "\\|").replace("\n", " ")
