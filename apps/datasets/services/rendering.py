"""What a version's kind renders from its stored rows: the card (``card.md``, written last
by the build and again whenever current data renders it differently) and the lines of a
JSONL export (training reads them; a download whose cached file has gone streams them)."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

# the module, not its names: the kinds build on services.exports, which loads this package
from apps.datasets import kinds
from apps.datasets.models import DatasetExport, DatasetVersion, ExportFormat, ExportStatus
from apps.datasets.services.exports import (
    export_absolute_path,
    export_directory,
    export_relative_path,
)

logger = logging.getLogger(__name__)


def card_markdown(version: DatasetVersion) -> str:
    """The card of a version of any kind, rendered from its current data (its dataset's name
    and description as they are now, the figures and files of the version)."""
    return kinds.kind_of(version).card(version)


def export_lines(version: DatasetVersion, fmt: str, split: str) -> Iterator[tuple[str, object]]:
    """Each exported line (with its newline) of a JSONL export and the source it came from
    (a demonstration, a run, a task): the lines the build wrote (with images when the split
    has any: ``data:`` URLs for ``openai``, ``images/<sha256>.<ext>`` paths for ``trl`` and
    ``sharegpt``)."""
    return kinds.kind_of(version).lines(version, fmt, split)


def card_current(*, version: DatasetVersion) -> tuple[DatasetExport | None, str]:
    """The version's card export and its text, as current data renders it: when the cached
    file is missing, says something else, or lies outside the version's own folder, it is
    written again first (a renamed dataset; a version migration 0008 moved into a new
    ``rollouts`` dataset, whose cached card still named the old one, in the old dataset's
    folder, where a later version of that dataset with the same number writes its own card).
    ``(None, "")`` while the version has no card (building, failed)."""
    export = DatasetExport.objects.filter(version=version, format=ExportFormat.CARD).first()
    if export is None:
        return None, ""
    text = card_markdown(version)
    data = text.encode()
    path = export_absolute_path(export)
    fresh = (
        export.path == export_relative_path(version, ExportFormat.CARD, "")
        and export.sha256 == hashlib.sha256(data).hexdigest()
        and path.is_file()
        and path.read_bytes() == data
    )
    if not fresh:
        export = card_write(version=version)
    return export, text


def card_write(*, version: DatasetVersion) -> DatasetExport:
    directory = export_directory(version)
    directory.mkdir(parents=True, exist_ok=True)
    data = card_markdown(version).encode()
    relative = export_relative_path(version, ExportFormat.CARD, "")
    handle, temp_path = tempfile.mkstemp(dir=directory, prefix=".card-")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temp_path, Path(settings.MEDIA_ROOT) / relative)
    export, _ = DatasetExport.objects.update_or_create(
        version=version,
        format=ExportFormat.CARD,
        split="",
        defaults={
            "status": ExportStatus.READY,
            "path": relative,
            "rows": 0,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "lint": {},
        },
    )
    return export


def export_regenerate_stream(export: DatasetExport) -> Iterator[bytes]:
    """The bytes of an offered JSONL export whose cached file has gone (a wiped MEDIA_ROOT),
    rendered again from the rows while being streamed, and put back in the cache once
    complete if it hashes to the recorded sha256 (it does: versions are immutable)."""
    version = export.version
    target = export_absolute_path(export)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_path = tempfile.mkstemp(dir=target.parent, prefix=".regen-")
    digest = hashlib.sha256()
    complete = False
    try:
        with os.fdopen(handle, "wb") as file:
            for line, _ in export_lines(version, export.format, export.split):
                data = line.encode()
                file.write(data)
                digest.update(data)
                yield data
        complete = True
    finally:
        if complete and digest.hexdigest() == export.sha256:
            os.replace(temp_path, target)
        else:
            if complete:
                logger.warning("Regenerated %s does not match its recorded sha256.", export)
            Path(temp_path).unlink(missing_ok=True)
