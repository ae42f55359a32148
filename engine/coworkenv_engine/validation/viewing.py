"""Attachments the agent can actually read: every attached file reaches the agent through
a view tool (a ``get`` binding with ``attachment``) in a form it receives.

* ``attachment_not_viewable``: a record field refers to an image that no view tool shows
  (no view tool over that collection names that field): a picture the agent is meant to
  read, the full receipt beside the thumbnail a view tool shows. A PDF no tool shows is a
  document the agent may only pass on (no tool shows PDFs);
* ``attachment_wrong_kind``: a view tool shows the field, but the file there is not an
  image (a PDF): viewing it is a ``not_an_image`` tool error, the agent never sees it.

References to hashes ``/attachments`` does not list are ``attachment_missing``
(attachments.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..attachments import SIZE_LIMITS, references
from ..problems import Problem, error, pointer
from ..spec_model import EnvironmentSpec

Located = tuple[str, str]


def _records(spec: EnvironmentSpec) -> Iterator[tuple[tuple, Located, list[Any]]]:
    """``(pointer base, (service, collection), records)`` of every place records live; an
    update's values are one record (its base is the update's values, not a list)."""
    for service, cols in spec.services.items():
        for name, records in cols.items():
            yield ("services", service, name), (service, name), records
    for k, task in enumerate(spec.tasks):
        for service, cols in task.records.items():
            for name, records in cols.items():
                yield ("tasks", k, "records", service, name), (service, name), records
        for t, turn in enumerate(task.turns):
            for u, update in enumerate(turn.updates):
                if update.values is not None:
                    base = ("tasks", k, "turns", t, "updates", u)
                    yield base, (update.service, update.collection), {"values": update.values}


def _views(spec: EnvironmentSpec) -> dict[Located, dict[str, str]]:
    """(service, collection) -> {field: the view tool showing it}."""
    out: dict[Located, dict[str, str]] = {}
    for tool in spec.tools:
        b = tool.binding
        if b.op == "get" and b.attachment:
            out.setdefault((b.service, b.collection), {}).setdefault(b.attachment, tool.name)
    return out


def viewing_problems(spec: EnvironmentSpec) -> list[Problem]:
    if not spec.attachments:
        return []
    listed = {a.sha256: a for a in spec.attachments}
    views = _views(spec)
    out: list[Problem] = []
    for base, where, records in _records(spec):
        shown = views.get(where, {})
        for path, sha in references(records):
            att = listed.get(sha)
            if att is None or att.media_type not in SIZE_LIMITS or len(path) < 2:
                continue  # attachment_missing, attachment_type_unsupported
            field = path[1]
            ptr = pointer(*base, *path)
            tool = shown.get(field)
            image = att.media_type.startswith("image/")
            if tool is None and image:
                out.append(_not_viewable(ptr, where, field, att, shown))
            elif tool is not None and not image:
                out.append(
                    error(
                        "attachment_wrong_kind",
                        ptr,
                        f"'{att.name}' is {att.media_type}, but '{tool}' shows images: viewing "
                        "it is a not_an_image error, so the agent never sees the file.",
                        "Attach the document as an image (a PNG or JPEG of each page) and "
                        "refer to that, or put its text in the record.",
                    )
                )
    return out


def _not_viewable(ptr: str, where: Located, field: Any, att: Any, shown: dict[str, str]):
    service, collection = where
    other = ""
    if shown:
        fields = ", ".join(f"'{f}' ({t})" for f, t in shown.items())
        other = f" The view tools show only {fields} of these records, not '{field}'."
    return error(
        "attachment_not_viewable",
        ptr,
        f"'{att.name}' ({att.media_type}) is in {service}.{collection} field '{field}', "
        f"which no view tool shows: the agent cannot read what it holds.{other}",
        f'Add a view tool (a get binding with "attachment": "{field}") over '
        f"{service}.{collection}, or point the existing one at '{field}' (the full file, not "
        "a thumbnail).",
    )
