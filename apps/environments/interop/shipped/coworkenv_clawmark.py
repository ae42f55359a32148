"""Helpers for ClawMark tasks exported by CoworkEnv (shipped in exports).

State contract: every collection of the environment is a JSON array of records at
``/workspace/coworkenv/<service>/<collection>.json`` in the agent's workspace; the agent
reads and writes them (PROMPT and AGENTS.md say so), the stages seed and mutate them, and
the checkers evaluate CoworkEnv's declarative checks with CoworkEnv's engine
(``coworkenv_engine``, shipped next to this file; it needs ``jmespath`` and ``jsonschema``).
Services of a kind ClawMark runs locally are also seeded there: ``email`` inbox messages
through ``ctx.email``, ``calendar`` events through ``ctx.calendar``, ``files`` documents as
real files under ``/workspace``.

The evidence a ClawMark checker gets is its ``ctx``: ``ctx.workspace`` (the snapshot of
``/workspace`` taken when the stage's agent session ended), ``ctx.snapshots`` (every stage's
snapshot so far), the service managers and the sandbox. No tool-call log and no reply log
reach it, so the checks see:

state         the records in the snapshot of the check's stage (``final``: the last one)
response      the agent's reply to stage K, which the output contract (AGENTS.md and each
              notification) asks for in ``outputs/replies/stage<K>.md``, read from stage
              K's snapshot; without that file, the agent's messages of stage K in OpenClaw's
              session log (read through ``ctx.sandbox``: the transcript ClawMark keeps as
              ``messages.jsonl``), a stage beginning at the notification that names its
              reply file
side_effects  the agent's own changes, per stage: stage K's snapshot against stage K-1's
              (the initial records for stage 0) with stage K's exogenous updates applied,
              compared with the reference solution's footprint (exported with the task)
"""

from __future__ import annotations

import json
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from coworkenv_engine.checks import Call, CheckView, evaluate
from coworkenv_engine.side_effects import Change, Footprint

STATE_DIR = "coworkenv"
CALENDAR = "coworkenv"
WORKSPACE = "/workspace"
REPLIES = "outputs/replies"
SESSIONS = "/root/.openclaw/agents/main/sessions"
STAGE_MARK = re.compile(r"\(Write your reply to this message in outputs/replies/stage(\d+)\.md\.\)")


def reply_path(stage: int) -> str:
    """Where the agent writes its reply to stage ``stage``, relative to /workspace."""
    return f"{REPLIES}/stage{stage}.md"


def remote_path(service: str, collection: str) -> str:
    return f"{WORKSPACE}/{STATE_DIR}/{service}/{collection}.json"


async def _write(ctx, remote: str, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        f.write(text)
        local = Path(f.name)
    try:
        await ctx.fs.upload_file(local, remote)
    finally:
        local.unlink(missing_ok=True)


async def write_collection(ctx, service: str, collection: str, records: list) -> None:
    text = json.dumps(records, indent=2, ensure_ascii=False)
    await _write(ctx, remote_path(service, collection), text)


async def read_collection(ctx, service: str, collection: str) -> list:
    try:
        text = await ctx.fs.read_file(remote_path(service, collection))
        value = json.loads(text)
    except Exception:  # missing or broken: the agent removed or garbled it
        return []
    return value if isinstance(value, list) else []


async def seed(ctx, state: dict, users: dict) -> None:
    """Stage 0: the assets (AGENTS.md), the initial records as JSON files, and the records
    of the local services they map to."""
    assets = Path(getattr(ctx, "task_dir", "") or ".") / "assets"
    if getattr(ctx, "task_dir", None) and assets.is_dir():
        await ctx.fs.upload_dir(assets, WORKSPACE)
    for service, collections in state.items():
        for collection, records in collections.items():
            await write_collection(ctx, service, collection, records)
    for record in state.get("email", {}).get("inbox", []):
        sender = _user_key(record.get("from", ""), users)
        if getattr(ctx, "email", None) is not None and sender:
            await ctx.email.send_email(
                from_user=sender,
                to=_address(record.get("to", "")),
                subject=str(record.get("subject", "")),
                body=str(record.get("body", "")),
            )
    if getattr(ctx, "calendar", None) is not None and state.get("calendar", {}).get("events"):
        await ctx.calendar.create_calendar(CALENDAR)
        for event in state["calendar"]["events"]:
            start, end = _moment(event.get("start")), _moment(event.get("end"))
            if start is None or end is None:
                continue  # not a time ClawMark's calendar can hold; the JSON file keeps it
            await ctx.calendar.add_event(
                CALENDAR,
                str(event.get("title", "")),
                start,
                end,
                description=str(event.get("description", "")),
                uid=str(event["id"]),
            )
    for document in state.get("files", {}).get("files", []):
        path = str(document.get("path", "")).lstrip("/")
        if path and ".." not in path.split("/"):
            await _write(ctx, f"{WORKSPACE}/{path}", str(document.get("content", "")))


def _moment(value) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _address(value) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _user_key(address: str, users: dict) -> str | None:
    for key, user in users.items():
        if user.get("email") == address:
            return key
    return None


def apply_update(records: list, u: dict) -> bool:
    """One exogenous update applied to a collection's records in place (the engine's
    semantics: a create with a taken id, or a change of a missing record, does nothing)."""
    index = {r.get("id"): i for i, r in enumerate(records) if isinstance(r, dict)}
    if u["op"] == "create":
        record = dict(u.get("values") or {})
        record.setdefault("id", u.get("id") or f"{u['collection']}-x{len(records) + 1}")
        if record["id"] in index:
            return False
        records.append(record)
        return True
    if u.get("id") not in index:
        return False
    i = index[u["id"]]
    if u["op"] == "update":
        records[i] = {**records[i], **(u.get("values") or {}), "id": u["id"]}
    else:
        records.pop(i)
    return True


async def apply_updates(ctx, updates: list) -> list[str]:
    """A turn's exogenous updates, applied to the workspace files; the loud ones' notices."""
    notices = []
    for u in updates:
        records = await read_collection(ctx, u["service"], u["collection"])
        if apply_update(records, u):
            await write_collection(ctx, u["service"], u["collection"], records)
            if not u.get("silent"):
                what = f"{u['op']} {u['service']}.{u['collection']} {u.get('id') or ''}".strip()
                notices.append(u.get("notice") or what)
    return notices


def notification(message: str, notices: list[str], stage: int | None = None) -> str:
    text = message
    if notices:
        text = "\n".join(f"[notice] {n}" for n in notices) + "\n\n" + message
    if stage is not None:
        text += f"\n\n(Write your reply to this message in {reply_path(stage)}.)"
    return text


def snapshot_state(workspace: Path, services: dict) -> dict:
    """The records in a workspace snapshot (``ctx.workspace``)."""
    state = {}
    for service, collections in services.items():
        state[service] = {}
        for collection in collections:
            path = Path(workspace) / STATE_DIR / service / f"{collection}.json"
            try:
                value = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                value = []
            state[service][collection] = value if isinstance(value, list) else []
    return state


class TaskData:
    """What the checkers of one exported task need besides ``ctx``."""

    def __init__(self, services: dict, initial: dict, turns: list, reference: list):
        self.services, self.initial, self.turns = services, initial, turns
        self.reference = Footprint(
            tuple(Change(**{**c, "fields": tuple(c.get("fields", ()))}) for c in reference)
        )


def _snapshot(ctx, stage: int) -> Path | None:
    snapshots = getattr(ctx, "snapshots", None) or {}
    path = snapshots.get(f"stage{stage}")
    return Path(path) if path else None


def _diffs(before: dict, after: dict) -> list[dict]:
    """Record-level changes between two states, in the audit log's diff form."""
    out = []
    for service, collections in after.items():
        for collection, records in collections.items():
            old = {r.get("id"): r for r in before.get(service, {}).get(collection, [])
                   if isinstance(r, dict)}  # fmt: skip
            new = {r.get("id"): r for r in records if isinstance(r, dict)}
            base = {"service": service, "collection": collection}
            for rid, record in new.items():
                if rid not in old:
                    out.append({**base, "op": "create", "id": rid, "after": record})
                elif record != old[rid]:
                    fields = sorted(set(record) | set(old[rid]))
                    changes = {
                        f: [old[rid].get(f), record.get(f)]
                        for f in fields
                        if old[rid].get(f) != record.get(f)
                    }
                    out.append({**base, "op": "update", "id": rid, "changes": changes})
            out += [{**base, "op": "delete", "id": rid} for rid in old if rid not in new]
    return out


def agent_changes(ctx, task: TaskData, turn: int) -> list[Call]:
    """The agent's own changes, one pseudo-call per stage up to ``turn``: each stage's
    snapshot against the previous one with the stage's exogenous updates applied."""
    calls, before = [], json.loads(json.dumps(task.initial))
    for k in range(turn + 1):
        for u in task.turns[k]["updates"]:
            records = before.setdefault(u["service"], {}).setdefault(u["collection"], [])
            apply_update(records, u)
        path = _snapshot(ctx, k) or (Path(ctx.workspace) if k == turn else None)
        if path is None:
            break
        after = snapshot_state(path, task.services)
        calls.append(Call(k, k, "(workspace)", {}, True, None, tuple(_diffs(before, after))))
        before = after
    return calls


def parse_session(text: str) -> dict[int, list[str]]:
    """The assistant's texts per stage in an OpenClaw session log (JSONL, one entry a line,
    ``{"type": "message", "message": {"role", "content": [{"type": "text", "text"}, …]}}``):
    a stage begins at the user message holding its notification's reply-file mark."""
    stage, out = None, {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        texts = [
            c.get("text") or ""
            for c in content or []
            if isinstance(c, dict) and c.get("type") == "text"
        ]
        said = "\n".join(t for t in texts if t.strip())
        if message.get("role") == "user":
            mark = STAGE_MARK.search(said)
            if mark:
                stage = int(mark.group(1))
        elif message.get("role") == "assistant" and stage is not None and said:
            out.setdefault(stage, []).append(said)
    return out


async def session_replies(ctx) -> dict[int, list[str]]:
    """The agent's messages per stage from OpenClaw's session log in the sandbox ({} when
    there is no sandbox or no log)."""
    sandbox = getattr(ctx, "sandbox", None)
    if sandbox is None:
        return {}
    try:
        result = await sandbox.exec(f"cat {SESSIONS}/*.jsonl 2>/dev/null")
    except Exception:  # no container, no log: the reply files are the only evidence
        return {}
    return parse_session(getattr(result, "stdout", "") or "")


async def replies(ctx, turn: int) -> list[tuple[int, str]]:
    """The agent's replies to stages 0..turn: each stage's reply file from its own snapshot,
    else its messages in the session log."""
    out, session = [], None
    for k in range(turn + 1):
        path = _snapshot(ctx, k) or (Path(ctx.workspace) if k == turn else None)
        try:
            text = (path / reply_path(k)).read_text(encoding="utf-8") if path else ""
        except (OSError, UnicodeDecodeError):
            text = ""
        if text.strip():
            out.append((k, text))
            continue
        if session is None:
            session = await session_replies(ctx)
        out += [(k, t) for t in session.get(k, [])]
    return out


def _has_response(check: dict) -> bool:
    if "all" in check or "any" in check:
        return any(_has_response(c) for c in check.get("all") or check.get("any") or [])
    if "not" in check:
        return _has_response(check["not"])
    return check.get("kind") == "response"


async def passes(ctx, task: TaskData, check: dict, turn: int) -> bool:
    """Whether a declarative check holds at the end of stage ``turn``: state over that
    stage's snapshot, replies from the reply files (or the session log), side effects from
    the snapshots."""
    state = snapshot_state(ctx.workspace, task.services)
    view = CheckView(
        state,
        agent_changes(ctx, task, turn),
        await replies(ctx, turn) if _has_response(check) else [],
        turn,
        [],
        "",
        None,
        task.reference.until(turn),
    )
    status, _ = evaluate(check, view)
    return status == "passed"
