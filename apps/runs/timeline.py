"""The trajectory of a run as a timeline a person can read: plain data built from the stored
transcript, audit log, exogenous log and verdicts (no database, no HTML; the templates
escape every string)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from apps.core.text import count_of
from coworkenv_engine.attachments import (
    image_urls,
    message_text,
    references,
    url_sha256,
)

# sha256 -> the URL of the file (the environment's attachment view), or None when the
# environment no longer lists it
AttachmentURL = Callable[[str], "str | None"]


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def compact(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _parsed(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def record_diff(change: dict) -> dict:
    """One changed record: {title, op, fields: [{name, before, after, changed}], changed}.

    The one reader of both diff shapes the engine writes: a tool call's update lists only
    what changed (``changes: {field: {before, after}}``); a create has ``after``, a delete
    ``before``, and an exogenous update both whole records (fields that stayed the same are
    listed too, unmarked)."""
    if isinstance(change.get("changes"), dict):
        fields = []
        # By name: PostgreSQL's jsonb does not keep the order the engine wrote them in.
        for name, values in sorted(change["changes"].items()):
            values = values if isinstance(values, dict) else {}
            fields.append(
                {
                    "name": name,
                    "before": compact(values.get("before")) if "before" in values else "",
                    "after": compact(values.get("after")) if "after" in values else "",
                    "changed": True,
                }
            )
    else:
        before = change.get("before") if isinstance(change.get("before"), dict) else {}
        after = change.get("after") if isinstance(change.get("after"), dict) else {}
        names = list(before) + [name for name in after if name not in before]
        fields = [
            {
                "name": name,
                "before": compact(before.get(name)) if name in before else "",
                "after": compact(after.get(name)) if name in after else "",
                "changed": before.get(name) != after.get(name)
                or (name in before) != (name in after),
            }
            for name in names
        ]
    where = f"{change.get('service', '')}.{change.get('collection', '')}"
    return {
        "title": f"{where}/{change.get('id', '')}",
        "op": change.get("op", ""),
        "fields": fields,
        "changed": sum(1 for f in fields if f["changed"]),
    }


def _update_item(entry: dict) -> dict:
    return {
        "op": entry.get("op", ""),
        "where": f"{entry.get('service', '')}.{entry.get('collection', '')}",
        "id": entry.get("id") or "",
        "silent": bool(entry.get("silent")),
        "ok": entry.get("ok", True),
        "error": entry.get("error", ""),
        "diff": record_diff(entry) if entry.get("ok", True) else None,
    }


def call_media(
    content: Any, attachments: dict[str, dict], attachment_url: AttachmentURL | None
) -> tuple[list[dict], list[dict]]:
    """``(images, documents)`` a tool result shows: the images a view tool returned (what
    the agent saw: thumbnails), and the other attachments its records refer to (PDFs,
    images the agent did not view: links). Each is
    ``{"sha256", "name", "media_type", "url"}``; ``url`` is None when the file cannot be
    served (the environment no longer lists it)."""
    images, documents, seen = [], [], set()

    def entry(sha: str) -> dict:
        meta = attachments.get(sha) or {}
        return {
            "sha256": sha,
            "name": meta.get("name") or f"sha256:{sha[:12]}…",
            "media_type": meta.get("media_type") or "",
            "url": attachment_url(sha) if attachment_url and sha in attachments else None,
        }

    for url in image_urls(content):
        sha = url_sha256(url)
        if sha and sha not in seen:
            seen.add(sha)
            images.append(entry(sha))
    for _, sha in references(_parsed(message_text(content))):
        if sha not in seen:
            seen.add(sha)
            documents.append(entry(sha))
    return images, documents


def context_item(event: dict) -> dict:
    """A compaction of the agent's request (``apps.runs.context``) as the viewer shows it."""
    parts = []
    if event.get("summarized_messages"):
        parts.append(f"{count_of(event['summarized_messages'], 'earlier message')} summarized")
    if event.get("dropped_tool_results"):
        parts.append(f"{count_of(event['dropped_tool_results'], 'old tool result')} left out")
    if event.get("dropped_turns"):
        parts.append(f"{count_of(event['dropped_turns'], 'earlier turn')} left out")
    return {
        "kind": "context",
        "what": "; ".join(parts) or "request shortened",
        "tokens_before": event.get("tokens_before"),
        "tokens_after": event.get("tokens_after"),
        "budget": event.get("budget"),
        "summary": event.get("summary", ""),
        "call": event.get("call"),
    }


def run_timeline(
    *,
    transcript: list[dict],
    audit_log: list[dict],
    exogenous_log: list[dict],
    attachments: list[dict] | None = None,
    attachment_url: AttachmentURL | None = None,
    context_events: list[dict] | None = None,
) -> list[dict]:
    """Items in order: ``system``, ``user`` (with the turn's exogenous updates), ``context``
    (the agent's request was shortened to fit its model's context before the next answer),
    ``assistant`` (its text and tool calls, each with arguments, result or error, record
    diffs, and the images and documents the result shows: ``attachments`` is the
    environment's list, ``attachment_url`` gives a file's URL)."""
    listed = {a.get("sha256"): a for a in attachments or [] if isinstance(a, dict)}
    items: list[dict] = []
    compactions: dict[int, list[dict]] = {}
    for event in context_events or []:
        compactions.setdefault(event.get("messages", -1), []).append(context_item(event))
    updates_by_turn: dict[int, list[dict]] = {}
    for entry in exogenous_log or []:
        updates_by_turn.setdefault(entry.get("turn", 0), []).append(_update_item(entry))
    calls_by_id: dict[str, dict] = {}
    audit_index = 0
    turn = -1
    for index, message in enumerate(transcript or []):
        role = message.get("role")
        if role == "system":
            items.append({"kind": "system", "content": message.get("content") or ""})
        elif role == "user":
            turn += 1
            items.append(
                {
                    "kind": "user",
                    "turn": turn,
                    "content": message.get("content") or "",
                    "updates": updates_by_turn.get(turn, []),
                    "anchor": f"turn-{turn}",
                }
            )
        elif role == "assistant":
            items.extend(compactions.get(index, []))
            calls = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                arguments = _parsed(function.get("arguments"))
                item = {
                    "id": call.get("id", ""),
                    "name": function.get("name", ""),
                    "arguments": pretty(arguments) if not isinstance(arguments, str) else arguments,
                    "ok": None,
                    "result": "",
                    "error_code": "",
                    "error_message": "",
                    "fault": "",
                    "diffs": [],
                    "images": [],
                    "documents": [],
                    "seq": None,
                    "anchor": f"msg-{index}-call-{len(calls)}",
                }
                calls.append(item)
                calls_by_id[item["id"]] = item
            items.append(
                {
                    "kind": "assistant",
                    "turn": turn,
                    "content": message.get("content") or "",
                    "calls": calls,
                    "anchor": f"msg-{index}",
                }
            )
        elif role == "tool":
            call = calls_by_id.get(message.get("tool_call_id", ""))
            entry = audit_log[audit_index] if audit_index < len(audit_log or []) else {}
            audit_index += 1
            if call is None:
                continue
            call["seq"] = entry.get("seq")
            call["ok"] = entry.get("ok", True)
            call["at"] = entry.get("at", "")
            call["error_code"] = entry.get("error_code") or ""
            call["error_message"] = entry.get("error_message") or ""
            call["fault"] = entry.get("fault") or ""
            content = message.get("content")
            call["result"] = pretty(_parsed(message_text(content)))
            call["images"], call["documents"] = call_media(content, listed, attachment_url)
            call["diffs"] = [record_diff(change) for change in entry.get("diff") or []]
            if call["seq"] is not None:
                call["anchor"] = f"call-{call['seq']}"
    return items


def turn_days(items: list[dict]) -> list[dict]:
    """The user turns of a timeline grouped by the day they fell on, for jump links on a long
    run: ``[{"day": 1, "date": "2026-03-02", "turns": [{"turn", "anchor"}]}]``. A turn's day
    is the environment clock's date at its first tool call (a long-horizon task's later turns
    fall on later working days); a turn without calls joins the day before it."""
    days: list[dict] = []
    for item in items:
        if item["kind"] == "user":
            turn = {"turn": item["turn"], "anchor": item["anchor"]}
            days.append({"date": "", "turns": [turn]})
        elif item["kind"] == "assistant" and days and not days[-1]["date"]:
            dated = [str(call["at"])[:10] for call in item["calls"] if call.get("at")]
            days[-1]["date"] = dated[0] if dated else ""
    merged: list[dict] = []
    for entry in days:
        if merged and entry["date"] in ("", merged[-1]["date"]):
            merged[-1]["turns"].extend(entry["turns"])
        else:
            merged.append(entry)
    for number, entry in enumerate(merged, start=1):
        entry["day"] = number
    return merged


def failures(items: list[dict], verdicts: list[dict]) -> list[dict]:
    """Jump targets: failed graders, then tool calls that returned an error."""
    out = [
        {
            "kind": "grader",
            "label": f"{v.get('grader_id')} failed ({v.get('category')})",
            "anchor": f"verdict-{v.get('grader_id')}",
        }
        for v in verdicts or []
        if v.get("status") == "failed"
    ]
    for item in items:
        for call in item.get("calls", []):
            if call["ok"] is False:
                out.append(
                    {
                        "kind": "tool",
                        "label": f"{call['name']} → {call['error_code'] or 'error'}",
                        "anchor": call["anchor"],
                    }
                )
    return out


def verdict_rows(verdicts: list[dict], grader_anchors: dict[str, str] | None = None) -> list[dict]:
    grader_anchors = grader_anchors or {}
    return [
        {
            **v,
            "evidence_text": pretty(v.get("evidence") or {}),
            "anchor": f"verdict-{v.get('grader_id')}",
            "grader_href": grader_anchors.get(v.get("grader_id")),
            "judge": judge_summary(v.get("evidence") or {}),
        }
        for v in verdicts or []
    ]


def judge_summary(evidence: dict) -> dict | None:
    """A judge check's score, reasoning and cache hit, for the verdict panel (None for other
    checks). Shown escaped: the reasoning is model output."""
    if not isinstance(evidence, dict) or "score" not in evidence or "threshold" not in evidence:
        return None
    reasoning = evidence.get("reasoning")
    return {
        "score": evidence.get("score"),
        "threshold": evidence.get("threshold"),
        "reasoning": reasoning if isinstance(reasoning, str) else "",
        "cached": bool(evidence.get("cached")),
        "model": evidence.get("model") or "",
        "error": evidence.get("error") or "",
    }
