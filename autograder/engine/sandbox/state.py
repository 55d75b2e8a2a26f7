"""The limits, and one submission's state: shared by reference by all its sandboxes."""

from dataclasses import dataclass, field

from ..student import Stopped


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot start a sandbox on this machine."""


class SandboxStopped(Stopped):
    """The sandbox was stopped or died; a BaseException so that checks do not swallow it.
    `fault`: what the code it was running did, when that alone stopped it (it killed the
    process, or could not be interrupted), else None."""

    def __init__(self, status, reason, fault=None):
        super().__init__(status, reason)
        self.fault = fault


class NotCalledAgain(RuntimeError):
    """What calling a function of the notebook raises once it has killed the notebook's process in a
    check: it is not called again (the checks after it fail at once, and cost no restart)."""


@dataclass(frozen=True)
class Limits:
    cell_seconds: float = 60.0          # CPU time of one notebook cell: at most (or exactly, if
                                        # fixed_cells)
    call_seconds: float = 30.0          # of one call of a student's function by a check: at most
                                        # (or exactly, if fixed_calls)
    wall_factor: float = 2.0            # a cell or call may wait (sleep) this many times its limit
    time_factor: float = 50.0           # below those, a cell or call gets this many times the
    min_seconds: float = 1.0            # reference's time on it, at least min_seconds (timing.py)
    fixed_cells: bool = False           # the instructor fixed every cell's limit
    fixed_calls: bool = False           # the instructor fixed every call's limit
    submission_seconds: float = 600.0   # everything the sandbox of one submission does
    memory_bytes: int = 2 * 1024 ** 3   # address space of the notebook's process
    processes: int = 1                  # processes and threads: the notebook alone (memory
                                        # is limited per process)
    output_chars: int = 1_000_000       # printed by the notebook in all
    file_bytes: int = 16 * 1024 ** 2    # largest file it may write
    disk_bytes: int = 64 * 1024 ** 2    # size of each of its two writable folders, /sandbox and /tmp
    shell_processes: int = 4            # processes of one shell command of a cell (`!cmd`), which
                                        # share the memory limit


@dataclass(frozen=True)
class Timeouts:
    """One submission's time limits (`timing.timeouts`); what is not listed gets `Limits`'."""
    cells: dict = field(default_factory=dict)   # cell id -> seconds
    calls: dict = field(default_factory=dict)   # function name -> seconds of one call
    call: float = None                          # seconds of a call of any other function
    # cells (the course's: checks, given code) where a function that runs out of time is not
    # called again; a student's own cell may try a function on a large input of its own
    stopping_cells: frozenset = frozenset()


@dataclass
class Submission:
    """One submission's notebook and what its sandboxes learn of it. Every sandbox of the
    submission (the first, one restarted after it died, those for memory checks) holds this one
    object: nothing is copied from one to another."""
    cells: list                         # (cell id, source) of its code cells, in order
    limits: Limits = Limits()
    uid: int = 61000                    # the sandbox's user
    isolate: bool = True                # False: no bubblewrap, only for our own code
    timeouts: Timeouts = Timeouts()
    files: tuple = ()                   # (path, relative path) of files the notebook reads
    hidden: tuple = ()                  # the course's packages, hidden should they be installed as copies
    places: dict = field(default_factory=dict)     # cell id -> where it is, for messages (its task)
    own_cells: list = field(default_factory=list)  # ids of the student's own cells: an error's place
    task: str = None                    # the task whose hidden checks call the student's functions now
    deadline: float = None              # time.monotonic() by which everything must be done
    events: list = field(default_factory=list)     # (status, reason) of every limit hit or crash
    stopped: dict = field(default_factory=dict)    # function name -> why it is not called again
    # function name -> the notebook's function it ran when it was stopped in a cell (a call in
    # which that one stands in runs it again: `Sandbox.call`)
    stopped_within: dict = field(default_factory=dict)
    call_seconds: dict = field(default_factory=dict)  # function name -> CPU time of its slowest call
    # cell id -> why it is not run: it killed the notebook's process or could not be interrupted
    # (`Sandbox.run`); every sandbox of the submission runs the notebook without it
    skipped: dict = field(default_factory=dict)
    died: set = field(default_factory=set)  # names among `stopped` that killed the process in a check

    def checking(self):
        """The check running now, in words."""
        return f"a check of task “{self.task}”" if self.task else "a check"

    def stop_calling(self, name, where, seconds):
        """`name` ran out of time: it is not called again in this submission."""
        self.stopped.setdefault(name, f"{name} ran longer than its limit of {seconds:g} s in {where} "
                                      "and is not called again")
