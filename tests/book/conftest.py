"""The website, built once for all the tests of tests/book, served over HTTP
and opened in a real headless Chromium (Debian's package, as `make test` installs it)."""

import functools
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tests.support import COURSE

JUPYTER_BOOK = str(Path(sys.executable).parent / "jupyter-book")
BUILD = [JUPYTER_BOOK, "build", "--warningiserror", "--nitpick", "--keep-going"]  # as `make book`
CHROMIUM = "/usr/bin/chromium"  # Debian's package
# Playwright adds --headless, --no-sandbox (needed as root) and a fresh profile;
# these keep Chromium from reaching for the network or a GPU.
CHROMIUM_FLAGS = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
SCREENSHOTS = COURSE.root / "_build" / "screenshots"


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The built website's folder (…/_build/html). It starts from the executed
    chapters of `make book` (_build/.jupyter_cache), as a rebuild does: a chapter
    whose code, or the code it imports, changed since is executed again."""
    out = tmp_path_factory.mktemp("site")
    cache = COURSE.root / "_build" / ".jupyter_cache"
    if cache.is_dir():
        shutil.copytree(cache, out / "_build" / ".jupyter_cache")
    result = subprocess.run([*BUILD, str(COURSE.root), "--path-output", str(out)],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return out / "_build" / "html"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def site_url(site):
    """The website served over HTTP on localhost, as a reader's browser gets it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    assert Path(CHROMIUM).is_file(), f"{CHROMIUM} is missing: `make test` installs Debian's chromium package"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def screenshots():
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    return SCREENSHOTS


def pytest_terminal_summary(terminalreporter):
    if SCREENSHOTS.is_dir() and any(SCREENSHOTS.iterdir()):
        terminalreporter.write_line(f"Screenshots of the website's pages: {SCREENSHOTS}")
