"""Which attachments a project holds. Files are stored once by sha256 for everyone, so a
document a user sends may only list a hash its project already holds (uploaded there, or
imported with its bytes into one of its environments) or whose bytes come with it: knowing
another project's hash is not enough to read its file."""

from __future__ import annotations

from collections.abc import Iterable

from apps.core.exceptions import ApplicationError
from apps.environments.models import Environment

CODE = "attachment_not_in_project"


def attachments_held(project) -> set[str]:
    """Every sha256 some environment of ``project`` lists (archived ones too)."""
    held = set()
    for entries in Environment.objects.filter(project=project).values_list(
        "attachments", flat=True
    ):
        held.update(e.get("sha256") for e in entries or [] if isinstance(e, dict))
    return held


def attachments_owned_check(*, project, document, provided: Iterable[str] = ()) -> None:
    """An ApplicationError (with the entry's pointer) for the first attachment ``document``
    lists that ``project`` does not hold and whose bytes are not in ``provided``."""
    entries = document.get("attachments") if isinstance(document, dict) else None
    wanted = [
        (index, entry["sha256"])
        for index, entry in enumerate(entries or [])
        if isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
    ]
    unknown = {sha for _, sha in wanted} - set(provided)
    if not unknown:
        return
    held = attachments_held(project)
    for index, sha256 in wanted:
        if sha256 in unknown and sha256 not in held:
            pointer = f"/attachments/{index}"
            message = f"Attachment {sha256[:12]}… is not a file of this project."
            hint = "Upload the file to an environment of this project, or import it with its bytes."
            raise ApplicationError(
                message,
                {
                    "pointer": pointer,
                    "problems": [
                        {
                            "code": CODE,
                            "severity": "error",
                            "pointer": pointer,
                            "message": message,
                            "hint": hint,
                        }
                    ],
                },
            )
