"""The one-sentence reason a check cell lost its points (shared by both graders)."""

import ast
import re


def failure_message(error):
    """One sentence from the error of a check cell (an nbformat error output, or a dict like it)."""
    name, value = error["ename"], str(error["evalue"]).strip()
    if name in ("CheckFailed", "CellNotRun"):  # a sentence of ours
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
    message = f"{name}: {value.splitlines()[0]}" if value else name
    if error.get("inputs"):  # a visible check called their function: with what, and where it raised
        message += f", raised in {error['inputs']}"
    return message + (f", at {error['place']}" if error.get("place") else "")


def undefined_name(error):
    """The name a NameError (an error of a cell, as a dict) says is not defined, or None."""
    if error is None or error["ename"] != "NameError":
        return None
    found = re.match(r"name '(\w+)' is not defined", str(error["evalue"]))
    return found.group(1) if found else None


def bound_names(source):
    """The names a cell's code binds at its top level (def, class, import, assignment, for,
    with, del): what running it would define. Empty for a cell that is not plain Python."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # IPython's syntax (a magic): nothing is claimed of it
        return set()
    names = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return  # their names are their own
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def caused_by(error, earlier):
    """The sentence saying why a cell's NameError happened, when one earlier cell alone explains
    it: `earlier` is [(where, source, error or None, the student's own)] of the cells that ran
    before, in order; the one cell that was to define the name (binds it at its top level) is
    the student's and raised. None otherwise (the plain message stands)."""
    name = undefined_name(error)
    if name is None:
        return None
    defining = [cell for cell in earlier if name in bound_names(cell[1])]
    if len(defining) != 1:
        return None
    where, _, raised, own = defining[0]
    if not own or raised is None:
        return None
    if raised.get("place"):  # the line that raised, in the cell named already
        raised = {**raised, "place": raised["place"].replace(f" of their cell in {where}:", ":")
                  .replace(f" in {where}:", ":")}
    how = "was not run:" if raised["ename"] == "CellNotRun" else "raised"  # it killed its process (Sandbox.run)
    return f"`{name}` is not defined because {where} {how} {failure_message(raised)}"
