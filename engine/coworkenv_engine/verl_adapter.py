"""verl with no glue: the reward function, the interaction and the tool class that verl's
multi-turn ``tool_agent`` loop needs to roll out CoworkEnv tasks, on the engine in process.

Optional extra ``verl`` (verl 0.5-0.7: ``verl.interactions`` went away in 0.8). The rows of
CoworkEnv's verl export name them (``data_source`` "coworkenv", ``agent_name``
"tool_agent", ``extra_info.interaction_kwargs`` {name "coworkenv", environment, task_key,
seed}, ``extra_info.tools``: the row's own tool schemas); the verl config points at them
(docs/verl.md):

- ``CoworkEnvInteraction`` (``interaction_config_path``; config ``specs``: spec file paths or
  globs, for the engine in process, or ``server``: an environment server's URL, such as the
  app's ``/envs/<slug>``, with ``token_env`` naming the variable that holds the token):
  ``start_interaction`` starts the row's episode under verl's request id; each
  assistant message without tool calls is the reply that ends a turn
  (``generate_response``: the user's next message and the turn's reward, or the end).
- ``CoworkEnvTool`` (``tool_config_path``, one entry per tool name: ``verl_tool_config``
  writes them): a call runs in the trajectory's episode (found by ``agent_data.request_id``);
  a tool the row's environment does not have is a tool error. verl presents one tool list
  to every row; the row's own is ``extra_info.tools``.
- ``compute_score`` (``custom_reward_function.path``, name ``compute_score``): the episode's
  score, which the tools hand to verl through ``agent_data.extra_fields["reward_scores"]``
  (verl gives it back as ``extra_info["rollout_reward_scores"]``); for a trajectory that
  called no tool it grades, in process, the episode whose every turn was answered with the
  response text (``COWORKENV_SPECS``: the spec globs, as the interaction's config).
"""

from __future__ import annotations

import functools
import glob
import json
import os
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from verl.interactions.base import BaseInteraction
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from .policies import ToolCall
from .session import EpisodeSession
from .spec import EnvironmentSpec, load_spec

DATA_SOURCE = "coworkenv"
SCORE_KEY = "coworkenv"
MAX_EPISODES = 4096  # trajectories that stopped before their end are forgotten past this


class LocalEpisode:
    """An ``EpisodeSession`` in this process, behind the surface ``RemoteEpisode`` has."""

    def __init__(self, session: EpisodeSession):
        self.session = session
        self.tools = session.tools
        self.done = False

    async def start(self) -> dict[str, Any]:
        return self.session.start()

    async def act(self, reply: str | None = None, tool_calls=()) -> dict[str, Any]:
        obs = self.session.act(reply, tool_calls)
        self.done = obs["done"]
        return obs


class RemoteEpisode:
    """An HTTP episode on an environment server (``server.py``'s routes, the app's
    ``/envs/<slug>/`` included): observations as ``EpisodeSession`` gives them."""

    def __init__(self, url: str, token: str, reset: dict[str, Any]):
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.reset = {**reset, "evidence": False}
        self.episode_id: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.done = False

    async def _send(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.post(self.url + route, json=body, headers=self.headers)
        if response.status_code != 200:
            raise ValueError(f"{route} answered {response.status_code}: {response.text[:300]}")
        return response.json()

    async def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        payload = await self._send(route, body)
        obs = {**payload["observation"], "reward": payload["reward"], "done": payload["done"]}
        self.done = obs["done"]
        return obs

    async def start(self) -> dict[str, Any]:
        obs = await self._post("/reset", self.reset)
        self.episode_id, self.tools = obs["episode_id"], obs["tools"]
        return obs

    async def act(self, reply: str | None = None, tool_calls=()) -> dict[str, Any]:
        calls = [{"name": c.name, "arguments": c.arguments} for c in tool_calls]
        action = {"reply": reply, "tool_calls": calls}
        obs = await self._post("/step", {"episode_id": self.episode_id, "action": action})
        if obs["done"]:  # free the server's session slot now, not at its idle timeout
            await self._send("/close", {"episode_id": self.episode_id})
        return obs


@dataclass
class Trajectory:
    """One rollout's episode and the scores dict verl carries to the reward function (the
    same object, filled in when the episode ends, so verl sends the final score)."""

    session: LocalEpisode | RemoteEpisode
    scores: dict[str, Any] = field(default_factory=dict)


EPISODES: OrderedDict[str, Trajectory] = OrderedDict()  # verl request id -> trajectory


def load_specs(patterns: Iterable[str]) -> dict[str, EnvironmentSpec]:
    """The environment specs of the files matching ``patterns``, by name."""
    specs = {}
    for pattern in patterns:
        paths = sorted(glob.glob(pattern)) or [pattern]
        for path in paths:
            with open(path, encoding="utf-8") as handle:
                spec = load_spec(json.load(handle))
            specs[spec.name] = spec
    return specs


_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def _property_type(prop: dict[str, Any]) -> str:
    """One JSON type name for a parameter, as verl's schema wants one on every property: its
    own (the first not null of a list), else that of its ``enum`` values, else string."""
    declared = prop.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), None)
    if isinstance(declared, str):
        return declared
    values = prop.get("enum") or []
    for kind, name in _JSON_TYPES:
        if values and all(isinstance(v, kind) for v in values):
            return name
    return "string"


def verl_schema(tool: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI function tool in the subset verl's ``OpenAIFunctionToolSchema`` accepts:
    each property keeps its type (``_property_type``), description and enum."""
    function = tool["function"]
    parameters = function.get("parameters") or {}
    properties = {
        name: {"type": _property_type(prop)}
        | {k: prop[k] for k in ("description", "enum") if k in prop}
        for name, prop in (parameters.get("properties") or {}).items()
    }
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": function.get("description") or "",
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(parameters.get("required") or []),
            },
        },
    }


def verl_tool_config(specs: Iterable[EnvironmentSpec]) -> dict[str, Any]:
    """verl's tool config (``tool_config_path``, as YAML or JSON) for these environments:
    ``CoworkEnvTool`` once per tool name (the first environment's schema for a shared name),
    in the schema subset verl takes (``verl_schema``)."""
    tools: dict[str, dict[str, Any]] = {}
    for spec in specs:
        for schema in spec.openai_tools():
            tools.setdefault(schema["function"]["name"], verl_schema(schema))
    return {
        "tools": [
            {
                "class_name": f"{__name__}.CoworkEnvTool",
                "config": {"type": "native"},
                "tool_schema": schema,
            }
            for schema in tools.values()
        ]
    }


def _track(request_id: str, trajectory: Trajectory) -> None:
    EPISODES[request_id] = trajectory
    while len(EPISODES) > MAX_EPISODES:
        EPISODES.popitem(last=False)


def _finish(trajectory: Trajectory, obs: dict[str, Any]) -> None:
    grading = obs["grading"]
    trajectory.scores.update(
        {SCORE_KEY: grading["score"], "passed": grading["passed"], "strict": grading["strict"]}
    )


class CoworkEnvInteraction(BaseInteraction):
    """The simulated user of a CoworkEnv task (see the module)."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        self.server = config.get("server")
        self.token = os.environ.get(config.get("token_env") or "", "")
        self.specs = load_specs(config.get("specs") or [])
        if not self.server and not self.specs:
            raise ValueError("give the interaction specs (spec files) or a server (its URL)")
        self.faults = bool(config.get("faults", True))

    async def start_interaction(
        self,
        instance_id: str | None = None,
        *,
        environment: str,
        task_key: str,
        seed: int = 0,
        **kwargs: Any,
    ) -> str:
        instance_id = await super().start_interaction(instance_id)
        if self.server:
            reset = {"environment": environment, "task_key": task_key, "seed": int(seed)}
            episode: LocalEpisode | RemoteEpisode = RemoteEpisode(
                self.server, self.token, reset | {"faults": self.faults}
            )
        else:
            spec = self.specs.get(environment)
            if spec is None:
                raise ValueError(f"no environment named {environment!r} among the specs")
            episode = LocalEpisode(
                EpisodeSession(spec, task_key, int(seed), faults=self.faults, evidence=False)
            )
        await episode.start()
        _track(instance_id, Trajectory(episode))
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        trajectory = EPISODES.get(instance_id)
        if trajectory is None or trajectory.session.done:  # a limit ended it in a tool call
            EPISODES.pop(instance_id, None)
            return True, "", 0.0, dict(trajectory.scores) if trajectory else {}
        reply = next(
            (m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"),
            "",
        )
        obs = await trajectory.session.act(reply if isinstance(reply, str) else json.dumps(reply))
        if obs["done"]:
            _finish(trajectory, obs)
            EPISODES.pop(instance_id, None)
            return True, "", float(obs["turn_reward"]), dict(trajectory.scores)
        return False, obs["user_message"] or "", float(obs["turn_reward"] or 0.0), {}


class CoworkEnvTool(BaseTool):
    """One CoworkEnv tool name (see the module); its calls run in the trajectory's episode."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema):
        super().__init__(config, tool_schema)

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        agent_data = kwargs.get("agent_data")
        trajectory = EPISODES.get(getattr(agent_data, "request_id", None) or "")
        if trajectory is None or trajectory.session.done:
            return ToolResponse(text="Error: no episode is running."), 0.0, {}
        agent_data.extra_fields["reward_scores"] = trajectory.scores
        session = trajectory.session
        if self.name not in {t["function"]["name"] for t in session.tools}:
            return ToolResponse(text=f"Error: no tool {self.name!r} here."), 0.0, {}
        obs = await session.act(None, [ToolCall(self.name, parameters)])
        if obs["done"]:  # the round or call limit ended the episode
            _finish(trajectory, obs)
        result = obs["tool_results"][0]
        content = result["content"]
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        return ToolResponse(text=text), 0.0, {"ok": result["ok"]}


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's reward function for CoworkEnv rows (see the module): ``{"score", "passed"}``."""
    if data_source != DATA_SOURCE:
        raise ValueError(f"not a CoworkEnv row: data_source {data_source!r}")
    extra = extra_info or {}
    scores = extra.get("rollout_reward_scores") or {}
    if SCORE_KEY in scores:
        return {"score": float(scores[SCORE_KEY]), "passed": bool(scores["passed"])}
    return _replies_only(solution_str, extra)


@functools.lru_cache(maxsize=4)
def _cached_specs(patterns: tuple[str, ...]) -> dict[str, EnvironmentSpec]:
    return load_specs(patterns)


def _replies_only(solution_str: str, extra: dict[str, Any]) -> dict[str, Any]:
    patterns = [p for p in os.environ.get("COWORKENV_SPECS", "").split(os.pathsep) if p]
    if not patterns:
        raise ValueError("set COWORKENV_SPECS to the spec files to grade rows without tool calls")
    spec = _cached_specs(tuple(patterns)).get(extra.get("environment"))
    if spec is None:
        raise ValueError(f"no environment named {extra.get('environment')!r} in COWORKENV_SPECS")
    session = EpisodeSession(spec, extra["task_key"], int(extra.get("seed", 0)), evidence=False)
    obs = session.start()
    while not obs["done"]:
        obs = session.act(solution_str)
    return {"score": float(obs["reward"]), "passed": bool(obs["grading"]["passed"])}
