"""A static look at a submission's code, for the instructor: what tries to tamper with grading.

Flags never change a score: every point is decided outside the student's
process, whatever its code does. They say which notebooks deserve a look.
"""

import ast
import functools
import re

from .course import ENGINE_PACKAGE

# The engine's modules, and those of its runner in the sandbox (the course's packages join them).
ENGINE_MODULES = {ENGINE_PACKAGE, "nbgrader", "protocol", "runner", "standins"}
PATCHED_MODULES = {"np", "numpy", "builtins", "__builtins__", "sys", "math", "operator", "protocol"}
COMPARISONS = {"__eq__", "__ne__", "__bool__", "__array_ufunc__", "__array_function__",
               "__array_finalize__", "__array_wrap__"}
HOOKS = {"input_transformers_cleanup", "input_transformers_post", "ast_transformers", "events",
         "set_custom_exc", "register_magic_function", "excepthook", "displayhook", "settrace",
         "setprofile", "audit", "addaudithook", "meta_path", "path_hooks"}
MAGIC = re.compile(r"^(\s*)%{1,2}\w+[ \t]*(.*)$", re.MULTILINE)  # %time CODE: look at CODE
SHELL = re.compile(r"^\s*!.*$", re.MULTILINE)


def without_magics(source):
    """The Python of a cell: IPython magics replaced by their code, shell commands removed."""
    return MAGIC.sub(r"\1\2", SHELL.sub("", source))


def flags(course, sources):
    """Sentences about what the code `sources` (cell sources) does to the grading of `course`, sorted."""
    found = set()
    for source in sources:
        try:
            tree = ast.parse(without_magics(source))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            found.update(_flag(course, node))
    return sorted(found)


@functools.cache
def grader_modules(course):
    """The top-level modules a submission has no business importing: the engine's and the course's."""
    return ENGINE_MODULES | set(course.packages)


@functools.cache
def suspicious_words(course):
    """Words in a string that point at the grader: its modules, its files, the hidden tests."""
    names = "|".join(re.escape(name) for name in sorted({ENGINE_PACKAGE, *course.references,
                                                                *filter(None, [course.checks])}))
    return re.compile(rf"gradebook|{names}|HIDDEN TESTS|\.npy\b|/proc/\d|/sandbox\b")


def _flag(course, node):
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] in grader_modules(course):
                yield f"imports `{alias.name}` (the reference or the grader)"
    elif isinstance(node, ast.ImportFrom) and node.module:
        if node.module.split(".")[0] in grader_modules(course):
            yield f"imports from `{node.module}` (the reference or the grader)"
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            root = _root(target)
            if isinstance(target, (ast.Attribute, ast.Subscript)) and root in PATCHED_MODULES:
                yield f"changes `{ast.unparse(target)}` (patches {root})"
            if isinstance(target, ast.Attribute) and target.attr in HOOKS | COMPARISONS:
                yield f"changes `{ast.unparse(target)}` (a hook or comparison of the interpreter)"
    elif isinstance(node, ast.ClassDef):
        bases = [ast.unparse(base) for base in node.bases]
        if any(base.split(".")[-1] in ("ndarray", "generic", "float64") for base in bases):
            yield f"defines `{node.name}`, a subclass of a NumPy type"
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in COMPARISONS:
                yield f"defines `{node.name}.{item.name}` (a comparison override)"
    elif isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        if name in ("globals", "vars", "gc.get_referents", "gc.get_referrers", "ctypes.pythonapi",
                    "sys._getframe"):
            yield f"calls `{name}` (rebinds names or reaches into objects behind the code's back)"
        if name in ("setattr", "delattr") and node.args and _root(node.args[0]) in PATCHED_MODULES:
            yield f"calls `{name}` on `{ast.unparse(node.args[0])}` (patches it)"
        if name == "get_ipython" or name.startswith("get_ipython()."):
            yield "uses `get_ipython()` (IPython's transformers and hooks)"
        if name.split(".")[-1] in ("register", "append", "insert", "extend") and \
                any(part in HOOKS for part in name.split(".")):
            yield f"calls `{name}` (adds an IPython or interpreter hook)"
        if name in ("os.kill", "os.killpg", "os._exit", "os.fork", "signal.signal"):
            yield f"calls `{name}` (processes and signals)"
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and suspicious_words(course).search(node.value):
        yield f"mentions {suspicious_words(course).search(node.value).group(0)!r} in a string"
    elif isinstance(node, ast.Attribute) and node.attr in ("__subclasses__", "__globals__", "f_back",
                                                           "f_globals", "modules", "__dict__"):
        yield f"reaches into the interpreter (`.{node.attr}`)"


def _root(node):
    """The name an attribute or subscript chain starts from (`np` in `np.testing.x`)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
