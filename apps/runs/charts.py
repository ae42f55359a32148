"""Chart geometry for server-side SVG: numbers in, coordinates out. The templates
(``runs/_bar_chart.html``, ``runs/_line_chart.html``) draw them; every label is escaped there
like any other text."""

from __future__ import annotations

SERIES = 6  # CSS classes chart-series-0 … chart-series-5


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def bar_chart(
    items: list[dict], *, width: int = 640, bar_height: int = 22, label_width: int = 210
) -> dict:
    """Horizontal bars for values in [0, 1]. ``items``: {"label", "value", "href"?, "note"?}."""
    gap = 8
    plot = width - label_width - 60
    bars = []
    for i, item in enumerate(items):
        value = item.get("value")
        y = 24 + i * (bar_height + gap)
        w = 0 if value is None else max(0.0, min(1.0, value)) * plot
        bars.append(
            {
                "label": item["label"],
                "href": item.get("href"),
                "note": item.get("note", ""),
                "value": value,
                "text": _pct(value),
                "x": label_width,
                "y": y,
                "w": round(w, 1),
                "h": bar_height,
                "label_x": label_width - 8,
                "text_x": round(label_width + w + 6, 1),
                "mid_y": y + bar_height / 2 + 4,
            }
        )
    height = 24 + len(items) * (bar_height + gap) + 4
    ticks = [
        {"x": round(label_width + plot * t, 1), "label": f"{round(t * 100)}%"}
        for t in (0, 0.25, 0.5, 0.75, 1)
    ]
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "ticks": ticks,
        "plot_top": 18,
        "plot_bottom": height - 4,
    }


def line_chart(series: list[dict], *, width: int = 640, height: int = 260) -> dict:
    """Lines over integer x (k = 1..K) and y in [0, 1]. ``series``: {"name", "points":
    {k: value or None}}."""
    left, right, top, bottom = 48, 16, 16, 40
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
        points = [
            {
                "x": round(sx(k), 1),
                "y": round(sy(v), 1),
                "k": k,
                "text": _pct(v),
            }
            for k, v in sorted(s["points"].items())
            if v is not None
        ]
        lines.append(
            {
                "name": s["name"],
                "css": f"chart-series-{i % SERIES}",
                "points": points,
                "path": " ".join(f"{p['x']},{p['y']}" for p in points),
                "legend_y": top + 14 + i * 16,
            }
        )
    return {
        "width": width,
        "height": height,
        "lines": lines,
        "x_ticks": [{"x": round(sx(k), 1), "label": str(k)} for k in xs],
        "y_ticks": [{"y": round(sy(t), 1), "label": f"{round(t * 100)}%"} for t in (0, 0.5, 1)],
        "left": left,
        "right": width - right,
        "top": top,
        "bottom": height - bottom,
        "legend_x": width - right - 150,
        "axis_label_y": height - 6,
    }
