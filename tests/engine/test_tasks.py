"""Feedback names each check's task by title and links to the chapter section that explains it."""

import pytest

from autograder.engine import assignment, course, tasks
from tests.support import COURSE, PUBLISHED, published

SLUGS = course.assignments(COURSE)


@pytest.mark.parametrize("slug", SLUGS)
def test_every_check_has_a_task_title_from_the_notebook(slug):
    titles = tasks.titles(COURSE, slug)
    assert set(titles) == {test.grade_id for test in assignment.load(COURSE, slug).tests}
    for title in titles.values():  # the heading without its number and points
        assert title and title[0].isupper() and "point" not in title and not title[0].isdigit()


def test_a_title_is_the_heading_without_number_and_points():
    assert tasks.titles(COURSE, "scaled_dot_product")["test_softmax"] == "A stable softmax"
    assert tasks.titles(COURSE, "transformer_decoder")["test_decoder_layer"] == "A decoder layer"


@pytest.mark.parametrize("slug", SLUGS)
def test_every_linked_section_exists_in_its_chapter(slug):
    labels = tasks.chapter_labels(COURSE, slug)
    assert labels, f"book/{slug}.md has no label"
    for check in tasks.titles(COURSE, slug):
        assert tasks.section_label(COURSE, slug, check) in labels
        assert tasks.section_url(published(), slug, check).startswith(f"{PUBLISHED}book/{slug}.html#")
        assert tasks.section_name(COURSE, slug, check).startswith("“")  # the chapter's title, in words


def test_no_link_leads_nowhere_while_the_address_is_the_templates():
    """While html.baseurl is the template's placeholder nothing is published there: a failed check
    names its chapter and section by their titles; once the address is set, it links there too."""
    assert tasks.placeholder_base_url(published(COURSE.placeholder_baseurl))
    explained = tasks.explained_in(published(COURSE.placeholder_baseurl), "efficient_attention",
                                   "test_flash_attention")
    assert explained == " (the chapter explains it: “Attention at scale”, section “FlashAttention in NumPy”)"
    assert tasks.section_url(published(COURSE.placeholder_baseurl), "efficient_attention", "test_flash_attention") == ""
    explained = tasks.explained_in(published(), "efficient_attention", "test_flash_attention")
    assert explained == (" (the chapter explains it: “Attention at scale”, section “FlashAttention in NumPy”, "
                         f"{PUBLISHED}book/efficient_attention.html#efficient-attention-flash)")


def test_the_section_map_names_every_check_and_only_real_ones():
    for slug in SLUGS:  # the check cells' metadata course.section
        checks = tasks.sections(COURSE, slug)
        assert set(checks) == set(tasks.titles(COURSE, slug)), slug
        assert set(checks.values()) <= set(tasks.chapter_labels(COURSE, slug)), slug


def test_the_base_url_comes_from_the_site_config():
    assert tasks.base_url(COURSE).startswith("https://") and tasks.base_url(COURSE).endswith("/")


@pytest.mark.parametrize("slug", SLUGS)
def test_messages_name_each_code_cell_by_its_task_never_by_a_number(slug):
    released = assignment.load(COURSE, slug).cells
    places = tasks.places(COURSE, slug, list(released))
    assert set(places) == {str(i) for i, cell in enumerate(released) if cell.cell_type == "code"}
    for index, check in ((i, assignment.grade_id(c)) for i, c in enumerate(released)
                         if assignment.grade_id(c) in tasks.titles(COURSE, slug)):
        assert places[str(index)] == f"the check cell of task “{tasks.titles(COURSE, slug)[check]}”"
    assert not [place for place in places.values() if any(ch.isdigit() for ch in place.split("“")[0])]
