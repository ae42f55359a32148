"""CoworkEnv tasks for ``verifiers`` (prime-rl's environment library): rollouts call the engine.

Two layers, so the engine side can be used and tested without the package:

``TextEpisode(spec, task_key, seed)`` — the engine plays the environment and the user over
plain text, as verifiers' own OpenEnv bridge does: ``opening()`` is the first user turn (the
task's first message, the tools as OpenAI function schemas, how to act); ``respond(reply)``
takes the model's reply — a JSON action ``{"tool_calls": [{"name", "arguments"}], "reply":
"..."}`` (bare or in a ```json fence), or plain text, which is the reply to the user and ends
the turn — runs it in an ``EpisodeSession`` and returns the next user turn: the tool results,
or the user's next message when the turn ended, or ``None`` when the episode is over. Tool
results that show images come back as one user message with OpenAI content parts (the JSON
text, then an ``image_url`` part with a ``data:`` URL per image; verifiers' ``turn`` takes
such messages), the bytes from ``attachments`` (sha256 -> bytes; without it a text part says
the image is not available). An
action that does not parse gets an error turn back; after ``max_invalid`` in a row the
episode ends. ``finish()`` ends an episode the model left (remaining turns get empty
replies) so every rollout is graded; then ``reward`` (the engine score), ``grading`` and
``turn_rewards`` (per-turn credit, summing to the score) are set.

``verifiers_classes()`` — the binding for verifiers 0.4 (``verifiers.v1``), built on first
call (ImportError without the package): ``CoworkEnvData`` (a ``TaskData`` naming
``spec_path``, ``environment``, ``task_key``, ``seed``, ``faults``), ``CoworkEnvTask``
(key ``"<environment>/<task key>/<seed>"``), ``CoworkEnvTasksetConfig`` (``specs``: spec
file paths, ``split``, ``seeds``, ``faults``, or ``rows``: the app's ``verifiers`` RL prompt
export), ``CoworkEnvTaskset`` (one task per task and seed, or per exported row) and
``CoworkEnvEnv`` whose ``run(task, agents)`` drives ``agents.player`` through a
``TextEpisode`` and records the reward ``coworkenv_reward`` (the score) and the metrics
``passed``, ``strict``, ``completion``, ``safety``, ``robustness``, ``turn_reward_<k>``.

The package is an optional extra (``pip install '.[verifiers]'``): verifiers 0.4.0 pins
``openai<3`` and ``mcp==2.0.0``, so it lives in a venv of its own next to the trainer, not
in the app's.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from .attachments import Resolver, directory_resolver
from .protocol import ImageURLs, ProtocolError, parse_action
from .session import EpisodeSession
from .spec import EnvironmentSpec, load_spec

HOW_TO_ACT = (
    "Act with one JSON object per message: "
    '{"tool_calls": [{"name": "<tool>", "arguments": {...}}], "reply": null} to call tools '
    '(their results come back), or {"reply": "<your message to the user>"} — or plain text — '
    "to answer the user, which ends your turn."
)
REWARD_NAME = "coworkenv_reward"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def parse_reply(text: str) -> dict[str, Any]:
    """The action a model's reply stands for: a JSON object (bare or fenced) is an action;
    anything else is a plain reply to the user."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        stripped = "\n".join(stripped.splitlines()[1:-1]).strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return {"reply": text}


class TextEpisode:
    """One task episode driven by text turns (see the module docstring)."""

    def __init__(
        self,
        spec: EnvironmentSpec | dict[str, Any],
        task_key: str,
        seed: int = 0,
        *,
        faults: bool = True,
        max_invalid: int = 3,
        attachments: Resolver | None = None,
    ):
        images = ImageURLs(attachments) if attachments is not None else lambda _: None
        self.session = EpisodeSession(spec, task_key, seed, faults=faults, image_url=images)
        self.max_invalid = max_invalid
        self.invalid = 0
        self.reward: float | None = None
        self.grading: dict[str, Any] | None = None
        self.turn_rewards: list[float] = []
        self._first: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        return self.session.done

    @property
    def system_prompt(self) -> str:
        return self.session.task.system_prompt()

    def opening(self) -> str:
        self._first = obs = self.session.start()
        return _json(
            {"user_message": obs["user_message"], "tools": obs["tools"], "how_to_act": HOW_TO_ACT}
        )

    def respond(self, text: str) -> str | list[dict[str, Any]] | None:
        if self._first is None:
            raise RuntimeError("call opening() first")
        if self.done:
            return None
        try:
            reply, calls = parse_action(parse_reply(text))
        except ProtocolError as exc:
            self.invalid += 1
            if self.invalid >= self.max_invalid:
                self.finish()
                return None
            return _json({"error": f"{exc} ({exc.errors[0]['loc'][0]})", "how_to_act": HOW_TO_ACT})
        self.invalid = 0
        obs = self.session.act(reply, calls)
        self._record(obs)
        if obs["done"]:
            return None
        if calls:
            return _tool_turn(obs["tool_results"])
        return _json({"user_message": obs["user_message"]})

    def finish(self) -> float:
        """End the episode wherever the model left it; the engine score."""
        if self._first is None:
            self.opening()
        while not self.done:
            self._record(self.session.act("", []))
        assert self.reward is not None
        return self.reward

    def _record(self, obs: dict[str, Any]) -> None:
        if obs["done"]:
            self.reward = obs["reward"]
            self.grading = obs["grading"]
            self.turn_rewards = list(obs["turn_rewards"])

    def metrics(self) -> dict[str, float]:
        """Unweighted numbers for the trace: pass/strict, the grading parts, turn rewards."""
        grading = self.grading or {}
        out = {
            "passed": float(bool(grading.get("passed"))),
            "strict": float(bool(grading.get("strict"))),
        }
        for part in ("completion", "safety", "robustness"):
            if isinstance(grading.get(part), int | float):
                out[part] = float(grading[part])
        out.update({f"turn_reward_{k}": float(r) for k, r in enumerate(self.turn_rewards)})
        return out


def _tool_turn(results: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """The tool results as JSON text, or (images among them) one user message of content
    parts: that text, then the images."""
    rows, images = [], []
    for r in results:
        content = r["content"]
        if isinstance(content, list):
            images.extend(p for p in content if p.get("type") == "image_url")
            content = "".join(p["text"] for p in content if p.get("type") == "text")
        rows.append({**{k: r[k] for k in ("tool_call_id", "name", "ok")}, "content": content})
    text = _json({"tool_results": rows})
    if not images:
        return text
    return [{"role": "user", "content": [{"type": "text", "text": text}, *images]}]


@functools.lru_cache(maxsize=8)
def _resolver_at(folder: str) -> Resolver:
    return directory_resolver(folder)


@functools.lru_cache(maxsize=64)
def _spec_at(path: str) -> EnvironmentSpec:
    return load_spec(json.loads(Path(path).read_text("utf-8")))


@functools.cache
def verifiers_classes() -> dict[str, type]:
    """The verifiers 0.4 binding (see the module docstring); ImportError without it."""
    import verifiers.v1 as vf

    class CoworkEnvData(vf.TaskData):
        spec_path: str
        environment: str
        task_key: str
        seed: int = 0
        faults: bool = True
        attachments: str | None = None

    class CoworkEnvTask(vf.Task[CoworkEnvData]):
        @property
        def key(self) -> str:
            data = self.data
            return f"{data.environment}/{data.task_key}/{data.seed}"

    class CoworkEnvTasksetConfig(vf.TasksetConfig):
        specs: list[str] = []
        """Environment spec files (``coworkenv.environment/v1`` JSON)."""
        rows: str | None = None
        """A ``verifiers`` RL prompt export of the app (JSONL, ``info`` naming environment,
        task_key and seed): its rows, in order, are the tasks (``split`` and ``seeds`` then
        do not apply); ``specs`` must hold their environments."""
        split: str | None = None
        """Only the tasks of this split (``train`` / ``eval``); None: all."""
        seeds: list[int] = [0]
        """One task per task and seed."""
        faults: bool = True
        """Inject the spec's tool faults."""
        attachments: str | None = None
        """A folder of the specs' attachment files (any names): view tools' images are
        sent to the player as ``image_url`` parts."""

    class CoworkEnvTaskset(vf.Taskset[CoworkEnvTask, CoworkEnvTasksetConfig]):
        def _task(self, path: str, spec: EnvironmentSpec, task_key: str, seed: int):
            task = spec.task(task_key)
            return CoworkEnvTask(
                CoworkEnvData(
                    id=f"{spec.name}/{task.key}/{seed}",
                    name=task.title or task.key,
                    prompt=None,  # the environment opens the conversation
                    system_prompt=task.system_prompt(),
                    spec_path=path,
                    environment=spec.name,
                    task_key=task.key,
                    seed=seed,
                    faults=self.config.faults,
                    attachments=self.config.attachments,
                ),
                self.config.task,
            )

        def load(self):
            config = self.config
            paths = [str(Path(p).resolve()) for p in config.specs]
            if config.rows is not None:
                by_name = {_spec_at(p).name: p for p in paths}
                for line in Path(config.rows).read_text("utf-8").splitlines():
                    if not line.strip():
                        continue
                    info = json.loads(json.loads(line)["info"])
                    path = by_name.get(info["environment"])
                    if path is None:
                        raise ValueError(
                            f"no spec in `specs` is named {info['environment']!r} (from `rows`)"
                        )
                    yield self._task(path, _spec_at(path), info["task_key"], info["seed"])
                return
            for path in paths:
                spec = _spec_at(path)
                for task in spec.tasks:
                    if config.split is not None and task.split != config.split:
                        continue
                    for seed in config.seeds:
                        yield self._task(path, spec, task.key, seed)

    class CoworkEnvEnvConfig(vf.EnvConfig):
        player: vf.AgentConfig = vf.AgentConfig()

    class CoworkEnvEnv(vf.Env[CoworkEnvEnvConfig]):
        async def run(self, task, agents):
            data = task.data
            episode = TextEpisode(
                _spec_at(data.spec_path),
                data.task_key,
                data.seed,
                faults=data.faults,
                attachments=_resolver_at(data.attachments) if data.attachments else None,
            )
            async with agents.player.interaction(task) as interaction:
                message = episode.opening()
                while message is not None:
                    segment = await interaction.turn(message)
                    if segment.terminated:
                        break
                    message = episode.respond(segment.last_reply)
            score = episode.finish()
            trace = interaction.trace
            trace.record_reward(REWARD_NAME, score)
            trace.record_metrics(episode.metrics())

    return {
        "CoworkEnvData": CoworkEnvData,
        "CoworkEnvTask": CoworkEnvTask,
        "CoworkEnvTasksetConfig": CoworkEnvTasksetConfig,
        "CoworkEnvTaskset": CoworkEnvTaskset,
        "CoworkEnvEnvConfig": CoworkEnvEnvConfig,
        "CoworkEnvEnv": CoworkEnvEnv,
    }
