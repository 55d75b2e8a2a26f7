"""An exception of the student's code as plain data, with its place in their code."""

from checking import arguments_of, student_frames
from runner.cells import OutputLimitExceeded
from runner.limits import CellTimeout


def describe(nb, error, inputs=True):
    """The error as plain data: its type's name, its message, its classes' names, and where in the
    student's code it was raised (`where`; with the inputs of their function's call unless not
    `inputs`)."""
    try:
        evalue = str(error)
    except BaseException:  # a hostile __str__
        evalue = ""
    if isinstance(error, CellTimeout):
        function, seconds, innermost = (list(error.args) + [None, 0.0, None])[:3]
        what = function or "the cell"
        return {"ename": "CellTimeout", "evalue": f"{what} ran longer than its limit of {seconds:g} s",
                "mro": ["CellTimeout"], "function": function, "within": innermost}
    if isinstance(error, OutputLimitExceeded):
        return {"ename": "OutputLimitExceeded", "evalue": "", "mro": ["OutputLimitExceeded"]}
    return {"ename": type(error).__name__, "evalue": evalue[:2000],
            "mro": [cls.__name__ for cls in type(error).__mro__], **where(nb, error, inputs)}


def where(nb, error, inputs=True):
    """{"place": the student's line that raised `error`, in words, "inputs": the call of
    their function by a course cell that led there} (each only when known)."""
    try:
        innermost, called = student_frames(error.__traceback__, lambda frame: frame.f_code.co_filename in nb.own)
        if innermost is None:
            return {}
        frame, line = innermost
        cell_id, source = nb.own[frame.f_code.co_filename]
        code = (source.splitlines()[line - 1:line] or [""])[0].strip()
        function = frame.f_code.co_name
        found = {"place": (f"line {line} of {'their cell' if function == '<module>' else function} in "
                           f"{nb.places.get(cell_id, 'a cell of theirs')}: {code[:200]}")}
        if inputs and called is not None:
            found["inputs"] = f"{called.f_code.co_name}({arguments_of(called)})"
        return found
    except Exception:  # a hostile traceback or argument: no place rather than none at all
        return {}
