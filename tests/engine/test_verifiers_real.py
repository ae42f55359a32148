"""The verifiers binding with the real package (verifiers 0.4, ``verifiers.v1``): the taskset
loads real ``Task``/``TaskData`` objects, and ``CoworkEnvEnv.run`` drives a scripted player
through the real ``Segment``/``AssistantMessage`` types and records on a real ``Trace``.

verifiers 0.4.0 pins ``openai<3`` and ``mcp==2.0.0``; the app's venv has openai 3.x and
mcp 2.3 (openenv-core's fastmcp), so it is not installed there and this module skips there;
``test_verifiers_venv.py`` runs it in the suite, in a cached venv of its own. By hand (no
Django needed):

    python -m venv /tmp/vf && /tmp/vf/bin/pip install verifiers jsonschema jmespath \\
        google-re2 pytest
    /tmp/vf/bin/python -m pytest --noconftest -p no:cacheprovider -o addopts="" \\
        tests/engine/test_verifiers_real.py
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

vf = pytest.importorskip(
    "verifiers.v1",
    reason="verifiers is not installed in this venv: verifiers 0.4.0 pins openai<3 and "
    "mcp==2.0.0, which would downgrade the app's openai 3.x and openenv-core's mcp; "
    "test_verifiers_venv.py runs this module in a venv of its own",
)

from verifiers.v1.trace import AgentInfo, TraceTask  # noqa: E402
from verifiers.v1.types import AssistantMessage  # noqa: E402

from coworkenv_engine.session import EpisodeSession  # noqa: E402
from coworkenv_engine.spec import load_spec  # noqa: E402
from coworkenv_engine.verifiers_env import REWARD_NAME, verifiers_classes  # noqa: E402

from .helpers import SAMPLES, load_json  # noqa: E402
from .verifiers_scripts import policy_actions  # noqa: E402

CLASSES = verifiers_classes()


def taskset(**config):
    cfg = CLASSES["CoworkEnvTasksetConfig"](specs=[str(p) for p in SAMPLES], **config)
    return CLASSES["CoworkEnvTaskset"](cfg)


def test_taskset_loads_one_task_per_task_and_seed():
    specs = [load_spec(load_json(p)) for p in SAMPLES]
    tasks = list(taskset(split="train", seeds=[0, 5]))
    expected = [
        (s.name, t.key, seed)
        for s in specs
        for t in s.tasks
        if t.split == "train"
        for seed in (0, 5)
    ]
    assert [(t.data.environment, t.data.task_key, t.data.seed) for t in tasks] == expected
    assert [t.data.idx for t in tasks] == list(range(len(expected)))
    assert all(isinstance(t, vf.Task) and isinstance(t.data, vf.TaskData) for t in tasks)
    assert len({t.key for t in tasks}) == len(tasks)
    first = tasks[0]
    assert first.key == f"{expected[0][0]}/{expected[0][1]}/0"
    assert first.data.prompt is None
    assert first.data.system_prompt == specs[0].task(expected[0][1]).system_prompt()
    # the wire form round-trips through verifiers' own pydantic model
    wire = first.data.model_dump(mode="json")
    assert CLASSES["CoworkEnvData"].model_validate(wire) == first.data


class ScriptedPlayer:
    """The model side: answers each user turn with the next scripted text."""

    def __init__(self, replies: list[str]):
        self.replies = list(replies)
        self.seen: list[str] = []

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        player = self

        class Interaction:
            trace = vf.Trace(
                task=TraceTask(type=type(task).__name__, data=task.data, key=task.key),
                agent=AgentInfo(config=vf.AgentConfig()),
            )

            async def turn(self, message):
                player.seen.append(message)
                if not player.replies:
                    return vf.Segment(messages=[], terminated=True)
                text = player.replies.pop(0)
                return vf.Segment(messages=[AssistantMessage(content=text)])

        yield Interaction()
        player.trace = Interaction.trace


class Agents:
    def __init__(self, player):
        self.player = player


def run(task, replies):
    import asyncio

    env = object.__new__(CLASSES["CoworkEnvEnv"])  # run() needs no loaded harness
    player = ScriptedPlayer(replies)
    asyncio.run(env.run(task, Agents(player)))
    return player


@pytest.mark.parametrize("index", range(3))
def test_env_run_oracle_gets_reward_one(index):
    task = list(taskset(split="train"))[index]
    spec = load_spec(load_json(Path(task.data.spec_path)))
    actions, final = policy_actions(spec, task.data.task_key, "oracle", seed=task.data.seed)
    player = run(task, [json.dumps(a) for a in actions])
    trace = player.trace
    assert trace.rewards[REWARD_NAME].score == final["reward"] == 1.0
    assert trace.metrics["passed"] == trace.metrics["strict"] == 1.0
    assert trace.metrics["turn_reward_0"] == final["turn_rewards"][0]
    opening = json.loads(player.seen[0])
    first = EpisodeSession(spec, task.data.task_key, task.data.seed).start()
    assert opening["user_message"] == first["user_message"]
    assert opening["tools"] == first["tools"]
    assert len(player.seen) == len(actions)  # one user turn per action; the last ends it


def test_env_run_do_nothing_and_a_player_that_stops():
    task = next(iter(taskset(split="train")))
    player = run(task, ["Done."] * 10)
    assert player.trace.rewards[REWARD_NAME].score < 0.75
    assert player.trace.metrics["passed"] == 0.0
    stopped = run(task, [])  # terminated before answering: graded as it stands
    assert stopped.trace.rewards[REWARD_NAME].score < 0.75


def test_taskset_from_the_apps_verifiers_export(tmp_path):
    """Rows shaped like the datasets app's ``verifiers`` export (``info`` names environment,
    task and seed) become the tasks, in order."""
    specs = [load_spec(load_json(p)) for p in SAMPLES]
    picked = [(specs[1], specs[1].tasks[0].key, 9), (specs[0], specs[0].tasks[1].key, 2)]
    rows = tmp_path / "verifiers-train.jsonl"
    rows.write_text(
        "".join(
            json.dumps(
                {
                    "prompt": [],
                    "answer": "",
                    "info": json.dumps({"environment": s.name, "task_key": k, "seed": seed}),
                    "task": "coworkenv",
                    "example_id": i,
                }
            )
            + "\n"
            for i, (s, k, seed) in enumerate(picked)
        )
    )
    tasks = list(taskset(rows=str(rows)))
    assert [(t.data.environment, t.data.task_key, t.data.seed) for t in tasks] == [
        (s.name, k, seed) for s, k, seed in picked
    ]
    missing = CLASSES["CoworkEnvTasksetConfig"](specs=[str(SAMPLES[0])], rows=str(rows))
    with pytest.raises(ValueError, match="no spec in `specs` is named"):
        list(CLASSES["CoworkEnvTaskset"](missing))


def test_a_view_tools_image_reaches_the_player_as_verifiers_image_content(tmp_path):
    """With ``attachments`` (a folder of the spec's files), the tool results of a view tool
    come to the player as one user message that verifiers' own parser (what ``turn`` applies
    to wire dicts) types as text + ``ImageUrlContentPart`` with the image's data: URL."""
    from verifiers.v1.dialects import parse_message
    from verifiers.v1.types import ImageUrlContentPart, TextContentPart, UserMessage

    from coworkenv_engine.attachments import data_url

    from .test_attachments import PNG, image_spec

    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "receipt.png").write_bytes(PNG)
    spec_path = tmp_path / "receipts.json"
    spec_path.write_text(json.dumps(image_spec()))
    config = CLASSES["CoworkEnvTasksetConfig"](
        specs=[str(spec_path)], attachments=str(tmp_path / "files"), faults=False
    )
    task = next(t for t in CLASSES["CoworkEnvTaskset"](config) if t.data.task_key == "file-rc-1")
    view = {"tool_calls": [{"name": "view_receipt", "arguments": {"receipt_id": "rc-1"}}]}
    player = run(task, [json.dumps(view), "Done."])
    (message,) = player.seen[1]
    typed = parse_message(message)
    assert isinstance(typed, UserMessage)
    text, image = typed.content
    assert isinstance(text, TextContentPart) and isinstance(image, ImageUrlContentPart)
    assert image.image_url.url == data_url("image/png", PNG)
