"""Figures a reader can play with: computed at build, explored in the browser.

Each is a Vega-Lite chart written with Altair: the data, computed by the
chapter from ``solutions/``, is all in the page, and the sliders, menus and
hovers run in the reader's browser, with no server. The chapters call
``show(chart)``; the functions below build the five charts of the course, so
that each chapter's cell stays short.

- ``show`` outputs the chart twice: as HTML for the website (the chart's
  specification, which ``interactive.js`` hands to Vega-Embed when the page
  loads) and as a PNG of its default state, drawn by vl-convert without a
  browser, which the PDF (LaTeX builder) takes instead.
- ``interactive_site.py``, a Sphinx extension, serves Vega, Vega-Lite and
  Vega-Embed from the site itself to the pages that have such a figure.
  (It is apart so that changing it executes no chapter again: the chapters
  import this module, and are executed again when it changes.)

Accessibility: every control is an HTML input (range, radio or select) that
Vega wraps in a ``<label>`` with its name, so it works with the keyboard
(Tab, arrows) and is announced; the chart's SVG takes the figure's alt text
(``description``) as its ``aria-label``.
"""

import base64
import json

MARKER = 'class="interactive-figure"'                 # what interactive_site.py looks for in a page
FONT = 13                                       # px: the charts' text, ≥ 80% of the body's
# Colours of Tableau's colour-blind-safe palette (tableau-colorblind10, as the matplotlib figures
# use), those with a contrast of 3:1 at least against the white background (WCAG 1.4.11): its
# orange #FF800E and its lighter greys are not (tests/book/test_interactive.py measures them).
BLUE, ORANGE, GREY, LIGHTER_GREY = "#006BA4", "#C85200", "#595959", "#898989"
CONFIG = {"font": "sans-serif", "background": "white",
          "axis": {"labelFontSize": FONT, "titleFontSize": FONT},
          "legend": {"labelFontSize": FONT, "titleFontSize": FONT},
          "title": {"fontSize": FONT + 1}, "text": {"fontSize": FONT}}


# -- in the chapters ------------------------------------------------------------------

def show(chart, alt_text, scale=2):
    """Display ``chart`` for the website (HTML, interactive) and the PDF (PNG, its default state).

    ``alt_text`` says what the figure shows and that it is interactive: it
    becomes the chart's description, the ``aria-label`` of the drawn chart.
    (The PNG's alt text is the cell's ``mystnb: image: alt:``, as for any figure.)
    """
    import vl_convert
    from IPython.display import display

    spec = chart.properties(description=alt_text).to_dict()
    config = spec.setdefault("config", {})
    for name, value in CONFIG.items():
        if isinstance(value, dict):
            config.setdefault(name, {}).update(value)
        else:
            config.setdefault(name, value)
    png = vl_convert.vegalite_to_png(spec, scale=scale)
    # Inside <script>, "</" would end the element: JSON may write it "<\/".
    data = json.dumps(spec, ensure_ascii=False).replace("</", "<\\/")
    markup = (f"<div {MARKER}>"
              f'<script type="application/json">{data}</script></div>')
    # text/plain: the alt text, for builders that take neither (Sphinx's link check) and for consoles
    display({"text/html": markup, "image/png": base64.b64encode(png).decode(), "text/plain": alt_text},
            raw=True)


def alignment_explorer(source_words, target_words, weights):
    """Bahdanau's alignment, one target word at a time: ``weights (len(target), len(source))``.

    Hovering a row of the matrix, or choosing a word among the radio
    buttons under it, shows that word's weights over the source as bars.
    """
    import altair as alt

    rows = [{"target": f"{i + 1}. {t}", "source": f"{j + 1}. {s}", "weight": float(weights[i, j])}
            for i, t in enumerate(target_words) for j, s in enumerate(source_words)]
    targets = [row["target"] for row in rows[::len(source_words)]]
    sources = [row["source"] for row in rows[:len(source_words)]]
    chosen = alt.selection_point(fields=["target"], on="pointerover", clear=False, nearest=False,
                                 value=[{"target": targets[0]}],
                                 bind=alt.binding_radio(options=targets, name="Target word "))
    base = alt.Chart(alt.Data(values=rows))
    # Each cell outlined, so that a weight near 0 (white) still shows its cell; the words not
    # chosen are faded in their fill only.
    matrix = base.mark_rect(stroke=GREY, strokeWidth=0.5).encode(
        x=alt.X("source:N", sort=sources, title="source word j", axis=alt.Axis(labelAngle=-30)),
        y=alt.Y("target:N", sort=targets, title="target word i (written)"),
        color=alt.Color("weight:Q", scale=alt.Scale(scheme="greys", domain=[0, 1]), title="weight α_ij"),
        fillOpacity=alt.condition(chosen, alt.value(1), alt.value(0.45)),
    ).add_params(chosen).properties(width=230, height=200)
    values = base.mark_text(baseline="middle").encode(
        x=alt.X("source:N", sort=sources), y=alt.Y("target:N", sort=targets),
        text=alt.Text("weight:Q", format=".2f"),
        # white on the dark cells of the chosen word; the others' fill is faded, light under black
        color=alt.condition(chosen & (alt.datum.weight > 0.5), alt.value("white"), alt.value("black")))
    bars = base.mark_bar(color=BLUE).encode(
        x=alt.X("source:N", sort=sources, title="source word j", axis=alt.Axis(labelAngle=-30)),
        y=alt.Y("weight:Q", scale=alt.Scale(domain=[0, 1]), title="weight α_ij of the chosen word"),
    ).transform_filter(chosen).properties(width=170, height=200)
    return alt.hconcat(matrix + values, bars)


def softmax_saturation(table):
    """Entropy and gradient of the softmax against ``d_k``, scaled or not, with a ``d_k`` slider.

    ``table``: rows ``{"log2_d_k", "d_k", "scaling", "entropy", "gradient"}``
    and, for the weights drawn at each ``d_k``, ``{"key", "weight"}`` rows.
    """
    import altair as alt

    curves = [row for row in table if "entropy" in row]
    weights = [row for row in table if "weight" in row]
    top = max(row["log2_d_k"] for row in curves)
    log2_d_k = alt.param(name="log2_d_k", value=6,
                         bind=alt.binding_range(min=0, max=top, step=1, name="log₂ d_k "))
    colour = alt.Color("scaling:N", title=None, legend=alt.Legend(orient="top"),
                       scale=alt.Scale(range=[BLUE, ORANGE]))
    here = alt.Chart(alt.Data(values=[{}])).mark_rule(color=GREY, strokeDash=[4, 3]).encode(
        x="x:Q").transform_calculate(x="pow(2, log2_d_k)")

    def against_d_k(field, title, log):
        line = alt.Chart(alt.Data(values=curves)).mark_line(point=True).encode(
            x=alt.X("d_k:Q", scale=alt.Scale(type="log", base=2), title="d_k",
                    axis=alt.Axis(values=[2 ** i for i in range(0, top + 1, 2)], format="d")),
            y=alt.Y(f"{field}:Q", title=title, scale=alt.Scale(type="log") if log else alt.Undefined),
            color=colour)
        return (line + here).properties(width=150, height=170)

    bars = alt.Chart(alt.Data(values=weights)).mark_bar().encode(
        x=alt.X("key:O", title="key j"), xOffset="scaling:N",
        y=alt.Y("weight:Q", title="weight", scale=alt.Scale(domain=[0, 1])),
        color=colour).transform_filter("datum.log2_d_k == log2_d_k").properties(width=150, height=170)
    return alt.hconcat(
        bars.properties(title="the weights of one query"),
        against_d_k("entropy", "entropy of the weights (bits)", False),
        against_d_k("gradient", "softmax gradient (Frobenius norm)", True),
    ).add_params(log2_d_k).resolve_scale(color="shared")


def encoding_similarity(table, max_offset):
    """Two dot products against the offset ``k`` (their sum over feature pairs) and their terms at ``k``.

    ``table``: rows ``{"offset", "encoding", "pair", "term"}``; an offset slider.
    """
    import altair as alt

    largest = max(abs(row["term"]) for row in table)            # a fixed axis while the slider moves
    offset = alt.param(name="offset", value=8,
                       bind=alt.binding_range(min=0, max=max_offset, step=1, name="offset k "))
    colour = alt.Color("encoding:N", title=None, legend=alt.Legend(orient="top", labelLimit=400),
                       scale=alt.Scale(range=[BLUE, ORANGE]))
    base = alt.Chart(alt.Data(values=table))
    sums = base.transform_aggregate(similarity="sum(term)", groupby=["offset", "encoding"])
    lines = sums.mark_line().encode(
        x=alt.X("offset:Q", title="offset k between the two positions"),
        y=alt.Y("similarity:Q", title="dot product / its value at k = 0"), color=colour)
    chosen = sums.transform_filter("datum.offset == offset")
    dots = chosen.mark_point(filled=True, size=90, opacity=1).encode(   # Vega-Lite draws points at 0.7
        x="offset:Q", y="similarity:Q", color=colour)
    values = chosen.mark_text(align="left", dx=8, dy=-10).encode(
        x="offset:Q", y="similarity:Q", color=colour, text=alt.Text("similarity:Q", format=".3f"))
    terms = base.transform_filter("datum.offset == offset").mark_bar().encode(
        x=alt.X("pair:O", title="feature pair i (slow ones right)"), xOffset="encoding:N",
        y=alt.Y("term:Q", title="term of pair i at offset k", scale=alt.Scale(domain=[-largest, largest])),
        color=colour)
    return alt.hconcat((lines + dots + values).properties(width=250, height=230),
                       terms.properties(width=250, height=230)).add_params(offset)


def sampling_explorer(characters, logits, shown=30):
    """Temperature, top-k and top-p sliders on next-token ``logits (V,)``; the ``shown`` likeliest drawn.

    The browser applies ``filter_logits``' rules to every token: divide by
    the temperature; keep the tokens whose logit is ≥ the k-th largest (ties
    kept); among them, the shortest prefix of decreasing probability (ties:
    lower id first) whose sum reaches p; renormalise.
    """
    import altair as alt

    order = sorted(range(len(logits)), key=lambda i: -logits[i])
    rank_of = {token: r for r, token in enumerate(order)}
    rows = [{"id": i, "logit": float(z), "rank": rank_of[i],
             "label": f"{rank_of[i] + 1:02d} {_visible(characters[i])}"} for i, z in enumerate(logits)]
    temperature = alt.param(name="temperature", value=1.0,
                            bind=alt.binding_range(min=0.1, max=2.0, step=0.05, name="temperature τ "))
    top_k = alt.param(name="top_k", value=len(logits),
                      bind=alt.binding_range(min=1, max=len(logits), step=1, name="top-k: k "))
    top_p = alt.param(name="top_p", value=1.0,
                      bind=alt.binding_range(min=0.05, max=1.0, step=0.05, name="nucleus: p "))
    base = alt.Chart(alt.Data(values=rows)).transform_calculate(
        scaled="datum.logit / temperature", model="exp(datum.logit)",
    ).transform_joinaggregate(
        model_total="sum(model)", top="max(scaled)",
    ).transform_window(
        k_rank="rank()", sort=[alt.SortField("scaled", order="descending")],
    ).transform_calculate(
        model_p="datum.model / datum.model_total",
        after_k="datum.k_rank <= top_k ? exp(datum.scaled - datum.top) : 0",
    ).transform_joinaggregate(
        k_total="sum(after_k)",
    ).transform_calculate(
        p_k="datum.after_k / datum.k_total",
    ).transform_window(
        cumulative="sum(p_k)", sort=[alt.SortField("p_k", order="descending"), alt.SortField("id")],
        frame=[None, 0],
    ).transform_calculate(
        kept="datum.after_k > 0 && datum.cumulative - datum.p_k < top_p ? datum.after_k : 0",
    ).transform_joinaggregate(
        kept_total="sum(kept)",
    ).transform_calculate(
        p="datum.kept / datum.kept_total",
    )
    shown_rows = base.transform_filter(f"datum.rank < {shown}")
    x = alt.X("label:N", sort=alt.SortField("rank"), title=f"the {shown} likeliest next characters (rank, character)",
              axis=alt.Axis(labelAngle=0, labelFontSize=FONT, labelExpr="slice(datum.label, 3)"))
    kept = shown_rows.mark_bar(color=BLUE).encode(
        x=x, y=alt.Y("p:Q", title="probability of being sampled (√ axis)",
                     scale=alt.Scale(type="sqrt", domain=[0, 1])),
        tooltip=[alt.Tooltip("label:N", title="character"), alt.Tooltip("p:Q", format=".3f")])
    model = shown_rows.mark_tick(color=GREY, thickness=2, size=14).encode(x=x, y="model_p:Q")
    count = base.transform_filter("datum.kept > 0").transform_aggregate(n="count()").transform_calculate(
        text="'characters kept: ' + datum.n").mark_text(align="right", x="width", y=0, baseline="top").encode(
        text="text:N")
    return (kept + model + count).add_params(temperature, top_k, top_p).properties(width=540, height=240)


def flash_stepper(table, num_blocks):
    """FlashAttention one key block at a time: a slider over the blocks seen.

    ``table``: rows ``{"block", "query", "quantity", "value"}`` with quantity
    one of "running max m", "running sum ℓ", "distance to exact output".
    """
    import altair as alt

    step = alt.param(name="blocks_seen", value=1,
                     bind=alt.binding_range(min=1, max=num_blocks, step=1, name="key blocks seen "))
    base = alt.Chart(alt.Data(values=table))
    colour = alt.Color("query:N", title="query", legend=alt.Legend(orient="top"),
                       scale=alt.Scale(range=[BLUE, ORANGE, GREY, LIGHTER_GREY]))

    def panel(quantity, log, tick_format=alt.Undefined):
        rows = base.transform_filter(alt.datum.quantity == quantity)
        y = alt.Y("value:Q", title=quantity, scale=alt.Scale(type="log") if log else alt.Undefined,
                  axis=alt.Axis(format=tick_format))
        seen = rows.transform_filter("datum.block <= blocks_seen").mark_line(point=True).encode(
            x=alt.X("block:Q", title="key blocks seen", scale=alt.Scale(domain=[1, num_blocks]),
                    axis=alt.Axis(tickMinStep=1, format="d")), y=y, color=colour)
        # The blocks not seen yet: thin dashes in the same colours, not faded ones, which the
        # legend's symbols would take and which a reader could not tell apart.
        ahead = rows.mark_line(strokeDash=[2, 3], strokeWidth=1).encode(x="block:Q", y=y, color=colour)
        return (ahead + seen).properties(width=150, height=170)

    # Sixteen decades in one format, powers of ten (d3's default writes 0.000001 beside 1e-8).
    return alt.hconcat(panel("running max m", False), panel("running sum ℓ", True),
                       panel("distance to exact output", True, tick_format=".0e")).add_params(step)


def _visible(character):
    """A character as a reader can see it: space, newline and tab named."""
    return {" ": "␣", "\n": "¶", "\t": "⇥"}.get(character, character)
