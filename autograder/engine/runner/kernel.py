"""IPython's shell as a Jupyter kernel's, made only for a notebook that needs it; shell commands.

The shell is created, around the notebook's namespace, at its first cell that is not plain
Python (a magic, `!`, a prompt), its first call of `get_ipython()`, or its first figure. It
is a kernel's (as ipykernel's): figures are drawn inline (matplotlib's backend is
matplotlib-inline, as in Jupyter) and kept as display_data outputs, `?` pages nothing into
the outputs, input() and getpass() raise StdinNotImplementedError, and shell escapes (`!cmd`,
`%system`, `%%bash`, `%%sh`, `%%script`) are run by the grader in a sandbox of their own that
sees this one's folders (`run_command`): this process cannot start one.
"""

import builtins
import getpass
import os
import signal
import sys

import protocol
from runner.cells import keep_display, quiet, write_result
from runner.limits import timed_out

# `%matplotlib` backends that draw in the notebook page (a browser's): figures are drawn inline
NOTEBOOK_BACKENDS = ("notebook", "nbagg", "widget", "ipympl")


class StdinNotImplementedError(RuntimeError):
    """input() while grading: nobody is there to answer (as in Jupyter without stdin)."""


def no_input(*args, **kwargs):
    raise StdinNotImplementedError(
        "input() was called, but the notebook runs without a keyboard while it is "
        "graded: remove the call to input()")


def install(nb):
    """The notebook's get_ipython(), input(), os.system and figures' hook, in this process."""
    def get_ipython():
        """IPython's shell of the notebook, created on first use (with its hidden names, the
        notebook's own names kept)."""
        if nb.shell is None:
            from traitlets.config import Config
            config = Config()
            config.HistoryManager.hist_file = ":memory:"  # no file, no thread (processes are limited)
            own = {name: value for name, value in nb.namespace.items() if value is not get_ipython}
            nb.shell = kernel_shell(nb).instance(config=config, colors="NoColor", user_module=nb.main)
            nb.shell.showtraceback = lambda *args, **kwargs: None
            nb.shell.showsyntaxerror = lambda *args, **kwargs: None
            nb.namespace.update(own)
        return nb.shell

    nb.get_ipython = get_ipython
    nb.namespace.update(__builtins__=builtins, __builtin__=builtins, get_ipython=get_ipython)
    builtins.input = getpass.getpass = no_input
    os.system = lambda command: system(nb, command)
    sys.meta_path.insert(0, ShellOnFigures(nb))


class ShellOnFigures:
    """Creates the notebook's shell when matplotlib loads its inline backend (the notebook's
    first figure), as a kernel has one: the backend then draws each cell's figures at its end.
    (A finder of sys.meta_path needs only find_spec: importlib.abc's base, and its imports, not.)"""

    def __init__(self, nb):
        self.nb = nb

    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib_inline.backend_inline" and self.nb.shell is None:
            self.nb.get_ipython()
        return None


def run_command(nb, argv, stdin=None, merged=True):
    """(stdout, stderr, exit status) of the command `argv` (its input: `stdin`; `merged`: its
    output and errors in one terminal, as a kernel's `!`), run by the grader in a sandbox of its
    own that shares this one's folders, limits and user, in this process's folder and
    environment. Only while a cell runs; within what remains of the cell's time."""
    if not nb.channel:
        raise RuntimeError("shell commands run only in the notebook's cells, not when a check calls a "
                           "function")
    reader, writer = nb.channel
    # the cell's alarms wait for the answer (the grader stops the command at the cell's limit)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})
    try:
        protocol.write(writer, "shell", protocol.RUNNER, argv=[str(part) for part in argv], stdin=stdin,
                       merged=merged, cwd=os.getcwd(), env=dict(os.environ))
        answer, _ = protocol.read(reader, ("shell",), protocol.GRADER)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    if answer["refused"]:
        raise RuntimeError(answer["refused"])
    if answer["timed_out"]:
        raise timed_out(nb, sys._getframe(1))
    return answer["stdout"], answer["stderr"], answer["status"]


def system(nb, command):
    """os.system: the command run as a kernel's `%%sh` runs it (this process cannot start one),
    its output the cell's (as ipykernel forwards a process's); its wait status."""
    out, err, status = run_command(nb, ["/bin/sh", "-c", os.fsdecode(command)], merged=False)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status << 8 if status >= 0 else -status


def kernel_shell(nb):
    """IPython's InteractiveShell as a Jupyter kernel's shell (ipykernel's ZMQInteractiveShell)
    behaves for a notebook run without a person: outputs kept as the kernel sends them, no
    pager, no GUI event loop, shell commands run by the grader (`run_command`)."""
    from IPython.core import page
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    compiler, hook, publisher = _output_classes(nb)
    scripts = _script_magics(nb)

    class KernelShell(_ShellCommands(nb, InteractiveShell)):
        compiler_class = compiler
        displayhook_class = hook
        display_pub_class = publisher

        def init_environment(self):  # as ipykernel's: no pager, colours for a browser
            os.environ.update(TERM="xterm-color", CLICOLOR="1", FORCE_COLOR="1", CLICOLOR_FORCE="1",
                              PAGER="cat", GIT_PAGER="cat")

        def init_hooks(self):
            super().init_hooks()
            # ipykernel sends what `?` shows to the pager, never to the cell's outputs
            self.set_hook("show_in_pager", page.as_hook(lambda *args, **kwargs: None), 99)

        def init_magics(self):
            super().init_magics()
            self.register_magics(scripts)

        def enable_matplotlib(self, gui=None):
            if gui in NOTEBOOK_BACKENDS:
                print(f"(%matplotlib {gui} needs a browser: while the notebook is graded, "
                      "its figures are drawn inline)")
                gui = "inline"
            return super().enable_matplotlib(gui)

        def enable_gui(self, gui=None):
            if gui not in (None, "inline"):
                raise UsageError(f"%matplotlib {gui} opens windows, which cannot be while the notebook "
                                 "is graded: use %matplotlib inline")
            self.active_eventloop = gui

    return KernelShell


def _output_classes(nb):
    """The shell's compiler (a cell's code named as on the plain-Python path), display hook and
    display publisher (outputs kept as a kernel sends them)."""
    from IPython.core.compilerop import CachingCompiler
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher

    class Compiler(CachingCompiler):
        def get_code_name(self, raw_code, transformed_code, number):
            # the cell's own name, as on the plain-Python path: an error's place is found by it
            source, filename = nb.cell
            return filename if raw_code == source else super().get_code_name(raw_code, transformed_code, number)

    class Publisher(DisplayPublisher):
        def publish(self, data, metadata=None, *args, **kwargs):
            keep_display(nb, "display_data", data, metadata)

        def clear_output(self, wait=False):
            nb.outputs.clear()

    class Hook(DisplayHook):
        def quiet(self):  # IPython reads the history, which is not kept
            return quiet(nb.cell[0])

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            keep_display(nb, "execute_result", format_dict, md_dict)
            write_result(format_dict.get("text/plain", ""))

        def finish_displayhook(self):
            self._is_active = False

    return Compiler, Hook, Publisher


def _script_magics(nb):
    """`%%script PROGRAM` (and %%bash, %%sh...), run by the grader (`run_command`)."""
    from IPython.core import magic_arguments
    from IPython.core.error import UsageError
    from IPython.core.magic import cell_magic, magics_class
    from IPython.core.magics.script import ScriptMagics, script_args
    from IPython.utils.process import arg_split

    @magics_class
    class Scripts(ScriptMagics):
        @magic_arguments.magic_arguments()
        @script_args
        @cell_magic("script")
        def shebang(self, line, cell):
            """%%script PROGRAM (and %%bash, %%sh...): the cell is PROGRAM's input."""
            from subprocess import CalledProcessError
            args, argv = self.shebang.parser.parse_known_args(arg_split(line, posix=True))
            if args.bg or args.proc:
                raise UsageError("%%script --bg: background processes cannot run while the notebook "
                                 "is graded")
            if not cell.endswith("\n"):
                cell += "\n"
            out, err, status = run_command(nb, argv, cell, merged=False)
            if status == 127 and "exec" in err and not out:
                print(f"Couldn't find program: {argv[0]!r}")
                return
            for name, text, stream in ((args.out, out, sys.stdout), (args.err, err, sys.stderr)):
                if name:
                    self.shell.user_ns[name] = text
                elif text:
                    stream.write(text)
            if args.raise_error and status != 0:
                raise CalledProcessError(status, cell)

    return Scripts


def _ShellCommands(nb, base):  # noqa: N802 (a class factory)
    """`base` (InteractiveShell) whose `!cmd` and `%system` the grader runs (`run_command`)."""
    from IPython.utils.text import LSString, SList

    class ShellCommands(base):
        def system_piped(self, cmd):
            if cmd.rstrip().endswith("&"):
                raise OSError("Background processes not supported.")
            out, _, status = run_command(nb, ["/bin/sh", "-c", self.var_expand(cmd, depth=1)])
            sys.stdout.write(out)
            self.user_ns["_exit_code"] = status
            if self.system_raise_on_error and status != 0:
                from subprocess import CalledProcessError
                raise CalledProcessError(status, cmd)

        system = system_raw = system_piped

        def getoutput(self, cmd, split=True, depth=0):
            if cmd.rstrip().endswith("&"):
                raise OSError("Background processes not supported.")
            out, _, status = run_command(nb, ["/bin/sh", "-c", self.var_expand(cmd, depth=depth + 1)])
            out = out.replace("\r\n", "\n")
            if self.system_raise_on_error and status != 0:
                from subprocess import CalledProcessError
                raise CalledProcessError(status, cmd)
            return SList(out.splitlines()) if split else LSString(out)

    return ShellCommands
