"""Where the course's files are, and how nbgrader is run on them."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
AUTOGRADER = ROOT / "autograder"
SOURCE = AUTOGRADER / "source"
EXERCISES = ROOT / "exercises"
CHECK_HELPERS = AUTOGRADER / "checks" / "checking.py"


def assignments():
    """Assignment slugs with an instructor notebook, in the order of _toc.yml."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = [Path(entry["file"]).stem
                for part in toc.get("parts", [toc])
                for entry in part.get("chapters", [])]
    return [slug for slug in chapters if (SOURCE / slug / f"{slug}.ipynb").is_file()]


def make_course_dir(root, names):
    """Lay out a fresh nbgrader course in `root` with the sources of `names`."""
    root = Path(root)
    (root / "source").mkdir(parents=True, exist_ok=True)
    shutil.copy(AUTOGRADER / "nbgrader_config.py", root / "nbgrader_config.py")
    for name in names:
        shutil.copytree(SOURCE / name, root / "source" / name, dirs_exist_ok=True)
    return root


def nbgrader(course_dir, *args, timeout=None):
    """Run `nbgrader ARGS` in `course_dir`; return the CompletedProcess.

    The interpreter's own bin folder goes first on PATH: nbgrader calls
    `alembic` (and the kernel `python`) from PATH. nbgrader and the kernels
    it starts run in a process group of their own, killed whole on timeout
    (subprocess.TimeoutExpired is raised then), so that no kernel outlives it.
    """
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    with subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=course_dir, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
