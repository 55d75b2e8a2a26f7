"""Stand-ins: a student's graded functions answering as the correct ones during one call.

A function is judged on its own: while a check calls it, the student's other graded
functions that it may reach answer with the correct function's value for the arguments
they are given. One mechanism, whatever computes the answer (the reference in the
grader's process, the grader over the wire for the sandbox's runner):

- `swap(namespace, name, answer, called)`: the notebook's function `name` answers with
  `answer(*args, **kwargs)`, however it is reached: a plain function by identity (its code
  replaced by a trampoline, so that its aliases, partials and the defaults holding it answer
  too), anything else by name in `namespace` and in the defaults of `called`. Arguments that
  the correct function's parameters do not take (`Unbound`) go to the student's own.
  It returns the undo; `swapped` swaps several names and undoes them in reverse order (a
  function bound to two names is restored whole);
- `binds`: whether arguments bind to a correct function's parameters (the one rule of
  "unbound");
- `answering` / `answered`: the record of the names whose stand-ins answered;
- `reached` / `chosen`: which graded functions stand in for a checked function.

Standard library only: this file is also copied into the sandbox, where the runner imports it.
"""

import contextlib
import contextvars
import functools
import inspect
import types
import warnings

# -- the trampoline ---------------------------------------------------------------------

with warnings.catch_warnings():  # calling a constant: the constant is replaced by the target
    warnings.simplefilter("ignore")
    _TEMPLATE = compile('def stand_in(*args, **kwargs):\n    return "target"(*args, **kwargs)\n',
                        "<stand-in>", "exec").co_consts[0]
_CODES = {}  # id(function) -> its own code, while a trampoline replaces it


def swappable(function):
    """Whether `function`'s code can be swapped: a plain function without free variables."""
    return type(function) is types.FunctionType and not function.__closure__


def own_copy(function):
    """A new function with `function`'s own code (not a trampoline's), namespace, name and defaults."""
    own = types.FunctionType(_CODES.get(id(function), function.__code__), function.__globals__,
                             function.__name__, function.__defaults__)
    own.__kwdefaults__ = function.__kwdefaults__
    return own


def retarget(function, target):
    """Make the plain `function` (see `swappable`) call ``target(*args, **kwargs)``; return the undo."""
    code = function.__code__
    _CODES.setdefault(id(function), code)
    function.__code__ = _TEMPLATE.replace(co_consts=tuple(target if constant == "target" else constant
                                                          for constant in _TEMPLATE.co_consts))

    def undo():
        function.__code__ = code
        if _CODES.get(id(function)) is code:
            del _CODES[id(function)]
    return undo


# -- arguments --------------------------------------------------------------------------

class Unbound(TypeError):
    """The arguments do not bind to the correct function's parameters (renamed or added by the
    student): the student's own function takes them."""


@functools.lru_cache(maxsize=1024)
def _signature(function):
    """inspect.signature of a correct function, read once (None when it has none to read)."""
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def binds(function, args, kwargs):
    """Whether ``function(*args, **kwargs)`` binds the arguments to its parameters (True when
    `function` has no signature to read: let it try)."""
    try:
        signature = _signature(function)
    except TypeError:  # not hashable
        signature = None
    if signature is None:
        return True
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def bound(name, function):
    """The answer for `name` (see `stand_in`) computed by `function`, Unbound for arguments it does not take;
    it answered (`answered`) when they bind, whatever it gives or raises."""
    def answer(*args, **kwargs):
        if not binds(function, args, kwargs):
            raise Unbound(f"the correct {name}'s parameters do not take these arguments")
        answered(name)
        return function(*args, **kwargs)
    return answer


# -- what answered ----------------------------------------------------------------------

_ANSWERED = contextvars.ContextVar("answered", default=None)


@contextlib.contextmanager
def answering():
    """Yield the set of the names whose stand-ins answered in the `with` block: the graded
    functions a check judged the student's function with the correct versions of."""
    names = set()
    token = _ANSWERED.set(names)
    try:
        yield names
    finally:
        _ANSWERED.reset(token)


def answered(name):
    """Note that the stand-in for `name` answered (see `answering`)."""
    names = _ANSWERED.get()
    if names is not None:
        names.add(name)


# -- swapping ---------------------------------------------------------------------------

MISSING = object()


def stand_in(name, answer, own=None):
    """A function named `name` returning ``answer(*args, **kwargs)``; for arguments the answer
    does not take (Unbound), ``own(*args, **kwargs)`` (the student's function), when there is one."""
    def standing_in(*args, **kwargs):
        try:
            value = answer(*args, **kwargs)
        except Unbound:
            if own is None:
                raise
            return own(*args, **kwargs)
        answered(name)
        return value
    standing_in.__name__ = standing_in.__qualname__ = name
    return standing_in


def swap(namespace, name, answer, called=None, reference=None):
    """Make the notebook's function `name` (in `namespace`) answer with `answer` (see `stand_in`);
    return the undo. A plain function (never `called`, the function being checked, nor the
    correct function `reference` itself) by identity; anything else by name in `namespace` and in
    `called`'s defaults."""
    value = namespace.get(name, MISSING)
    if swappable(value) and value is not called and value is not reference:
        return retarget(value, stand_in(name, answer, own_copy(value)))
    replacement = stand_in(name, answer, value if callable(value) and value is not reference else None)
    namespace[name] = replacement
    undo_defaults = _replace_defaults(called, value, replacement) if value is not MISSING else None

    def undo():
        if undo_defaults:
            undo_defaults()
        if value is MISSING:
            namespace.pop(name, None)
        else:
            namespace[name] = value
    return undo


def _replace_defaults(function, value, replacement):
    """Replace `value` by `replacement` among `function`'s defaults; the undo, or None."""
    defaults = getattr(function, "__defaults__", None)
    kwdefaults = getattr(function, "__kwdefaults__", None)
    if not any(item is value for item in (*(defaults or ()), *(kwdefaults or {}).values())):
        return None
    try:
        if defaults:
            function.__defaults__ = tuple(replacement if item is value else item for item in defaults)
        if kwdefaults:
            function.__kwdefaults__ = {key: replacement if item is value else item
                                       for key, item in kwdefaults.items()}
    except (AttributeError, TypeError):  # not a plain function: its defaults stay
        return None

    def undo():
        function.__defaults__, function.__kwdefaults__ = defaults, kwdefaults
    return undo


def undoing(undos):
    """One undo running `undos` in reverse order (the last swap is undone first)."""
    def undo():
        for step in reversed(undos):
            step()
    return undo


def swapped(namespace, called, answers, references=None):
    """`swap` each name of `answers` ({name: answer}); one undo, in reverse order.
    `references` ({name: the correct function}) are never swapped by identity."""
    undos = []
    try:
        for name, answer in answers.items():
            undos.append(swap(namespace, name, answer, called, (references or {}).get(name)))
    except BaseException:
        undoing(undos)()
        raise
    return undoing(undos)


# -- which graded functions stand in ----------------------------------------------------

def chosen(function, stand_ins):
    """The stand-ins ({name: correct function}, in the order of the tasks) that answer while
    `function` is checked: when its own name is among them, those before it and those that its
    correct version reaches (`reached`); otherwise all; never `function` itself."""
    own = getattr(function, "__name__", None)
    namespace = getattr(inspect.unwrap(function), "__globals__", None)
    if isinstance(namespace, dict):  # the name the notebook gives it, which its __name__ may not be
        own = next((name for name in stand_ins if namespace.get(name) is inspect.unwrap(function)), own)
    if own in stand_ins:
        # a later task's reference (which may compute this very task) never answers for it
        names = list(stand_ins)
        keep = reached(stand_ins[own], frozenset(stand_ins)) | set(names[:names.index(own)])
        stand_ins = {name: answer for name, answer in stand_ins.items() if name in keep}
    return {name: answer for name, answer in stand_ins.items() if name != own}


@functools.lru_cache(maxsize=1024)
def reached(reference, graded):
    """The names of `graded` that the function `reference` reaches: by a global name of its code
    (nested functions and lambdas included), through an ungraded function it calls the same way,
    or as a default argument; a graded function is not followed further (it stands in whole).
    Read once per reference and names: the reference's code and module do not change while grading."""
    found, seen = set(), set()

    def visit(function):
        function = inspect.unwrap(function)
        code = getattr(function, "__code__", None)
        if code is None or id(function) in seen:
            return
        seen.add(id(function))
        namespace = getattr(function, "__globals__", {})
        values = [namespace[name] for name in _global_names(code) if name in namespace]
        values += list(getattr(function, "__defaults__", None) or ())
        values += list((getattr(function, "__kwdefaults__", None) or {}).values())
        for value in values:
            if isinstance(value, functools.partial):
                value = value.func
            name = getattr(value, "__name__", None)
            if name in graded and callable(value):
                found.add(name)
            elif inspect.isfunction(value):
                visit(value)

    visit(reference)
    return frozenset(found)


def _global_names(code):
    """The names `code` and the code nested in it may look up globally."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if inspect.iscode(constant):
            names |= _global_names(constant)
    return names
