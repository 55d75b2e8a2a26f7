"""Feedback names each check's task by title and links to the chapter section that explains it."""

import pytest

from autograder import assignment, course, tasks

SLUGS = course.assignments()


@pytest.mark.parametrize("slug", SLUGS)
def test_every_check_has_a_task_title_from_the_notebook(slug):
    titles = tasks.titles(slug)
    assert set(titles) == {test.grade_id for test in assignment.load(slug).tests}
    for title in titles.values():  # the heading without its number and points
        assert title and title[0].isupper() and "point" not in title and not title[0].isdigit()


def test_a_title_is_the_heading_without_number_and_points():
    assert tasks.titles("scaled_dot_product")["test_softmax"] == "A stable softmax"
    assert tasks.titles("transformer_decoder")["test_decoder_layer"] == "A decoder layer"


@pytest.mark.parametrize("slug", SLUGS)
def test_every_linked_section_exists_in_its_chapter(slug):
    labels = tasks.chapter_labels(slug)
    assert labels, f"book/{slug}.md has no label"
    for check in tasks.titles(slug):
        assert tasks.section_label(slug, check) in labels
        assert tasks.section_url(slug, check).startswith(tasks.base_url() + f"book/{slug}.html#")


def test_the_section_map_names_every_check_and_only_real_ones():
    for slug in SLUGS:  # the check cells' metadata course.section
        checks = tasks.sections(slug)
        assert set(checks) == set(tasks.titles(slug)), slug
        assert set(checks.values()) <= set(tasks.chapter_labels(slug)), slug


def test_the_base_url_comes_from_the_site_config():
    assert tasks.base_url().startswith("https://") and tasks.base_url().endswith("/")


@pytest.mark.parametrize("slug", SLUGS)
def test_messages_name_each_code_cell_by_its_task_never_by_a_number(slug):
    released = assignment.load(slug).cells
    places = tasks.places(slug, list(released))
    assert set(places) == {str(i) for i, cell in enumerate(released) if cell.cell_type == "code"}
    for index, check in ((i, assignment.grade_id(c)) for i, c in enumerate(released)
                         if assignment.grade_id(c) in tasks.titles(slug)):
        assert places[str(index)] == f"the check cell of task “{tasks.titles(slug)[check]}”"
    assert not [place for place in places.values() if any(ch.isdigit() for ch in place.split("“")[0])]
