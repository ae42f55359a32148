"""Chart geometry for server-side SVG, one style for every page with a chart (runs'
evaluation, batch detail, leaderboard, training): numbers in, coordinates out.

The shared templates ``_bar_chart.html`` and ``_line_chart.html`` draw them, with the legend
as HTML under the plot (it never covers a line) and every label escaped like any other text.
Charts are drawn at their own pixel width and only shrink on narrow screens, so label sizes
are the same everywhere. A series is told apart by colour *and* by its line dash and point
marker, so two overlapping lines (pass@k and pass^k at 100%) both stay visible.
"""

from __future__ import annotations

# Per series: CSS colour class, SVG dash pattern, point marker. Six, then they repeat.
SERIES_STYLES = (
    ("chart-series-0", "", "circle"),
    ("chart-series-1", "7 4", "square"),
    ("chart-series-2", "2 3", "diamond"),
    ("chart-series-3", "10 3 2 3", "triangle"),
    ("chart-series-4", "4 4", "circle"),
    ("chart-series-5", "1 2", "square"),
)
LINE_WIDTH = 560
BAR_WIDTH = 560
MARKER_SIZE = 4.5


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def step_ticks(low: int, high: int, most: int = 10) -> list[int]:
    """Integer ticks for an axis from ``low`` to ``high``: both ends and the multiples of an
    even step (1, 2 or 5 times a power of ten; at most ``most`` ticks) between them, so the
    axis never jumps over a value its neighbours would show. A multiple within half a step
    of an end is left out (its label would run into the end's)."""
    span = high - low
    if span <= 0:
        return [low]
    step, factors = 1, (2, 2.5, 2)
    while span / step + 1 > most:
        step = round(step * factors[0])
        factors = factors[1:] + factors[:1]
    first = -(-low // step) * step
    inner = [t for t in range(first, high, step) if t - low > step / 2 and high - t > step / 2]
    return [low, *inner, high]


def series_style(index: int) -> dict:
    css, dash, marker = SERIES_STYLES[index % len(SERIES_STYLES)]
    return {"css": css, "dash": dash, "marker": marker}


def _marker(shape: str, x: float, y: float) -> dict:
    """A point marker: a circle, or a polygon's points around (x, y)."""
    r = MARKER_SIZE
    if shape == "circle":
        return {"shape": "circle", "x": x, "y": y, "r": r - 0.5}
    corners = {
        "square": [(-1, -1), (1, -1), (1, 1), (-1, 1)],
        "diamond": [(0, -1.3), (1.3, 0), (0, 1.3), (-1.3, 0)],
        "triangle": [(0, -1.3), (1.2, 1), (-1.2, 1)],
    }[shape]
    points = " ".join(f"{round(x + dx * r, 1)},{round(y + dy * r, 1)}" for dx, dy in corners)
    return {"shape": "polygon", "points": points}


def bar_chart(
    items: list[dict],
    *,
    series: list[str] | None = None,
    width: int = BAR_WIDTH,
    bar_height: int = 22,
    label_width: int = 200,
) -> dict:
    """Horizontal bars for values in [0, 1].

    ``items``: {"label", "value", "note"?} — or, with ``series`` (names, e.g. models), one
    group per item with ``"values"`` (one per series, None where missing), drawn as bars of
    the series' colours side by side with a legend.
    """
    names = series or [""]
    group_gap = 10 if series else 8
    inner = bar_height if len(names) == 1 else max(12, bar_height * 2 // 3)
    plot = width - label_width - 60
    bars, groups = [], []
    y = 24
    for item in items:
        values = item["values"] if series else [item.get("value")]
        group_top = y
        for i, value in enumerate(values):
            w = 0 if value is None else max(0.0, min(1.0, value)) * plot
            style = series_style(i)
            bars.append(
                {
                    "label": item["label"],
                    "series": names[i],
                    "css": style["css"] if series else "",
                    "note": item.get("note", ""),
                    "value": value,
                    "text": _pct(value),
                    "x": label_width,
                    "y": y,
                    "w": round(w, 1),
                    "h": inner,
                    "text_x": round(label_width + w + 6, 1),
                    "mid_y": y + inner / 2 + 4,
                }
            )
            y += inner + 2
        y += group_gap - 2
        groups.append(
            {
                "label": item["label"],
                "label_x": label_width - 8,
                "mid_y": (group_top + y - group_gap) / 2 + 4,
            }
        )
    height = y + 4
    ticks = [
        {"x": round(label_width + plot * t, 1), "label": f"{round(t * 100)}%"}
        for t in (0, 0.25, 0.5, 0.75, 1)
    ]
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "groups": groups,
        "ticks": ticks,
        "plot_top": 18,
        "plot_bottom": height - 4,
        "legend": [
            {"name": name, **series_style(i), "marker": "square"}
            for i, name in enumerate(names)
            if series
        ],
    }


def line_chart(
    series: list[dict], *, width: int = LINE_WIDTH, height: int = 240, x_label: str = "k (trials)"
) -> dict:
    """Lines over integer x (k = 1..K) and y in [0, 1]. ``series``: {"name", "points":
    {k: value or None}}; series i is drawn in style i (colour, dash, marker)."""
    left, right, top, bottom = 48, 16, 14, 40
    xs = sorted({k for s in series for k in s["points"]}) or [1]
    x_min, x_max = xs[0], xs[-1]
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(k):
        if x_max == x_min:
            return left + plot_w / 2
        return left + (k - x_min) / (x_max - x_min) * plot_w

    def sy(v):
        return top + (1 - max(0.0, min(1.0, v))) * plot_h

    lines = []
    for i, s in enumerate(series):
        style = series_style(i)
        points = []
        for k, v in sorted(s["points"].items()):
            if v is None:
                continue
            x, y = round(sx(k), 1), round(sy(v), 1)
            points.append(
                {"x": x, "y": y, "k": k, "text": _pct(v), **_marker(style["marker"], x, y)}
            )
        lines.append(
            {
                "name": s["name"],
                **style,
                "points": points,
                "path": " ".join(f"{p['x']},{p['y']}" for p in points),
            }
        )
    return {
        "width": width,
        "height": height,
        "lines": lines,
        "legend": [{"name": s["name"], **series_style(i)} for i, s in enumerate(series)],
        "x_label": x_label,
        "x_ticks": [{"x": round(sx(k), 1), "label": str(k)} for k in step_ticks(x_min, x_max)],
        "y_ticks": [
            {"y": round(sy(t), 1), "label": f"{round(t * 100)}%"} for t in (0, 0.25, 0.5, 0.75, 1)
        ],
        "left": left,
        "right": width - right,
        "top": top,
        "bottom": height - bottom,
        "axis_label_y": height - 6,
    }
