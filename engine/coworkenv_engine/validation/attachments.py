"""Attachments: every reference resolves to a listed attachment, every listed attachment is
a supported type within its size limit and is referred to, view tools read a field that
holds one, and (given a resolver) the stored bytes are the ones the document describes."""

from __future__ import annotations

from typing import Any

from ..attachments import MAX_TOTAL_BYTES, SIZE_LIMITS, Resolver, content_problem, references
from ..problems import Problem, error, pointer, warning
from ..spec_model import EnvironmentSpec
from .viewing import viewing_problems


def _record_sources(spec: EnvironmentSpec):
    """``(pointer base, records)`` of every place records live: the services, each task's
    records and each exogenous update's values."""
    for service, cols in spec.services.items():
        for name, records in cols.items():
            yield ("services", service, name), records
    for k, task in enumerate(spec.tasks):
        for service, cols in task.records.items():
            for name, records in cols.items():
                yield ("tasks", k, "records", service, name), records
        for t, turn in enumerate(task.turns):
            for u, update in enumerate(turn.updates):
                if update.values is not None:
                    yield ("tasks", k, "turns", t, "updates", u, "values"), update.values


def attachment_problems(spec: EnvironmentSpec) -> list[Problem]:
    out: list[Problem] = []
    listed: dict[str, int] = {}
    total = 0
    for i, att in enumerate(spec.attachments):
        if att.sha256 in listed:
            out.append(
                error(
                    "duplicate_id",
                    pointer("attachments", i, "sha256"),
                    f"Attachment {att.sha256[:12]}… is listed twice.",
                    "List each attachment once.",
                )
            )
        listed.setdefault(att.sha256, i)
        total += att.size
        limit = SIZE_LIMITS.get(att.media_type)
        if limit is None:
            out.append(
                error(
                    "attachment_type_unsupported",
                    pointer("attachments", i, "media_type"),
                    f"'{att.name}' is {att.media_type}, which an attachment cannot be.",
                    f"Use one of: {', '.join(SIZE_LIMITS)} (convert the file).",
                )
            )
        elif att.size > limit:
            out.append(
                error(
                    "attachment_too_large",
                    pointer("attachments", i, "size"),
                    f"'{att.name}' has {att.size} bytes, over the {limit}-byte limit for "
                    f"{att.media_type}.",
                    "Shrink the file (a smaller resolution, JPEG for photos) and attach it again.",
                )
            )
    if total > MAX_TOTAL_BYTES:
        out.append(
            error(
                "attachment_too_large",
                "/attachments",
                f"The attachments take {total} bytes together, over {MAX_TOTAL_BYTES}.",
                "Use fewer or smaller attachments.",
            )
        )
    referenced: set[str] = set()
    for base, records in _record_sources(spec):
        for path, sha in references(records):
            referenced.add(sha)
            if sha not in listed:
                out.append(
                    error(
                        "attachment_missing",
                        pointer(*base, *path),
                        f"The record refers to attachment {sha[:12]}…, which /attachments "
                        "does not list.",
                        "Attach the file (its sha256, media_type, size and name under "
                        "/attachments), or remove the reference.",
                    )
                )
    for i, att in enumerate(spec.attachments):
        if att.sha256 not in referenced and listed.get(att.sha256) == i:
            out.append(
                warning(
                    "attachment_unreferenced",
                    pointer("attachments", i),
                    f"No record refers to '{att.name}' (sha256:{att.sha256[:12]}…).",
                    f'Refer to it from a record field ("sha256:{att.sha256}") or remove it.',
                )
            )
    out.extend(_view_tools(spec))
    out.extend(viewing_problems(spec))
    return out


def _view_tools(spec: EnvironmentSpec) -> list[Problem]:
    out = []
    for t, tool in enumerate(spec.tools):
        b = tool.binding
        if not b.attachment:
            continue
        records: list[Any] = list(spec.services.get(b.service, {}).get(b.collection, []))
        for task in spec.tasks:
            records += task.records.get(b.service, {}).get(b.collection, [])
        holders = [
            r for r in records if isinstance(r, dict) and any(references(r.get(b.attachment)))
        ]
        if not holders:
            out.append(
                error(
                    "attachment_field_unknown",
                    pointer("tools", t, "binding", "attachment"),
                    f"No record of {b.service}.{b.collection} holds an attachment in "
                    f"'{b.attachment}': the view tool '{tool.name}' can show nothing.",
                    'Name the field whose value is "sha256:<hex>", or attach files to the records.',
                )
            )
    return out


def attachment_content_problems(spec: EnvironmentSpec, resolve: Resolver) -> list[Problem]:
    """Each listed attachment's stored bytes, fetched through ``resolve``, must exist and
    match its hash, size and media type."""
    out = []
    for i, att in enumerate(spec.attachments):
        why = content_problem(att, resolve(att.sha256))
        if why is not None:
            out.append(
                error(
                    "attachment_content_invalid",
                    pointer("attachments", i),
                    f"'{att.name}': {why}.",
                    "Upload the file again (it is stored by its sha256) or correct its entry.",
                )
            )
    return out
