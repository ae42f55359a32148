"""The one chart style (apps.core.charts): geometry, series told apart by colour, dash and
marker, grouped bars, and the shared templates that draw them."""

from django.template.loader import render_to_string

from apps.core.charts import bar_chart, line_chart, series_style, step_ticks


def test_bar_chart_geometry():
    chart = bar_chart([{"label": "a", "value": 1.0}, {"label": "b", "value": 0.25}], width=460)
    # plot width = 460 - 200 (labels) - 60 (value text) = 200
    assert [(b["w"], b["text"]) for b in chart["bars"]] == [(200.0, "100%"), (50.0, "25%")]
    assert chart["height"] == 24 + 2 * 30 + 4
    assert chart["legend"] == []  # one series: nothing to tell apart


def test_grouped_bars_have_one_bar_per_series_and_a_legend():
    chart = bar_chart(
        [{"label": "clarify", "values": [1.0, 0.5]}, {"label": "policy", "values": [None, 0.25]}],
        series=["gpt-x", "oracle"],
        width=460,
    )
    assert [(b["label"], b["series"], b["css"], b["w"]) for b in chart["bars"]] == [
        ("clarify", "gpt-x", "chart-series-0", 200.0),
        ("clarify", "oracle", "chart-series-1", 100.0),
        ("policy", "gpt-x", "chart-series-0", 0),
        ("policy", "oracle", "chart-series-1", 50.0),
    ]
    assert [g["label"] for g in chart["groups"]] == ["clarify", "policy"]
    assert [(item["name"], item["css"]) for item in chart["legend"]] == [
        ("gpt-x", "chart-series-0"),
        ("oracle", "chart-series-1"),
    ]


def test_line_chart_geometry():
    chart = line_chart([{"name": "pass@k", "points": {1: 0.5, 2: 1.0, 3: None}}])
    (line,) = chart["lines"]
    assert [(p["k"], p["text"]) for p in line["points"]] == [(1, "50%"), (2, "100%")]
    assert line["points"][1]["y"] == chart["top"]
    assert [t["label"] for t in chart["x_ticks"]] == ["1", "2", "3"]


def test_overlapping_lines_differ_in_dash_and_marker():
    same = {1: 1.0, 2: 1.0}
    chart = line_chart([{"name": "pass@k", "points": same}, {"name": "pass^k", "points": same}])
    first, second = chart["lines"]
    assert first["path"] == second["path"]  # they overlap exactly...
    assert (first["dash"], first["marker"]) == ("", "circle")  # ...yet are drawn apart
    assert (second["dash"], second["marker"]) == ("7 4", "square")
    assert second["points"][0]["shape"] == "polygon"
    assert [series_style(i)["css"] for i in (0, 5, 6)] == [
        "chart-series-0",
        "chart-series-5",
        "chart-series-0",
    ]


def test_chart_templates_draw_dashes_markers_and_escaped_legends():
    chart = line_chart(
        [{"name": "a", "points": {1: 0.5}}, {"name": "<b>m</b>", "points": {1: 0.7}}]
    )
    html = render_to_string("_line_chart.html", {"chart": chart, "title": "T"})
    assert 'stroke-dasharray="7 4"' in html
    assert html.count("<circle") == 2  # the first series' point and its legend key
    assert "&lt;b&gt;m&lt;/b&gt;" in html and "<b>m</b>" not in html
    assert html.count('data-testid="chart-legend"') == 1
    bars = bar_chart([{"label": "x", "values": [0.5, 1.0]}], series=["p", "q"])
    html = render_to_string("_bar_chart.html", {"chart": bars, "title": "B"})
    assert 'class="chart-bar chart-series-1"' in html
    assert f'width="{bars["width"]}"' in html  # drawn at its own size, never stretched


def test_step_ticks_keep_an_even_step_between_the_ends():
    assert step_ticks(1, 4) == [1, 2, 3, 4]
    assert step_ticks(1, 24) == [1, 5, 10, 15, 20, 24]
    assert step_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert step_ticks(2, 2000) == [2, 500, 1000, 1500, 2000]
    assert step_ticks(1, 37, most=8) == [1, 10, 20, 30, 37]  # 35 would run into 37
    assert step_ticks(5, 5) == [5]


def test_a_line_chart_labels_every_k_even_where_a_series_skips_one():
    chart = line_chart([{"name": "pass@k", "points": {1: 0.5, 2: 0.6, 4: 0.8}}])
    assert [t["label"] for t in chart["x_ticks"]] == ["1", "2", "3", "4"]
