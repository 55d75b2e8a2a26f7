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
            "mro": [cls.__name__ for cls in type(error).__mro__], "frames": frames(error),
            **where(nb, error, inputs)}


FRAMES_KEPT = (10, 20)  # the outermost and innermost frames of a longer traceback (a recursion)


def frames(error):
    """[[cell id, line, "function(its parameters)" or None at a cell's top level]] of the frames
    of `error`'s traceback that ran a notebook cell's code, outermost first (a traceback's
    lines, drawn by the grader from its own copy of the cells), None where frames were left out."""
    found = []
    try:
        traceback = error.__traceback__
        while traceback is not None:
            code = traceback.tb_frame.f_code
            if code.co_filename.startswith("<cell ") and code.co_filename.endswith(">"):
                names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
                function = None if code.co_name == "<module>" else f"{code.co_name}({', '.join(names)})"
                # the line the frame ended on, as IPython shows it (a `finally:` run after the raise)
                line = traceback.tb_frame.f_lineno or traceback.tb_lineno
                found.append([code.co_filename[len("<cell "):-1], line, function])
            traceback = traceback.tb_next
    except Exception:  # a hostile traceback: the frames walked so far
        pass
    first, last = FRAMES_KEPT
    return found if len(found) <= first + last else found[:first] + [None] + found[-last:]


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
