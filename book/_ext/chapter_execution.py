"""Execute the chapters that need it, in parallel, before Sphinx reads them.

With ``execute_notebooks: cache``, myst-nb executes a notebook when Sphinx
reads it, one at a time, and reuses the outputs cached in jupyter-cache for as
long as the notebook's code cells are unchanged. This extension adds what
the course needs besides:

- the chapters import the reference code in ``solutions/``. A change there
  must re-execute the chapters that use it, but it changes none of their
  cells. Each chapter is therefore made to depend on the local modules it
  imports (found by reading its imports, transitively), so that Sphinx
  re-reads it when they change, and their content is recorded with its cached
  outputs, so that they are recomputed when it differs;
- the chapters that must be executed are executed side by side, one kernel
  per core, into the cache that myst-nb then reads from;
- myst-nb's cache mode saves the notebook it read, without the outputs, as
  the chapter's ``.ipynb`` (which the site offers for download): the
  executed notebook is written in its place;
- every figure is checked as the chapter draws it (``figure_check``, loaded
  into each kernel as an IPython extension): one that readers could not read
  fails the build, with what is wrong with it.

A chapter that fails here is left out of the cache: myst-nb then executes it
again as it reads it and reports the error as usual. A failed figure check is
reported here, as a warning (the build turns it into an error).
"""

import ast
import hashlib
import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import nbformat
import figure_check
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution
from myst_nb.core.read import create_nb_reader
from sphinx.util import logging

logger = logging.getLogger(__name__)

# Where the fingerprint of a chapter's local imports is kept in its cache record.
LOCAL_IMPORTS_KEY = "local_imports_sha256"
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# The figure check, which each kernel imports from this folder.
FIGURE_CHECK = Path(figure_check.__file__).resolve()


def imported_modules(source, package=None):
    """Dotted names imported by Python `source`; relative imports are resolved
    against `package`. `from a import b` gives `a` and `a.b` (b may be a module)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not package:
                    continue
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            else:
                base = node.module
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def module_files(name, roots):
    """(file, module name) of module `name` and of its parent packages, under
    the first of `roots` that holds its top-level package or module."""
    parts = name.split(".")
    for root in roots:
        found = []
        for depth in range(1, len(parts) + 1):
            base = Path(root, *parts[:depth])
            module = ".".join(parts[:depth])
            if (base / "__init__.py").is_file():
                found.append((base / "__init__.py", module))
            elif base.with_suffix(".py").is_file():
                found.append((base.with_suffix(".py"), module))
            else:
                break
        if found:
            return found
    return []


def local_imports(code_cells, roots):
    """The local files (under `roots`) that code cells import, transitively.

    The kernel runs in the chapter's folder, the first of `roots`, and finds
    the course's packages (``solutions``) through their editable install,
    which points to the book's root, the second.
    """
    files, pending = set(), []
    for source in code_cells:
        try:
            pending.extend(imported_modules(source))
        except SyntaxError:  # IPython magics; such a cell imports nothing local
            continue
    while pending:
        for path, module in module_files(pending.pop(), roots):
            if path in files:
                continue
            files.add(path)
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            pending.extend(imported_modules(path.read_text(encoding="utf-8"), package))
    return sorted(files)


def fingerprint(files, root):
    """A hash of the files' paths (relative to `root`) and contents."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def data_files(config, docname, srcdir):
    """The files that chapter `docname` reads (``chapter_data_files``), sorted."""
    patterns = config.chapter_data_files.get(docname, [])
    return sorted({path.resolve() for pattern in patterns for path in srcdir.glob(pattern)})


def read_notebook(env, docname):
    """(path, notebook) of a document, read as myst-nb reads it; the notebook
    is None when the document is not one."""
    path = Path(env.doc2path(docname)).resolve()
    content = path.read_text(encoding="utf-8")
    reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, content)
    return path, reader.read(content) if reader else None


@contextmanager
def kernel_environment():
    """For the kernels started meanwhile: a BLAS thread count of 1, unless the
    user has set it, and the figure check's folder on the module path."""
    saved = {name: os.environ.get(name) for name in (*BLAS_THREADS, "PYTHONPATH")}
    os.environ.update({name: "1" for name in BLAS_THREADS if name not in os.environ})
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIGURE_CHECK.parent), saved["PYTHONPATH"]]))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def execute_outdated_chapters(app, env, docnames):
    """Execute, in parallel, the notebooks among `docnames` whose cached outputs
    are missing or were computed with other local code."""
    config = env.mystnb_config
    if config.execution_mode != "cache":
        return
    cache = get_cache(config.execution_cache_path)
    srcdir = Path(app.srcdir).resolve()
    env.chapter_local_imports = getattr(env, "chapter_local_imports", {})
    outdated = []
    for docname in docnames:
        path, notebook = read_notebook(env, docname)
        code = [cell.source for cell in notebook.cells if cell.cell_type == "code"] if notebook else []
        if not code:
            continue
        files = local_imports(code, [path.parent, srcdir]) + data_files(app.config, docname, srcdir)
        env.chapter_local_imports[docname] = [os.path.relpath(f, srcdir) for f in files]
        wanted = fingerprint(files, srcdir) + "," + fingerprint([FIGURE_CHECK], FIGURE_CHECK.parent)
        try:
            record = cache.match_cache_notebook(notebook)
        except KeyError:
            record = None
        if record is not None and record.data.get(LOCAL_IMPORTS_KEY) == wanted:
            continue
        if record is not None:
            cache.remove_cache(record.pk)
        outdated.append((docname, path, notebook, wanted))
    if not outdated:
        return

    def execute(chapter):
        _, path, notebook, _ = chapter
        cwd = None if config.execution_in_temp else str(path.parent)
        return single_nb_execution(notebook, cwd=cwd, timeout=config.execution_timeout,
                                   allow_errors=config.execution_allow_errors,
                                   extra_arguments=[f"--ext={FIGURE_CHECK.stem}"])

    logger.info(f"Executing {len(outdated)} chapters on {os.cpu_count()} cores: "
                + ", ".join(docname for docname, *_ in outdated))
    # Threads suffice: each notebook runs in a kernel process of its own. The
    # kernels inherit this environment: one BLAS thread each, as one kernel
    # runs per core and competing BLAS threads slow everything down.
    with kernel_environment(), ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        results = list(pool.map(execute, outdated))
    for (docname, path, notebook, wanted), result in zip(outdated, results):
        if result.err is not None:
            if figure_check.IllegibleFigure.__name__ in str(result.err):
                logger.warning(f"{docname}: {result.err}", location=docname)
            else:
                logger.info(f"{docname}: execution failed, left to myst-nb to report")
            continue
        cache.cache_notebook_bundle(
            CacheBundleIn(notebook, str(path),
                          data={"execution_seconds": result.time, LOCAL_IMPORTS_KEY: wanted}),
            check_validity=False, overwrite=True)
        logger.info(f"{docname}: executed in {result.time:.1f} s")


def note_local_imports(app, docname, source):
    """Make Sphinx re-read a chapter when a local module it imports changes."""
    for path in getattr(app.env, "chapter_local_imports", {}).get(docname, []):
        app.env.note_dependency(path)


def write_executed_notebook(app, doctree):
    """Replace the chapter's notebook that myst-nb has just saved, without
    outputs, by the executed one from the cache."""
    env = app.env
    config = env.mystnb_config
    if config.execution_mode != "cache" or env.docname not in getattr(env, "chapter_local_imports", {}):
        return
    _, notebook = read_notebook(env, env.docname)
    try:
        _, executed = get_cache(config.execution_cache_path).merge_match_into_notebook(notebook)
    except KeyError:  # not in the cache: its execution failed, and myst-nb said so
        return
    Path(config.output_folder, f"{env.docname}.ipynb").write_text(nbformat.writes(executed), encoding="utf-8")


def setup(app):
    app.add_config_value("chapter_data_files", {}, "env", dict)
    app.connect("env-before-read-docs", execute_outdated_chapters)
    app.connect("source-read", note_local_imports)
    app.connect("doctree-read", write_executed_notebook)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
