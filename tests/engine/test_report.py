"""The instructor's summary: every student with their scores and links, counts in words, integer axes."""

import html
import re
from datetime import datetime, timezone

from autograder.engine import assignment, deadlines, feedback, summary, tasks
from autograder.engine.results import Check, Result
from autograder.samples.submissions import SLUG, implementations, submission
from tests.support import COURSE, PUBLISHED, published

DUE = datetime(2026, 3, 1, 23, 59, tzinfo=timezone.utc)


def result(student, assignment, points, status="graded", submitted_at=""):
    """A result of two checks: `points` of 4 in the first, 6 of 6 in the second."""
    return Result(student, assignment, status, [Check("test_a", points, 4.0, "wrong" * (points < 4)),
                                                Check("test_b", 6.0, 6.0)], submitted_at=submitted_at)


def links(page):
    """{href: text} of the page's links."""
    return {html.unescape(href): text for href, text in re.findall(r"<a href='([^']*)'>([^<]*)</a>", page)}


def test_summary_lists_every_student_with_scores_linked_to_their_feedback():
    results = [result("ada", "luong", 4), result("ada", "bahdanau", 1), result("bob", "luong", 0, "timeout"),
               result("c+d@example.edu", "bahdanau", 2)]
    page = summary.summary_html(COURSE, results)
    table = page[page.index("<h2>Students</h2>"):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 4  # the header and one row per student
    assert links(table) == {"feedback/ada/luong.html": "10 / 10", "feedback/ada/bahdanau.html": "7 / 10",
                            "feedback/bob/luong.html": "6 / 10",
                            "feedback/c%2Bd%40example.edu/bahdanau.html": "8 / 10"}
    assert "6 / 10</a> (timeout)" in table  # not simply graded: said beside the score
    bob = table[table.index("<tr><td>bob</td>"):]
    assert "<td></td>" in bob[:bob.index("</tr>")]  # no bahdanau from bob: an empty cell


def test_the_students_table_shows_the_score_after_the_late_penalty():
    policy = deadlines.Policy(DUE, penalty=0.25)
    page = summary.summary_html(COURSE, [result("ada", "luong", 4, submitted_at="2026-03-02T10:00:00+00:00")], policy)
    assert links(page)["feedback/ada/luong.html"] == "7.5 / 10"


def test_counts_are_said_in_words_one_student_not_one_students():
    page = summary.summary_html(COURSE, [result("ada", "luong", 4)])
    assert "<p>1 submission of 1 student.</p>" in page
    page = summary.summary_html(COURSE, [result("ada", "luong", 4), result("bob", "luong", 4)])
    assert "<p>2 submissions of 2 students.</p>" in page


def test_late_counts_submissions_and_students_apart():
    late = "2026-03-03T10:00:00+00:00"
    results = [result("ada", "luong", 4, submitted_at=late), result("ada", "bahdanau", 4, submitted_at=late),
               result("bob", "luong", 4, submitted_at="2026-03-01T10:00:00+00:00")]
    page = summary.summary_html(COURSE, results, deadlines.Policy(DUE, extensions={"bob": DUE}))
    assert "<h2>Late (2 submissions of 1 student)</h2>" in page and "(1 extension);" in page


def test_score_histograms_have_whole_number_ticks():
    for scores, max_score in (([0.5, 2, 3, 3], 3), ([7, 7.5, 16], 16)):  # half points, a wide range
        svg = summary._histogram(scores, max_score, "tiny")
        x = re.findall(r"class='tick-x'>([^<]*)<", svg)
        y = re.findall(r"class='tick-y'>([^<]*)<", svg)
        assert x and all(float(t).is_integer() for t in x), x
        assert y and all(float(t).is_integer() for t in y), y


def test_score_histograms_put_half_points_in_the_column_above():
    """Column k holds the scores in [k - 0.5, k + 0.5): 0.5 and 1 share a column, 1.5 goes to 2."""
    svg = summary._histogram([0.5, 1, 1.5], 3, "halves")
    heights = [float(h) for h in re.findall(r"<rect [^>]*height='([0-9.]+)'", svg)]
    assert heights[0] == 0 and heights[1] == 2 * heights[2] > 0 and heights[3] == 0, heights


# -- the student's feedback page ----------------------------------------------------------

def _graded(scores, course=COURSE):
    """The feedback page of a correct notebook of SLUG whose checks scored `scores` (grade_id ->
    (points, message); full marks for the others)."""
    spec = assignment.load(COURSE, SLUG)
    cells, _ = assignment.fit(spec, submission(SLUG, implementations(SLUG).CORRECT))
    checks = []
    for test in spec.tests:
        score, message = scores.get(test.grade_id, (test.points, ""))
        checks.append(Check(test.grade_id, score, test.points, message))
    return spec, feedback.feedback_html(course, Result("ada", SLUG, "graded", checks), cells, {})


def test_feedback_shows_the_students_cells_and_each_checks_result_not_the_course_cells():
    spec, page = _graded({})
    assert page.count("<div class=\"highlight\">") == len(spec.solutions)  # their answers, highlighted
    assert "CheckFailed" not in page and "Given: generated" not in page  # no helper, no given cell
    assert "How it works" not in page  # no text of the course
    for title in tasks.titles(COURSE, SLUG).values():
        assert f"<h3>{title}</h3>" in page and f"The checks of “{title}”:" in page


def test_why_points_were_lost_shows_only_where_some_were():
    _, page = _graded({})
    assert "why points were lost" not in page
    _, page = _graded({"test_softmax": (0, "softmax: expected 1, got 2.")})
    assert "why points were lost" in page and "softmax: expected 1, got 2." in page


def test_feedback_links_a_failed_check_to_its_section_once_the_site_is_published():
    failed = {"test_softmax": (0, "softmax: expected 1, got 2.")}
    where = html.escape(tasks.section_name(COURSE, SLUG, "test_softmax"))
    _, page = _graded(failed)  # the template's address: the section by its title, no link
    assert f"A stable softmax (read the chapter {where})" in page and "<a href" not in page
    _, page = _graded(failed, published())
    url = tasks.section_url(published(), SLUG, "test_softmax")
    assert url.startswith(PUBLISHED) and f"(<a href='{url}'>read the chapter</a>: {where})" in page
