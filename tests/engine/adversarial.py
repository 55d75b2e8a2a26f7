"""Submissions that try to forge their grade: a wrong solution plus one trick each.

Every cheater of scaled_dot_product hands in the course's correct tasks but
for a wrong softmax, plus ONE trick, written as student code in a cell right
after the softmax cell. The wrong softmax is one that an honest student of
the batch hands in too, without a trick, so that the cheater deserves exactly
that student's points and no more:

- `submitted-wrong-softmax-axis` normalises over axis 0 the arrays larger than
  the visible checks' (`softmax_wrong_beyond_the_visible_checks`): it passes
  the visible checks and fails the hidden ones. Tricks that act when the hidden
  checks call softmax start from it.
- `submitted-softmax-unstable` overflows on large scores: it fails a visible
  check too. Tricks against the visible checks start from it, so that one can
  see that they do get past the visible checks, and that the hidden checks
  stop them.

`forged-counts` is the exception: a transformer_decoder whose decoder_step
recomputes the prefix at every step from tokens it keeps, handed in honestly
(the tokens kept in the cache) by `submitted-cache-recomputes-prefix`.

Some tricks would do real harm if the sandbox did not hold; they are bounded
so that they cannot hurt the machine even then: the fork storm stops at 200
processes that only sleep, the memory hogs at 3 GB, the disk search after 3
seconds, and nothing is killed by a broad signal (no kill(-1)), only the
cheater's own ancestors.

Files a cheater manages to create are named ``cheat-marker-*`` where the name
is free, so that the test can look for them outside the sandbox.
"""

import textwrap
from dataclasses import dataclass

import nbformat
from nbformat.v4 import new_code_cell

from autograder.samples.implementations import scaled_dot_product as sdp
from autograder.samples.implementations import transformer_decoder as td
from autograder.samples.submissions import submission
from tests.engine.grading import softmax_wrong_beyond_the_visible_checks

SLUG = "scaled_dot_product"
CACHE_SLUG = "transformer_decoder"
HONEST_WRONG = "submitted-wrong-softmax-axis"
HONEST_UNSTABLE = "submitted-softmax-unstable"
HONEST_NO_CACHE = "submitted-cache-recomputes-prefix"

# The visible softmax checks call softmax four times; later calls come from the hidden checks.
VISIBLE_SOFTMAX_CALLS = 4


@dataclass(frozen=True)
class Cheat:
    name: str           # the student is submitted-cheat-<name>
    trick: str          # what it tries, in one sentence
    code: str = ""      # student code, in a cell after the softmax cell (after decoder_step for
                        # forged-counts); "\n# %%\n" starts another cell
    status: tuple = ("graded",)  # what the report may say happened to the submission
    note: str = ""      # words one of the result's notes must contain
    flag: str = ""      # words one of the result's flags must contain
    message: str = ""   # words the message of its check cell (`check_cell`) must contain
    against_visible_checks: bool = False  # hands in the unstable softmax, which fails them

    @property
    def student(self):
        return f"submitted-cheat-{self.name}"

    @property
    def honest(self):
        """The honest student who hands in the same solution without the trick."""
        if self is CACHE_CHEAT:
            return HONEST_NO_CACHE
        return HONEST_UNSTABLE if self.against_visible_checks else HONEST_WRONG

    @property
    def slug(self):
        return CACHE_SLUG if self is CACHE_CHEAT else SLUG

    @property
    def check_cell(self):
        """The check cell of the function the trick is about."""
        return "test_decoder_step" if self is CACHE_CHEAT else "test_softmax"


def cell(source):
    return textwrap.dedent(source).strip()


# A softmax that does something else once the hidden checks call it, and is the wrong one before.
def on_hidden_calls(action):
    body = textwrap.indent(cell(action), " " * 8)
    return (f"_wrong_softmax = softmax\n"
            f"_calls = [0]\n\n\n"
            f"def softmax(x, axis=-1):\n"
            f"    _calls[0] += 1\n"
            f"    if _calls[0] > {VISIBLE_SOFTMAX_CALLS}:  # past the visible checks: a hidden one\n"
            f"{body}\n"
            f"    return _wrong_softmax(x, axis)")


CHEATS = [
    Cheat("ast-transformer",
          "an IPython AST transformer that deletes every assert, raise and check*() call",
          cell('''
            import ast


            class RemoveChecks(ast.NodeTransformer):
                """No assert, no raise, no call of check(), check_close()...: nothing can fail."""

                def visit_Assert(self, node):
                    return ast.Pass()

                def visit_Raise(self, node):
                    return ast.Pass()

                def visit_Expr(self, node):
                    call = node.value
                    if isinstance(call, ast.Call) and getattr(call.func, "id", "").startswith("check"):
                        return ast.Pass()
                    return self.generic_visit(node)


            get_ipython().ast_transformers.append(RemoveChecks())
          '''),
          flag="ast_transformers", against_visible_checks=True),
    Cheat("input-transformer",
          "an IPython input transformer that empties every cell that checks something",
          cell('''
            def drop_checks(lines):
                if any("check" in line for line in lines):
                    return ["pass\\n"]
                return lines


            get_ipython().input_transformers_cleanup.append(drop_checks)
          '''),
          flag="input_transformers_cleanup", against_visible_checks=True),
    Cheat("patched-allclose",
          "numpy's comparisons patched to say that everything is close and equal",
          cell('''
            import numpy as np

            np.allclose = lambda *args, **kwargs: True
            np.array_equal = lambda *args, **kwargs: True
            np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast(a, b).shape, dtype=bool)
            np.testing.assert_allclose = lambda *args, **kwargs: None
            np.isfinite = lambda x, *args, **kwargs: np.ones(np.shape(x), dtype=bool)
          '''),
          flag="np.allclose", against_visible_checks=True),
    Cheat("ndarray-subclass",
          "softmax returns an ndarray subclass that is equal and close to anything",
          cell('''
            class AlwaysRight(np.ndarray):
                def __eq__(self, other):
                    return np.ones(np.shape(self), dtype=bool)

                def __ne__(self, other):
                    return np.zeros(np.shape(self), dtype=bool)

                def __array_function__(self, function, types, args, kwargs):
                    if function in (np.allclose, np.array_equal, np.array_equiv):
                        return True
                    if function is np.isclose:
                        return np.ones(np.shape(self), dtype=bool)
                    return super().__array_function__(function, types, args, kwargs)


            _wrong_softmax = softmax


            def softmax(x, axis=-1):
                return np.asarray(_wrong_softmax(x, axis)).view(AlwaysRight)
          '''),
          # no longer gets past the visible checks either: check_close compares np.asarray(actual),
          # a plain ndarray, so the subclass's overrides are never consulted
          flag="__eq__"),
    Cheat("eq-always-true",
          "ndarray's __eq__ replaced in its type dictionary and an answer whose __eq__ is always true",
          cell('''
            import gc


            class EqualToAnything:
                __array_priority__ = 1e9

                def __init__(self, values):
                    self.values = values
                    self.shape, self.dtype = values.shape, values.dtype

                def __eq__(self, other):
                    return True

                def __ne__(self, other):
                    return False

                def __bool__(self):
                    return True

                def __array__(self, dtype=None, copy=None):
                    return self.values


            # the real dictionary behind np.ndarray.__dict__ (a read-only proxy): patch it anyway
            gc.get_referents(np.ndarray.__dict__)[0]["__eq__"] = lambda self, other: True
            _wrong_softmax = softmax


            def softmax(x, axis=-1):
                return EqualToAnything(_wrong_softmax(x, axis))
          '''),
          flag="__eq__"),
    Cheat("shadowed-builtins",
          "builtins patched (all, any, abs) and shadowed by the notebook (isinstance, len)",
          cell('''
            import builtins

            builtins.all = lambda iterable: True
            builtins.any = lambda iterable: True
            builtins.abs = lambda x: 0 * x


            def isinstance(value, classes):
                return True


            def len(value):
                return 0
          '''),
          flag="builtins"),
    Cheat("excepthook",
          "exception hooks (sys.excepthook, IPython's custom exception handler) that swallow failures",
          cell('''
            import sys

            sys.excepthook = lambda *args: None


            def swallow(shell, etype, evalue, tb, tb_offset=None):
                return []  # nothing shown: the check "passed"


            get_ipython().set_custom_exc((BaseException,), swallow)
          '''),
          flag="excepthook"),
    Cheat("import-reference",
          "imports the reference package (and the hidden checks) from wherever it may be",
          cell('''
            import importlib
            import os
            import sys

            for folder in ("/work/main", "/work", "/repo", "/course", "/", os.path.dirname(os.getcwd())):
                sys.path.append(folder)
            try:
                from solutions import scaled_dot_product as reference
            except ImportError:
                try:
                    reference = importlib.import_module("autograder.checks.scaled_dot_product").reference
                except ImportError as error:
                    print("no reference to import:", error)
                    reference = None
            if reference is not None:
                softmax = reference.softmax
          '''),
          flag="solutions"),
    Cheat("search-disk",
          "searches the disk (3 s at most) for the reference or the instructor's notebook and uses it",
          cell('''
            import json
            import os
            import time

            WANTED = ("scaled_dot_product.py", "scaled_dot_product.ipynb")


            def search(deadline):
                """Paths of files that may hold a working softmax: the solutions, the sources."""
                for top in ("/work", "/root", "/home", "/srv", "/opt", "/mnt", "/"):
                    for folder, subfolders, files in os.walk(top):
                        if time.monotonic() > deadline:
                            return
                        subfolders[:] = [s for s in subfolders if os.path.join(folder, s)
                                         not in ("/proc", "/sys", "/dev")]
                        for name in files:
                            if name in WANTED or (name.endswith(".py") and "solutions" in folder):
                                yield os.path.join(folder, name)


            def softmax_from(path):
                text = open(path, encoding="utf-8", errors="replace").read()
                if path.endswith(".ipynb"):
                    text = "\\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                                     if c["cell_type"] == "code")
                namespace = {}
                exec(text, namespace)
                found = namespace["softmax"]
                if np.allclose(found(np.zeros((2, 3)), axis=-1), 1 / 3):
                    return found


            for path in search(time.monotonic() + 3):
                try:
                    softmax = softmax_from(path)
                    print("found a softmax in", path)
                    break
                except Exception:
                    continue
          '''),
          flag="solutions"),
    Cheat("shell-search-disk",
          "searches the disk with a shell command for the reference, the checks or the instructor's "
          "notebook, and uses what it finds",
          cell('''
            found = !find / \\( -path /proc -o -path /sys -o -path /usr -o -name site-packages \\) -prune -o \\( -name "scaled_dot_product*" -o -path "*/checks/*.py" -o -path "*/solutions/*.py" \\) -print 2>/dev/null
            print("the shell found", len(found), "files")
            for path in found:
                try:
                    namespace = {}
                    exec(open(path).read(), namespace)
                    softmax = namespace["softmax"]
                    print("the shell found a softmax in", path)
                except Exception:
                    continue
          ''')),
    Cheat("shell-daemon",
          "starts processes from a shell command (setsid, nohup) to outlive the notebook",
          cell('''
            %%bash
            cp /usr/bin/sleep /tmp/cheat-shell-kid
            (setsid /tmp/cheat-shell-kid 600 &)
            nohup /tmp/cheat-shell-kid 600 > /dev/null 2>&1 &
          ''')),
    Cheat("shell-in-hidden-call",
          "softmax asks the shell for the grader's processes and files once the hidden checks call it",
          on_hidden_calls('''
            print(get_ipython().getoutput("ps -ef; ls -R /work /root"))
          ''')),
    Cheat("write-gradebook",
          "writes grades (gradebook.db, grades.csv) into every folder it can name",
          cell('''
            import os

            folders = [".", "..", "/", "/tmp", "/work/main", "/work", "/work/main/autograder",
                       os.path.expanduser("~"), "/srv/nbgrader/exchange"]
            for line in open("/proc/self/mountinfo"):
                folders += line.split()[3:5]  # where each mount comes from, and where it is
            FULL_MARKS = "submitted-cheat-write-gradebook,scaled_dot_product,10,10,graded\\n"
            wrote = []
            for folder in folders:
                for name in ("gradebook.db", "grades.csv", "cheat-marker-gradebook.csv"):
                    path = os.path.join(folder, name)
                    try:
                        with open(path, "a") as gradebook:
                            gradebook.write(FULL_MARKS)
                        wrote.append(path)
                    except OSError:
                        pass
            print("wrote", wrote)
          '''),
          flag="gradebook"),
    Cheat("write-other-student",
          "overwrites another student's notebook and plants a new student in the submissions",
          cell('''
            import glob
            import os

            victims = ["../submitted-correct/scaled_dot_product.ipynb",
                       "/submissions/submitted-correct/scaled_dot_product.ipynb"]
            for pattern in ("/tmp/*/*/submitted-correct/scaled_dot_product.ipynb",
                            "/tmp/*/*/*/submitted-correct/scaled_dot_product.ipynb",
                            "/tmp/pytest-of-*/*/*/submitted-correct/scaled_dot_product.ipynb"):
                victims += glob.glob(pattern)
            for path in victims:
                for target in (path, os.path.join(os.path.dirname(os.path.dirname(path)),
                                                  "cheat-marker-planted", "scaled_dot_product.ipynb")):
                    try:
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        with open(target, "w") as notebook:
                            notebook.write('{"cells": []}')
                        print("overwrote", target)
                    except OSError:
                        pass
          ''')),
    Cheat("sys-exit",
          "sys.exit() in a cell, and SystemExit raised by softmax in the hidden checks",
          "import sys\n\nsys.exit(0)\n# %%\n" + on_hidden_calls("raise SystemExit(0)"),
          message="SystemExit"),
    Cheat("os-exit",
          "os._exit() in the first hidden call of softmax",
          "import os\n\n" + on_hidden_calls("os._exit(0)"),
          status=("crashed",), note="process died"),
    Cheat("kill-parent",
          "kills its parent, the parent's process group and its ancestors up to the grader and pytest",
          cell('''
            import os
            import signal


            def ancestors(pid, count):
                """The parent of `pid`, its parent... (`count` of them at most, never pid 1)."""
                for _ in range(count):
                    try:
                        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
                    except (OSError, IndexError, ValueError):
                        return
                    if pid <= 1:
                        return
                    yield pid


            for pid in [os.getppid(), *ancestors(os.getppid(), 4)]:
                try:
                    os.kill(pid, signal.SIGKILL)
                    print("killed", pid)
                except OSError as error:
                    print("could not kill", pid, error)
                try:
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
                    print("killed the group of", pid)
                except OSError as error:
                    print("could not kill the group of", pid, error)
          '''),
          flag="os.kill"),
    Cheat("loop-ignoring-sigint",
          "an endless loop in a cell, with SIGINT, SIGALRM, SIGPROF and SIGTERM ignored and blocked",
          cell('''
            import signal

            for number in (signal.SIGINT, signal.SIGALRM, signal.SIGPROF, signal.SIGTERM):
                signal.signal(number, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGALRM, signal.SIGPROF,
                                                      signal.SIGTERM})
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            while True:
                pass
          '''),
          status=("timeout",), note="could not be interrupted", flag="signal.signal"),
    Cheat("hang-in-hidden-call",
          "softmax hangs, with SIGALRM and SIGPROF (the runner's timers) ignored, once the hidden "
          "checks call it",
          "import signal\n\n" + on_hidden_calls('''
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            signal.signal(signal.SIGPROF, signal.SIG_IGN)
            while True:
                pass
          '''),
          status=("timeout",), note="could not be interrupted"),
    Cheat("memory-hog",
          "tries to lift its memory limit, then allocates 64 MB blocks up to 3 GB",
          cell('''
            import resource

            for limit in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
                try:
                    resource.setrlimit(limit, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                except (ValueError, OSError) as error:
                    print("limit kept:", error)
            # 48 x 64 MB, allocated but not written: the limit counts them all the same, and
            # writing them would only make the test slow (the first touch of memory is)
            hog = [np.empty(8 * 1024 ** 2) for _ in range(48)]
          '''),
          status=("resource-limit",), note="out of memory"),
    Cheat("memory-in-children",
          "holds 4 x 200 MB in forked processes, more than the notebook's memory limit (512 MB), "
          "waiting for them over several cells (a cell has 5 s)",
          cell('''
            import ctypes
            import os
            import select
            import time

            BLOCK_MB, CHILDREN = 200, 4
            ready, said = os.pipe()
            held, children = [], []
            try:
                for _ in range(CHILDREN):
                    pid = os.fork()
                    if pid == 0:
                        try:
                            ctypes.CDLL(None).prctl(15, b"cheat-mem-kid", 0, 0, 0)  # its name, for ps
                            block = np.ones(BLOCK_MB * 2 ** 20 // 8)  # written: really held
                            os.write(said, b"y")
                            time.sleep(60)
                        except BaseException:
                            os.write(said, b"n")
                        finally:
                            os._exit(0)
                    children.append(pid)
            except OSError as error:
                print("fork refused:", error)


            def collect(seconds):
                """Count the children that hold their block, waiting `seconds` at most."""
                deadline = time.monotonic() + seconds
                while len(held) < len(children):
                    if not select.select([ready], [], [], max(0, deadline - time.monotonic()))[0]:
                        return
                    held.append(os.read(ready, 1) == b"y")
          ''') + "\n# %%\ncollect(4)\n# %%\ncollect(4)\n# %%\ncollect(4)\n# %%\n" + cell('''
            print(f"cheat-held-{BLOCK_MB * sum(held)}-MB-in-{sum(held)}-other-processes "
                  f"({len(held)} of {len(children)} answered)")
            for pid in children:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
          '''),
          flag="os.fork"),
    Cheat("fork-storm",
          "forks up to 200 sleeping processes (each named cheat-fork-kid) and leaves them running",
          cell('''
            import ctypes
            import os
            import time

            started = 0
            for _ in range(200):
                try:
                    pid = os.fork()
                except OSError as error:
                    print("fork refused after", started, "processes:", error)
                    break
                if pid == 0:
                    try:
                        ctypes.CDLL(None).prctl(15, b"cheat-fork-kid", 0, 0, 0)
                        time.sleep(600)
                    finally:
                        os._exit(0)
                started += 1
          '''),
          flag="os.fork"),
    Cheat("output-flood",
          "prints 6 MB through print (ignoring the cap's exception), then 12 MB straight to fds 1 and 2",
          cell('''
            import os

            line = "flood " * 1000 + "\\n"
            try:
                for _ in range(1000):
                    print(line, end="")
            except BaseException:
                pass  # the notebook's output cap raised: go on past it
            for _ in range(1000):
                os.write(1, line.encode())
                os.write(2, line.encode())
          '''),
          status=("resource-limit",), note="printed more than"),
    Cheat("huge-result",
          "softmax returns 80 MB in the hidden checks, more than a message may hold",
          on_hidden_calls("return np.zeros(10 * 1024 ** 2)"),
          status=("crashed",), note="malformed message"),
    Cheat("crafted-results",
          "fake result files and grades wherever it can write, and the runner's protocol.send patched "
          "so that no cell ever reports an error",
          cell('''
            import json
            import os

            import protocol  # the sandbox runner's own module, beside the notebook

            STUDENT = "submitted-cheat-crafted-results"
            POINTS = {"test_softmax": 2, "test_attention": 3, "test_causal_mask": 1,
                      "test_padding_mask": 1, "test_attention_masks": 3}
            fake = {"student_id": STUDENT, "assignment": "scaled_dot_product", "status": "graded",
                    "checks": [{"name": n, "score": p, "max_score": p, "message": ""}
                               for n, p in POINTS.items()],
                    "notes": [], "fingerprint": "", "flags": []}
            folders = [".", "..", "/", "/tmp", "/out", "/work/main", os.path.expanduser("~")]
            for line in open("/proc/self/mountinfo"):
                folders += line.split()[3:5]
            for folder in folders:
                for student in (STUDENT, "cheat-marker-fake-student"):
                    path = os.path.join(folder, "results", student, "scaled_dot_product.json")
                    try:
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        with open(path, "w") as result:
                            json.dump({**fake, "student_id": student}, result)
                        print("wrote", path)
                    except OSError:
                        pass
            print(f"[1/1] {STUDENT} scaled_dot_product: graded 10/10")

            _send = protocol.send


            def send(stream, header, blobs=()):
                if header.get("op") == "cell":
                    header = {**header, "error": None}  # every check "passed"
                return _send(stream, header, blobs)


            protocol.send = send
          '''),
          flag="protocol", against_visible_checks=True),
    Cheat("forged-messages",
          "writes forged protocol messages to the grader's socket: every cell passed, then "
          "answers to calls not yet made",
          cell('''
            import gc
            import os
            import sys

            import protocol

            channel = os.fdopen(os.dup(int(sys.argv[1])), "wb")
            # the runner's request (cell ids and sources) is a live dict; this cell is the one
            # that says "forge from here"
            run = next(o for o in gc.get_objects() if type(o) is dict and o.get("op") == "run")
            cells = run["cells"]
            mine = next(cell_id for cell_id, source in cells if "forge from " + "here" in source)
            ids = [cell_id for cell_id, _ in cells]
            for cell_id in ids[ids.index(mine):]:
                protocol.send(channel, {"op": "cell", "id": cell_id, "stdout": "", "stderr": "",
                                    "error": None, "seconds": 0.0})
            protocol.send(channel, {"op": "ran", "functions": ["softmax", "scaled_dot_product_attention",
                                                           "causal_mask", "padding_mask"]})
            for _ in range(100):
                tree, blobs = protocol.encode(np.full(6, 1 / 6))
                arguments, _ = protocol.encode([[], {}], blobs=blobs)
                protocol.send(channel, {"op": "returned", "value": tree, "arguments": arguments}, blobs)
          '''),
          status=("graded", "crashed"), flag="protocol"),
    Cheat("malformed-message",
          "writes a message whose JSON header is nested 200000 deep to the grader's socket",
          cell('''
            import os
            import socket
            import struct
            import sys

            header = b"[" * 200_000 + b"]" * 200_000
            channel = socket.socket(fileno=os.dup(int(sys.argv[1])))
            channel.sendall(struct.pack(">Q", len(header)) + header)
          '''),
          status=("crashed",), note="malformed message"),
    Cheat("previous-inputs",
          "saves every input softmax receives where a later run could find it, and looks for the "
          "inputs saved by an earlier run",
          cell('''
            import glob
            import os

            STORES = ["/sandbox", "/tmp", "/dev/shm", "/var/tmp", os.path.expanduser("~"), ".."]
            earlier = [path for store in STORES
                       for path in glob.glob(os.path.join(store, "cheat-marker-inputs-*.npy"))]
            print(f"found {len(earlier)} inputs saved by an earlier run")
            _wrong_softmax = softmax
            _earlier = {np.load(path).tobytes() for path in earlier}
            _saved = [0]


            def softmax(x, axis=-1):
                x = np.asarray(x, dtype=float)
                if x.tobytes() in _earlier:  # asked in an earlier run: its answer was worked out since
                    e = np.exp(x - x.max(axis=axis, keepdims=True))
                    return e / e.sum(axis=axis, keepdims=True)
                for store in STORES:
                    try:
                        np.save(os.path.join(store, f"cheat-marker-inputs-{_saved[0]}.npy"), x)
                    except OSError:
                        pass
                _saved[0] += 1
                return _wrong_softmax(x, axis)
          ''')),
    Cheat("frame-inspection",
          "softmax looks through the caller's frames and every live object for the expected answer",
          cell('''
            import gc
            import sys


            def expected_answers():
                found, frame = [], sys._getframe(1)
                while frame is not None:
                    for scope in (frame.f_locals, frame.f_globals):
                        found += [v for k, v in scope.items() if "expected" in k or "reference" in k]
                    frame = frame.f_back
                for value in gc.get_objects():
                    if type(value) is dict and "expected" in value:
                        found.append(value["expected"])
                return found


            _wrong_softmax = softmax


            def softmax(x, axis=-1):
                for answer in expected_answers():
                    if isinstance(answer, np.ndarray) and answer.shape == np.shape(x) \\
                            and answer.dtype.kind == "f":
                        return answer
                return _wrong_softmax(x, axis)
          '''),
          flag="f_back"),
]

# Tricks on the notebook's structure instead of its code.
STRUCTURE_CHEATS = [
    Cheat("fake-graded-cell",
          "adds its own graded cell worth 100 points, and a second copy of test_softmax",
          status=("invalid-structure",), note="renamed"),
    Cheat("edited-check-cell",
          "empties the check cell test_softmax and gives it 100 points",
          status=("invalid-structure",), note="test_softmax", against_visible_checks=True),
]

CACHE_CHEAT = Cheat(
    "forged-counts",
    "decoder_step recomputes the whole prefix at every step, from tokens it keeps beside the "
    "cache (in a global, by the cache's id) so that the cache it returns looks right",
    cell('''
        _recomputing_step = decoder_step
        _tokens_of = {}  # id of a cache this step returned -> (that cache, the tokens decoded so far)


        def decoder_step(token, cache, params, num_heads):
            returned, kept = _tokens_of.get(id(cache), (None, None))
            given = [{**c, "tokens": kept} for c in cache] if returned is cache else cache
            output, new = _recomputing_step(token, given, params, num_heads)
            tokens = new[0]["tokens"]
            new = [{key: value for key, value in c.items() if key != "tokens"} for c in new]
            _tokens_of[id(new)] = (new, tokens)
            return output, new
    '''), message="continue the prefix")

ALL_CHEATS = CHEATS + STRUCTURE_CHEATS + [CACHE_CHEAT]


# -- the notebooks -------------------------------------------------------------------

def correct():
    return submission(SLUG, sdp.CORRECT)


def honest_wrong():
    """Correct but for softmax, which normalises over axis 0 beyond the visible checks' arrays (it
    fails hidden checks only)."""
    return submission(SLUG, {**sdp.CORRECT, "softmax": softmax_wrong_beyond_the_visible_checks})


def honest_unstable():
    """Correct but for softmax, which overflows on large scores (it fails a visible check)."""
    return submission(SLUG, {**sdp.CORRECT, "softmax": sdp.softmax_unstable})


def honest_no_cache():
    task, wrong, _, _ = td.MISTAKES["step-recomputes-prefix"]
    return submission(CACHE_SLUG, {**td.CORRECT, task: wrong})


# student -> (assignment, their notebook)
HONEST = {"submitted-correct": (SLUG, correct), HONEST_WRONG: (SLUG, honest_wrong),
          HONEST_UNSTABLE: (SLUG, honest_unstable), HONEST_NO_CACHE: (CACHE_SLUG, honest_no_cache)}


def notebook(cheat):
    """The notebook that `cheat` hands in: its honest student's, with the trick."""
    handed_in = HONEST[cheat.honest][1]()
    if cheat is CACHE_CHEAT:
        return _after(handed_in, "decoder_step", cheat.code)
    if cheat.name == "fake-graded-cell":
        check = next(c for c in handed_in.cells if _grade_id(c) == "test_softmax")
        bonus = new_code_cell("pass  # worth 100 points")
        bonus.metadata["nbgrader"] = {**check.metadata["nbgrader"], "grade_id": "test_bonus", "points": 100}
        copy = nbformat.from_dict({**check, "id": "test-softmax-again",
                                   "metadata": {"nbgrader": dict(check.metadata["nbgrader"])}})
        handed_in.cells += [bonus, copy]
        return handed_in
    if cheat.name == "edited-check-cell":
        check = next(c for c in handed_in.cells if _grade_id(c) == "test_softmax")
        check.source = "pass  # every check passes"
        check.metadata["nbgrader"]["points"] = 100
        return handed_in
    return _after(handed_in, "softmax", cheat.code)


def second_attempt(cheat):
    """`cheat`'s notebook handed in again, changed."""
    resubmitted = notebook(cheat)
    resubmitted.cells.append(new_code_cell("# second attempt"))
    return resubmitted


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _after(notebook, grade_id, code):
    """`notebook` with the cells of `code` right after the cell `grade_id`."""
    index = next(i for i, c in enumerate(notebook.cells) if _grade_id(c) == grade_id)
    notebook.cells[index + 1:index + 1] = [new_code_cell(source.strip())
                                           for source in code.split("\n# %%\n")]
    return notebook
