"""The sandbox's walls: bubblewrap's command line, and the runner's files inside it."""

import ast
import atexit
import importlib.util
import os
import py_compile
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath

from ..course import ENGINE_PACKAGE
from .state import Limits, SandboxUnavailable

ENGINE = Path(__file__).resolve().parent.parent
RUNNER = "runner"  # the package that runs in the sandbox (`python -m runner`)
SITE_PACKAGES = [folder for folder in site.getsitepackages() if os.path.isdir(folder)]
# In a sandbox for memory checks, glibc's malloc serves arrays of 128 KiB and more from their own
# mappings, returned when freed (fixing the threshold stops glibc from raising it, and keeping
# freed arrays, after a large free): what a call frees no longer counts against the cap. It
# costs page faults (NumPy code with large temporaries takes about twice as long), so only there.
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


def runner_files():
    """The files the sandbox holds, as paths relative to the engine's folder: the whole runner
    package, and the engine's modules it imports (by a top-level name: in the sandbox they sit
    beside it), and those they import, found by reading their code."""
    files = sorted(path.relative_to(ENGINE) for path in (ENGINE / RUNNER).glob("*.py"))
    todo = list(files)
    while todo:
        tree = ast.parse((ENGINE / todo.pop()).read_text())
        for node in ast.walk(tree):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                module = Path(f"{name.split('.')[0]}.py")
                if (ENGINE / module).is_file() and module not in files:
                    files.append(module)
                    todo.append(module)
    return sorted(files)


def check_available():
    """Raise SandboxUnavailable with what to do, unless bubblewrap works here."""
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(
            "bubblewrap is not installed: grading runs each notebook in a bubblewrap sandbox "
            "(install the Debian package `bubblewrap`; `make test` installs it)")
    options, prefix = arguments(runner_folder(), None, Limits())
    result = subprocess.run(["bwrap", *options, *prefix, "/bin/true"], capture_output=True, text=True)
    if result.returncode != 0:
        said = result.stderr.strip()
        why = ""
        if os.geteuid() != 0 and any(words in said for words in ("namespace", "uid map")):
            why = ("; as an ordinary user, bubblewrap needs unprivileged user namespaces, which this machine "
                   "refuses: allow them (Debian's older kernels: sysctl kernel.unprivileged_userns_clone=1; "
                   "Ubuntu 23.10 and later: an AppArmor profile for bwrap, or sysctl "
                   "kernel.apparmor_restrict_unprivileged_userns=0), or grade as root")
        raise SandboxUnavailable(f"bubblewrap cannot start a sandbox here: {said}{why}")


_FOLDER = []  # the runner's folder of this process (and of the workers it forks), once made


def runner_folder():
    """A folder holding the runner files and their bytecode, made once per grading process
    (workers forked after `check_available` share it) and removed at its exit; every sandbox
    binds these files read-only, so that no sandbox compiles them again."""
    if not _FOLDER or not _FOLDER[0].is_dir():
        folder = Path(tempfile.mkdtemp(prefix="sandbox-runner-"))
        for relative in runner_files():
            (folder / relative).parent.mkdir(exist_ok=True)
            shutil.copy(ENGINE / relative, folder / relative)
            py_compile.compile(folder / relative, importlib.util.cache_from_source(folder / relative),
                               doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _FOLDER[:] = [folder]
    return _FOLDER[0]


def arguments(folder, uid, limits, files=(), environment=None, hidden=()):
    """(bubblewrap's options, what comes before the command in the sandbox) to run the runner
    files of `folder` (and their bytecode) with nothing else around but `files`: (path, relative
    path) bound read-only in the notebook's folder (and the variables of `environment`); the
    packages `hidden` (the course's) and the engine's are hidden should they be installed as copies."""
    size = str(limits.disk_bytes)
    line = ["--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    for name in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{name}"):
            line += ["--symlink", os.readlink(f"/{name}"), f"/{name}"]
    line += _python(hidden)
    # The notebook's folder: memory of a fixed size (it cannot fill the disk), runner read-only.
    line += ["--perms", "1777", "--size", size, "--tmpfs", "/sandbox"]
    for relative in runner_files():
        if relative.parent == Path("."):
            line += ["--ro-bind", str(folder / relative), f"/sandbox/{relative}"]
    line += ["--ro-bind", str(folder / "__pycache__"), "/sandbox/__pycache__",
             "--ro-bind", str(folder / RUNNER), f"/sandbox/{RUNNER}"]
    for path, relative in files:  # an nbgrader assignment's data and images, read-only
        for parent in reversed(PurePosixPath(relative).parents[:-1]):  # else made private (0700)
            line += ["--perms", "0755", "--dir", f"/sandbox/{parent}"]
        line += ["--ro-bind", str(path), f"/sandbox/{relative}"]
    # Read-only, once every mount is made, but /tmp and /sandbox: as an ordinary user, / and /dev
    # are tmpfs of the user's (who could write /etc/ld.so.preload, read by the shell's tools)
    line += ["--remount-ro", "/dev", "--remount-ro", "/"]
    line += _environment(environment)
    return (line, []) if uid is None else _as_user(line, uid)


def _python(hidden):
    """Python and its packages, read-only; the engine's and the course's packages hidden."""
    prefix, venv = Path(sys.base_prefix), Path(sys.prefix)
    line = []
    for readable in (prefix, venv):
        # bwrap makes missing parent folders private (0700); the sandbox's user must pass them
        for parent in reversed(readable.parents[:-1]):
            line += ["--perms", "0755", "--dir", str(parent)]
        line += ["--ro-bind", str(readable), str(readable)]
    for package in (ENGINE_PACKAGE, *hidden):
        spec = importlib.util.find_spec(package)
        location = Path(spec.origin).parent if spec and spec.origin else None
        if location and venv in location.parents:
            line += ["--tmpfs", str(location)]
    if venv != prefix:  # packages of the base interpreter are not the course's
        line += ["--tmpfs", str(prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
                                / "site-packages")]
    return line


def _environment(environment):
    venv = Path(sys.prefix)
    return ["--chdir", "/sandbox", "--clearenv",
            "--setenv", "HOME", "/tmp", "--setenv", "PATH", f"{venv / 'bin'}:/usr/bin:/bin",
            "--setenv", "OPENBLAS_NUM_THREADS", "1", "--setenv", "OMP_NUM_THREADS", "1",
            "--setenv", "MPLBACKEND", "module://matplotlib_inline.backend_inline", "--setenv", "MPLCONFIGDIR", "/tmp",
            *(part for name, value in (environment or {}).items() for part in ("--setenv", name, value))]


def _as_user(line, uid):
    if os.geteuid() == 0:
        # As root: share no user namespace, run the notebook as an ordinary user instead,
        # so that its process limit counts (root's would not).
        line.remove("--unshare-all")
        line[:0] = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        return line, ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                      "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    return line, []
