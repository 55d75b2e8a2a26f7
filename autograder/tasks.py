"""Which task a check grades, by its title, and where the chapter explains it.

The title comes from the released notebook itself: the heading of the task
the check cell follows ("## 1. A decoder layer (3 points)" -> "A decoder
layer"). The chapter section is the one place below (`SECTIONS`): a check
not listed there links to its chapter's top label. Labels are MyST targets
`(name)=` of book/<slug>.md (a test checks that each one exists and that
every check has one); the page's address starts with the site's
`html.baseurl` from _config.yml.
"""

import functools
import re

import yaml

from .assignment import grade_id, load
from .course import ROOT

# check cell (grade_id) -> label of the chapter section that explains it (where the chapter
# shows the reference function the check compares with)
SECTIONS = {
    "rnn_encoder_decoder": {"test_rnn_cell": "rnn-cells", "test_gru_cell": "rnn-cells",
                            "test_encode": "rnn-encoding", "test_decode_step": "rnn-encoding",
                            "test_greedy_decode": "rnn-greedy-decoding"},
    "bahdanau": {"test_bidirectional_encode": "bahdanau-annotations", "test_additive_score": "bahdanau-scores",
                 "test_masked_softmax": "bahdanau-context", "test_bahdanau_attention": "bahdanau-context",
                 "test_bahdanau_decode_step": "bahdanau-decoder-step"},
    "luong": {"test_dot_score": "luong-scores", "test_general_score": "luong-scores",
              "test_concat_score": "luong-scores", "test_luong_attention": "luong-attention",
              "test_luong_attention_masks": "luong-attention", "test_predictive_position": "luong-global-local",
              "test_local_attention": "luong-global-local"},
    "scaled_dot_product": {"test_softmax": "scaled-dot-product-matrix-form",
                           "test_attention": "scaled-dot-product-matrix-form",
                           "test_causal_mask": "scaled-dot-product-masks",
                           "test_padding_mask": "scaled-dot-product-masks",
                           "test_attention_masks": "scaled-dot-product-masks"},
    "multi_head": {"test_split_heads": "multi-head-split-merge", "test_merge_heads": "multi-head-split-merge",
                   "test_multi_head_attention": "multi-head-equation",
                   "test_multi_head_attention_masks": "multi-head-masks"},
    "positional_encoding": {"test_sinusoidal_encoding": "positional-encoding-sinusoidal",
                            "test_relative_position_matrix": "positional-encoding-relative",
                            "test_add_positional_encoding": "positional-encoding-adding",
                            "test_rotary_embedding": "positional-encoding-rope",
                            "test_rotary_positions": "positional-encoding-rope"},
    "transformer_encoder": {"test_layer_norm": "transformer-encoder-layer-norm",
                            "test_position_wise_ffn": "transformer-encoder-ffn",
                            "test_encoder_layer": "transformer-encoder-layer",
                            "test_embed": "transformer-encoder-embed",
                            "test_encoder": "transformer-encoder-stack",
                            "test_encoder_mask": "transformer-encoder-padding"},
    "transformer_decoder": {"test_decoder_layer": "transformer-decoder-sublayers",
                            "test_decoder": "transformer-decoder-memory",
                            "test_transformer_logits": "transformer-decoder-output",
                            "test_greedy_decode": "transformer-decoder-greedy",
                            "test_init_decoder_cache": "transformer-decoder-cache",
                            "test_decoder_step": "transformer-decoder-cache",
                            "test_greedy_decode_cache": "transformer-decoder-cache"},
    "backpropagation": {"test_softmax_backward": "backpropagation-softmax",
                        "test_scaled_dot_product_attention_backward": "backpropagation-attention",
                        "test_layer_norm_backward": "backpropagation-layers",
                        "test_cross_entropy": "backpropagation-cross-entropy",
                        "test_multi_head_attention_backward": "backpropagation-layers"},
    "training": {"test_noam_learning_rate": "training-adam", "test_adam_step": "training-adam",
                 "test_train": "training-loop"},
    "language_model": {"test_filter_logits": "language-model-decoding",
                       "test_sample_next": "language-model-decoding",
                       "test_language_model_step": "language-model-cache",
                       "test_beam_search": "language-model-beam-search"},
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
