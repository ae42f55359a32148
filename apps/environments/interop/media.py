"""The attachment files an export ships: every image a task's view tools can return.

A view tool (a ``get`` binding with ``attachment``) shows the file a record field refers to
(``"sha256:<hex>"``). The files an export needs are those of the fields view tools show, in
the task's initial records and in the values its turns' updates write. Their bytes come from
a ``Resolver`` (the app passes its attachment storage) and are checked against the document
(hash, size, type): a record that points at a file the storage lacks, or at bytes that are
not the file the document lists, stops the export with a ``MediaProblem`` naming the record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from apps.environments.interop.package import identifier
from coworkenv_engine.attachments import EXTENSIONS, Attachment, Resolver, content_problem
from coworkenv_engine.attachments import references as attachment_references
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import parse_spec


class MediaProblem(Exception):
    """An attachment an export needs cannot be shipped: ``message`` names the record."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Media:
    attachment: Attachment
    file_name: str  # unique within one task's files
    data: bytes


def _view_fields(document: dict) -> dict[tuple[str, str], set[str]]:
    """(service, collection) -> the record fields view tools show."""
    out: dict[tuple[str, str], set[str]] = {}
    for tool in document["tools"]:
        binding = tool["binding"]
        if binding.get("op") == "get" and binding.get("attachment"):
            out.setdefault((binding["service"], binding["collection"]), set()).add(
                binding["attachment"]
            )
    return out


def _record_label(service: str, collection: str, record: object, where: str) -> str:
    key = record.get("id") if isinstance(record, dict) else None
    named = f" '{key}'" if key is not None else ""
    return f"{where}{service}.{collection} record{named}"


def _viewed_references(document: dict, task: dict) -> list[tuple[str, str, str]]:
    """``(record label, field, sha256)`` of each view-tool field's reference in the task's
    initial records and its turns' update values, in order."""
    views = _view_fields(document)
    state = Episode(parse_spec(document), task["key"], faults=False).state_snapshot()
    places = [
        ("", service, collection, record)
        for service, collections in state.items()
        for collection, records in collections.items()
        for record in records
    ]
    for t, turn in enumerate(task["turns"]):
        for update in turn.get("updates") or []:
            if isinstance(update.get("values"), dict):
                record = {"id": update.get("id"), **update["values"]}
                where = f"turn {t}'s update of "
                places.append((where, update["service"], update["collection"], record))
    out = []
    for where, service, collection, record in places:
        shown = views.get((service, collection), set())
        for path, sha in attachment_references(record):
            if path and path[0] in shown:
                out.append((_record_label(service, collection, record, where), path[0], sha))
    return out


def _file_name(attachment: Attachment, taken: dict[str, str]) -> str:
    stem = identifier(PurePosixPath(attachment.name).stem, "attachment")[:80]
    extension = EXTENSIONS.get(attachment.media_type, "bin")
    name = f"{stem}.{extension}"
    if taken.get(name, attachment.sha256) != attachment.sha256:
        name = f"{stem}-{attachment.sha256[:12]}.{extension}"
    taken[name] = attachment.sha256
    return name


def task_media(document: dict, task: dict, resolve: Resolver | None) -> list[Media]:
    """The files the task's view tools can return, read and checked (``MediaProblem`` when
    one cannot be shipped)."""
    listed = {a["sha256"]: Attachment.of(a) for a in document.get("attachments") or []}
    found: dict[str, Media] = {}
    taken: dict[str, str] = {}
    for label, field, sha in _viewed_references(document, task):
        if sha in found:
            continue
        attachment = listed.get(sha)
        if attachment is None:
            raise MediaProblem(
                f"Task '{task['key']}': {label} field '{field}' refers to sha256:{sha[:12]}…, "
                "which the environment's attachments do not list."
            )
        if not attachment.is_image:
            continue  # viewing it is a not_an_image tool error: no file to ship
        data = resolve(sha) if resolve is not None else None
        problem = content_problem(attachment, data)
        if problem is not None:
            raise MediaProblem(
                f"Task '{task['key']}': {label} field '{field}' refers to "
                f"'{attachment.name}' (sha256:{sha[:12]}…), which cannot be exported: "
                f"{problem}."
            )
        found[sha] = Media(attachment, _file_name(attachment, taken), data)
    return list(found.values())
