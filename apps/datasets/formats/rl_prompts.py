"""RL prompt rows: environment tasks for trainers that roll out themselves (no Django).

A prompt entry is what an environment server's ``reset`` returns for one task and seed,
plus the task's identity and lineage (``prompt_entry`` builds it from a reset observation):

    {"environment", "environment_id", "revision", "spec_hash", "task_key", "title", "split",
     "capabilities", "seed", "turns", "system_prompt", "user_message", "tools"}

Each format renders an entry (and its position in the file, ``index``) as one row; every
row names the environment and the task, so the trainer's environment resets that task:

- ``grpo`` — TRL ``GRPOTrainer`` (conversational ``prompt`` + columns): ``prompt`` (system
  and first user message), ``environment`` (the name: picks the class when
  ``environment_factory`` is a dict; TRL does not pass it to ``reset``), ``task_key`` and
  ``seed`` (arrive in ``reset(**row)``), ``info`` (a JSON string: lineage). With
  ``engine.trl_env.environment_class`` the prompt is already complete, so its ``reset``
  adds nothing to it.
- ``verl`` — verl's RL parquet: ``data_source`` ("coworkenv": one reward function for all
  rows), ``prompt`` (messages), ``ability`` ("agent"), ``reward_model`` ({"style": "rule",
  "ground_truth": task key}), ``extra_info`` ({split, index, environment, task_key, seed,
  revision, spec_hash, interaction_kwargs: {name: "coworkenv", environment, task_key,
  seed}, tools: the row's tool schemas as a JSON string}), ``agent_name`` ("tool_agent").
  One schema for every row, so Arrow needs no unions. ``coworkenv_engine.verl_adapter``
  is what these names point at: ``compute_score`` for the data source, the
  ``CoworkEnvInteraction`` named "coworkenv", ``CoworkEnvTool`` in the tool config (verl
  presents one tool list to every row; the row's own is ``extra_info.tools``).
- ``nemo_gym`` — NeMo Gym rows: ``id`` (the index), ``responses_create_params`` ({input:
  messages, tools: Responses-API function tools ``{type, name, description, parameters}``}),
  plus ``environment``, ``task_key``, ``seed`` for the resources server's verify.
  ``agent_ref`` is added by NeMo Gym's prepare step, not here.
- ``verifiers`` — verifiers dataset rows: ``prompt`` (messages), ``answer`` (""), ``info``
  (a JSON string: environment, task_key, seed, split, revision, spec_hash), ``task``
  ("coworkenv"), ``example_id`` (the index).
"""

from __future__ import annotations

import json
from typing import Any

from apps.datasets.formats.lint import Linter

DATA_SOURCE = "coworkenv"
TASK_LABEL = "coworkenv"
ENTRY_KEYS = (
    "environment",
    "environment_id",
    "revision",
    "spec_hash",
    "task_key",
    "title",
    "split",
    "capabilities",
    "seed",
    "turns",
    "system_prompt",
    "user_message",
    "tools",
)


def prompt_entry(
    observation: dict[str, Any],
    *,
    environment_id: int | None,
    revision: int | None,
    spec_hash: str,
    title: str,
    split: str,
    capabilities: list[str],
    turns: int,
) -> dict[str, Any]:
    """The entry of a reset observation (``engine.session.EpisodeSession.start()``)."""
    episode = observation["episode"]
    return {
        "environment": episode["environment"],
        "environment_id": environment_id,
        "revision": revision,
        "spec_hash": spec_hash,
        "task_key": episode["task_key"],
        "title": title,
        "split": split,
        "capabilities": list(capabilities),
        "seed": episode["seed"],
        "turns": turns,
        "system_prompt": observation["system_prompt"],
        "user_message": observation["user_message"],
        "tools": observation["tools"],
    }


def prompt_messages(entry: dict[str, Any]) -> list[dict[str, str]]:
    messages = []
    if entry["system_prompt"]:
        messages.append({"role": "system", "content": entry["system_prompt"]})
    messages.append({"role": "user", "content": entry["user_message"]})
    return messages


def _lineage(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "environment": entry["environment"],
        "environment_id": entry["environment_id"],
        "revision": entry["revision"],
        "spec_hash": entry["spec_hash"],
        "task_key": entry["task_key"],
        "split": entry["split"],
        "capabilities": entry["capabilities"],
        "seed": entry["seed"],
        "turns": entry["turns"],
    }


def grpo_row(entry: dict[str, Any], index: int) -> dict[str, Any]:
    return {
        "prompt": prompt_messages(entry),
        "environment": entry["environment"],
        "task_key": entry["task_key"],
        "seed": entry["seed"],
        "info": json.dumps(_lineage(entry), ensure_ascii=False, sort_keys=True),
    }


def verl_row(entry: dict[str, Any], index: int) -> dict[str, Any]:
    return {
        "data_source": DATA_SOURCE,
        "prompt": prompt_messages(entry),
        "ability": "agent",
        "reward_model": {"style": "rule", "ground_truth": entry["task_key"]},
        "extra_info": {
            "split": entry["split"],
            "index": index,
            "environment": entry["environment"],
            "task_key": entry["task_key"],
            "seed": entry["seed"],
            "revision": entry["revision"],
            "spec_hash": entry["spec_hash"],
            "interaction_kwargs": {
                "name": DATA_SOURCE,
                "environment": entry["environment"],
                "task_key": entry["task_key"],
                "seed": entry["seed"],
            },
            "tools": json.dumps(entry["tools"], ensure_ascii=False),
        },
        "agent_name": "tool_agent",
    }


def responses_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat function tool as a Responses-API function tool (flat)."""
    function = tool["function"]
    return {
        "type": "function",
        "name": function["name"],
        "description": function.get("description", ""),
        "parameters": function.get("parameters") or {"type": "object", "properties": {}},
    }


def nemo_gym_row(entry: dict[str, Any], index: int) -> dict[str, Any]:
    return {
        "id": index,
        "responses_create_params": {
            "input": prompt_messages(entry),
            "tools": [responses_tool(t) for t in entry["tools"]],
        },
        "environment": entry["environment"],
        "task_key": entry["task_key"],
        "seed": entry["seed"],
    }


def verifiers_row(entry: dict[str, Any], index: int) -> dict[str, Any]:
    info = {
        "environment": entry["environment"],
        "task_key": entry["task_key"],
        "seed": entry["seed"],
        "split": entry["split"],
        "revision": entry["revision"],
        "spec_hash": entry["spec_hash"],
    }
    return {
        "prompt": prompt_messages(entry),
        "answer": "",
        "info": json.dumps(info, ensure_ascii=False, sort_keys=True),
        "task": TASK_LABEL,
        "example_id": index,
    }


# --------------------------------------------------------------------------- linters


class _PromptLinter(Linter):
    """Every row must name its environment and task and carry a system/user prompt."""

    def _check_messages(self, messages: Any, problem) -> None:
        if not isinstance(messages, list) or not messages:
            problem("The prompt must be a non-empty list of messages.")
            return
        roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
        if roles[-1] != "user" or any(r not in ("system", "user") for r in roles):
            problem(f"The prompt must be system/user messages ending with a user one: {roles}.")

    def _check_task(self, environment: Any, task_key: Any, seed: Any, problem) -> None:
        if not isinstance(environment, str) or not environment:
            problem("The row does not name its environment.")
        if not isinstance(task_key, str) or not task_key:
            problem("The row does not name its task.")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            problem("The seed must be an integer ≥ 0.")


class GrpoLinter(_PromptLinter):
    format = "grpo"

    def check_row(self, row: dict[str, Any], problem) -> None:
        self._check_messages(row.get("prompt"), problem)
        self._check_task(row.get("environment"), row.get("task_key"), row.get("seed"), problem)


class NemoGymLinter(_PromptLinter):
    format = "nemo_gym"

    def check_row(self, row: dict[str, Any], problem) -> None:
        params = row.get("responses_create_params")
        if not isinstance(params, dict):
            problem("responses_create_params is missing.")
            return
        self._check_messages(params.get("input"), problem)
        for tool in params.get("tools") or []:
            if not (isinstance(tool, dict) and tool.get("type") == "function" and tool.get("name")):
                problem("A tool must be a Responses-API function tool with a name.")
        self._check_task(row.get("environment"), row.get("task_key"), row.get("seed"), problem)


class VerifiersLinter(_PromptLinter):
    format = "verifiers"

    def check_row(self, row: dict[str, Any], problem) -> None:
        self._check_messages(row.get("prompt"), problem)
        try:
            info = json.loads(row.get("info") or "")
        except (TypeError, ValueError):
            problem("info must be a JSON string.")
            return
        self._check_task(info.get("environment"), info.get("task_key"), info.get("seed"), problem)


class VerlLinter(_PromptLinter):
    """Checks the rows before they go into the parquet file (fed as JSON lines)."""

    format = "verl"

    def check_row(self, row: dict[str, Any], problem) -> None:
        self._check_messages(row.get("prompt"), problem)
        extra = row.get("extra_info")
        if not isinstance(extra, dict):
            problem("extra_info is missing.")
            return
        self._check_task(
            extra.get("environment"), extra.get("task_key"), extra.get("seed"), problem
        )


RL_PROMPT_FORMATS = {
    "grpo": {"row": grpo_row, "linter": GrpoLinter, "label": "TRL GRPO prompts (JSONL)"},
    "verl": {"row": verl_row, "linter": VerlLinter, "label": "verl RL parquet"},
    "nemo_gym": {"row": nemo_gym_row, "linter": NemoGymLinter, "label": "NeMo Gym rows (JSONL)"},
    "verifiers": {"row": verifiers_row, "linter": VerifiersLinter, "label": "verifiers rows"},
}


def verl_parquet(rows: list[dict[str, Any]]) -> bytes:
    """The verl rows as one parquet file. Needs ``pyarrow`` (installed with ``datasets``, the
    train extra); ImportError when it is missing."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()
