"""What tests share that is neither a fixture nor a test: this course as the engine's one Course value, and
its course file with another term (issue 40)."""

import json
import tomllib
from pathlib import Path

from autograder.engine import course

ROOT = Path(__file__).resolve().parent.parent
COURSE = course.load(ROOT / "course.toml")  # this course, as the command line builds it
# The terms of the tests: multi_head's given cells hold answers of scaled_dot_product (softmax,
# scaled_dot_product_attention) and of bahdanau (masked_softmax), whose own given cells hold
# answers of rnn_encoder_decoder; EARLIER are released and closed in those terms.
GIVER, TAKER = "scaled_dot_product", "multi_head"
EARLIER = ["rnn_encoder_decoder", "bahdanau"]


def course_file(folder, released=(), closed=()):
    """A copy of this course's file in `folder`, with its paths made absolute (so that it reads the
    course from anywhere) and the term `[term] released` and `closed`."""
    data = tomllib.loads(COURSE.file.read_text(encoding="utf-8"))
    for setting in course.SETTINGS:
        table, _, key = setting.key.rpartition(".")
        values = data.get(table, {}) if table else data
        if setting.path and key in values:
            values[key] = str(ROOT / values[key])
    data["term"] = {"released": list(released), "closed": list(closed)}
    # TOML's strings and arrays of strings are written as JSON's
    text = "".join(f"{key} = {json.dumps(value)}\n" for key, value in data.items() if not isinstance(value, dict))
    for table, values in data.items():
        if isinstance(values, dict):
            text += f"\n[{table}]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())
    path = folder / course.COURSE_FILE
    path.write_text(text, encoding="utf-8")
    return path
