"""A cell run as IPython runs it, and what it prints and displays.

Cells run as IPython runs them (each statement in turn, the value of a last expression
displayed, every exception caught and reported), but without IPython, whose import and shell
cost more than NumPy's import: the shell is made (`kernel`), around the same namespace, only
for a notebook that needs it, and from then on every cell runs in it.
"""

import __future__
import ast
import builtins
import io
import json
import sys
import tokenize

OUTPUT_KEPT = 20_000  # characters of a cell's output kept for the feedback
FUTURE_FLAGS = sum(getattr(__future__, name).compiler_flag for name in __future__.all_feature_names)


class OutputLimitExceeded(BaseException):
    """Raised in the student's code when it has printed more than its budget."""


class CappedOutput(io.TextIOBase):
    """A text stream that keeps the first characters and counts them all; what it keeps
    is also the cell's stream output `name` (stdout or stderr)."""

    encoding = "utf-8"  # as a kernel's streams (IPython prints ± then, not +-)

    def __init__(self, nb, budget, name="stdout"):
        self.nb, self.budget, self.kept, self.name = nb, budget, [], name
        self.kept_size = 0

    def write(self, text, stream=True):
        text = str(text)
        self.budget[0] -= len(text)
        if self.kept_size < OUTPUT_KEPT:
            kept = text[:OUTPUT_KEPT - self.kept_size]
            self.kept.append(kept)
            self.kept_size += len(kept)
            outputs = self.nb.outputs
            if stream and kept:
                if outputs and outputs[-1].get("name") == self.name:
                    outputs[-1]["text"] += kept
                else:
                    outputs.append({"output_type": "stream", "name": self.name, "text": kept})
        if self.budget[0] < 0:
            raise OutputLimitExceeded()
        return len(text)

    def text(self):
        return "".join(self.kept)

    def writable(self):
        return True


def displayhook(nb):
    """sys.displayhook: print a last expression's value, as Python does, and keep its repr."""
    def display(value):
        if value is None:
            return
        builtins._ = value
        nb.shown = repr(value)
        keep_display(nb, "execute_result", {"text/plain": nb.shown})
        write_result(nb.shown)
    return display


def write_result(text):
    """The displayed value's text, in the cell's printed text (not as a stream output)."""
    if isinstance(sys.stdout, CappedOutput):
        sys.stdout.write(text + "\n", stream=False)
    else:
        sys.stdout.write(text + "\n")


def keep_display(nb, kind, data, metadata=None):
    """Keep an execute_result or display_data output: its plain data (MIME type -> str, or JSON
    data), while the notebook's allowance for displayed data lasts (then its text only)."""
    plain = {}
    for mime, value in (data or {}).items():
        if isinstance(value, bytes):
            continue
        try:
            size = len(value) if isinstance(value, str) else len(json.dumps(value))
        except (TypeError, ValueError):
            continue
        if mime == "text/plain" and isinstance(value, str):
            value = value[:OUTPUT_KEPT]  # as printed text (a value's repr can be huge)
        elif size > nb.display_kept:
            continue
        else:
            nb.display_kept -= size
        plain[str(mime)] = value
    try:
        metadata = json.loads(json.dumps(metadata or {}))
    except (TypeError, ValueError):
        metadata = {}
    nb.outputs.append({"output_type": kind, "data": plain,
                       "metadata": metadata if isinstance(metadata, dict) else {}})


def quiet(source):
    """Whether the cell ends in a semicolon, which hides its last value (IPython's
    DisplayHook.semicolon_at_end_of_expression, without importing IPython)."""
    skipped = (tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # IPython's syntax
        return False
    last = next((token for token in reversed(tokens) if token[0] not in skipped), None)
    return last is not None and last[0] == tokenize.OP and last[1] == ";"


def compiled(nb, source, filename="<cell>"):
    """The code objects of a cell, as IPython runs it: all but a last expression as
    statements, that one displayed. SyntaxError if it is not plain Python."""
    tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST | nb.future, dont_inherit=True)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) and not quiet(source) else None
    codes = [compile(tree, filename, "exec", nb.future, dont_inherit=True)]
    if last is not None:
        codes.append(compile(ast.Interactive([last]), filename, "single", nb.future, dont_inherit=True))
    nb.future |= codes[0].co_flags & FUTURE_FLAGS
    return codes


def run_cell(nb, source, filename="<cell>"):
    """Run a cell in the notebook (its code compiled as `filename`); return the exception it
    raised, or None."""
    nb.cell = (source, filename)
    if nb.shell is None:
        try:
            codes = compiled(nb, source, filename)
        except (SyntaxError, ValueError):  # IPython's syntax, or IPython's report of the error
            codes = None
        if codes is not None:
            return _run_plain(nb, codes)
    result = nb.get_ipython().run_cell(source, store_history=False)
    if result.result is not None:
        try:
            nb.shown = repr(result.result)
        except BaseException:  # a hostile __repr__: IPython showed nothing either
            pass
    return result.error_before_exec or result.error_in_exec


def _run_plain(nb, codes):
    error = None
    try:
        for code in codes:
            exec(code, nb.namespace)
    except BaseException as raised:  # as IPython: everything, a timeout too
        error = raised
    if nb.shell is not None:  # created by this cell: its hooks (the figures drawn) at its end
        try:
            nb.shell.events.trigger("post_execute")
        except BaseException as raised:
            error = error or raised
    return error
