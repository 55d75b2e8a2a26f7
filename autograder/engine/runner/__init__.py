"""The sandbox's side: runs inside the sandbox, executes a student's notebook, then calls its functions.

Started by `sandbox` (the grader's side) as ``python -E -s -S -m runner FD SITE_PACKAGES...``
in a folder holding only this package, the engine's modules it imports (`protocol`,
`standins`, `checking`, `memory`: `sandbox.bwrap.runner_files` finds them) and their
bytecode; without `site`, whose .pth files would import the course's editable finder (the
packages' folders are given instead). It talks to the grader over the socket FD with the
messages of `protocol`. Its modules:

- `state`: the one object holding the notebook's namespace and what runs now;
- `cells`: a cell run as IPython runs it, its outputs and displayed values, its errors
  described as plain data (with the student's line: `checking.student_frames`);
- `limits`: time and output limits, the resource limits, functions stopped for time;
- `kernel`: IPython's shell as a kernel's, made only for a notebook that needs it, and
  shell commands (run by the grader: this process cannot start one);
- `calls`: a check's call of a student's function, its stand-ins asking the grader
  (`standins` swaps them in);
- `loop`: the protocol loop.

Stand-ins: while the called function runs, the notebook's function of each name of
"stand_ins" (the graded functions before it, and those its reference reaches) answers as a
stand-in that sends its arguments to the grader and returns the grader's answer: the
reference's value, computed there (the reference never enters this process). Arguments the
reference's parameters do not take ("unbound") go to the student's own function. All is
restored after the call; a stand-in kept by the notebook answers nothing afterwards, and the
grader answers only for the names of the call it is waiting on. When the call raises after
stand-ins answered, only the exception's type and line are reported (its message may hold
answers).

limits["memory_above_baseline"], when not null, makes this a sandbox for memory checks:
before the first cell, the runner reserves BLAS's work buffer, reads its own address space
and sets its hard RLIMIT_AS to that plus those bytes (at most limits["memory_bytes"]), which
the student's code cannot raise.

Time limits are on CPU time, which measures the work whatever else the machine runs (the
reference's times are CPU times too), and on wall-clock time at limits["wall_factor"] times
as much, which stops code that waits (a sleep) rather than works. A cell or call that runs
out of time raises CellTimeout naming the outermost function of the notebook that was
running; after a call, or a cell of "stopping_cells", that function is replaced by one that
raises TimeoutError at once. The error also names the innermost function ("within"): when
that one stands in for a call of the stopped function, the grader asks to run the stopped
function once more ("revive"), so that a neighbour that never returns costs it nothing.

Everything it sends is untrusted by the grader, which only ever reads plain data from it:
the student's code runs in this same process and could forge any of these messages, so none
of them can grant a point by itself.
"""
