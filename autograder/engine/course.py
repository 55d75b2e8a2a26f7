"""The course being graded, as its course file `course.toml` describes it, and how nbgrader
is run on it.

The engine names no path, package or chapter of a course: everything it needs
comes from the course file (README: "Reusing the grader for your course").
The command line builds the one Course value (`load`) from the file named by
`--course FILE`, else the `course.toml` of the current folder or the nearest
folder above it (`find`), and passes it down to everything that grades,
releases or reports; nothing reads a course from a module global. A process
the engine starts (nbgrader) is told the file in AUTOGRADER_COURSE.
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

from . import nbgrader_course

COURSE_FILE = "course.toml"
ENVIRONMENT = "AUTOGRADER_COURSE"
ENGINE = Path(__file__).resolve().parent
ENGINE_PACKAGE = __name__.partition(".")[0]


# What a folder may hold that is no one's source: caches and build records (never a grade's).
NOT_SOURCE = ("__pycache__", ".ipynb_checkpoints", ".pytest_cache")


def source_files(folder):
    """Every file under `folder`, sorted, but caches and build records (NOT_SOURCE, *.pyc, *.egg-info)."""
    return sorted(path for path in Path(folder).rglob("*") if path.is_file() and path.suffix not in (".pyc", ".pyo")
                  and not any(part in NOT_SOURCE or part.endswith(".egg-info") for part in path.parts))


class CourseError(ValueError):
    """The course file is missing, incomplete or has a key it does not know."""


REQUIRED = object()


@dataclass(frozen=True)
class Setting:
    """One key of course.toml, declared once: its type, default, meaning and check."""
    key: str
    kind: type             # str, or tuple for a list (a string is a list of one)
    default: object        # REQUIRED if the file must give it
    description: str
    path: bool = False     # a path relative to the course file
    field: str = None      # the Course field it sets (default: the key)


SETTINGS = (
    Setting("id", str, REQUIRED, "nbgrader's course id (the gradebook's, and nbgrader_config.py's)"),
    Setting("source", str, REQUIRED, "instructor notebooks <source>/<slug>/<slug>.ipynb", path=True),
    Setting("exercises", str, REQUIRED, "released student notebooks <exercises>/<slug>.ipynb", path=True),
    Setting("references", tuple, REQUIRED, "packages of reference code (a name or a list)"),
    Setting("checks", str, REQUIRED, "the package of the hidden checks"),
    Setting("private", tuple, (), "other packages a submission has no business importing"),
    Setting("done_cell", str, None, "the closing cell of every exercise", path=True),
    Setting("nbgrader_config", str, None, "the course's nbgrader settings (nbgrader_config.py), which "
            "release copies into its temporary nbgrader course", path=True),
    Setting("toc", str, None, "the order of the assignments (_toc.yml); without it, alphabetical",
            path=True),
    Setting("book.chapter", str, "book/{slug}.md", "the chapter of <slug> (its MyST labels are the "
            "sections a check cell's `course.section` names)", field="chapter"),
    Setting("book.config", str, None, "the site's configuration (its html.baseurl)", path=True,
            field="book_config"),
    Setting("book.url", str, "book/{slug}.html", "a chapter's page, relative to html.baseurl",
            field="chapter_url"),
    Setting("book.placeholder_baseurl", str, "", "html.baseurl as the template ships: grading warns "
            "while it is still this", field="placeholder_baseurl"),
    Setting("student_copy.include", tuple, (), "what `student-copy` writes besides the exercises "
            "(glob patterns): the class edition's sources", field="student_copy_include"),
    Setting("student_copy.readme", str, "README.md", "the file whose section is a student copy's README",
            path=True, field="student_copy_readme"),
    Setting("student_copy.readme_section", str, "", "that section's heading (empty: no README)",
            field="student_copy_readme_section"),
    Setting("term.released", tuple, (), "the assignments students have this term (default none): the class "
            "edition and `student-copy` offer only these", field="released"),
    Setting("term.closed", tuple, (), "those of them already graded (a subset of term.released)",
            field="closed"),
)


@dataclass(frozen=True)
class Course:
    file: Path
    id: str
    source: Path        # instructor notebooks <source>/<slug>/<slug>.ipynb (nbgrader: source/<name>/)
    exercises: Path = None      # released notebooks <exercises>/<slug>.ipynb
    references: tuple = ()      # packages of reference code
    checks: str = None          # package of the hidden checks
    private: tuple = ()         # other packages a submission should not import
    done_cell: Path = None      # the closing cell's text, or None
    nbgrader_config: Path = None  # the course's nbgrader_config.py, or None
    toc: Path = None            # _toc.yml, or None (alphabetical)
    chapter: str = ""           # "book/{slug}.md", relative to root
    book_config: Path = None    # the site's _config.yml (html.baseurl), or None
    chapter_url: str = ""       # "book/{slug}.html", relative to html.baseurl
    placeholder_baseurl: str = ""
    student_copy_include: tuple = ()    # glob patterns, relative to root
    student_copy_readme: Path = None
    student_copy_readme_section: str = ""
    released: tuple = ()        # the term: the assignments students have ...
    closed: tuple = ()          # ... and those of them already graded
    kind: str = "course"        # "course" (course.toml) or "nbgrader" (an nbgrader course folder)

    @property
    def root(self):
        return self.file.parent

    @property
    def nbgrader(self):
        """Whether this is an nbgrader course, graded as `nbgrader autograde` grades it."""
        return self.kind == "nbgrader"

    @property
    def packages(self):
        """The top-level names of the course's own packages (references, checks, private)."""
        names = (*self.references, *([self.checks] if self.checks else []), *self.private)
        return tuple(dict.fromkeys(p.partition(".")[0] for p in names))

    def notebook(self, name):
        return self.source / name / f"{name}.ipynb"

    def package_files(self, package):
        """The .py files of the importable package `package` (a dotted name), sorted."""
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise CourseError(f"{self.file}: the package {package!r} cannot be imported")
        return sorted(path for folder in spec.submodule_search_locations for path in Path(folder).rglob("*.py"))


def load(path):
    """The Course at `path`: a course file, an nbgrader course folder (with nbgrader_config.py
    and source/) or its nbgrader_config.py, or a folder with a course file. A course file's
    folder goes on sys.path (its packages)."""
    path = Path(path).resolve()
    if path.is_dir() and not (path / COURSE_FILE).is_file() and nbgrader_course.is_course(path):
        path = path / nbgrader_course.CONFIG_FILE
    elif path.is_dir():
        path = path / COURSE_FILE
    if path.name == nbgrader_course.CONFIG_FILE:
        return _nbgrader(path.parent)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CourseError(f"cannot read the course file {path}: {error}") from None
    values = settings(data, path)
    root = path.parent
    course = Course(file=path, **{setting.field or setting.key:
                                  root / values[setting.key] if setting.path and values[setting.key] else
                                  values[setting.key] for setting in SETTINGS})
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    check_term(course)
    return course


def check_term(course):
    """A CourseError unless every assignment of the term is one of the course's and the closed
    ones are released."""
    unknown = [name for name in (*course.released, *course.closed) if name not in assignments(course)]
    if unknown:
        raise CourseError(f"{course.file}: [term] names {unknown[0]!r}, which is not an assignment of "
                          f"this course (they are: {', '.join(assignments(course))})")
    unreleased = [name for name in course.closed if name not in course.released]
    if unreleased:
        raise CourseError(f"{course.file}: [term] closed has {', '.join(unreleased)}, which released does "
                          "not: an assignment is closed once it has been released and graded")


def settings(data, path):
    """{key: value} of every Setting from the parsed course file `data`: unknown keys, missing
    required ones and values of the wrong type are a CourseError naming the key and the file."""
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": v for inner, v in value.items()})
        else:
            flat[key] = value
    declared = {setting.key: setting for setting in SETTINGS}
    unknown = sorted(set(flat) - set(declared))
    if unknown:
        raise CourseError(f"{path}: unknown key {unknown[0]!r} (the keys are: {', '.join(declared)})")
    values = {}
    for setting in SETTINGS:
        value = flat.get(setting.key, setting.default)
        if value is REQUIRED:
            raise CourseError(f"{path}: the course file needs the key {setting.key!r} ({setting.description})")
        if setting.kind is tuple:
            value = (value,) if isinstance(value, str) else value
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise CourseError(f"{path}: {setting.key!r} must be a name or a list of names")
            value = tuple(value)
        elif value is not None and not isinstance(value, setting.kind):
            raise CourseError(f"{path}: {setting.key!r} must be a {setting.kind.__name__} "
                              f"({setting.description})")
        values[setting.key] = value
    return values


def _nbgrader(root):
    """The Course of the nbgrader course folder `root`."""
    try:
        _, directory = nbgrader_course.configuration(root)
        nbgrader_course.assignment_names(root)
    except nbgrader_course.NbgraderCourseError as error:
        raise CourseError(str(error)) from None
    return Course(file=root / nbgrader_course.CONFIG_FILE, id=directory.course_id or root.name,
                  source=nbgrader_course.source_folder(root), kind="nbgrader")


def find(default=None):
    """The path of the course file of the current folder or the nearest folder above it, else
    `default` (a course's launcher gives its own)."""
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / COURSE_FILE).is_file():
            return folder / COURSE_FILE
    if default is not None:
        return Path(default)
    raise CourseError(f"no {COURSE_FILE} here or in a folder above, and no --course FILE")


@functools.cache
def assignments(course):
    """The assignments of `course`: for a course file, the slugs with an instructor notebook in
    the order of the toc (alphabetical without one); for an nbgrader course, the folders of source/."""
    if course.nbgrader:
        return nbgrader_course.assignment_names(course.root)
    if course.toc is None:
        return sorted(path.parent.name for path in course.source.glob("*/*.ipynb")
                      if path.stem == path.parent.name)
    toc = yaml.safe_load(course.toc.read_text())
    chapters = [Path(entry["file"]).stem
                for part in toc.get("parts", [toc])
                for entry in part.get("chapters", [])]
    return [slug for slug in chapters if course.notebook(slug).is_file()]


def make_course_dir(course, root, names):
    """Lay out a fresh nbgrader course in `root` with the sources of `names` of `course` and its
    nbgrader settings (an nbgrader course: its configuration and its whole source folder, header
    and footer included)."""
    root = Path(root)
    if course.nbgrader:
        shutil.copy(course.file, root / course.file.name)
        shutil.copytree(course.source, root / course.source.relative_to(course.root), dirs_exist_ok=True)
        for path in nbgrader_course.header_footer(course.root):  # where nbgrader looks: relative to root
            target = root / path.relative_to(course.root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        return root
    if course.nbgrader_config is None:
        raise CourseError(f"{course.file}: the course file needs the key 'nbgrader_config' "
                          "(the course's nbgrader_config.py) to release with nbgrader")
    (root / "source").mkdir(parents=True, exist_ok=True)
    shutil.copy(course.nbgrader_config, root / "nbgrader_config.py")
    for name in names:
        shutil.copytree(course.source / name, root / "source" / name, dirs_exist_ok=True)
    return root


def nbgrader(course, course_dir, *args, timeout=None):
    """Run `nbgrader ARGS` in `course_dir`, a folder of `course` (None: a course the engine does not
    know, such as one being made); return the CompletedProcess.

    The interpreter's own bin folder goes first on PATH: nbgrader calls
    `alembic` (and the kernel `python`) from PATH. The course file is
    passed on (nbgrader_config.py reads the course id from it). nbgrader and
    the kernels it starts run in a process group of their own, killed whole on
    timeout (subprocess.TimeoutExpired is raised then), so that no kernel
    outlives it. Its `CourseDirectory.root` is `course_dir`, whatever the
    course's nbgrader_config.py says (a configuration copied from a hub names
    the hub's folder), as the engine reads every course (nbgrader_course.configuration).
    """
    if args and not args[0].startswith("-") and args[0] != "quickstart":  # quickstart makes a course: no root yet
        args = (*args, f"--CourseDirectory.root={Path(course_dir).resolve()}")
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    if course is not None:
        env |= {ENVIRONMENT: str(course.file),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(course.root), os.environ.get("PYTHONPATH")]))}
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
