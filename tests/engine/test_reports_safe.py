"""Nothing a student controls can run, load anything or restyle a page the grader writes, or
become a formula in its CSV files: a hostile submission graded, every page opened in the
headless Chromium of the site's tests (Debian's package, no network)."""

import asyncio
import html
import csv
import http.server
import threading
import zipfile

import nbformat
import pytest
from playwright.sync_api import sync_playwright

from autograder.engine import grade, similarity
from autograder.engine.report import FORMULA_START
from tests.support import COURSE
from autograder.samples.submissions import SLUG, implementations, submission, write
from tests.book.conftest import CHROMIUM, CHROMIUM_FLAGS

CORRECT = implementations(SLUG).CORRECT


def formula_softmax(x, axis=-1):
    # an exception whose name is a spreadsheet formula, message with markup
    raise type("=HYPERLINK(\"http://evil.example\",\"click\")", (Exception,), {})(
        "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=1</script>")


class Recorder(http.server.BaseHTTPRequestHandler):
    """A server that only records who asked: no page may reach it."""
    requests = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        Recorder.requests.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def tracker():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def hostile_notebook(tracker):
    notebook = submission(SLUG, {**CORRECT, "softmax": formula_softmax})
    payloads = [
        "<script>window.__pwned = 1</script>",
        "<img src=x onerror=\"window.__pwned = 1\">",
        "<style>body { background: red !important; color: red !important }</style>",
        f"<link rel=stylesheet href='{tracker}/sheet.css'>",
        f"<meta http-equiv='refresh' content='0; url={tracker}/refresh'>",
        f"<iframe src='{tracker}/frame'></iframe><object data='{tracker}/object'></object>",
        f"<base href='{tracker}/'><form action='{tracker}/form'><button>go</button></form>",
        f"![a tracking pixel]({tracker}/pixel.png) [click me](javascript:window.__pwned=1)",
        f"<svg onload='window.__pwned=1'><image href='{tracker}/svg.png'/></svg>",
        "<div style='position:fixed;inset:0;background:red'>restyled</div>",
    ]
    notebook.cells.insert(1, nbformat.v4.new_markdown_cell("\n\n".join(payloads)))
    notebook.cells.insert(2, nbformat.v4.new_code_cell(
        "print('<script>window.__pwned=1</script><style>*{color:red}</style>')\n"
        "import sys; print('<img src=x onerror=window.__pwned=1>', file=sys.stderr)"))
    renamed = nbformat.v4.new_code_cell("x = 1")
    renamed.metadata["nbgrader"] = {"grade": True, "grade_id": "<img src=x onerror=window.__pwned=1>",
                                    "points": 1, "solution": False}
    notebook.cells.insert(3, renamed)
    notebook.metadata["kernelspec"] = {"name": "<script>window.__pwned=1</script>",
                                       "display_name": "=cmd|' /C calc'!A0", "language": "python"}
    notebook.metadata["title"] = "<style>*{display:none}</style>"
    return notebook


@pytest.fixture(scope="module")
def hostile_out(tmp_path_factory, tracker):
    folder = tmp_path_factory.mktemp("hostile")
    write(folder, "hostile", hostile_notebook(tracker))
    write(folder, "honest", submission(SLUG, CORRECT))
    (folder / "honest" / "timestamp.txt").write_text("<script>window.__pwned=1</script>")
    for name in ("=cmd|' calc'!A0", "<img src=x onerror=alert(1)>", "@SUM(1+1)"):
        (folder / name).mkdir()
        write(folder, name, submission(SLUG, CORRECT))
    archive = tmp_path_factory.mktemp("zip") / "batch.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in folder.rglob("*"):
            if path.is_file():
                bundle.write(path, path.relative_to(folder).as_posix())
        bundle.writestr("<script>alert(1)</script>/scaled_dot_product.ipynb", "{}")
    out = tmp_path_factory.mktemp("out")
    grade.grade(COURSE, archive, out, log=lambda line: None, workers=1)
    similarity.run(COURSE, out, SLUG, threshold=0)  # every pair side by side, the hostile code with them
    return out


def test_no_csv_cell_is_a_formula(hostile_out):
    cells = [cell for name in ("grades.csv", "details.csv", f"similarity/{SLUG}.csv")
             for row in csv.reader(open(hostile_out / name, newline="")) for cell in row]
    assert not [cell for cell in cells if cell.startswith(FORMULA_START)]
    details = (hostile_out / "details.csv").read_text()
    assert "'=HYPERLINK" in details  # the exception's name is there, as text


def test_pages_escape_what_students_wrote(hostile_out):
    page = (hostile_out / "feedback" / "hostile" / f"{SLUG}.html").read_text()
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "<script" not in page.lower() and "<img" not in page.lower() and "<iframe" not in page.lower()
    report = (hostile_out / "similarity" / f"{SLUG}.html").read_text()  # the hostile student's own cell
    assert "print(&#x27;&lt;script&gt;window.__pwned=1&lt;/script&gt;" in report and "<script" not in report


def pages(out):
    return sorted(out.rglob("*.html"))


def test_every_page_carries_a_strict_content_security_policy(hostile_out):
    assert len(pages(hostile_out)) >= 3
    for path in pages(hostile_out):
        head = path.read_text().split("</head>")[0]
        assert "http-equiv='Content-Security-Policy'" in head and "default-src 'none'" in head, path


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API refuses a thread whose event loop is marked as running, and in the whole
    # suite an earlier test leaves the main thread's loop marked so (no loop runs here): unmark it.
    asyncio.events._set_running_loop(None)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


INSPECT = """() => {
  const outside = [...document.querySelectorAll('body *')].filter(e => !e.closest('svg'));
  return {
    pwned: window.__pwned === 1,
    title: document.title,
    styles: document.querySelectorAll('style').length - document.querySelectorAll('svg style').length,
    styled: outside.filter(e => e.hasAttribute('style')).map(e => e.outerHTML.slice(0, 80)),
    handlers: [...document.querySelectorAll('*')].flatMap(
        e => [...e.attributes].filter(a => a.name.startsWith('on')).map(a => a.name)),
    active: document.querySelectorAll('script, iframe, object, embed, link, base, form, meta[http-equiv=refresh]').length,
    background: getComputedStyle(document.body).backgroundColor,
    color: getComputedStyle(document.body).color,
    hidden: outside.filter(e => getComputedStyle(e).display === 'none' && !e.closest('head')).length,
    js_links: [...document.querySelectorAll('a[href^="javascript" i]')].length,
  };
}"""


def test_no_page_runs_loads_or_restyles_anything(hostile_out, browser, tracker):
    Recorder.requests.clear()
    context = browser.new_context()
    requests, dialogs, errors = [], [], []
    page = context.new_page()
    page.on("request", lambda request: requests.append(request.url))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on("pageerror", lambda error: errors.append(str(error)))
    for path in pages(hostile_out):
        requests.clear()
        page.goto(path.as_uri())
        page.wait_for_timeout(200)
        seen = page.evaluate(INSPECT)
        where = path.relative_to(hostile_out)
        assert requests == [path.as_uri()], (where, requests)
        assert not seen["pwned"] and not dialogs and not errors, (where, seen, dialogs, errors)
        assert seen["styles"] == 1 and seen["styled"] == [] and seen["handlers"] == [], (where, seen)
        assert seen["active"] == 0 and seen["js_links"] == 0 and seen["hidden"] == 0, (where, seen)
        assert (seen["background"], seen["color"]) == ("rgba(0, 0, 0, 0)", "rgb(34, 34, 34)"), (where, seen)
        assert "<" not in seen["title"] or "&" in seen["title"], (where, seen["title"])
    context.close()
    assert Recorder.requests == []


def test_hostile_names_and_metadata_get_no_page_of_their_own(hostile_out):
    names = {path.name for path in (hostile_out / "feedback").iterdir()}
    assert names == {"hostile", "honest"}


def test_feedback_names_failed_tasks_and_links_their_chapter_section(hostile_out):
    from autograder.engine import tasks
    page = (hostile_out / "feedback" / "hostile" / f"{SLUG}.html").read_text()
    # its softmax fails; the site's address is the template's, which leads nowhere: the section by name
    assert f"A stable softmax (read the chapter {html.escape(tasks.section_name(COURSE, SLUG, 'test_softmax'))})" \
        in page and "read the chapter</a>" not in page
    honest = (hostile_out / "feedback" / "honest" / f"{SLUG}.html").read_text()
    assert "read the chapter" not in honest and "A stable softmax" in honest  # nothing failed
    # the notebook as graded, highlighted by Pygments (a keyword span), not hand-written markup
    assert "<div class=\"highlight\"><pre>" in page and "<span class=\"k\">def</span>" in page
