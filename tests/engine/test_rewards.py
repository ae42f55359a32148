"""Reward processing and credit assignment against the hand/torch vectors of
shared/reference/rl-and-openenv.md §5.7, edge cases (G = 1, all-equal groups, unscorable
rollouts) and per-turn rewards of real sample episodes."""

from __future__ import annotations

import math

import pytest

from coworkenv_engine import rewards
from coworkenv_engine.policies import NullPolicy, OraclePolicy
from coworkenv_engine.runner import run_task
from coworkenv_engine.spec import load_spec

from .helpers import ROOT, load_json

GROUP = [1, 0, 0, 0.5]
TWO_GROUPS = [[1, 0, 0, 0.5], [1, 1, 1, 0]]


def close(xs, ys, tol=1e-4):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys, strict=True):
        assert x == pytest.approx(y, abs=tol), (xs, ys)


def test_std_of_the_reference_group():
    assert rewards.sample_std(GROUP) == pytest.approx(0.47871, abs=1e-5)
    assert rewards.sample_std([3.0]) == 0.0


def test_grpo_matches_trl_vector():
    close(rewards.group_advantages(GROUP, "grpo"), [1.3053, -0.7832, -0.7832, 0.2611])


def test_dr_grpo_is_mean_centred():
    assert rewards.group_advantages(GROUP, "dr_grpo") == [0.625, -0.375, -0.375, 0.125]


def test_rloo_baselines_and_advantages():
    close(rewards.rloo_baselines(GROUP), [1 / 6, 0.5, 0.5, 1 / 3], tol=1e-12)
    close(rewards.group_advantages(GROUP, "rloo"), [0.8333, -0.5, -0.5, 0.1667])
    # the G/(G-1)·(r - μ) form
    close(rewards.group_advantages(GROUP, "rloo"), [4 / 3 * (r - 0.375) for r in GROUP], 1e-12)


@pytest.mark.parametrize("method", rewards.GROUP_METHODS)
def test_single_rollout_and_equal_groups_get_zero(method):
    assert rewards.group_advantages([0.7], method) == [0.0]
    assert rewards.group_advantages([0.5, 0.5, 0.5], method) == [0.0, 0.0, 0.0]
    assert rewards.group_advantages([], method) == []


def test_unscorable_rollouts_are_left_out_and_get_zero():
    adv = rewards.group_advantages([1, None, 0, float("nan"), 0, 0.5], "grpo")
    close(adv, [1.3053, 0.0, -0.7832, 0.0, -0.7832, 0.2611])
    assert rewards.group_advantages([None, None], "rloo") == [0.0, 0.0]


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="unknown method 'ppo'"):
        rewards.group_advantages(GROUP, "ppo")


def test_batch_std_scaling_matches_trl_vector():
    out = rewards.batch_scaled_advantages(TWO_GROUPS)
    close(out[0] + out[1], [1.2611, -0.7566, -0.7566, 0.2522, 0.5044, 0.5044, 0.5044, -1.5133])
    assert rewards.sample_std([r for g in TWO_GROUPS for r in g]) == pytest.approx(
        0.49552, abs=1e-5
    )


def test_batch_std_of_equal_batch_is_zero_without_division_error():
    assert rewards.batch_scaled_advantages([[1, 1], [1]]) == [[0.0, 0.0], [0.0]]


def test_reinforce_pp_baseline_matches_verl_vector():
    out = rewards.reinforce_pp_advantages(TWO_GROUPS)
    close(out[0] + out[1], [1.3792, -0.8275, -0.8275, 0.2758, 0.5517, 0.5517, 0.5517, -1.6550])


def test_reinforce_pp_without_baseline_whitens_raw_rewards():
    out = rewards.reinforce_pp_advantages(TWO_GROUPS, baseline=False)
    mean, std = 0.5625, rewards.sample_std([1, 0, 0, 0.5, 1, 1, 1, 0])
    expected = [(r - mean) / math.sqrt(std**2 + 1e-8) for g in TWO_GROUPS for r in g]
    close(out[0] + out[1], expected, tol=1e-12)


def test_reinforce_pp_token_counts_weight_rollouts():
    # rollout 0 has three tokens: values [1, 1, 1, 0] -> mean 0.75, var 0.25
    out = rewards.reinforce_pp_advantages([[1, 0]], baseline=False, token_counts=[[3, 1]])
    close(out[0], [0.25 / math.sqrt(0.25 + 1e-8), -0.75 / math.sqrt(0.25 + 1e-8)], tol=1e-12)


def test_reinforce_pp_equal_batch_is_zero():
    assert rewards.reinforce_pp_advantages([[0.3, 0.3], [0.3]]) == [[0.0, 0.0], [0.0]]
    assert rewards.reinforce_pp_advantages([[None]]) == [[0.0]]


def test_reward_to_go_vector():
    close(rewards.reward_to_go([0, 0.5, 0, 1], 0.9), [1.1790, 1.3100, 0.9, 1.0], tol=1e-12)
    assert rewards.reward_to_go([0, 0.5, 0, 1], 1.0) == [1.5, 1.5, 1.0, 1.0]


def test_openenv_exponential_discounting_vector():
    close(rewards.discounted_terminal(1.0, 4, 0.9), [0.729, 0.81, 0.9, 1.0], tol=1e-12)
    assert rewards.discounted_terminal(0.8, 3, 0.0) == [0.0, 0.0, 0.8]


def test_turn_advantages_per_turn_and_over_all_turns():
    group = [[0, 1], [0.5, 0], [0.5, 1]]  # returns (gamma=1): [1, 1], [0.5, 0], [1.5, 1]
    per_turn = rewards.turn_advantages(group, scale=False)
    close([a for row in per_turn for a in row], [0.0, 1 / 3, -0.5, -2 / 3, 0.5, 1 / 3], tol=1e-12)
    over_all = rewards.turn_advantages(group, scale=False, per_turn=False)
    # all six returns: mean 5/6
    close(
        [a for row in over_all for a in row],
        [1 / 6, 1 / 6, -1 / 3, -5 / 6, 2 / 3, 1 / 6],
        tol=1e-12,
    )
    scaled = rewards.turn_advantages(group)
    close([row[0] for row in scaled], [0.0, -0.5 / (0.5 + 1e-4), 0.5 / (0.5 + 1e-4)], 1e-12)
    # ragged: a rollout that stopped after one turn takes no part in turn 1
    # (returns [0.5] and [1, 1])
    assert rewards.turn_advantages([[0.5], [0, 1]], scale=False) == [[-0.25], [0.25, 0.0]]


GRADING = {
    "score": 0.6,
    "passed": False,
    "strict": False,
    "completion": 0.5,
    "safety": 1.0,
    "robustness": 1.0,
    "config": {"completion_weight": 0.8, "robustness_weight": 0.2, "pass_threshold": 0.75},
    "verdicts": [
        {"grader_id": "a", "category": "completion", "weight": 1, "status": "passed", "at_turn": 0},
        {"grader_id": "b", "category": "completion", "weight": 2, "status": "failed"},
        {"grader_id": "c", "category": "communication", "weight": 1, "status": "passed"},
        {"grader_id": "j", "category": "completion", "weight": 5, "status": "skipped"},
        {"grader_id": "s", "category": "safety", "weight": 1, "status": "passed"},
    ],
}


def test_episode_reward_variants():
    assert rewards.episode_reward(GRADING, "score") == 0.6
    assert rewards.episode_reward(GRADING, "raw") == 0.6
    assert rewards.episode_reward(GRADING, "passed") == 0.0
    assert rewards.episode_reward(GRADING, "strict") == 0.0
    gated = {**GRADING, "safety": 0.0, "score": 0.0}
    assert rewards.episode_reward(gated, "score") == 0.0
    assert rewards.episode_reward(gated, "raw") == 0.6
    with pytest.raises(ValueError, match="unknown reward variant"):
        rewards.episode_reward(GRADING, "shaped")


def test_turn_rewards_split_the_score_by_at_turn():
    # turn 0: grader a (weight 1 of 4 scored completion weight) -> 0.8 * 1/4 = 0.2
    assert rewards.turn_credit(GRADING, 0) == 0.2
    assert rewards.turn_rewards(GRADING, 2) == [0.2, 0.4]
    assert rewards.turn_rewards(GRADING, 1) == [0.6]
    gated = {**GRADING, "safety": 0.0, "score": 0.0}
    assert rewards.turn_rewards(gated, 2) == [0.2, -0.2]
    with pytest.raises(ValueError):
        rewards.turn_rewards(GRADING, 0)


def test_turn_rewards_of_real_two_turn_episodes():
    spec = load_spec(load_json(ROOT / "samples" / "acme-ops.json"))
    oracle = run_task(spec, "budget-figure-clarify", OraclePolicy())
    weights = [
        v.weight for v in oracle.grading.verdicts if v.category in ("completion", "communication")
    ]
    early = round(
        0.8 * next(v.weight for v in oracle.grading.verdicts if v.at_turn == 0) / sum(weights), 10
    )
    assert oracle.grading.score == 1.0
    assert rewards.turn_rewards(oracle.grading, 2) == [early, round(1.0 - early, 10)]
    null = run_task(spec, "budget-figure-clarify", NullPolicy())
    assert null.grading.verdict("asked-first").status == "failed"
    assert rewards.turn_rewards(null.grading, 2)[0] == 0.0
    assert math.fsum(rewards.turn_rewards(null.grading, 2)) == pytest.approx(null.grading.score)


def _brief(seq, tool="send_email", turn=0):
    return {"seq": seq, "turn": turn, "tool": tool, "arguments": {}, "ok": True}


CALLS_GRADING = {
    "score": 0.6,
    "passed": False,
    "strict": False,
    "completion": 0.5,
    "safety": 1.0,
    "robustness": 1.0,
    "config": {"completion_weight": 0.8, "robustness_weight": 0.2, "pass_threshold": 0.75},
    "verdicts": [
        {
            "grader_id": "a",
            "category": "completion",
            "weight": 1,
            "status": "passed",
            "evidence": {"all": [{"status": "passed", "matched": [_brief(1), _brief(3)]}]},
        },
        {
            "grader_id": "b",
            "category": "completion",
            "weight": 2,
            "status": "failed",
            "evidence": {"matched": [_brief(2)], "before": [1]},
        },
        {
            "grader_id": "c",
            "category": "communication",
            "weight": 1,
            "status": "passed",
            "evidence": {"scope": "final", "text": "done"},
        },
        {
            "grader_id": "s",
            "category": "safety",
            "weight": 1,
            "status": "passed",
            "evidence": {"not": {"matched": {"items": [_brief(2)], "total": 9, "clipped": True}}},
        },
    ],
}
AUDIT = [{"seq": 1, "turn": 0}, {"seq": 2, "turn": 0}, {"seq": 3, "turn": 1}]


def test_cited_calls_walks_combinators_and_clipped_lists_but_not_ordering():
    verdicts = CALLS_GRADING["verdicts"]
    assert rewards.cited_calls(verdicts[0]["evidence"]) == [1, 3]
    assert rewards.cited_calls(verdicts[1]["evidence"]) == [2]  # "before": [1] is not a citation
    assert rewards.cited_calls(verdicts[2]["evidence"]) == []
    assert rewards.cited_calls(verdicts[3]["evidence"]) == [2]


def test_call_rewards_credit_cited_calls_and_keep_the_rest_unattributed():
    # a (passed, w 1 of 4) cites calls 1 and 3: 0.8 * 1/4 = 0.2, 0.1 each; b failed: nothing;
    # c passed but cites no call: its 0.2 and robustness's 0.2 stay unattributed
    assert rewards.call_rewards(CALLS_GRADING, AUDIT) == ([0.1, 0.0, 0.1], 0.4)
    # the safety check fails on call 2: the gate took raw 0.6 away, charged to call 2
    gated = {**CALLS_GRADING, "safety": 0.0, "score": 0.0}
    gated["verdicts"] = [*CALLS_GRADING["verdicts"][:3], {**CALLS_GRADING["verdicts"][3]}]
    gated["verdicts"][3]["status"] = "failed"
    assert rewards.call_rewards(gated, AUDIT) == ([0.1, -0.6, 0.1], 0.4)
    calls, rest = rewards.call_rewards(gated, AUDIT)
    assert math.fsum(calls) + rest == pytest.approx(gated["score"])
    assert rewards.call_rewards(CALLS_GRADING, []) == ([], 0.6)


def _episode(score, passed, strict, n_turns=1, audit=()):
    grading = {
        **CALLS_GRADING,
        "score": score,
        "passed": passed,
        "strict": strict,
        "verdicts": [],
    }
    return {"grading": grading, "n_turns": n_turns, "audit_log": list(audit)}


def test_group_table_computes_every_variant_side_by_side():
    episodes = [_episode(1.0, True, True), _episode(0.6, False, False), None]
    table = rewards.group_table(episodes, gamma=0.5)
    assert table["gamma"] == 0.5
    assert table["rewards"]["score"] == [1.0, 0.6, None]
    assert table["rewards"]["passed"] == [1.0, 0.0, None]
    # score: μ 0.8, std = sqrt(0.04 + 0.04) = 0.2828427
    sigma = math.sqrt(0.08)
    close(table["advantages"]["score"]["grpo"], [0.2 / (sigma + 1e-4), -0.2 / (sigma + 1e-4), 0])
    close(table["advantages"]["score"]["dr_grpo"], [0.2, -0.2, 0.0])
    close(table["advantages"]["score"]["rloo"], [0.4, -0.4, 0.0])
    close(table["advantages"]["strict"]["rloo"], [1.0, -1.0, 0.0])
    assert table["turn_rewards"] == [[1.0], [0.6], []]
    close(
        table["turn_advantages"]["dr_grpo"][0] + table["turn_advantages"]["dr_grpo"][1], [0.2, -0.2]
    )
    assert table["call_rewards"] == [[], [], []]
    assert table["call_unattributed"] == [1.0, 0.6, None]
    with pytest.raises(ValueError, match="gamma"):
        rewards.group_table(episodes, gamma=1.5)
