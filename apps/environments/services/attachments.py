"""Writes of attachment files: upload one to an environment, import a document with its
files. The bytes go to the ``attachments`` storage under their sha256
(``apps.environments.attachments``); the document lists their metadata."""

from __future__ import annotations

from django.db import transaction

from apps.core.exceptions import ApplicationError
from apps.environments.attachments import attachment_bytes, attachment_save
from apps.environments.models import Environment, EnvironmentSource
from apps.environments.services.environments import environment_edited, environment_import
from coworkenv_engine.attachments import Attachment, content_problem, describe


def attachment_check(*, data: bytes, name: str, media_type: str | None = None) -> Attachment:
    """The metadata of an uploaded file; a clear ApplicationError for a type that cannot be
    attached, a file over its size limit or bytes that are not what their type says."""
    name = (name or "").strip()[:255] or "attachment"
    try:
        return describe(data, name=name, media_type=media_type or None)
    except ValueError as exc:
        raise ApplicationError(str(exc), {"name": name, "size": len(data)}) from None


@transaction.atomic
def attachment_add(
    *, environment: Environment, data: bytes, name: str, media_type: str | None = None
) -> Attachment:
    """Store a file and list it in the environment's ``/attachments`` (a new revision, back
    to draft). Records refer to it with ``"sha256:<hex>"``; a file listed already is
    returned as listed."""
    attachment = attachment_check(data=data, name=name, media_type=media_type)
    attachment_save(attachment.sha256, data)
    locked = Environment.objects.select_for_update().get(pk=environment.pk)
    for entry in locked.attachments:
        if entry.get("sha256") == attachment.sha256:
            return Attachment.of(entry)  # listed already (under the name it was given)
    locked.attachments = [*locked.attachments, attachment.to_dict()]
    locked.save(update_fields=["attachments"])
    environment_edited(locked)
    return attachment


@transaction.atomic
def environment_import_with_files(
    *,
    project,
    spec: dict,
    files: dict[str, bytes],
    user,
    source: str = EnvironmentSource.IMPORTED,
) -> Environment:
    """Import a document whose ``/attachments`` come with their bytes (``files``: sha256 ->
    bytes; a file already stored may be left out). Nothing is saved when one is missing or
    does not match its entry."""
    listed = spec.get("attachments") if isinstance(spec, dict) else None
    checked: list[tuple[str, bytes]] = []
    for index, entry in enumerate(listed or []):
        try:
            attachment = Attachment.of(entry)
        except (KeyError, TypeError, ValueError):
            continue  # not schema-valid: environment_import reports it with its pointer
        data = files.get(attachment.sha256)
        stored = data is None
        if stored:
            data = attachment_bytes(attachment.sha256)
        problem = content_problem(attachment, data)
        if problem is not None:
            raise ApplicationError(
                f"Attachment '{attachment.name}': {problem}.",
                {"pointer": f"/attachments/{index}"},
            )
        if not stored:
            checked.append((attachment.sha256, data))
    environment = environment_import(project=project, spec=spec, user=user, source=source)
    for sha256, data in checked:
        attachment_save(sha256, data)
    return environment
