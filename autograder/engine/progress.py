"""The progress line of a batch being graded, on stderr."""

import sys

from .report import number


class Progress:
    """A progress bar on a terminal, a plain line per submission otherwise."""

    def __init__(self, total, log):
        self.total, self.done, self.log = total, 0, log
        self.bar = None
        if total and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="submission", file=sys.stderr)

    def update(self, result):
        self.done += 1
        line = (f"[{self.done}/{self.total}] {result.student_id} {result.assignment}: {result.status} "
                f"{number(result.score)}/{number(result.max_score)}")
        if self.bar is not None:
            self.bar.set_postfix_str(line, refresh=False)
            self.bar.update()
        else:
            self.log(line)

    def close(self):
        if self.bar is not None:
            self.bar.close()
