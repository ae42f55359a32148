"""Loss-curve geometry for the inline SVG chart: (step, value) series in, coordinates out.
``training/_loss_chart.html`` draws it (names escaped there like any text)."""

from __future__ import annotations

from apps.core.charts import step_ticks

SERIES = 6  # CSS classes chart-series-0 … chart-series-5 (static/css/app.css)


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def loss_chart(
    series: list[dict],
    *,
    width: int = 720,
    height: int = 280,
    legend_width: int = 170,
    within: tuple[float, float] | None = None,
) -> dict:
    """``series``: ``[{"name", "points": [(step, value), …], "dashed"?: bool}]``; values
    may be None (skipped). Both axes are linear, from the data's range. The legend on the
    right is ``legend_width`` pixels wide (names cut to what fits). ``within``: the range
    the values live in (rates: 0 to 1): the axis's padding never crosses a bound the data
    keeps to."""
    left, right, top, bottom = 56, legend_width, 16, 40
    points_all = [(s, v) for line in series for s, v in line["points"] if v is not None]
    if not points_all:
        return {"lines": [], "width": width, "height": height}
    steps = [s for s, _ in points_all]
    values = [v for _, v in points_all]
    x_min, x_max = min(steps), max(steps)
    y_min, y_max = data_min, data_max = min(values), max(values)
    if y_max == y_min:
        y_min, y_max = y_min - 0.5, y_max + 0.5
    pad = (y_max - y_min) * 0.05
    low, high = y_min - pad, y_max + pad
    if within is not None:
        low = max(low, within[0]) if data_min >= within[0] else low
        high = min(high, within[1]) if data_max <= within[1] else high
    y_min, y_max = low, high
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(step):
        return left + (plot_w / 2 if x_max == x_min else (step - x_min) / (x_max - x_min) * plot_w)

    def sy(value):
        return top + (1 - (value - y_min) / (y_max - y_min)) * plot_h

    lines = []
    for i, line in enumerate(series):
        pts = [
            {"x": round(sx(s), 1), "y": round(sy(v), 1), "step": s, "text": _fmt(v)}
            for s, v in line["points"]
            if v is not None
        ]
        lines.append(
            {
                "name": line["name"],
                "css": f"chart-series-{line.get('color', i) % SERIES}",
                "dashed": bool(line.get("dashed")),
                "points": pts,
                "path": " ".join(f"{p['x']},{p['y']}" for p in pts),
                "legend_y": top + 12 + i * 16,
                "last": pts[-1]["text"] if pts else "",
            }
        )
    y_ticks = []
    for t in (0, 0.25, 0.5, 0.75, 1):
        value = y_min + (y_max - y_min) * t
        y_ticks.append({"y": round(sy(value), 1), "label": _fmt(value)})
    x_ticks = step_ticks(x_min, x_max, most=8)
    return {
        "width": width,
        "height": height,
        "lines": lines,
        "x_ticks": [{"x": round(sx(s), 1), "label": str(s)} for s in x_ticks],
        "y_ticks": y_ticks,
        "left": left,
        "right": width - right,
        "bottom": height - bottom,
        "legend_x": width - right + 12,
        "axis_label_y": height - 6,
        "points": len(points_all),
        "legend_chars": max(8, (legend_width - 60) // 5),
    }


def job_loss_chart(metrics: list[tuple[int, float | None, float | None]], name: str = "") -> dict:
    prefix = f"{name} · " if name else ""
    return loss_chart(
        [
            {
                "name": f"{prefix}train loss",
                "points": [(s, loss) for s, loss, _ in metrics],
                "color": 0,
            },
            {
                "name": f"{prefix}eval loss",
                "points": [(s, ev) for s, _, ev in metrics],
                "color": 1,
                "dashed": True,
            },
        ]
    )


def rl_job_chart(metrics: list[tuple[int, float | None, float | None, float | None]]) -> dict:
    """One GRPO job: mean reward, pass rate and the reward's std within groups by step."""
    return loss_chart(
        [
            {"name": "reward", "points": [(s, r) for s, r, _, _ in metrics], "color": 0},
            {"name": "pass rate", "points": [(s, p) for s, _, p, _ in metrics], "color": 1},
            {
                "name": "std in groups",
                "points": [(s, g) for s, _, _, g in metrics],
                "color": 2,
                "dashed": True,
            },
        ],
        within=(0.0, 1.0),
    )


def rl_compare_chart(jobs: list, series: dict[int, list[dict]], field: str) -> dict:
    """One line per GRPO job of ``field`` (reward, pass_rate…) by step, named by the job's
    configuration (``TrainingJob.rl_label``)."""
    return loss_chart(
        [
            {
                "name": job.rl_label(),
                "points": [(p["step"], p[field]) for p in series[job.pk]],
                "color": i,
            }
            for i, job in enumerate(jobs)
        ],
        width=800,
        legend_width=290,  # "#12 passed/dr_grpo G16 T0.7 turn (gamma)0.95" and its value fit
        within=(0.0, 1.0),  # rewards and pass rates are scores in [0, 1]
    )
