"""Helpers for ClawMark tasks exported by CoworkEnv (shipped in exports).

State contract: every collection of the environment is a JSON array of records at
``/workspace/coworkenv/<service>/<collection>.json`` in the agent's workspace; the agent
reads and writes them (PROMPT says so), the stages seed and mutate them, and the checkers
evaluate CoworkEnv's declarative checks over the stage's workspace snapshot with CoworkEnv's
engine (``coworkenv_engine``, shipped next to this file; it needs ``jmespath`` and
``jsonschema``). Services of a kind ClawMark runs locally are also seeded there: ``email``
inbox messages through ``ctx.email``, ``calendar`` events through ``ctx.calendar``,
``files`` documents as real files under ``/workspace``.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from coworkenv_engine.checks import CheckView, evaluate

STATE_DIR = "coworkenv"
CALENDAR = "coworkenv"
WORKSPACE = "/workspace"


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


async def apply_updates(ctx, updates: list) -> list[str]:
    """A turn's exogenous updates, applied to the workspace files; the loud ones' notices."""
    notices = []
    for u in updates:
        records = await read_collection(ctx, u["service"], u["collection"])
        index = {r.get("id"): i for i, r in enumerate(records) if isinstance(r, dict)}
        applied = False
        if u["op"] == "create":
            record = dict(u.get("values") or {})
            record.setdefault("id", u.get("id") or f"{u['collection']}-x{len(records) + 1}")
            if record["id"] not in index:
                records.append(record)
                applied = True
        elif u.get("id") in index:
            i = index[u["id"]]
            if u["op"] == "update":
                records[i] = {**records[i], **(u.get("values") or {}), "id": u["id"]}
            else:
                records.pop(i)
            applied = True
        if applied:
            await write_collection(ctx, u["service"], u["collection"], records)
            if not u.get("silent"):
                what = f"{u['op']} {u['service']}.{u['collection']} {u.get('id') or ''}".strip()
                notices.append(u.get("notice") or what)
    return notices


def notification(message: str, notices: list[str]) -> str:
    if not notices:
        return message
    return "\n".join(f"[notice] {n}" for n in notices) + "\n\n" + message


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


def passes(ctx, check: dict, services: dict, turn: int) -> bool:
    """Whether a declarative state check holds over the stage's workspace snapshot."""
    state = snapshot_state(ctx.workspace, services)
    view = CheckView(state, [], [], turn, [], "", None, None)
    status, _ = evaluate(check, view)
    return status == "passed"
