"""The verifiers adapter's engine side (``TextEpisode``), which needs no verifiers: oracle
actions sent as JSON text get the engine's score (1.0, strict), plain-text do-nothing replies
stay below the pass threshold, bad actions get error turns and end the episode when they
persist. The binding to the real package is tested in ``test_verifiers_real.py``."""

from __future__ import annotations

import json

import pytest

from coworkenv_engine.adversaries import policy_by_name
from coworkenv_engine.runner import run_task
from coworkenv_engine.session import EpisodeSession
from coworkenv_engine.spec import load_spec
from coworkenv_engine.verifiers_env import HOW_TO_ACT, TextEpisode, parse_reply

from .helpers import SAMPLES, load_json
from .verifiers_scripts import policy_actions

SPECS = [load_spec(load_json(p)) for p in SAMPLES]
CASES = [(s, t.key) for s in SPECS for t in s.tasks]


@pytest.mark.parametrize(("spec", "task_key"), CASES, ids=[k for _, k in CASES])
def test_oracle_actions_as_text_get_the_engine_score(spec, task_key):
    actions, final = policy_actions(spec, task_key, "oracle", seed=1)
    expected = run_task(spec, task_key, policy_by_name("oracle"), seed=1)
    episode = TextEpisode(spec, task_key, 1)
    opening = json.loads(episode.opening())
    first = EpisodeSession(spec, task_key, 1).start()
    assert opening == {
        "user_message": first["user_message"],
        "tools": spec.openai_tools(),
        "how_to_act": HOW_TO_ACT,
    }
    assert spec.task(task_key).turns[0].message in opening["user_message"]
    assert episode.system_prompt == first["system_prompt"]
    turns = []
    for i, action in enumerate(actions):
        # fenced JSON for every other action: both spellings parse
        text = json.dumps(action)
        turns.append(episode.respond(f"```json\n{text}\n```" if i % 2 else text))
    assert turns[-1] is None and all(t is not None for t in turns[:-1])
    assert episode.done
    assert episode.reward == expected.grading.score == 1.0
    assert episode.grading == expected.grading.to_dict() == final["grading"]
    assert episode.turn_rewards == final["turn_rewards"]
    assert sum(episode.turn_rewards) == pytest.approx(1.0)
    metrics = episode.metrics()
    assert metrics["passed"] == metrics["strict"] == 1.0
    assert [metrics[f"turn_reward_{k}"] for k in range(len(episode.turn_rewards))] == (
        episode.turn_rewards
    )


@pytest.mark.parametrize(("spec", "task_key"), CASES, ids=[k for _, k in CASES])
def test_plain_text_do_nothing_stays_below_the_threshold(spec, task_key):
    episode = TextEpisode(spec, task_key, 0)
    episode.opening()
    turns = len(spec.task(task_key).turns)
    replies = [episode.respond("Done.") for _ in range(turns)]
    assert replies[-1] is None
    assert all(json.loads(r).keys() == {"user_message"} for r in replies[:-1])
    assert episode.reward < episode.grading["config"]["pass_threshold"]
    assert episode.grading["passed"] is False
    assert episode.respond("more?") is None  # over


def test_tool_results_and_bad_actions():
    spec = SPECS[0]
    task = spec.tasks[0]
    episode = TextEpisode(spec, task.key, 0, faults=False, max_invalid=2)
    episode.opening()
    tool = spec.openai_tools()[0]["function"]["name"]
    answer = json.loads(episode.respond(json.dumps({"tool_calls": [{"name": tool}]})))
    assert list(answer) == ["tool_results"]
    (result,) = answer["tool_results"]
    assert result["name"] == tool and result["tool_call_id"] == "call_1"
    bad = json.loads(episode.respond('{"tool_calls": "nope"}'))
    assert bad == {"error": "tool_calls must be a list (tool_calls)", "how_to_act": HOW_TO_ACT}
    assert episode.respond('{"speak": 1}') is None  # the second in a row ends it
    assert episode.done and episode.grading["passed"] is False
    assert episode.session.step_count == 1 + len(task.turns)  # the call, then empty replies


def test_finish_grades_an_abandoned_episode():
    spec = SPECS[0]
    task = spec.tasks[0]
    episode = TextEpisode(spec, task.key, 0)
    assert episode.finish() == episode.reward
    assert episode.grading["passed"] is False
    assert len(episode.turn_rewards) == len(task.turns)
    with pytest.raises(RuntimeError, match="opening"):
        TextEpisode(spec, task.key, 0).respond("hi")


def test_parse_reply():
    assert parse_reply('{"reply": "x"}') == {"reply": "x"}
    assert parse_reply('```\n{"reply": "x"}\n```') == {"reply": "x"}
    assert parse_reply("Sure, done.") == {"reply": "Sure, done."}
    assert parse_reply("{not json") == {"reply": "{not json"}
    assert parse_reply("[1, 2]") == {"reply": "[1, 2]"}


def test_a_view_tools_image_comes_back_as_a_user_message_with_image_parts():
    from coworkenv_engine.attachments import data_url

    from .test_attachments import FILES, PNG, PNG_SHA, image_spec

    action = json.dumps(
        {"tool_calls": [{"name": "view_receipt", "arguments": {"receipt_id": "rc-1"}}]}
    )
    episode = TextEpisode(image_spec(), "file-rc-1", faults=False, attachments=FILES.get)
    episode.opening()
    ((message),) = episode.respond(action)
    assert message["role"] == "user"
    text, image = message["content"]
    (result,) = json.loads(text["text"])["tool_results"]
    assert json.loads(result["content"])["image"] == f"sha256:{PNG_SHA}"
    assert image == {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}}
    # without the bytes: text only, saying so
    bare = TextEpisode(image_spec(), "file-rc-1", faults=False)
    bare.opening()
    reply = bare.respond(action)
    assert isinstance(reply, str)
    assert "[image rc-1.png is not available]" in json.loads(reply)["tool_results"][0]["content"]
