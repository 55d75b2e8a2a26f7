"""Write the frozen text that the language-model chapter (book/language_model.md) learns from.

The chapter trains on the course's own prose. Read live from ``book/*.md``,
every edit to any chapter would change its training batches and with them its
measured claims; it reads this snapshot instead, taken once from a commit:

    python book/data/snapshot_prose.py COMMIT

writes ``course_prose.txt`` (every chapter's source at COMMIT but the held-out
one, in the order of their file names) and ``held_out_prose.txt`` (the
held-out chapter), each after a header of ``#`` lines that ends at the first
empty line. ``read_prose`` returns a file's text without its header.
"""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
HELD_OUT = "bahdanau"
FILES = {"train": HERE / "course_prose.txt", "held_out": HERE / "held_out_prose.txt"}


def read_prose(path):
    """The text of a snapshot file, its header removed."""
    header, _, text = Path(path).read_text(encoding="utf-8").partition("\n\n")
    if not all(line.startswith("#") for line in header.splitlines()):
        raise ValueError(f"{path} does not start with a header of '#' lines and an empty line")
    return text


def main(commit):
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout

    commit = git("rev-parse", "--short=12", commit).decode().strip()
    names = sorted(Path(name).stem for name in
                   git("ls-tree", "--name-only", commit, "book/").decode().splitlines()
                   if name.endswith(".md"))
    texts = {name: git("show", f"{commit}:book/{name}.md").decode("utf-8") for name in names}
    parts = {"train": [name for name in names if name != HELD_OUT], "held_out": [HELD_OUT]}
    for part, path in FILES.items():
        header = (f"# A frozen copy of the course's prose for book/language_model.md, not a chapter: "
                  f"{'the held-out chapter' if part == 'held_out' else 'the training chapters'}, "
                  f"book/{{{','.join(parts[part])}}}.md concatenated in this order, from commit {commit}.\n"
                  f"# Regenerate (and update the chapter's claims): python book/data/snapshot_prose.py COMMIT\n")
        path.write_text(header + "\n" + "".join(texts[name] for name in parts[part]), encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(read_prose(path)):,} characters")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "HEAD")
