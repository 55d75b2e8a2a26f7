"""nbgrader settings of the tiny course: what `python -m autograder release` needs to release it."""
import os

from nbgrader.coursedir import CourseDirectory

from autograder.engine import course

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = course.load(os.environ.get(course.ENVIRONMENT) or course.find()).id
c.CourseDirectory.ignore = [*CourseDirectory.class_traits()["ignore"].default(), "timing.json"]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
