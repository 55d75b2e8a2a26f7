"""Sample submissions: what the tests assert on and the benchmarks time.

Tests and benchmarks import nothing of each other; what both need lives here,
in the course's folder (the engine never reads it):

- `implementations/<slug>.py`: right implementations of every graded function,
  written unlike the reference, and plausible wrong ones; the tests assert
  that the hidden checks accept the first and reject the others, with a reason.
- `submissions`: student notebooks made from them, and classes of honest ones.
- `planted_class`: a class with disguised copies, for the similarity report.
- `plain_nbgrader`: the same submissions graded by stock `nbgrader autograde`.
- `nbgrader_quickstart`: nbgrader's own example course and its students.
"""
