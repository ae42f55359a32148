"""CoworkEnv tasks as TRL ``GRPOTrainer`` environments, in process (pure Python).

``environment_class(spec)`` builds a class for TRL's ``environment_factory``: one public method
per spec tool (signature, type hints and a Google-style docstring generated from the tool's
JSON Schema, so ``transformers.utils.get_json_schema`` renders the spec's parameters; nested
shapes flatten to ``list`` / ``dict`` as in TRL's own spec-driven adapter), plus
``reply_to_user(message)`` which ends a turn and returns the next user message. TRL's loop
only inserts tool results between model messages and stops at a message without tool calls,
so mid-episode user turns come back as that tool's result and the final plain message is
graded by ``coworkenv_reward`` (pass it in ``reward_funcs``): it hands each rollout's last
assistant text to its environment as the final reply and returns the engine score.

    trainer = GRPOTrainer(model, reward_funcs=[coworkenv_reward],
                          environment_factory=environment_class(spec), train_dataset=rows)

Dataset rows carry ``task_key`` and optionally ``seed`` (``task_rows(spec)`` lists them);
``reset(**row)`` returns the system prompt and the first user message as the prompt text.
After the reward, ``env.grading`` and ``env.turn_rewards`` hold the full grading and the
per-turn rewards (``rewards.turn_rewards``) for credit assignment.

Images: a view tool whose result shows an image returns TRL's multimodal tool response, a
list of content blocks ``[{"type": "text", "text": ...}, {"type": "image", "image": <PIL
image>}]`` (TRL >= 1.x passes a tool's list result through as the tool message content and
gives the ``image`` blocks to the VLM processor; a ``data:`` URL string stands in when Pillow
is not installed). The bytes come from ``environment_class(spec, attachments=resolver)``
(sha256 -> bytes); without one the image is a text block saying it is not available.
"""

from __future__ import annotations

import base64
import inspect
import io
import json
from typing import Any

from .attachments import Resolver, data_url, url_sha256
from .policies import ToolCall
from .session import EpisodeSession
from .spec import EnvironmentSpec, load_spec

RESERVED = frozenset({"reset", "get_reward", "reply_to_user"})
_PY_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
             "object": dict}  # fmt: skip
OVER = "The conversation is over."


def _annotation(schema: dict[str, Any]) -> type:
    enum = schema.get("enum")
    if "type" not in schema and enum:
        kinds = {type(v) for v in enum}
        return kinds.pop() if len(kinds) == 1 and kinds <= {str, int, float, bool} else str
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return _PY_TYPES.get(kind, str)


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "No description."


def _arg_doc(schema: dict[str, Any]) -> str:
    text = _one_line(schema.get("description", ""))
    if schema.get("enum"):  # transformers renders "(choices: [...])" as the enum
        text += f" (choices: {json.dumps(schema['enum'])})"
    return text


def _tool_method(tool: dict[str, Any]):
    fn_spec = tool["function"]
    name = fn_spec["name"]
    params = fn_spec.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or [])

    def method(self, **kwargs: Any) -> str:
        arguments = {k: v for k, v in kwargs.items() if v is not None}
        return self._call(name, arguments)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    ordered = [p for p in props if p in required] + [p for p in props if p not in required]
    for p in ordered:
        parameters.append(
            inspect.Parameter(
                p,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=_annotation(props[p]),
                default=inspect.Parameter.empty if p in required else None,
            )
        )
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)
    method.__annotations__ = {p: _annotation(props[p]) for p in props} | {"return": str}
    args = "\n".join(f"    {p}: {_arg_doc(props[p])}" for p in ordered)
    method.__doc__ = _one_line(fn_spec.get("description", name)) + (
        f"\n\nArgs:\n{args}\n" if args else "\n"
    )
    method.__name__ = method.__qualname__ = name
    return method


def _holds_prompt(prompt: Any, user_message: str) -> bool:
    if not isinstance(prompt, list) or not prompt or not isinstance(prompt[-1], dict):
        return False
    last = prompt[-1]
    return last.get("role") == "user" and last.get("content") == user_message


class _CoworkEnvBase:
    spec: EnvironmentSpec
    faults: bool = True
    attachments: Resolver | None = None

    def __init__(self) -> None:
        self._session: EpisodeSession | None = None
        self.grading: dict[str, Any] | None = None
        self.turn_rewards: list[float] = []

    def reset(
        self, task_key: str | None = None, seed: int | None = 0, prompt: Any = None, **row: Any
    ) -> str | None:
        """Start an episode of ``task_key`` (a dataset column); returns the prompt text, or
        None when the row's ``prompt`` already ends with the task's first user message (the
        app's ``grpo`` export: system prompt and first user message in the row)."""
        key = task_key or self.spec.tasks[0].key
        self._session = EpisodeSession(self.spec, key, int(seed or 0), faults=self.faults)
        self.grading, self.turn_rewards = None, []
        return self._prompt_text(self._session.start(), prompt)

    @staticmethod
    def _prompt_text(obs: dict[str, Any], prompt: Any) -> str | None:
        """What ``reset`` gives TRL to append to the row's last message: nothing when the
        row's ``prompt`` already ends with the first user message, else the prompt text."""
        if _holds_prompt(prompt, obs["user_message"]):
            return None
        return f"{obs['system_prompt']}\n\n{obs['user_message']}"

    def reply_to_user(self, message: str) -> str:
        """Send your reply to the user and end this turn; returns the user's next message.

        Args:
            message: your message to the user
        """
        return self._act(message, [])

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        return self._act(None, [ToolCall(name, arguments)])

    def _act(self, reply: str | None, calls: list[ToolCall]) -> str:
        session = self._session
        if session is None:
            raise RuntimeError("reset() first")
        if session.done:
            return OVER
        obs = session.act(reply, calls)
        self._record(obs)
        if calls:
            return self._tool_response(obs["tool_results"])
        return OVER if obs["done"] else obs["user_message"]

    def _tool_response(self, results: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        """The tool results' text, or (images among them) TRL's content blocks."""
        texts: list[str] = []
        images: list[dict[str, Any]] = []
        for result in results:
            content = result["content"]
            if not isinstance(content, list):
                texts.append(content)
                continue
            texts.append("".join(p["text"] for p in content if p.get("type") == "text"))
            images.extend(
                self._image(p["image_url"]["url"]) for p in content if p.get("type") == "image_url"
            )
        text = "\n".join(texts)
        return [{"type": "text", "text": text}, *images] if images else text

    def _image(self, url: str) -> dict[str, Any]:
        """An ``image`` block for an ``attachment:`` URL (bytes from ``attachments``) or a
        ``data:`` URL (what an environment server sends)."""
        if url.startswith("data:") and ";base64," in url:
            media_type = url[5:].split(";", 1)[0]
            data = base64.b64decode(url.split(",", 1)[1])
        else:
            sha = url_sha256(url) or ""
            attachment = next((a for a in self.spec.attachments if a.sha256 == sha), None)
            data = self.attachments(sha) if self.attachments and attachment else None
            if attachment is None or data is None:
                name = attachment.name if attachment else "an attachment"
                return {"type": "text", "text": f"[image {name} is not available]"}
            media_type = attachment.media_type
        try:
            from PIL import Image
        except ImportError:  # a data: URL, which transformers' load_image also reads
            return {"type": "image", "image": data_url(media_type, data)}
        image = Image.open(io.BytesIO(data))
        image.load()
        return {"type": "image", "image": image}

    def _record(self, obs: dict[str, Any]) -> None:
        if obs["done"]:
            self.grading = obs["grading"]
            self.turn_rewards = obs["turn_rewards"]

    def _finish(self, final_reply: str) -> float | None:
        """End the episode with the rollout's last message; the engine score."""
        session = self._session
        if session is None:
            return None
        if not session.done:
            self._record(session.act(final_reply, []))
            while not session.done:  # turns the rollout never reached: empty replies
                self._record(session.act("", []))
        return session.grading.score if session.grading else None


def environment_class(
    spec: EnvironmentSpec | dict[str, Any],
    *,
    faults: bool = True,
    attachments: Resolver | None = None,
) -> type[_CoworkEnvBase]:
    """A class for TRL's ``environment_factory`` serving every task of ``spec``;
    ``attachments`` (sha256 -> bytes) gives view tools' images (module docstring)."""
    spec = spec if isinstance(spec, EnvironmentSpec) else load_spec(spec)
    members: dict[str, Any] = {
        "spec": spec,
        "faults": faults,
        "attachments": staticmethod(attachments) if attachments else None,
    }
    for tool in spec.openai_tools():
        name = tool["function"]["name"]
        if name in RESERVED or name.startswith("_"):
            raise ValueError(f"tool name {name!r} clashes with the TRL environment interface")
        members[name] = _tool_method(tool)
    class_name = "CoworkEnv_" + "".join(c if c.isalnum() else "_" for c in spec.name)
    return type(class_name, (_CoworkEnvBase,), members)


def _last_assistant_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    for message in reversed(completion or []):
        if message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def coworkenv_reward(completions: list[Any], environments: list[Any], **kwargs: Any) -> list:
    """TRL reward function: the engine score of each rollout (``None`` for rows whose
    environment is not a CoworkEnv one, so TRL leaves them out)."""
    out: list[float | None] = []
    for completion, env in zip(completions, environments, strict=True):
        if isinstance(env, _CoworkEnvBase):
            out.append(env._finish(_last_assistant_text(completion)))
        else:
            out.append(None)
    return out


def task_rows(spec: EnvironmentSpec | dict[str, Any], *, split: str | None = None,
              seeds: tuple[int, ...] = (0,)) -> list[dict[str, Any]]:  # fmt: skip
    """Dataset rows for ``environment_factory`` training: one per task (and seed)."""
    spec = spec if isinstance(spec, EnvironmentSpec) else load_spec(spec)
    return [
        {
            "prompt": [{"role": "user", "content": ""}],
            "task_key": t.key,
            "seed": seed,
            "info": json.dumps({"environment": spec.name, "task_key": t.key, "split": t.split}),
        }
        for t in spec.tasks
        if split is None or t.split == split
        for seed in seeds
    ]
