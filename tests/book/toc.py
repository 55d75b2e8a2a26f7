"""The pages of the website, in the order of _toc.yml."""

import re
from pathlib import Path

import yaml

from tests.support import COURSE


def pages():
    """Names of the toc's pages (book/<name>.md), the root first."""
    toc = yaml.safe_load((COURSE.root / "_toc.yml").read_text())
    return [Path(toc["root"]).stem] + [Path(entry["file"]).stem
                                       for part in toc["parts"] for entry in part["chapters"]]


def numbered_chapters():
    """Names of the chapters of the toc's numbered parts, in order."""
    toc = yaml.safe_load((COURSE.root / "_toc.yml").read_text())
    return [Path(entry["file"]).stem for part in toc["parts"] if part.get("numbered")
            for entry in part["chapters"]]


def title(name):
    """The title of page book/<name>.md: its first level-1 heading, after the front matter."""
    text = (COURSE.root / "book" / f"{name}.md").read_text(encoding="utf-8")
    if text.startswith("---"):
        text = text.split("\n---", 1)[1]
    return re.search(r"^# (.+)$", text, re.M).group(1).strip()


CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```$", re.S | re.M)


def code_cells(text):
    """The source of each code cell of a MyST chapter's `text`, its options (--- … --- or :key:) included."""
    return CODE_CELL.findall(text)
