"""The results table's arithmetic on hand-made outcomes (expected numbers worked by hand)."""

import pytest

from apps.experiments.results import (
    ALL,
    OUT_OF_DISTRIBUTION,
    Outcome,
    arm_stats,
    latest_arm,
    paired_bootstrap,
    per_task,
    results_table,
    round_comparison,
    table_csv,
    table_markdown,
    table_summary,
    weaknesses,
)


def _o(
    run_id, task, score, *, passed=None, strict=False, caps=("clarify",), horizon="short", ood=False
):
    return Outcome(
        run_id=run_id,
        task=task,
        score=score,
        passed=score >= 0.75 if passed is None else passed,
        strict=strict,
        capabilities=caps,
        horizon=horizon,
        out_of_distribution=ood,
    )


def test_the_bootstrap_of_equal_differences_has_no_width():
    difference = paired_bootstrap({1: 0.2, 2: 0.4}, {1: 0.5, 2: 0.7}, seed=3)
    assert difference.n == 2
    assert difference.mean == pytest.approx(0.3)
    assert (difference.low, difference.high) == (pytest.approx(0.3), pytest.approx(0.3))
    assert difference.verdict == "improved"


def test_the_bootstrap_spans_the_resampled_means_and_pairs_by_task():
    # differences 0 and 1: a resample's mean is 0, 0.5 or 1 (a quarter, a half, a quarter),
    # so the 2.5% and 97.5% percentiles are 0 and 1; task 3 has no pair and is left out.
    difference = paired_bootstrap({1: 0.5, 2: 0.0, 3: 0.9}, {1: 0.5, 2: 1.0}, seed=0)
    assert (difference.n, difference.mean) == (2, 0.5)
    assert (difference.low, difference.high) == (0.0, 1.0)
    assert difference.verdict == "unchanged"
    assert paired_bootstrap({1: 0.5}, {2: 0.5}) is None
    # seeded: the same inputs give the same interval
    again = paired_bootstrap({1: 0.5, 2: 0.0, 3: 0.9}, {1: 0.5, 2: 1.0}, seed=0)
    assert again == difference


def test_arm_stats_by_hand():
    outcomes = [
        _o(1, 10, 1.0, strict=True),
        _o(2, 10, 0.5),
        _o(3, 20, 0.0),
        _o(4, 20, 0.0),
        _o(5, 30, 1.0),  # one trial: not counted in pass@2 / pass^2
    ]
    stats = arm_stats(outcomes, k=2)
    assert (stats["tasks"], stats["runs"]) == (3, 5)
    assert stats["mean_score"] == pytest.approx(2.5 / 5)
    assert stats["pass_rate"] == pytest.approx(2 / 5)
    assert stats["strict_rate"] == pytest.approx(1 / 5)
    # task 10: n=2, c=1 -> pass@2 = 1, pass^2 = (1/2)^2; task 20: n=2, c=0 -> 0 and 0
    assert stats["pass_at_k"] == pytest.approx(0.5)
    assert stats["pass_hat_k"] == pytest.approx(0.125)
    assert stats["run_ids"] == [1, 2, 3, 4, 5]
    assert per_task(outcomes, lambda o: o.score) == {10: 0.75, 20: 0.0, 30: 1.0}


@pytest.fixture
def table():
    base = [
        _o(1, 1, 0.0, caps=("clarify",)),
        _o(2, 2, 0.5, caps=("clarify", "notice"), horizon="long"),
        _o(3, 9, 0.2, caps=("notice",), ood=True),
    ]
    sft = [
        _o(11, 1, 1.0, caps=("clarify",)),
        _o(12, 2, 1.0, caps=("clarify", "notice"), horizon="long"),
        _o(13, 9, 0.2, caps=("notice",), ood=True),
    ]
    return results_table({"base": base, "sft": sft}, k=1, seed=0)


def test_rows_group_by_capability_horizon_and_the_held_out_family(table):
    groups = [row["group"] for row in table["rows"]]
    assert groups == [
        ALL,
        "capability:clarify",
        "capability:notice",
        "horizon:long",
        "horizon:short",
        OUT_OF_DISTRIBUTION,
    ]
    assert table["arms"] == ["base", "sft"]
    everything = table["rows"][0]
    assert everything["arms"]["base"]["run_ids"] == [1, 2]  # the family's run is not in it
    assert everything["arms"]["sft"]["mean_score"] == 1.0
    score = everything["deltas"]["sft"]["score"]
    # differences 1.0 and 0.5: resampled means 1.0, 0.75, 0.5
    assert (score.n, score.mean, score.low, score.high) == (2, 0.75, 0.5, 1.0)
    passes = everything["deltas"]["sft"]["pass_rate"]
    assert (passes.mean, passes.low, passes.high) == (1.0, 1.0, 1.0)
    family = table["rows"][-1]
    assert family["deltas"]["sft"]["score"].mean == 0.0
    assert "base" not in family["deltas"]


def test_csv_and_markdown_carry_the_same_figures(table):
    csv_text = table_csv(table)
    lines = csv_text.splitlines()
    assert lines[0].startswith("group,arm,tasks,runs,mean_score,pass_rate,strict_rate,pass_at_1")
    assert lines[1] == "all,base,2,2,0.250,0.000,0.000,0.000,0.000,,,,,,"
    assert (
        lines[2] == "all,sft,2,2,1.000,1.000,0.000,1.000,1.000,0.750,0.500,1.000,1.000,1.000,1.000"
    )
    assert len(lines) == 1 + 6 * 2
    markdown = table_markdown(table).splitlines()
    assert markdown[0] == (
        "| Group | Arm | n | Score | Pass | Strict | pass@1 | pass^1 "
        "| Δ score [95% CI] | Δ pass [95% CI] |"
    )
    assert markdown[3] == (
        "| all | sft | 2 | 1.000 | 1.000 | 0.000 | 1.000 | 1.000 "
        "| 0.750 [0.500, 1.000] | 1.000 [1.000, 1.000] |"
    )


def test_the_summary_says_what_improved_and_what_did_not(table):
    assert table_summary(table) == (
        # one task each for notice, long and short: a single difference has no spread
        "After SFT, the mean score improved on the held-out tasks, capability clarify, "
        "capability notice, horizon long, horizon short; did not change measurably on the "
        "held-out family."
    )
    assert table_summary(results_table({"base": []}, k=1)) == "No arm to compare with the base yet."


def test_weaknesses_rank_the_latest_arm_by_pass_hat_k_and_rounds_compare():
    base = [_o(1, 1, 0.0, caps=("clarify",)), _o(2, 2, 1.0, caps=("notice",))]
    sft = [
        _o(3, 1, 0.0, caps=("clarify",)),
        _o(4, 2, 1.0, caps=("notice",)),
        _o(5, 3, 0.0, caps=("approve",)),
    ]
    first = results_table({"base": base, "sft": sft}, k=1)
    assert latest_arm(first) == "sft"
    assert weaknesses(first) == [("approve", 0.0), ("clarify", 0.0), ("notice", 1.0)]
    second = results_table({"base": base, "sft": [_o(6, 1, 1.0, caps=("clarify",))]}, k=1)
    assert round_comparison(first, second, ["approve", "clarify"]) == [
        {"capability": "approve", "before": 0.0, "after": None, "improved": None},
        {"capability": "clarify", "before": 0.0, "after": 1.0, "improved": True},
    ]
