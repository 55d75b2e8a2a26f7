"""The grader's side of the sandbox: a student's notebook in bubblewrap, its functions called from outside.

The notebook runs in the `runner` package, in its own process started by bubblewrap (Debian's
`bwrap`) as an unprivileged user of its own (or, graded by an ordinary user, as that user in user
namespaces of its own), with only /usr, the Python installation and its packages (read-only)
around it, and two small private in-memory folders, the only ones it may write (/sandbox,
holding the runner read-only, and /tmp): no instructor sources, no reference package, no grader outputs, no
other student's files, no network, its own process namespace, and limits on time, memory,
processes (none besides itself), file size and output.

The grader keeps the hidden checks in its own process and calls the student's functions through
`StudentFunction` proxies (a `student.Student`): the inputs go to the sandbox as plain data, the
results come back as plain data (`protocol`), and the comparison with the reference, hence every
point, is decided here. One thing can only be observed where the code runs, and a notebook
could hide it: whether a function changed its arguments in place. Memory is decided by a limit
the notebook cannot raise: `Sandbox.in_memory` runs the notebook again in a sandbox whose runner
caps its own address space before the first cell (`harness.call_in_memory`). The flags
(`flags.py`) point at code that tries.

Its modules:

- `state`: the limits, and `Submission`, one submission's state, which all its sandboxes (a
  restarted one, those for memory checks) share by reference;
- `bwrap`: bubblewrap's command line, and the runner's files (derived from its imports);
- `process`: the runner's process, and the messages within the submission's time;
- `shell`: the broker of the cells' shell commands;
- `answers`: the reference answering the stand-ins, within a budget of its own;
- `session`: `Sandbox` (run the notebook, call its functions) and `StudentFunction`.
"""

from .bwrap import check_available, runner_files
from .session import Sandbox, StudentFunction
from .state import Limits, SandboxStopped, SandboxUnavailable, Submission, Timeouts

__all__ = ["Limits", "Sandbox", "SandboxStopped", "SandboxUnavailable", "StudentFunction", "Submission",
           "Timeouts", "check_available", "runner_files"]
