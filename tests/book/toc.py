"""The pages of the website, in the order of _toc.yml."""

from pathlib import Path

import yaml

from autograder import course


def pages():
    """Names of the toc's pages (book/<name>.md), the root first."""
    toc = yaml.safe_load((course.ROOT / "_toc.yml").read_text())
    return [Path(toc["root"]).stem] + [Path(entry["file"]).stem
                                       for part in toc["parts"] for entry in part["chapters"]]


def numbered_chapters():
    """Names of the chapters of the toc's numbered parts, in order."""
    toc = yaml.safe_load((course.ROOT / "_toc.yml").read_text())
    return [Path(entry["file"]).stem for part in toc["parts"] if part.get("numbered")
            for entry in part["chapters"]]
