"""The figure check of the build (book/_ext/figure_check.py): it rejects the
figures that issue 30 found hard to read and passes the same figures drawn
right; a chapter that draws an illegible figure fails the build."""

import subprocess
import sys

import matplotlib
import numpy as np
import pytest

from tests.support import COURSE
from tests.book.conftest import BUILD
from tests.book.test_build import mini_book

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(COURSE.root / "book" / "_ext"))
import figure_check  # noqa: E402

plt.rcParams.update({"figure.dpi": 110, "font.size": 10})


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_overlapping_log_tick_labels_are_found():
    """12.1 and 12.3: minor log ticks labelled over each other."""
    fig, ax = plt.subplots(figsize=(5, 3))
    lengths = [256, 512, 1024, 2048, 4096, 8192]
    ax.plot(lengths, np.square(lengths))
    ax.set(xscale="log", yscale="log", xticks=lengths, xticklabels=lengths)
    # less than two decades: matplotlib labels the minor ticks too, over the major ones
    assert any("x axis: tick labels overlap" in problem for problem in figure_check.problems(fig))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    assert figure_check.problems(fig) == []


def test_ticks_between_whole_number_positions_are_found():
    """1.3 and 12.2: positions 0 … 19 ticked at 2.5, 7.5, …"""
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(np.arange(20), np.random.default_rng(0).random(20))
    ax.set_xticks([0, 2.5, 5, 7.5])
    assert any("ticks fall between them" in problem and "2.5" in problem for problem in figure_check.problems(fig))
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    assert figure_check.problems(fig) == []


def test_half_cells_of_a_heatmap_are_found():
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.imshow(np.eye(6))
    ax.set_yticks([0, 2.5, 5])
    assert any("y axis: the data sit at whole numbers" in problem for problem in figure_check.problems(fig))


def test_bars_at_whole_positions_take_whole_ticks():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(range(6), [3, 1, 4, 1, 5, 9])
    ax.set_xticks([0, 2.5, 5])
    assert any("x axis: the data sit at whole numbers" in problem for problem in figure_check.problems(fig))
    ax.set_xticks(range(6))
    assert figure_check.problems(fig) == []


def test_real_valued_data_may_have_any_ticks():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(np.linspace(0, 1, 11), np.linspace(0, 1, 11) ** 2)
    assert figure_check.problems(fig) == []


def test_small_text_of_a_wide_figure_is_found():
    """5.2, 10.3, 10.4, 11.3: text drawn for a wide image shrinks with it."""
    fig, ax = plt.subplots(figsize=(12, 3))     # 1320 px wide: shown at about half its size
    ax.plot([0.0, 1.0], [0.0, 1.0])
    problems = figure_check.problems(fig)
    assert any("text of 10 pt" in problem for problem in problems), problems
    fig.set_size_inches(6, 3)
    assert figure_check.problems(fig) == []


def test_small_text_is_found_in_a_narrow_figure_too():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0.0, 1.0], [0.0, 1.0])
    ax.text(0.5, 0.5, "a note", fontsize=7)
    assert any("'a note'" in problem for problem in figure_check.problems(fig))


def test_a_legend_over_a_tick_label_is_found():
    """6.1: the legend covers a tick label."""
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0.0, 1.0], [0.0, 1.0], label="a line with a long label")
    ax.legend(loc="lower left", bbox_to_anchor=(-0.15, -0.12))
    assert any("a legend covers" in problem for problem in figure_check.problems(fig))


def test_the_cell_check_keeps_the_value_of_the_last_expression():
    import ast

    module = figure_check.CheckFiguresAtTheEnd().visit(ast.parse("x = 2\nx + 1"))
    namespace = {}
    exec(compile(ast.Module(module.body[:-1], []), "cell", "exec"), namespace)
    assert eval(compile(ast.Expression(module.body[-1].value), "cell", "eval"), namespace) == 3


def test_a_chapter_with_an_illegible_figure_fails_the_build(tmp_path):
    book = mini_book(tmp_path, "import matplotlib.pyplot as plt\n"
                               "fig, ax = plt.subplots(figsize=(6, 3))\n"
                               "ax.plot(range(10), range(10))\n"
                               "ax.set_xticks([0, 2.5, 5, 7.5]);")
    result = subprocess.run([*BUILD, str(book)], capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "IllegibleFigure" in output and "fall between them: 2.5, 7.5" in output, output[-3000:]
