"""Late submissions: `grade ... --due TIME [--extensions FILE] [--late-penalty F] [--late-cap F]`.

A submission late by `d` started days (one second late is one day) scores
`raw_score * (1 - min(d * F, cap))`. Its time is the LMS export's timestamp
(the `timestamp` group of the file name) or `<student_id>/timestamp.txt`,
as nbgrader writes it. A time without a zone is read as UTC, as nbgrader
reads it (`nbgrader.utils.parse_utc`); a submission with no time, or a time
that cannot be read, is not guessed: it keeps its raw score and gets the
status `no-time`, for the instructor to decide.

The policy of a batch is saved as OUT/deadlines.json by `grade --due`, so
that the reports, `merge` and `export` apply the same one; the results keep
their raw scores, and the penalty is applied when the reports are written.
"""

import csv
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

POLICY_FILE = "deadlines.json"
NO_TIME = "no-time"
DAY = timedelta(days=1)
# nbgrader's example export name has `2016-01-30-15-00-00`; timestamp.txt has `2016-01-30 15:00:00.123 UTC`
_DASHED = re.compile(r"^(\d{4}-\d\d-\d\d)[-_ T](\d\d)[-:](\d\d)[-:](\d\d(?:\.\d+)?)(.*)$")
_UTC_NAMES = re.compile(r"\s*(?:UTC|UCT|GMT|Z)$", re.IGNORECASE)


def parse_time(text, assume_utc=False):
    """An aware datetime from ISO 8601 text (or nbgrader's forms); ValueError if it is not one.

    Without a zone: UTC if `assume_utc` (submission times, as nbgrader), else an error
    (deadlines must say their zone).
    """
    text = str(text).strip()
    match = _DASHED.match(text)
    if match:
        text = f"{match[1]}T{match[2]}:{match[3]}:{match[4]}{match[5]}"
    text = _UTC_NAMES.sub("+00:00", text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time (e.g. 2026-03-01T23:59:00+01:00)") from None
    if moment.tzinfo is None:
        if not assume_utc:
            raise ValueError(f"{text!r} has no time zone (add one, e.g. +01:00 or Z)")
        moment = moment.replace(tzinfo=timezone.utc)
    return moment


def read_extensions(path):
    """{student_id: due} from a CSV `student_id,due`; ValueError naming the line if it is wrong."""
    extensions = {}
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or not {"student_id", "due"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: expected the columns student_id,due, found {reader.fieldnames}")
        for line, row in enumerate(reader, start=2):
            try:
                extensions[row["student_id"].strip()] = parse_time(row["due"])
            except (ValueError, AttributeError) as error:
                raise ValueError(f"{path}, line {line}: {error}") from None
    return extensions


@dataclass(frozen=True)
class Policy:
    due: datetime
    penalty: float = 0.0   # share of the score lost per started day late
    cap: float = 1.0       # largest share lost
    extensions: dict = field(default_factory=dict)  # student_id -> their own due time

    def __post_init__(self):
        if not (0 <= self.penalty <= 1 and 0 <= self.cap <= 1):
            raise ValueError(f"--late-penalty and --late-cap must lie in [0, 1], got {self.penalty} "
                             f"and {self.cap}")

    def due_for(self, student_id):
        return self.extensions.get(student_id, self.due)

    def to_json(self):
        return json.dumps({"due": self.due.isoformat(), "penalty": self.penalty, "cap": self.cap,
                           "extensions": {s: t.isoformat() for s, t in sorted(self.extensions.items())}},
                          indent=1)

    @classmethod
    def from_json(cls, text):
        data = json.loads(text)
        return cls(parse_time(data["due"]), float(data["penalty"]), float(data["cap"]),
                   {s: parse_time(t) for s, t in data["extensions"].items()})


def save(out, policy):
    """Record the batch's policy in OUT (or forget it: `policy` None)."""
    path = Path(out) / POLICY_FILE
    if policy is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(policy.to_json(), encoding="utf-8")


def load(out):
    path = Path(out) / POLICY_FILE
    return Policy.from_json(path.read_text(encoding="utf-8")) if path.is_file() else None


@dataclass(frozen=True)
class Lateness:
    """What the deadline does to one result."""
    due: datetime
    submitted_at: datetime | None
    late_days: int | None   # started days late; None without a time
    factor: float           # the share of the raw score kept

    @property
    def late_by(self):
        return None if self.submitted_at is None else max(self.submitted_at - self.due, timedelta(0))


def assess(policy, student_id, submitted_at):
    """The Lateness of a submission of `student_id` handed in at `submitted_at` (text, may be '')."""
    due = policy.due_for(student_id)
    try:
        moment = parse_time(submitted_at, assume_utc=True) if submitted_at else None
    except ValueError:
        moment = None
    if moment is None:
        return Lateness(due, None, None, 1.0)
    days = max(0, math.ceil((moment - due) / DAY))
    return Lateness(due, moment, days, 1.0 - min(days * policy.penalty, policy.cap))


def describe(delta):
    """'2 days 3 h 5 min' for a timedelta (whole minutes, rounded up: late is late)."""
    minutes = math.ceil(delta.total_seconds() / 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{days} day{'s' * (days != 1)}"] * bool(days) + [f"{hours} h"] * bool(hours) + [
        f"{minutes} min"] * bool(minutes)
    return " ".join(parts) or "0 min"
