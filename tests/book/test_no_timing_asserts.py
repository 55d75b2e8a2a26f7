"""No measured time decides whether the book builds: a chapter may glue a time and compare two
times measured in the same run, but never assert a time against a fixed number of seconds
(a slower or busier machine would fail the build). Reads every chapter's code; builds nothing."""

import ast
import re

import pytest

from tests.support import COURSE

CHAPTERS = sorted((COURSE.root / "book").glob("*.md"))
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)
TIMERS = {"time", "time_ns", "process_time", "process_time_ns", "perf_counter", "perf_counter_ns",
          "monotonic", "monotonic_ns", "thread_time", "thread_time_ns", "timeit", "repeat"}
ABSOLUTE, RELATIVE = "a time", "a ratio of times"


def chapter_code(text):
    """The Python of a MyST chapter's code cells, without their options and IPython magics."""
    cells = []
    for cell in CODE_CELL.findall(text):
        lines = cell.splitlines()
        if lines and lines[0] == "---":                      # YAML options between two ---
            lines = lines[lines.index("---", 1) + 1:]
        cells.append("\n".join(line for line in lines
                               if not line.startswith((":", "%", "!"))))  # :tags:, magics
    return "\n".join(cells)


class Times:
    """Which names hold a measured time (ABSOLUTE) or a ratio of two (RELATIVE)."""

    def __init__(self, tree):
        self.names = {}
        for _ in range(4):                                   # to a fixed point, whatever the order
            for node in ast.walk(tree):
                self.learn(node)

    def kind(self, node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TIMERS \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in {"time", "timeit"}:
            return ABSOLUTE
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            top, bottom = self.kind(node.left), self.kind(node.right)
            if top and bottom:                               # seconds / seconds: no unit left
                return RELATIVE if top == bottom else ABSOLUTE
            return top or bottom
        if isinstance(node, ast.DictComp):                   # what it holds, not what it loops over
            return self.kind(node.value)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self.kind(node.elt)
        kinds = {self.kind(child) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)}
        return ABSOLUTE if ABSOLUTE in kinds else RELATIVE if RELATIVE in kinds else None

    def taint(self, target, kind):
        if not kind:
            return
        while isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
            target = target.value
        if isinstance(target, ast.Name):
            self.names[target.id] = ABSOLUTE if ABSOLUTE in (kind, self.names.get(target.id)) else kind
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.taint(element, kind)

    def learn(self, node):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self.taint(target, self.kind(node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            self.taint(node.target, self.kind(node.value))
        elif isinstance(node, (ast.For, ast.comprehension)):
            self.taint(node.target, self.kind(node.iter))
        elif isinstance(node, ast.NamedExpr):
            self.taint(node.target, self.kind(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in {"append", "extend", "insert", "update", "setdefault"}:
            self.taint(node.func.value, next(filter(None, map(self.kind, node.args)), None))


def time_limits(code):
    """The asserts of `code` that compare a measured time with anything but another measured time."""
    tree = ast.parse(code)
    times = Times(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [compare.left, *compare.comparators]
            for left, right in zip(operands, operands[1:]):
                kinds = {times.kind(left), times.kind(right)}
                if ABSOLUTE in kinds and len(kinds) == 2:   # a time against a number or a ratio
                    found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_no_chapter_asserts_a_measured_time_against_a_constant(chapter):
    limits = time_limits(chapter_code(chapter.read_text()))
    assert not limits, f"{chapter.name} asserts a time against a fixed limit: {limits}"


RULE_CASES = {
    # the assert that failed chapter 11's build on a slower machine
    "start = time.process_time()\nwork()\nseconds = time.process_time() - start\nassert seconds <= 30": True,
    "LIMIT = 30\nt = time.perf_counter(); work(); t = time.perf_counter() - t\nassert t < LIMIT": True,
    "times = []\nfor i in range(3):\n    s = time.perf_counter()\n    times.append(time.perf_counter() - s)\n"
    "assert max(times) < 0.5": True,
    "took = {}\nfor n in 'ab':\n    s = time.process_time()\n    took[n] = time.process_time() - s\n"
    "assert 0.1 < took['a']": True,
    # two times measured in the same run, or their ratio against a margin: allowed
    "a = []; b = []\ns = time.perf_counter(); a.append(time.perf_counter() - s)\n"
    "s = time.perf_counter(); b.append(time.perf_counter() - s)\n"
    "growth = {n: float(np.median(t[-3:]) / np.median(t[:3])) for n, t in (('a', a), ('b', b))}\n"
    "assert growth['a'] > 2 and growth['b'] < growth['a'] / 3": False,
    "s = time.perf_counter(); x = time.perf_counter() - s\ny = time.perf_counter() - s\nassert x < y": False,
    "assert plain_bytes[-1] > 500 * MiB": False,
}


@pytest.mark.parametrize("code, is_limit", RULE_CASES.items())
def test_the_rule_catches_a_time_limit_and_allows_comparisons(code, is_limit):
    assert bool(time_limits(code)) == is_limit, code
