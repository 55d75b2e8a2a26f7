"""The one-sentence reason a check cell lost its points (shared by both graders)."""


def failure_message(error):
    """One sentence from the error of a check cell (an nbformat error output, or a dict like it)."""
    name, value = error["ename"], str(error["evalue"]).strip()
    if name == "CheckFailed":
        return value
    if name in ("CellTimeoutError", "CellTimeout"):
        if value:  # ours says which function ran out of time
            return f"{value} (an endless loop, or far more work than the task needs?)"
        return "the cell ran too long and was stopped (an endless loop?)"
    if name == "OutputLimitExceeded":
        return "the notebook printed more than its output limit and was stopped"
    if name == "MemoryError":
        return "the cell ran out of memory (it has a limit while it is graded)"
    if name == "NotImplementedError" and not value:
        return "not implemented yet (the function still raises NotImplementedError)"
    return f"{name}: {value.splitlines()[0]}" if value else name
