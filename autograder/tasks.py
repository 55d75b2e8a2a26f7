"""Which task a check grades, by its title, and where the chapter explains it.

The title comes from the released notebook itself: the heading of the task
the check cell follows ("## 1. A decoder layer (3 points)" -> "A decoder
layer"). The chapter section is the one place below (`SECTIONS`): a check
not listed there links to its chapter's top label. Labels are MyST targets
`(name)=` of book/<slug>.md (a test checks that each one exists), and the
page's address starts with the site's `html.baseurl` from _config.yml.
"""

import functools
import re

import yaml

from .assignment import grade_id, load
from .course import ROOT

# check cell (grade_id) -> label of the chapter section that explains it
SECTIONS = {
    "bahdanau": {"test_additive_score": "bahdanau-scores"},
    "positional_encoding": {"test_relative_position_matrix": "positional-encoding-relative"},
    "rnn_encoder_decoder": {"test_greedy_decode": "rnn-greedy-decoding"},
    "scaled_dot_product": {"test_causal_mask": "scaled-dot-product-masks",
                           "test_padding_mask": "scaled-dot-product-masks",
                           "test_attention_masks": "scaled-dot-product-masks"},
    "transformer_encoder": {"test_embed": "transformer-encoder-embed",
                            "test_layer_norm": "transformer-encoder-layer",
                            "test_position_wise_ffn": "transformer-encoder-layer",
                            "test_encoder_layer": "transformer-encoder-layer",
                            "test_encoder_mask": "transformer-encoder-padding"},
}

HEADING = re.compile(r"^#{2,4}\s+(?:\d+[a-z]?\.\s+)?(?P<title>.+?)(?:\s*\([^()]*\bpoints?\b[^()]*\))?\s*$",
                     re.MULTILINE)
LABEL = re.compile(r"^\((?P<label>[A-Za-z0-9_-]+)\)=\s*$", re.MULTILINE)


@functools.cache
def titles(name):
    """{grade_id of a check cell: the title of the task it grades} for the assignment `name`."""
    found, title = {}, None
    for cell in load(name).cells:
        if cell.cell_type == "markdown":
            headings = HEADING.findall(cell.source)
            title = headings[-1] if headings else title
        elif cell.metadata.get("nbgrader", {}).get("grade") and title:
            found[grade_id(cell)] = title
    return found


def chapter_labels(name):
    """The MyST labels `(name)=` of the chapter book/<name>.md, in order."""
    return LABEL.findall((ROOT / "book" / f"{name}.md").read_text(encoding="utf-8"))


def section_label(name, check):
    return SECTIONS.get(name, {}).get(check) or chapter_labels(name)[0]


@functools.cache
def base_url():
    """The site's address (`html.baseurl` of _config.yml), ending with '/', or '' if unset."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8")) or {}
    url = str((config.get("html") or {}).get("baseurl") or "")
    return url if not url or url.endswith("/") else url + "/"


def section_url(name, check):
    """The address of the chapter section that explains `check`, or '' without a base URL."""
    return f"{base_url()}book/{name}.html#{section_label(name, check)}" if base_url() else ""
