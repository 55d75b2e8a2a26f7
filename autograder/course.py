"""The course being graded, as its course file `course.toml` describes it, and how nbgrader
is run on it.

The engine names no path, package or chapter of a course: everything it needs
comes from the course file (README: "Reusing the grader for your course").
The file is the one named by `python -m autograder --course FILE` (or the
environment variable AUTOGRADER_COURSE), else the `course.toml` of the current
folder or the nearest folder above it, else the one next to the engine.
"""

import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml

COURSE_FILE = "course.toml"
ENVIRONMENT = "AUTOGRADER_COURSE"
ENGINE = Path(__file__).resolve().parent
ENGINE_PACKAGE = __name__.partition(".")[0]


class CourseError(ValueError):
    """The course file is missing or incomplete."""


@dataclass(frozen=True)
class Course:
    file: Path
    id: str
    source: Path        # instructor notebooks <source>/<slug>/<slug>.ipynb
    exercises: Path     # released notebooks <exercises>/<slug>.ipynb
    references: tuple   # packages of reference code
    checks: str         # package of the hidden checks
    private: tuple      # other packages a submission should not import
    done_cell: Path     # the closing cell's text, or None
    toc: Path
    chapter: str        # "book/{slug}.md", relative to root
    book_config: Path   # the site's _config.yml (html.baseurl), or None
    chapter_url: str    # "book/{slug}.html", relative to html.baseurl
    placeholder_baseurl: str

    @property
    def root(self):
        return self.file.parent

    @property
    def packages(self):
        """The top-level names of the course's own packages (references, checks, private)."""
        return tuple(dict.fromkeys(p.partition(".")[0] for p in (*self.references, self.checks, *self.private)))

    def notebook(self, name):
        return self.source / name / f"{name}.ipynb"

    def package_files(self, package):
        """The .py files of the importable package `package` (a dotted name), sorted."""
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise CourseError(f"{self.file}: the package {package!r} cannot be imported")
        return sorted(path for folder in spec.submodule_search_locations for path in Path(folder).rglob("*.py"))


def load(path):
    """The Course of the course file at `path`; its folder goes on sys.path (its packages)."""
    path = Path(path).resolve()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CourseError(f"cannot read the course file {path}: {error}") from None
    root = path.parent
    book = data.get("book", {})
    try:
        course = Course(
            file=path, id=str(data["id"]), source=root / data["source"], exercises=root / data["exercises"],
            references=tuple(data["references"]), checks=str(data["checks"]),
            private=tuple(data.get("private", ())),
            done_cell=root / data["done_cell"] if data.get("done_cell") else None,
            toc=root / data.get("toc", "_toc.yml"), chapter=book.get("chapter", "book/{slug}.md"),
            book_config=root / book["config"] if book.get("config") else None,
            chapter_url=book.get("url", "book/{slug}.html"),
            placeholder_baseurl=book.get("placeholder_baseurl", ""))
    except KeyError as error:
        raise CourseError(f"{path}: the course file needs the field {error.args[0]!r}") from None
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return course


def find():
    """The path of the course file in use (see the module's docstring)."""
    if os.environ.get(ENVIRONMENT):
        return Path(os.environ[ENVIRONMENT]).resolve()
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / COURSE_FILE).is_file():
            return folder / COURSE_FILE
    if (ENGINE.parent / COURSE_FILE).is_file():
        return ENGINE.parent / COURSE_FILE
    raise CourseError(f"no {COURSE_FILE} here or in a folder above, and no --course FILE")


@functools.cache
def current():
    """The Course in use, read once."""
    return load(find())


def use(path):
    """Grade the course of the course file at `path` from now on (in this process and the ones
    it starts): called before anything of a course is read (`--course`), as what the engine
    derives from a course (assignments, checks, titles) is read once."""
    os.environ[ENVIRONMENT] = str(Path(path).resolve())
    current.cache_clear()
    assignments.cache_clear()
    return current()


def __getattr__(name):
    """ROOT, SOURCE and EXERCISES of the course in use (for scripts and tests)."""
    attributes = {"ROOT": "root", "SOURCE": "source", "EXERCISES": "exercises"}
    if name in attributes:
        return getattr(current(), attributes[name])
    raise AttributeError(name)


@functools.cache
def assignments():
    """Assignment slugs with an instructor notebook, in the order of the toc."""
    course = current()
    toc = yaml.safe_load(course.toc.read_text())
    chapters = [Path(entry["file"]).stem
                for part in toc.get("parts", [toc])
                for entry in part.get("chapters", [])]
    return [slug for slug in chapters if course.notebook(slug).is_file()]


def make_course_dir(root, names):
    """Lay out a fresh nbgrader course in `root` with the sources of `names`."""
    root = Path(root)
    (root / "source").mkdir(parents=True, exist_ok=True)
    shutil.copy(ENGINE / "nbgrader_config.py", root / "nbgrader_config.py")
    for name in names:
        shutil.copytree(current().source / name, root / "source" / name, dirs_exist_ok=True)
    return root


def nbgrader(course_dir, *args, timeout=None):
    """Run `nbgrader ARGS` in `course_dir`; return the CompletedProcess.

    The interpreter's own bin folder goes first on PATH: nbgrader calls
    `alembic` (and the kernel `python`) from PATH. The course file in use is
    passed on (nbgrader_config.py reads the course id from it). nbgrader and
    the kernels it starts run in a process group of their own, killed whole on
    timeout (subprocess.TimeoutExpired is raised then), so that no kernel
    outlives it.
    """
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           ENVIRONMENT: str(current().file),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(current().root), os.environ.get("PYTHONPATH")]))}
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
