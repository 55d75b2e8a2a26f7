"""nbgrader configuration of the course.

The course directory is the folder holding this file. Instructors may use it
with plain nbgrader (`cd autograder && nbgrader generate_assignment NAME`, then
`nbgrader autograde NAME`). `python -m autograder release` copies it into a
temporary course directory, so that releasing never writes into the
repository; `python -m autograder grade` does not use nbgrader to grade: it
runs each notebook in a sandbox and the hidden checks outside it.
"""
import os

from nbgrader.converters.autograde import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute

from autograder.engine import course
from autograder.engine.preprocessors import StderrIsNotFailure

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# from the course file: the one the engine names when it runs nbgrader, else course.toml above
c.CourseDirectory.course_id = course.load(os.environ.get(course.ENVIRONMENT) or course.find()).id
# The reference's times (the engine's timing.py) are the grader's, not the students'.
c.CourseDirectory.ignore = [*CourseDirectory.class_traits()["ignore"].default(), "timing.json"]

# What students see in place of a solution.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# A cell that runs longer than this is stopped and scores zero.
c.Execute.timeout = 60

# nbgrader's own autograde steps, plus one after execution that keeps stderr
# of check cells as stdout before they are scored: warnings cost no points.
autograde_steps = Autograde.class_traits()["autograde_preprocessors"].default()
autograde_steps.insert(autograde_steps.index(Execute) + 1, StderrIsNotFailure)
c.Autograde.autograde_preprocessors = autograde_steps

# Feedback shows each check's points and its one-sentence reason, never the
# hidden tests' code or a traceback through them.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "autograder.engine.preprocessors.HideHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
