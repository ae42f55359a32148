"""The environment server's protocol, without a web framework: the task catalogue (reset
kwargs -> spec, task, seed), the session store (capacity, idle and lifetime expiry), action
parsing and the OpenEnv wire shapes and JSON Schemas. ``server.py`` puts it on starlette."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .attachments import (
    Attachment,
    Resolver,
    data_url,
    image_part_attachments,
    show_image_parts,
)
from .policies import ToolCall
from .session import EpisodeSession
from .spec import EnvironmentSpec, load_spec

logger = logging.getLogger(__name__)

VERSION = "1.0.0"
RESET_KEYS = {
    "seed",
    "episode_id",
    "environment",
    "task_key",
    "split",
    "capability",
    "faults",
    "evidence",
}
ACTION_KEYS = {"tool_calls", "reply", "metadata"}


REFUSED = {"detail": "missing or wrong token"}  # whatever is wrong with the token


class Unavailable(Exception):
    """Raised by an ``authorise`` callable that cannot decide now (its database is down):
    the request gets 503 with the message, and may be tried again."""


class ProtocolError(ValueError):
    """A request that does not fit the protocol: (code, message, errors)."""

    def __init__(self, code: str, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.code = code
        self.errors = errors or []


def invalid(loc: str, msg: str) -> ProtocolError:
    return ProtocolError("VALIDATION_ERROR", msg, [{"loc": [loc], "msg": msg}])


# --------------------------------------------------------------------------- catalogue


class Catalog:
    """The environment specs a server offers, by name."""

    def __init__(
        self,
        specs: Sequence[EnvironmentSpec | dict[str, Any]],
        *,
        listing_extra: Mapping[str, Mapping[str, Any]] | None = None,
        allow_empty: bool = False,
    ):
        loaded = [s if isinstance(s, EnvironmentSpec) else load_spec(s) for s in specs]
        if not loaded and not allow_empty:
            raise ValueError("a server needs at least one environment spec")
        self.specs: dict[str, EnvironmentSpec] = {}
        for spec in loaded:
            if spec.name in self.specs:
                raise ValueError(f"two environments are named {spec.name!r}")
            self.specs[spec.name] = spec
        self.tools = {name: spec.openai_tools() for name, spec in self.specs.items()}
        self.listing_extra = {name: dict(extra) for name, extra in (listing_extra or {}).items()}

    def listing(self) -> dict[str, Any]:
        return {
            "environments": [
                {
                    "name": spec.name,
                    "domain": spec.domain,
                    "description": spec.description,
                    "splits": sorted({t.split for t in spec.tasks}),
                    "capabilities": sorted({c for t in spec.tasks for c in t.capabilities}),
                    "tasks": [
                        {
                            "key": t.key,
                            "title": t.title,
                            "split": t.split,
                            "capabilities": list(t.capabilities),
                            "turns": len(t.turns),
                        }
                        for t in spec.tasks
                    ],
                }
                | self.listing_extra.get(spec.name, {})
                for spec in self.specs.values()
            ]
        }

    def resolve(self, kwargs: dict[str, Any]) -> tuple[EnvironmentSpec, str, int, bool]:
        """(spec, task key, seed, faults) for the reset kwargs; a task is named by
        ``environment`` + ``task_key`` or drawn (seeded) from those matching ``split`` /
        ``capability``; ``environment`` may be left out when the server has one."""
        unknown = sorted(set(kwargs) - RESET_KEYS)
        if unknown:
            raise invalid(unknown[0], f"unknown reset argument {unknown[0]!r}")
        seed = kwargs.get("seed", 0)
        if seed is None:
            seed = 0
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise invalid("seed", "seed must be an integer >= 0")
        faults = kwargs.get("faults", True)
        if not isinstance(faults, bool):
            raise invalid("faults", "faults must be true or false")
        if not isinstance(kwargs.get("evidence", False), bool):
            raise invalid("evidence", "evidence must be true or false")
        for key in ("environment", "task_key", "split", "capability", "episode_id"):
            value = kwargs.get(key)
            if value is not None and not isinstance(value, str):
                raise invalid(key, f"{key} must be a string")
        name = kwargs.get("environment")
        if name is not None and name not in self.specs:
            raise ProtocolError("NOT_FOUND", f"no environment named {name!r}")
        specs = [self.specs[name]] if name else list(self.specs.values())
        task_key = kwargs.get("task_key")
        if task_key is not None:
            owners = [s for s in specs if any(t.key == task_key for t in s.tasks)]
            if not owners:
                raise ProtocolError("NOT_FOUND", f"no task {task_key!r}")
            if len(owners) > 1:
                raise invalid("environment", f"task {task_key!r} is in several environments")
            return owners[0], task_key, seed, faults
        split, capability = kwargs.get("split"), kwargs.get("capability")
        matching = [
            (s, t.key)
            for s in specs
            for t in s.tasks
            if (split is None or t.split == split)
            and (capability is None or capability in t.capabilities)
        ]
        if not matching:
            raise ProtocolError("NOT_FOUND", "no task matches the given split/capability")
        spec, key = random.Random(seed).choice(matching)
        return spec, key, seed, faults


# --------------------------------------------------------------------------- images


class ImageURLs:
    """The ``data:`` URL of an image attachment from a ``Resolver`` (sha256 -> bytes), the
    last ``max_entries`` kept: an image viewed by many sessions is read and encoded once.

    Called, it reads on the caller's thread (an in-process session). A server awaits
    ``url`` or ``show`` instead: a miss is read in a worker thread (``asyncio.to_thread``), so
    a slow storage (an S3 bucket) stalls only the session that views the image, never the
    event loop the other sessions' steps run on; concurrent misses of one image share one
    read; a resolver that raises makes the image "not available" (logged, not kept)."""

    def __init__(self, resolve: Resolver, max_entries: int = 32):
        self.resolve = resolve
        self.max_entries = max_entries
        self.cache: OrderedDict[str, str | None] = OrderedDict()
        self.reading: dict[str, asyncio.Future] = {}

    def __call__(self, attachment: Attachment) -> str | None:
        key = attachment.sha256
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        url = self._read(attachment)
        self._keep(key, url)
        return url

    def _read(self, attachment: Attachment) -> str | None:
        data = self.resolve(attachment.sha256)
        return None if data is None else data_url(attachment.media_type, data)

    def _keep(self, key: str, url: str | None) -> None:
        self.cache[key] = url
        if len(self.cache) > self.max_entries:
            self.cache.popitem(last=False)

    def _read_done(self, key: str, task: asyncio.Future) -> None:
        self.reading.pop(key, None)
        if not task.cancelled() and task.exception() is None:
            self._keep(key, task.result())

    async def url(self, attachment: Attachment) -> str | None:
        key = attachment.sha256
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        task = self.reading.get(key)
        if task is None:
            task = asyncio.ensure_future(asyncio.to_thread(self._read, attachment))
            self.reading[key] = task
            task.add_done_callback(functools.partial(self._read_done, key))
        try:
            return await asyncio.shield(task)  # a cancelled waiter leaves the read to others
        except Exception:
            logger.exception("The image %s could not be read.", key)
            return None

    async def show(self, obs: dict[str, Any], spec: EnvironmentSpec) -> dict[str, Any]:
        """The observation of a session made without an ``image_url`` maker (its image parts
        carry the transcript's ``attachment:sha256:<hex>`` URLs), shown as ``EpisodeSession``
        shows it with one: each image part gets its ``data:`` URL, or becomes a text part
        saying the image is not available. The entries are copied, never changed."""
        if not spec.attachments:
            return obs
        by_sha = {a.sha256: a for a in spec.attachments}
        done: dict[int, list] = {}  # a tool message and its result share one content list
        for field_name in ("messages", "tool_results"):
            entries = obs.get(field_name) or []
            if any(_has_image(entry.get("content")) for entry in entries):
                shown = []
                for entry in entries:
                    content = entry.get("content")
                    if _has_image(content):
                        if id(content) not in done:
                            done[id(content)] = await self._parts(content, by_sha)
                        entry = {**entry, "content": done[id(content)]}
                    shown.append(entry)
                obs[field_name] = shown
        return obs

    async def _parts(self, content: list, by_sha: dict[str, Attachment]) -> list:
        attachments = image_part_attachments(content, by_sha)
        urls = [await self.url(a) if a is not None else None for a in attachments]
        return show_image_parts(content, attachments, urls)


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "image_url" for part in content
    )


# --------------------------------------------------------------------------- sessions


@dataclass
class Slot:
    id: str
    created: float
    last_used: float
    session: EpisodeSession | None = None
    episode_id: str | None = None
    websocket: Any = field(default=None, repr=False)  # the session's WebSocket, if any
    owner: str | None = None  # who opened it (a digest of the token); None: an open server
    group: str | None = None  # whose share it counts against (the token's user, or owner)


class SessionStore:
    def __init__(
        self,
        max_sessions: int,
        idle_timeout: float,
        max_lifetime: float,
        clock: Callable[[], float],
        max_per_owner: int | None = None,
        prefix: str = "",
    ):
        """``prefix``: the start of every id chosen here (a worker's ``wK-``)."""
        self.max_sessions = max_sessions
        self.prefix = prefix
        self.max_per_owner = max_per_owner or max_sessions
        self.idle_timeout = idle_timeout
        self.max_lifetime = max_lifetime
        self.clock = clock
        self.slots: dict[str, Slot] = {}

    def expired(self, slot: Slot) -> bool:
        now = self.clock()
        return now - slot.last_used > self.idle_timeout or now - slot.created > self.max_lifetime

    def open(self, owner: str | None = None, group: str | None = None) -> Slot:
        """A new session with a server-chosen id; at most ``max_per_owner`` of one group
        (the token's user, or the token itself) among the ``max_sessions``."""
        self.reap()
        if len(self.slots) >= self.max_sessions:
            raise ProtocolError("CAPACITY_REACHED", "session limit reached")
        group = group or owner
        if group is not None and self.held_by(group) >= self.max_per_owner:
            whose = "this token" if group == owner else "this token's user"
            raise ProtocolError("CAPACITY_REACHED", f"session limit of {whose} reached")
        now = self.clock()
        slot = Slot(self.prefix + uuid.uuid4().hex, now, now, owner=owner, group=group)
        self.slots[slot.id] = slot
        return slot

    def held_by(self, group: str) -> int:
        return sum(1 for slot in self.slots.values() if slot.group == group)

    def get(self, slot_id: str, owner: str | None = None) -> Slot:
        """The live session ``slot_id`` of ``owner``; another owner's is not found, alike."""
        slot = self.slots.get(slot_id)
        if slot is None or slot.owner != owner:
            raise ProtocolError("NOT_FOUND", f"no session {slot_id!r} (closed or expired)")
        if self.expired(slot):
            self.drop(slot_id)
            raise ProtocolError("NOT_FOUND", f"session {slot_id!r} expired")
        return slot

    def touch(self, slot: Slot) -> None:
        slot.last_used = self.clock()

    def drop(self, slot_id: str) -> Slot | None:
        return self.slots.pop(slot_id, None)

    def reap(self) -> list[Slot]:
        gone = [s for s in list(self.slots.values()) if self.expired(s)]
        for s in gone:
            self.drop(s.id)
        return gone

    def status(self) -> dict[str, int]:
        return {
            "active_sessions": len(self.slots),
            "max_sessions": self.max_sessions,
            "max_sessions_per_token": self.max_per_owner,
        }


# --------------------------------------------------------------------------- actions


def _tool_call(entry: Any, i: int) -> ToolCall:
    if not isinstance(entry, dict):
        raise invalid(f"tool_calls.{i}", "a tool call must be an object")
    if "function" in entry:
        fn = entry["function"]
        if not isinstance(fn, dict) or set(entry) - {"id", "type", "function"}:
            raise invalid(f"tool_calls.{i}", "an OpenAI tool call has id, type, function")
        name, arguments = fn.get("name"), fn.get("arguments", {})
    else:
        extra = sorted(set(entry) - {"id", "name", "arguments"})
        if extra:
            raise invalid(f"tool_calls.{i}.{extra[0]}", f"unknown key {extra[0]!r}")
        name, arguments = entry.get("name"), entry.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise invalid(f"tool_calls.{i}.name", "a tool call needs a name")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict | str):
        raise invalid(f"tool_calls.{i}.arguments", "arguments must be an object or a string")
    call_id = entry.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise invalid(f"tool_calls.{i}.id", "id must be a string")
    return ToolCall(name, arguments, call_id)


def parse_action(data: Any) -> tuple[str | None, list[ToolCall]]:
    if not isinstance(data, dict):
        raise invalid("action", "the action must be an object")
    extra = sorted(set(data) - ACTION_KEYS)
    if extra:
        raise invalid(extra[0], f"unknown action field {extra[0]!r}")
    reply = data.get("reply")
    if reply is not None and not isinstance(reply, str):
        raise invalid("reply", "reply must be a string or null")
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list):
        raise invalid("tool_calls", "tool_calls must be a list")
    return reply, [_tool_call(c, i) for i, c in enumerate(calls)]


def wire(obs: dict[str, Any]) -> dict[str, Any]:
    inner = {k: v for k, v in obs.items() if k not in ("reward", "done")}
    return {"observation": inner, "reward": obs["reward"], "done": obs["done"]}


def state_of(slot: Slot) -> dict[str, Any]:
    base = {"episode_id": slot.episode_id, "step_count": 0}
    if slot.session is not None:
        base.update(slot.session.state())
    return base


# --------------------------------------------------------------------------- schemas

_TOOL_CALL = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "arguments": {"anyOf": [{"type": "object"}, {"type": "string"}]},
    },
    "required": ["name"],
}
ACTION_SCHEMA = {
    "title": "CoworkEnvAction",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "tool_calls": {"type": "array", "items": _TOOL_CALL},
        "reply": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "metadata": {"type": "object"},
    },
}
OBSERVATION_SCHEMA = {
    "title": "CoworkEnvObservation",
    "type": "object",
    "properties": {
        "episode_id": {"type": "string"},
        "episode": {"type": "object"},
        "turn": {"type": "integer"},
        "turn_ended": {"type": "boolean"},
        "messages": {"type": "array", "items": {"type": "object"}},
        "tool_results": {"type": "array", "items": {"type": "object"}},
        "user_message": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "turn_reward": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "system_prompt": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "tools": {"type": "array", "items": {"type": "object"}},
        "grading": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        "turn_rewards": {"anyOf": [{"type": "array"}, {"type": "null"}]},
        "stop_reason": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "done": {"type": "boolean"},
        "reward": {"anyOf": [{"type": "number"}, {"type": "null"}]},
    },
}
STATE_SCHEMA = {
    "title": "State",
    "type": "object",
    "additionalProperties": True,
    "properties": {
        "episode_id": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "step_count": {"type": "integer", "minimum": 0},
    },
}
