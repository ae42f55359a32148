"""The TRL environment adapter: tool schemas through transformers' real schema generator,
TRL's discovery rule, and oracle / do-nothing rollouts against run_task."""

from __future__ import annotations

import inspect
import json

import pytest

from coworkenv_engine.policies import OraclePolicy
from coworkenv_engine.runner import run_task
from coworkenv_engine.spec import load_spec, parse_spec
from coworkenv_engine.trl_env import (
    OVER,
    coworkenv_reward,
    environment_class,
    task_rows,
)

from .helpers import SAMPLES, load_json

transformers_utils = pytest.importorskip("transformers.utils")

SPECS = [load_spec(load_json(p)) for p in SAMPLES]
CASES = [(s, t.key) for s in SPECS for t in s.tasks]


def discovered(env) -> dict:
    """TRL's rule: functions on the class, not reset/get_reward, not starting with '_'."""
    return {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_tools_render_the_spec_schemas(spec):
    env = environment_class(spec)()
    tools = discovered(env)
    assert set(tools) == {t.name for t in spec.tools} | {"reply_to_user"}
    for tool in spec.openai_tools():
        fn = tool["function"]
        rendered = transformers_utils.get_json_schema(tools[fn["name"]])["function"]
        assert rendered["name"] == fn["name"]
        assert set(rendered["parameters"]["properties"]) == set(fn["parameters"]["properties"])
        assert sorted(rendered["parameters"].get("required", [])) == sorted(
            fn["parameters"].get("required", [])
        )
        for p, schema in fn["parameters"]["properties"].items():
            got = rendered["parameters"]["properties"][p]
            assert got["type"] == schema.get("type", "string"), (fn["name"], p)
            assert got.get("enum") == schema.get("enum"), (fn["name"], p)
    reply = transformers_utils.get_json_schema(tools["reply_to_user"])["function"]
    assert reply["parameters"]["required"] == ["message"]


@pytest.mark.parametrize(("spec", "task_key"), CASES, ids=lambda c: getattr(c, "name", c))
def test_oracle_rollout_gets_the_engine_score(spec, task_key):
    env = environment_class(spec, faults=False)()
    task = spec.task(task_key)
    prompt = env.reset(task_key=task_key, seed=0, prompt=[{"role": "user", "content": ""}])
    assert prompt == f"{task.system_prompt()}\n\n{task.turns[0].message}"
    tools = discovered(env)
    final_reply = ""
    for i, step in enumerate(task.reference_solution):
        for call in step.calls:
            result = tools[call.tool](**call.arguments)
            assert '"error"' not in result[:20], result
        if i < len(task.turns) - 1:
            nxt = tools["reply_to_user"](step.reply or "Done.")
            assert task.turns[i + 1].message in nxt
        else:
            final_reply = step.reply or "Done."
    completion = [{"role": "assistant", "content": final_reply}]
    expected = run_task(spec, task_key, OraclePolicy(), faults=False)
    assert coworkenv_reward([completion], [env]) == [expected.grading.score] == [1.0]
    assert env.grading == expected.grading.to_dict()
    assert sum(env.turn_rewards) == pytest.approx(1.0)
    assert tools["reply_to_user"]("more?") == OVER
    # the pooled instance is reused: reset starts afresh
    env.reset(task_key=task_key, seed=0)
    assert env.grading is None and env._session.episode.audit_log == []


@pytest.mark.parametrize(("spec", "task_key"), CASES, ids=lambda c: getattr(c, "name", c))
def test_do_nothing_rollout_stays_below_the_threshold(spec, task_key):
    env = environment_class(spec)()
    env.reset(task_key=task_key, seed=0)
    [score] = coworkenv_reward(["Done."], [env])
    assert score < env.grading["config"]["pass_threshold"]
    assert len(env.turn_rewards) == len(spec.task(task_key).turns)


def test_other_environments_get_none_and_rows_name_tasks():
    spec = SPECS[0]
    assert coworkenv_reward(["x"], [object()]) == [None]
    rows = task_rows(spec, split="train", seeds=(0, 1))
    assert [(r["task_key"], r["seed"]) for r in rows] == [
        (t.key, s) for t in spec.tasks if t.split == "train" for s in (0, 1)
    ]


def test_reserved_tool_names_are_refused():
    doc = load_json(SAMPLES[0])
    doc["tools"][0]["name"] = "reset"
    with pytest.raises(ValueError, match="tool name 'reset' clashes"):
        environment_class(parse_spec(doc))


def test_a_view_tool_returns_trls_multimodal_content_blocks():
    """TRL's tool loop (trl 1.x ``GRPOTrainer._tool_call_loop``) keeps a tool's list result
    as the tool message content and hands its ``{"type": "image", "image": ...}`` blocks to
    the VLM processor: a view tool answers with the record text and the image (PIL)."""
    from PIL import Image

    from .test_attachments import FILES, PNG_SHA, image_spec

    env = environment_class(image_spec(), faults=False, attachments=FILES.get)()
    env.reset(task_key="file-rc-1")
    text, image = env.view_receipt(receipt_id="rc-1")
    assert text["type"] == "text"
    assert json.loads(text["text"])["image"] == f"sha256:{PNG_SHA}"
    assert image["type"] == "image"
    assert isinstance(image["image"], Image.Image)
    assert (image["image"].size, image["image"].getpixel((0, 0))) == ((2, 2), (255, 0, 0))
    # a tool without images still returns plain text
    assert isinstance(env.file_claim(receipt_id="rc-1", amount=12.5), str)
    bare = environment_class(image_spec(), faults=False)()
    bare.reset(task_key="file-rc-1")
    assert bare.view_receipt(receipt_id="rc-1")[1] == {
        "type": "text",
        "text": "[image rc-1.png is not available]",
    }
