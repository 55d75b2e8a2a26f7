"""Legible figures: a check of every matplotlib figure that a chapter draws,
when the book is built.

`chapter_execution` loads this module into each chapter's kernel as an
IPython extension. At the end of every cell it looks at the figures the cell
leaves open (those the inline backend is about to show) and makes the cell
fail, and with it the build, when one would be hard to read on the page:

- tick labels that overlap each other or a legend;
- ticks between whole numbers on an axis whose data are all whole numbers
  (positions, steps, counts);
- text smaller than `MIN_TEXT_SHARE` of the body's font once the image is
  shrunk to the width of the page's column (a figure drawn wide shows its
  text small).

The page's column and body font are those of the website at 1280 px
(tests/book/test_pages.py measures them and fails when the theme changes them).
"""

import ast
import sys

import numpy as np

COLUMN_PX = 688        # width of the page's column, in CSS pixels, at 1280 px
BODY_PX = 16           # font size of the page's body text, in CSS pixels
MIN_TEXT_SHARE = 0.8   # the smallest text of a figure, as a share of the body's
PAD_INCHES = 0.1       # the margin that bbox_inches="tight" adds around a figure


class IllegibleFigure(Exception):
    """A figure that the reader could not read as drawn."""


def _drawn_tick_labels(axis):
    """The tick labels that `axis` draws: visible, not empty, within its view."""
    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * max(abs(low), abs(high), 1e-300)
    labels = []
    for tick in axis.get_major_ticks() + axis.get_minor_ticks():
        location = tick.get_loc()
        if location is None or not low - slack <= location <= high + slack:
            continue
        for label in (tick.label1, tick.label2):
            if label.get_visible() and label.get_text().strip():
                labels.append((location, label))
    return labels


def _shown(text):
    """The text of a Text artist as the reader sees it, roughly (no mathtext markup)."""
    return text.get_text().replace("$", "").replace("\\mathdefault", "").replace("\\times", "×")


def _overlap(a, b, tolerance=1.0):
    """Whether two boxes (in pixels) share more than `tolerance` px each way."""
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return width > tolerance and height > tolerance


def _positions(ax):
    """The data positions along x and along y of what `ax` draws in data
    coordinates (lines, scatter points, bar centres, image cells): for each
    axis, a list of arrays, empty when nothing places data on it."""
    import matplotlib.container as mcontainer
    import matplotlib.image as mimage

    xs, ys = [], []
    for line in ax.lines:
        if line.get_transform() == ax.transData:
            xs.append(np.asarray(line.get_xdata(), dtype=float))
            ys.append(np.asarray(line.get_ydata(), dtype=float))
    for collection in ax.collections:
        offsets = np.asarray(collection.get_offsets(), dtype=float)
        if offsets.size and collection.get_offset_transform() == ax.transData:
            xs.append(offsets[:, 0])
            ys.append(offsets[:, 1])
    for container in ax.containers:
        if isinstance(container, mcontainer.BarContainer) and container.patches:
            vertical = container.orientation == "vertical"
            centres = [bar.get_x() + bar.get_width() / 2 if vertical else bar.get_y() + bar.get_height() / 2
                       for bar in container.patches]
            (xs if vertical else ys).append(np.array(centres))
    for image in ax.images:
        if isinstance(image, mimage.AxesImage):
            rows, columns = image.get_array().shape[:2]
            left, right, bottom, top = image.get_extent()
            if sorted((left, right)) == [-0.5, columns - 0.5]:
                xs.append(np.arange(columns, dtype=float))
            if sorted((bottom, top)) == [-0.5, rows - 0.5]:
                ys.append(np.arange(rows, dtype=float))
    return xs, ys


def _whole(values):
    """Whether `values` are whole numbers, three at least (a line from 0 to 1 is not a set of positions)."""
    values = np.concatenate([np.ravel(v) for v in values])
    values = values[np.isfinite(values)]
    return np.unique(values).size >= 3 and np.allclose(values, np.round(values), rtol=0, atol=1e-9)


def saved_width_px(fig, renderer):
    """The width of the image that the inline backend saves (bbox_inches="tight")."""
    return (fig.get_tightbbox(renderer).width + 2 * PAD_INCHES) * fig.dpi


def problems(fig):
    """What makes `fig` hard to read, in sentences; empty when nothing does."""
    from matplotlib.legend import Legend
    from matplotlib.text import Text

    fig.draw_without_rendering()          # lays the figure out as it will be saved
    renderer = fig.canvas.get_renderer()
    found = []
    legends = [artist for artist in fig.findobj(Legend) if artist.get_visible()]
    legend_boxes = [legend.get_window_extent(renderer) for legend in legends]
    all_tick_labels, drawn = set(), []
    for number, ax in enumerate(fig.axes, start=1):
        if not ax.get_visible():
            continue
        xs, ys = _positions(ax)
        for name, axis, values in (("x", ax.xaxis, xs), ("y", ax.yaxis, ys)):
            where = f"axes {number}, {name} axis"
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                all_tick_labels.update((id(tick.label1), id(tick.label2)))
            labels = _drawn_tick_labels(axis)
            drawn += [label for _, label in labels]
            boxes = [(_shown(label), label.get_window_extent(renderer)) for _, label in labels]
            pairs = [f"{text_a} and {text_b}" for i, (text_a, a) in enumerate(boxes)
                     for text_b, b in boxes[i + 1:] if _overlap(a, b)]
            if pairs:
                found.append(f"{where}: tick labels overlap: " + "; ".join(pairs[:4])
                             + ("…" if len(pairs) > 4 else ""))
            covered = [text for text, box in boxes if any(_overlap(box, legend) for legend in legend_boxes)]
            if covered:
                found.append(f"{where}: a legend covers the tick labels {', '.join(covered)}")
            if values and _whole(values):
                between = [_shown(label) for location, label in labels if abs(location - round(location)) > 1e-9]
                if between:
                    found.append(f"{where}: the data sit at whole numbers but ticks fall "
                                 f"between them: {', '.join(between)}")
    texts = drawn + [text for text in fig.findobj(Text)
                     if id(text) not in all_tick_labels and text.get_visible() and text.get_text().strip()]
    scale = min(1.0, COLUMN_PX / saved_width_px(fig, renderer))
    smallest = MIN_TEXT_SHARE * BODY_PX
    small = sorted({(text.get_fontsize(), text.get_text()) for text in texts
                    if text.get_fontsize() * fig.dpi / 72 * scale < smallest - 1e-6})
    if small:
        size, _ = small[0]
        width_in = saved_width_px(fig, renderer) / fig.dpi
        found.append(
            f"text of {size:g} pt is {size * fig.dpi / 72 * scale:.1f} px on the page "
            f"(the image, {width_in:.1f} in wide, shown {scale:.0%} of its size in a {COLUMN_PX} px column), "
            f"less than {smallest:.1f} px ({MIN_TEXT_SHARE:.0%} of the body's {BODY_PX} px): "
            + ", ".join(repr(text.replace("$", "")) for _, text in small[:6]) + ("…" if len(small) > 6 else ""))
    return found


def check_open_figures(value=None):
    """Raise IllegibleFigure if a figure left open is hard to read; return `value`."""
    if "matplotlib.pyplot" not in sys.modules:
        return value
    from matplotlib._pylab_helpers import Gcf

    found = []
    for manager in Gcf.get_all_fig_managers():
        found += [f"figure {manager.num}: {problem}" for problem in problems(manager.canvas.figure)]
    if found:
        raise IllegibleFigure("This cell draws a figure that readers cannot read as drawn:\n- "
                              + "\n- ".join(found))
    return value


class CheckFiguresAtTheEnd(ast.NodeTransformer):
    """Make each cell end by checking its figures. A cell that ends with an
    expression still shows its value: the check passes it through."""

    def visit_Module(self, module):
        check = ast.Attribute(ast.Call(ast.Name("__import__", ast.Load()), [ast.Constant(__name__)], []),
                              "check_open_figures", ast.Load())
        if module.body and isinstance(module.body[-1], ast.Expr):
            module.body[-1] = ast.Expr(ast.Call(check, [module.body[-1].value], []))
        else:
            module.body.append(ast.Expr(ast.Call(check, [], [])))
        return ast.fix_missing_locations(module)


def load_ipython_extension(shell):
    shell.ast_transformers.append(CheckFiguresAtTheEnd())
