"""The loss and RL charts' axes: from the data's range, and rates never drawn past [0, 1]."""

from apps.training.charts import loss_chart, rl_job_chart


def _labels(chart) -> list[float]:
    return [float(t["label"]) for t in chart["y_ticks"]]


def test_a_flat_pass_rate_of_zero_keeps_its_axis_at_or_above_zero():
    chart = rl_job_chart([(1, 0.0, 0.0, 0.0), (2, 0.0, 0.0, 0.0)])
    assert min(_labels(chart)) == 0.0  # not -0.525, as the padding used to draw
    assert max(_labels(chart)) <= 1.0


def test_rates_near_one_stop_at_one_and_a_loss_keeps_its_padding():
    high = rl_job_chart([(1, 0.9, 1.0, 0.1), (2, 1.0, 1.0, 0.0)])
    assert max(_labels(high)) == 1.0
    loss = loss_chart([{"name": "train loss", "points": [(1, 2.0), (2, 1.0)]}])
    assert _labels(loss)[0] == 0.95 and _labels(loss)[-1] == 2.05  # 5% padding each side


def test_values_outside_the_range_are_shown_as_they_are():
    chart = loss_chart([{"name": "advantage", "points": [(1, -0.5), (2, 0.5)]}], within=(0, 1))
    assert min(_labels(chart)) < -0.5  # the data crosses 0: the bound does not apply there
    assert max(_labels(chart)) == 0.55  # within 1: padded as usual
