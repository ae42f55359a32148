"""The verl adapter against verl's own classes and loaders (verl 0.7, installed with
``--no-deps`` plus what its import needs: see pyproject's ``verl`` extra): the tool config
``verl_tool_config`` writes and the interaction config load through verl's registries, and a
trajectory driven as verl's ``ToolAgentLoop`` drives one (``start_interaction``, tool
``create``/``execute``/``release`` with the loop's ``agent_data``, ``generate_response`` after
each message without tool calls) is scored by ``compute_score`` as the engine scores it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("verl.interactions.base", reason="the verl extra is not installed")

from verl.interactions.base import BaseInteraction
from verl.interactions.utils.interaction_registry import (
    initialize_interactions_from_config,
)
from verl.tools.base_tool import BaseTool
from verl.tools.utils.tool_registry import initialize_tools_from_config

from coworkenv_engine import verl_adapter
from coworkenv_engine.server import create_app
from coworkenv_engine.spec import load_spec
from tests.asyncio_thread import run_coroutine

from .helpers import SAMPLES, load_json
from .serving import running

SPECS = [load_spec(load_json(p)) for p in SAMPLES]
SPEC, OTHER = SPECS[0], SPECS[1]
TASK = SPEC.tasks[0]


@dataclass
class AgentData:
    """What verl's ToolAgentLoop hands a tool as ``agent_data`` and reads back after the
    rollout (``extra_fields`` becomes the batch's columns, ``reward_scores`` among them)."""

    request_id: str
    extra_fields: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    root = tmp_path_factory.mktemp("verl")
    tools_path = root / "tools.json"
    tools_path.write_text(json.dumps(verl_adapter.verl_tool_config(SPECS)))
    interaction_path = root / "interaction.json"
    interaction = {
        "name": "coworkenv",
        "class_name": "coworkenv_engine.verl_adapter.CoworkEnvInteraction",
        "config": {"specs": [str(p) for p in SAMPLES], "faults": False},
    }
    interaction_path.write_text(json.dumps({"interaction": [interaction]}))
    tools = {tool.name: tool for tool in initialize_tools_from_config(str(tools_path))}
    return tools, initialize_interactions_from_config(str(interaction_path))


async def call(tool: BaseTool, arguments: dict, agent_data: AgentData):
    instance_id, _ = await tool.create(create_kwargs={})
    try:
        return await tool.execute(instance_id, arguments, agent_data=agent_data)
    finally:
        await tool.release(instance_id)


def start(interaction: BaseInteraction, request_id: str, spec=SPEC, task=TASK) -> None:
    kwargs = {"name": "coworkenv", "environment": spec.name, "task_key": task.key, "seed": 0}
    run_coroutine(interaction.start_interaction(request_id, **kwargs))


def test_the_configs_load_into_verls_own_classes(loaded):
    tools, interactions = loaded
    names = {t.name for spec in SPECS for t in spec.tools}
    assert set(tools) == names
    assert all(isinstance(tool, verl_adapter.CoworkEnvTool) for tool in tools.values())
    assert isinstance(interactions["coworkenv"], BaseInteraction)


def test_the_reference_solution_scores_one(loaded):
    tools, interactions = loaded
    interaction, agent_data = interactions["coworkenv"], AgentData("oracle-1")
    start(interaction, agent_data.request_id)
    messages: list[dict] = []

    async def play():
        turn_rewards = []
        for turn in range(len(TASK.turns)):
            step = TASK.step_for_turn(turn)
            for ref in step.calls if step else ():
                response, _, metrics = await call(tools[ref.tool], ref.arguments, agent_data)
                assert metrics == {"ok": True}, response.text
            reply = step.reply if step and step.reply else "Done."
            messages.append({"role": "assistant", "content": reply})
            done, user, reward, _ = await interaction.generate_response(
                agent_data.request_id, messages
            )
            turn_rewards.append(reward)
            messages.append({"role": "user", "content": user})
        return done, turn_rewards

    done, turn_rewards = run_coroutine(play())
    assert done is True
    assert sum(turn_rewards) == pytest.approx(1.0)
    scores = agent_data.extra_fields["reward_scores"]
    extra = {"environment": SPEC.name, "task_key": TASK.key, "rollout_reward_scores": scores}
    assert verl_adapter.compute_score("coworkenv", "", TASK.key, extra) == {
        "score": 1.0,
        "passed": True,
    }
    assert agent_data.request_id not in verl_adapter.EPISODES


def test_a_trajectory_without_tool_calls_is_graded_from_its_text(loaded, monkeypatch):
    _, interactions = loaded
    interaction = interactions["coworkenv"]
    start(interaction, "idle-1")

    async def idle():
        for _ in TASK.turns:
            done, _, _, final = await interaction.generate_response(
                "idle-1", [{"role": "assistant", "content": "OK."}]
            )
        return done, final

    done, final = run_coroutine(idle())
    assert done is True and final["coworkenv"] < 0.75 and final["passed"] is False
    monkeypatch.setenv("COWORKENV_SPECS", str(SAMPLES[0]))
    extra = {"environment": SPEC.name, "task_key": TASK.key, "seed": 0, "rollout_reward_scores": {}}
    assert verl_adapter.compute_score("coworkenv", "OK.", TASK.key, extra) == {
        "score": final["coworkenv"],
        "passed": False,
    }


def test_another_environments_tool_is_a_tool_error(loaded):
    tools, interactions = loaded
    foreign = sorted({t.name for t in OTHER.tools} - {t.name for t in SPEC.tools})[0]
    agent_data = AgentData("foreign-1")
    start(interactions["coworkenv"], agent_data.request_id)
    response, reward, _ = run_coroutine(call(tools[foreign], {}, agent_data))
    assert response.text == f"Error: no tool {foreign!r} here."
    assert reward == 0.0
    state = verl_adapter.EPISODES[agent_data.request_id].session.session.state()
    assert state["step_count"] == 0


def test_bad_input_is_refused_clearly(loaded, monkeypatch):
    _, interactions = loaded
    with pytest.raises(ValueError, match="no environment named 'nope'"):
        start(interactions["coworkenv"], "bad-1", spec=type("S", (), {"name": "nope"}), task=TASK)
    assert "bad-1" not in verl_adapter.EPISODES
    with pytest.raises(ValueError, match="not a CoworkEnv row"):
        verl_adapter.compute_score("gsm8k", "42", "42", {})
    monkeypatch.delenv("COWORKENV_SPECS", raising=False)
    with pytest.raises(ValueError, match="set COWORKENV_SPECS"):
        verl_adapter.compute_score("coworkenv", "", TASK.key, {"environment": SPEC.name})


def test_verl_schema_gives_every_property_a_type():
    tool = {
        "type": "function",
        "function": {
            "name": "t",
            "parameters": {
                "type": "object",
                "properties": {
                    "status": {"enum": ["open", "closed"], "description": "d"},
                    "count": {"enum": [1, 2]},
                    "note": {"type": ["null", "string"]},
                    "free": {},
                },
                "required": ["status"],
            },
        },
    }
    assert verl_adapter.verl_schema(tool)["function"] == {
        "name": "t",
        "description": "",
        "parameters": {
            "type": "object",
            "properties": {
                "status": {"type": "string", "description": "d", "enum": ["open", "closed"]},
                "count": {"type": "integer", "enum": [1, 2]},
                "note": {"type": "string"},
                "free": {"type": "string"},
            },
            "required": ["status"],
        },
    }


def test_the_round_limit_ends_the_episode_and_the_score_still_reaches_verl(loaded):
    tools, interactions = loaded
    interaction, agent_data = interactions["coworkenv"], AgentData("spinner-1")
    start(interaction, agent_data.request_id)

    async def spin():
        for _ in range(40):  # Limits().max_rounds_per_turn
            await call(tools["list_events"], {}, agent_data)
        after = await call(tools["list_events"], {}, agent_data)
        end = await interaction.generate_response(agent_data.request_id, [])
        return after, end

    (after, _, _), (done, _, _, scores) = run_coroutine(spin())
    assert after.text == "Error: no episode is running."
    assert done is True and scores == agent_data.extra_fields["reward_scores"]
    assert scores["coworkenv"] < 0.75
    assert agent_data.request_id not in verl_adapter.EPISODES


def test_the_interaction_can_run_episodes_on_an_environment_server(loaded, monkeypatch):
    """``config.server``: the episode is an HTTP episode on a real server on loopback (the
    token read from the variable ``token_env`` names); the same tools and reward function."""
    tools, _ = loaded
    monkeypatch.setenv("COWORKENV_TOKEN", "verl-token")
    app = create_app(SPECS, token="verl-token")
    agent_data = AgentData("remote-1")

    async def play(url):
        interaction = verl_adapter.CoworkEnvInteraction(
            {"name": "coworkenv", "server": url, "token_env": "COWORKENV_TOKEN", "faults": False}
        )
        kwargs = {"environment": SPEC.name, "task_key": TASK.key, "seed": 0}
        await interaction.start_interaction(agent_data.request_id, **kwargs)
        for turn in range(len(TASK.turns)):
            step = TASK.step_for_turn(turn)
            for ref in step.calls if step else ():
                _, _, metrics = await call(tools[ref.tool], ref.arguments, agent_data)
                assert metrics == {"ok": True}
            reply = step.reply if step and step.reply else "Done."
            done, *_ = await interaction.generate_response(
                agent_data.request_id, [{"role": "assistant", "content": reply}]
            )
        return done

    with running(app) as url:
        assert run_coroutine(play(url)) is True
    assert app.state.store.slots == {}
    extra = {"rollout_reward_scores": agent_data.extra_fields["reward_scores"]}
    assert verl_adapter.compute_score("coworkenv", "", TASK.key, extra)["score"] == 1.0


def test_an_interaction_needs_specs_or_a_server():
    with pytest.raises(ValueError, match="give the interaction specs"):
        verl_adapter.CoworkEnvInteraction({"name": "coworkenv"})
