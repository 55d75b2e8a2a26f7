"""Make a function answer as another, by identity: its code replaced by a trampoline.

Every reference to the function (its name, an alias, a functools.partial, a default
argument) then reaches the other, until `swap`'s undo runs. Used by the sandbox's runner
(its stand-ins, which ask the grader) and by `harness` outside the sandbox. This file is
also copied into the sandbox, where the runner imports it: standard library only.
"""

import types
import warnings

with warnings.catch_warnings():  # calling a constant: the constant is replaced by the target
    warnings.simplefilter("ignore")
    _TEMPLATE = compile('def stand_in(*args, **kwargs):\n    return "target"(*args, **kwargs)\n',
                        "<stand-in>", "exec").co_consts[0]


def swappable(function):
    """Whether `function`'s code can be swapped: a plain function without free variables."""
    return type(function) is types.FunctionType and not function.__closure__


def copy(function):
    """A new function with `function`'s code, namespace, name and defaults as they are now."""
    own = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__)
    own.__kwdefaults__ = function.__kwdefaults__
    return own


def swap(function, target):
    """Make the plain `function` (see `swappable`) call ``target(*args, **kwargs)``; return the undo."""
    code = function.__code__
    function.__code__ = _TEMPLATE.replace(co_consts=tuple(target if constant == "target" else constant
                                                          for constant in _TEMPLATE.co_consts))

    def undo():
        function.__code__ = code
    return undo
