"""The simulator: one episode of one task, driven by tool calls and turn advances.

Every tool call returns a ToolResult — bad arguments, unknown tools, missing records,
injected faults and exhausted limits are error results, never exceptions — and is appended
to the audit log with its state diff. A failed call never changes state. Ids, the clock
and faults are deterministic functions of (spec, task, seed, call sequence).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from .argcheck import compile_check
from .attachments import Attachment, image_part, ref_sha256
from .bindings import OpContext, ToolError, execute
from .formats import validator_for
from .limits import Limits
from .spec import EnvironmentSpec, ToolSpec, Update, load_spec
from .state import BaseState, WorldState, build_base, json_size

TRANSIENT_ERRORS = frozenset({"rate_limit", "server_error", "timeout"})
FAULT_KINDS = ("rate_limit", "server_error", "timeout")  # what `Episode.call(fault=…)` takes
TIMEOUT_SECONDS = 30
# Encoders built once (json.dumps with options builds a JSONEncoder on every call).
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode
_ENCODE_ARGS = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_DECODE = json.JSONDecoder().decode
_FAULT_MESSAGES = {
    "rate_limit": "429 Too Many Requests: rate limit exceeded, retry after 2 s",
    "server_error": "500 Internal Server Error: the service failed, try again",
    "timeout": f"the request timed out after {TIMEOUT_SECONDS} s and was not applied",
}


class ToolResult:
    """The outcome of one call. ``content`` is decoded from the JSON text on access, so a
    caller mutating it cannot corrupt the episode's records."""

    __slots__ = ("_content", "_text", "error_code", "error_message", "images", "ok")

    def __init__(
        self,
        ok: bool,
        text: str,
        error_code: str | None = None,
        error_message: str | None = None,
        images: tuple[Attachment, ...] = (),
    ):
        self.ok = ok
        self._text = text
        self.images = images  # a view tool's images (attachments), sent as image parts
        self._content: Any = ...
        self.error_code = error_code
        self.error_message = error_message

    @classmethod
    def failure(cls, code: str, message: str) -> ToolResult:
        text = _ENCODE({"error": {"code": code, "message": message}})
        return cls(False, text, code, message)

    @property
    def content(self) -> Any:
        if self._content is ...:
            self._content = json.loads(self._text) if self.ok else None
        return self._content

    @property
    def retryable(self) -> bool:
        return self.error_code in TRANSIENT_ERRORS

    def to_message_content(self) -> str:
        """The text of the OpenAI ``tool`` message for this result."""
        return self._text

    def message_content(self) -> str | list[dict[str, Any]]:
        """The ``content`` of the OpenAI ``tool`` message: the text, or (a view tool's
        result) OpenAI content parts: the text, then one ``image_url`` part per image whose
        URL is ``attachment:sha256:<hex>`` (turned into a ``data:`` URL when sent)."""
        if not self.images:
            return self._text
        return [{"type": "text", "text": self._text}, *(image_part(a) for a in self.images)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "content": self.content,
            "error_code": self.error_code,
            "error_message": self.error_message,
        }

    def __repr__(self) -> str:
        return f"ToolResult(ok={self.ok}, error_code={self.error_code!r}, text={self._text[:80]!r})"


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    turn: int
    tool: str
    arguments: Any
    ok: bool
    error_code: str | None
    error_message: str | None
    fault: str | None
    at: str
    result_text: str | None
    diff: tuple[dict[str, Any], ...] = ()

    @classmethod
    def _make(cls, **fields: Any) -> AuditEntry:
        """The instance ``cls(**fields)`` gives (every field passed), built without the frozen
        ``__init__``'s ``object.__setattr__`` per field — a sixth of a simulator call."""
        entry = object.__new__(cls)
        entry.__dict__.update(fields)
        return entry

    @property
    def result(self) -> Any:
        return None if self.result_text is None else json.loads(self.result_text)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(
            json.dumps(
                {
                    "seq": self.seq,
                    "turn": self.turn,
                    "tool": self.tool,
                    "arguments": self.arguments,
                    "ok": self.ok,
                    "error_code": self.error_code,
                    "error_message": self.error_message,
                    "fault": self.fault,
                    "at": self.at,
                    "result": self.result,
                    "diff": list(self.diff),
                },
                default=str,
            )
        )


@dataclass(frozen=True)
class UserTurn:
    index: int
    message: str
    notices: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The user message as the agent sees it: loud-update notices first."""
        if not self.notices:
            return self.message
        return "\n".join(f"[notice] {n}" for n in self.notices) + "\n\n" + self.message


@dataclass
class _Counters:
    ids: dict[tuple[str, str], int] = field(default_factory=dict)


def _parse_time(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:  # never the machine's zone (validation reports these)
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


@lru_cache(maxsize=4096)
def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def base_state(spec: EnvironmentSpec, task_key: str) -> BaseState:
    """The task's initial state, built once per spec and shared by its episodes."""
    cache_key = ("base", task_key)
    base = spec._cache.get(cache_key)
    if base is None:
        base = spec._cache[cache_key] = build_base(spec.services, spec.task(task_key).records)
    return base


def _bounded_text(content: Any, max_chars: int) -> str:
    text = _ENCODE(content)
    if len(text) <= max_chars:
        return text
    if isinstance(content, dict) and isinstance(content.get("results"), list):
        budget = max_chars - 200
        kept: list[Any] = []
        used = 0
        for item in content["results"]:
            size = json_size(item) + 1
            if used + size > budget:
                break
            kept.append(item)
            used += size
        omitted = len(content["results"]) - len(kept)
        page = {
            **content,
            "results": kept,
            "truncated": f"{omitted} more results omitted (result size limit {max_chars} "
            "chars); narrow the query",
        }
        return json.dumps(page, ensure_ascii=False)
    preview = text[: max(0, max_chars - 120)]
    return json.dumps(
        {"truncated": f"result exceeded {max_chars} chars", "preview": preview + " …[truncated]"},
        ensure_ascii=False,
    )


class Episode:
    def __init__(
        self,
        spec: EnvironmentSpec | dict[str, Any],
        task_key: str,
        seed: int = 0,
        *,
        faults: bool = True,
        limits: Limits | None = None,
    ):
        self.spec = spec if isinstance(spec, EnvironmentSpec) else load_spec(spec)
        self.task = self.spec.task(task_key)
        self.seed = seed
        self.faults = faults
        self.limits = limits or Limits()
        self._world = WorldState(base_state(self.spec, task_key))
        self.reset()

    # ------------------------------------------------------------------ lifecycle
    def reset(self) -> None:
        self._world.reset()
        self.audit_log: list[AuditEntry] = []
        self.exogenous_log: list[dict[str, Any]] = []
        self.turn_index = -1
        self._clock = _parse_time(self.spec.clock.start)
        self._counters = _Counters()
        self._executed = 0

    @property
    def turns_left(self) -> int:
        return len(self.task.turns) - 1 - self.turn_index

    def clock_iso(self) -> str:
        return _iso(self._clock)

    def advance_turn(self) -> UserTurn | None:
        """Apply the next turn's exogenous updates; return its user message (None at end)."""
        if self.turns_left <= 0:
            return None
        self.turn_index += 1
        turn = self.task.turns[self.turn_index]
        if turn.time:
            self._clock = max(self._clock, _parse_time(turn.time))
        notices = []
        for update in turn.updates:
            ok = self._apply_update(update)
            if ok and not update.silent:
                notices.append(update.notice or _default_notice(update))
        return UserTurn(self.turn_index, turn.message, tuple(notices))

    def _apply_update(self, u: Update) -> bool:
        world = self._world
        entry: dict[str, Any] = {
            "turn": self.turn_index,
            "op": u.op,
            "service": u.service,
            "collection": u.collection,
            "id": u.id,
            "silent": u.silent,
        }
        if not world.has(u.service, u.collection):
            entry.update(ok=False, error="unknown collection")
        elif u.op == "create":
            record = dict(u.values or {})
            if "id" not in record:
                record["id"] = u.id or f"{u.collection}-x{len(self.exogenous_log) + 1}"
            if world.get(u.service, u.collection, record["id"]) is not None:
                entry.update(ok=False, error="id exists")
            else:
                world.insert(u.service, u.collection, record)
                world.size_bytes += json_size(record) + 1
                entry.update(ok=True, id=record["id"], after=record)
        else:
            old = world.get(u.service, u.collection, u.id or "")
            if old is None:
                entry.update(ok=False, error="record not found")
            elif u.op == "update":
                new = {**old, **(u.values or {}), "id": old["id"]}
                world.replace(u.service, u.collection, new)
                world.size_bytes += json_size(new) - json_size(old)
                entry.update(ok=True, before=old, after=new)
            else:
                world.remove(u.service, u.collection, old["id"])
                world.size_bytes -= json_size(old) + 1
                entry.update(ok=True, before=old)
        self.exogenous_log.append(entry)
        return entry["ok"]

    # ------------------------------------------------------------------ tool calls
    def call(
        self,
        tool_name: str,
        arguments: dict[str, Any] | str | None,
        *,
        fault: str | None = None,
        text: str | None = None,
    ) -> ToolResult:
        """Execute one tool call. ``fault`` forces that injected fault on a call that would
        otherwise run (a replay reproducing a recorded fault); it must be one of
        ``FAULT_KINDS`` and is applied where a seeded fault would be, after the tool and its
        arguments were checked. ``text``, for a dict of arguments, is their JSON as the
        caller already wrote it (``ensure_ascii=False, allow_nan=False``): not written again."""
        if fault is not None and fault not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {fault!r}; expected one of {FAULT_KINDS}")
        forced, fault = fault, None
        seq = len(self.audit_log) + 1
        self._clock += self.spec.clock.step_seconds
        diff: list[dict[str, Any]] = []
        args: Any = None
        if self._executed >= self.limits.max_calls:
            # Every attempt counts, malformed ones too: an agent spamming bad calls is bounded.
            msg = f"call limit reached ({self.limits.max_calls} calls per episode)"
            result = ToolResult.failure("call_limit", msg)
        else:
            self._executed += 1
            args, result = self._parse_arguments(arguments, text)
            if result is None:
                result, fault, diff = self._dispatch(seq, str(tool_name), args, forced=forced)
        self.audit_log.append(
            AuditEntry._make(
                seq=seq,
                turn=max(self.turn_index, 0),
                tool=str(tool_name)[:200],
                arguments=args,
                ok=result.ok,
                error_code=result.error_code,
                error_message=result.error_message,
                fault=fault,
                at=_iso(self._clock),
                result_text=result.to_message_content() if result.ok else None,
                diff=tuple(diff),
            )
        )
        return result

    def _parse_arguments(
        self, arguments: Any, known: str | None = None
    ) -> tuple[Any, ToolResult | None]:
        limit = self.limits.max_argument_chars
        if arguments is None:
            arguments = {}
        decoded = isinstance(arguments, str)
        if decoded:
            if len(arguments) > limit:
                return None, ToolResult.failure("bad_arguments", f"arguments exceed {limit} chars")
            try:
                arguments = _DECODE(arguments)
            except ValueError as exc:
                return None, ToolResult.failure("bad_arguments", f"arguments are not JSON: {exc}")
        if not isinstance(arguments, dict):
            return None, ToolResult.failure("bad_arguments", "arguments must be a JSON object")
        try:
            text = known if known is not None and not decoded else _ENCODE_ARGS(arguments)
        except (TypeError, ValueError) as exc:
            return None, ToolResult.failure("bad_arguments", f"arguments are not JSON: {exc}")
        if len(text) > limit:
            return None, ToolResult.failure("bad_arguments", f"arguments exceed {limit} chars")
        # Decoded text is already the episode's own object; a caller's dict is copied (the
        # caller may mutate it later; the audit log and the records must not change).
        return (arguments if decoded else _DECODE(text)), None

    def _dispatch(
        self, seq: int, name: str, args: dict[str, Any], *, forced: str | None = None
    ) -> tuple[ToolResult, str | None, list[dict[str, Any]]]:
        tool = self.spec.tool(name)
        if tool is None:
            names = ", ".join(t.name for t in self.spec.tools[:40])
            return (
                ToolResult.failure("unknown_tool", f"no tool '{name[:80]}'; tools: {names}"),
                None,
                [],
            )
        problem = self._check_arguments(tool, args)
        if problem is not None:
            return ToolResult.failure("bad_arguments", problem), None, []
        kind = forced
        if kind is None and self.faults and tool.faults.rate > 0:
            rng = random.Random(f"{self.seed}/{seq}/{name}")
            if rng.random() < tool.faults.rate:
                kind = rng.choice(tool.faults.kinds)
        if kind is not None:
            if kind == "timeout":
                self._clock += TIMEOUT_SECONDS
            return ToolResult.failure(kind, _FAULT_MESSAGES[kind]), kind, []
        ctx = OpContext(
            state=self._world,
            now=_iso(self._clock),
            id_counters=self._counters.ids,
            max_record_bytes=self.limits.max_record_bytes,
            max_state_bytes=self.limits.max_state_bytes,
        )
        try:
            content, diff = execute(tool.binding, args, ctx)
            images = self._viewed(tool, content) if tool.binding.attachment else ()
        except ToolError as exc:
            return ToolResult.failure(exc.code, exc.message), None, []
        text = _bounded_text(content, self.limits.max_result_chars)
        return ToolResult(True, text, images=images), None, diff

    def _viewed(self, tool: ToolSpec, record: Any) -> tuple[Attachment, ...]:
        """The image a view tool (``get`` with ``attachment``) shows for ``record``."""
        field_name = tool.binding.attachment or ""
        value = record.get(field_name) if isinstance(record, dict) else None
        sha = ref_sha256(value)
        if sha is None:
            raise ToolError("not_found", f"record '{record.get('id')}' has no {field_name}")
        attachment = self.spec.attachment(sha)
        if attachment is None:
            raise ToolError("not_found", f"the {field_name} of '{record.get('id')}' is missing")
        if not attachment.is_image:
            raise ToolError(
                "not_an_image",
                f"'{attachment.name}' is {attachment.media_type}, not an image: it cannot be shown",
            )
        return (attachment,)

    def _check_arguments(self, tool: ToolSpec, args: dict[str, Any]) -> str | None:
        """Why ``args`` fail the tool's schema (up to three jsonschema messages), or None."""
        key = ("args", tool.name)
        check = self.spec._cache.get(key)
        if check is None:
            # Compiled once per spec and tool: a plain predicate for the keyword subset tool
            # schemas use (argcheck.py), else the cached jsonschema validator's is_valid.
            check = compile_check(tool.parameters) or validator_for(tool.parameters).is_valid
            self.spec._cache[key] = check
        if check(args):
            return None
        # An invalid call: the messages come from jsonschema, as they always have.
        errors = sorted(
            validator_for(tool.parameters).iter_errors(args), key=lambda e: list(e.path)
        )
        parts = [
            (f"'{'/'.join(map(str, e.absolute_path))}': " if e.absolute_path else "") + e.message
            for e in errors[:3]
        ]
        return "; ".join(parts)[:1000]

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """The current state (shares record objects: treat as read-only)."""
        return self._world.view()

    def state_snapshot(self) -> dict[str, Any]:
        """A deep, JSON-able copy of the current state."""
        return json.loads(json.dumps(self._world.view()))

    @property
    def state_bytes(self) -> int:
        return self._world.size_bytes

    def state_hash(self) -> str:
        """sha256 of the state as sorted, compact JSON (records are JSON, so no float
        normalisation is needed: equal states give equal text)."""
        text = json.dumps(
            self._world.view(),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            default=str,
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _default_notice(u: Update) -> str:
    what = f"{u.service}/{u.collection}"
    if u.op == "create":
        return f"New record in {what}" + (f": {u.id}" if u.id else ".")
    if u.op == "update":
        return f"Record {u.id} in {what} was changed."
    return f"Record {u.id} in {what} was deleted."
