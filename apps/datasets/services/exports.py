"""Export files of a dataset version: written by streaming, linted, cached under MEDIA_ROOT.

Each (version, format, split) is one JSONL file at
``MEDIA_ROOT/datasets/<project>/<dataset>/v<number>/<format>-<split>.jsonl``. Writing reads
the version's rows from the database in chunks (``.iterator(chunk_size=…)``), renders and
lints each line as it goes, writes it to a temporary file in the same folder and renames
it into place once complete (``os.replace`` is atomic): memory stays constant whatever the
size, and a reader never sees half a file. One pass over a split writes every format.
The card (``card.md``) is written last by ``rendering.card_write``. These are the SFT
kind's files (``kinds/sft.py``) and what every kind's files share: paths, ``Sink``, the
version's token counter, the card's data.

A split whose demonstrations show images (view tools over attachments) is written with
``formats.media.Media``: the ``openai`` file carries them as ``data:`` URLs; the ``trl`` and
``sharegpt`` exports become zip bundles (``<format>-<split>.zip``) holding the rows and an
``images/`` folder: ``trl`` as ``metadata.jsonl`` with a ``file_names`` column, which
``datasets.load_dataset("imagefolder", data_dir=...)`` loads as an ``images`` column of
``Image`` features; ``sharegpt`` as ``sharegpt-<split>.jsonl`` with ``dataset_info.json``
(``images`` column, paths relative to the folder, LLaMA-Factory's ``media_dir`` default).

A file that failed its linter is removed and its export row keeps the errors (the page and
the API show them and offer no download); a split without rows is ``empty``.

A version with ``max_tokens`` fits every trajectory under it (``formats.long.fit``): one over
the limit is split into training rows by turn, or dropped, as ``long_trajectories`` says, the
same way for every format; what that did per split is kept in ``long_counts``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from django.conf import settings
from django.urls import reverse
from django.utils.text import slugify

from apps.core.exceptions import ApplicationError
from apps.datasets.formats import (
    FORMATS,
    dataset_info_entry,
    format_rows,
    normalize_messages,
    normalize_tools,
)
from apps.datasets.formats.long import LongCounts, fit
from apps.datasets.formats.media import Media, has_images
from apps.datasets.formats.tokens import TokenCounter, TokenizerUnavailable, token_counter
from apps.datasets.models import (
    DatasetExport,
    DatasetRow,
    DatasetVersion,
    ExportFormat,
    ExportStatus,
    RowSplit,
)
from apps.datasets.services.bundles import PARQUET_MISSING, bundle_write, trl_parquet_write
from apps.environments.attachments import attachment_bytes

logger = logging.getLogger(__name__)

JSONL_FORMATS = (
    ExportFormat.OPENAI,
    ExportFormat.TRL,
    ExportFormat.SHAREGPT,
    ExportFormat.TRL_TURNS,
    ExportFormat.SHAREGPT_TURNS,
)
SFT_FORMATS = (*JSONL_FORMATS, ExportFormat.TRL_PARQUET)  # what an sft version writes
PARQUET_FORMATS = (ExportFormat.VERL, ExportFormat.TRL_PARQUET)
SHAREGPT_FORMATS = (ExportFormat.SHAREGPT, ExportFormat.SHAREGPT_TURNS)
BUNDLED_FORMATS = (ExportFormat.TRL, ExportFormat.SHAREGPT)  # zip bundles when with images
CHUNK_SIZE = 500


def version_token_counter(version: DatasetVersion) -> TokenCounter:
    """The version's token counter: its tokenizer, loaded from settings.DATASET_TOKENIZERS,
    or the estimate."""
    if not version.tokenizer:
        return token_counter()
    path = settings.DATASET_TOKENIZERS.get(version.tokenizer)
    if path is None:
        raise ApplicationError(
            f"The tokenizer “{version.tokenizer}” is no longer configured on this server "
            "(DATASET_TOKENIZERS)."
        )
    try:
        return token_counter(version.tokenizer, path)
    except TokenizerUnavailable as exc:
        raise ApplicationError(str(exc)) from None


def export_directory(version: DatasetVersion) -> Path:
    dataset = version.dataset
    return (
        Path(settings.MEDIA_ROOT)
        / "datasets"
        / str(dataset.project_id)
        / str(dataset.pk)
        / f"v{version.number}"
    )


def export_relative_path(
    version: DatasetVersion, fmt: str, split: str, *, bundle: bool = False
) -> str:
    if fmt == ExportFormat.CARD:
        name = "card.md"
    elif fmt == ExportFormat.TRL_PARQUET:
        name = f"{fmt}-{split}.parquet"
    else:
        name = f"{fmt}-{split}.zip" if bundle else f"{fmt}-{split}.jsonl"
    return str((export_directory(version) / name).relative_to(settings.MEDIA_ROOT))


def export_absolute_path(export: DatasetExport) -> Path:
    return Path(settings.MEDIA_ROOT) / export.path


def download_filename(
    version: DatasetVersion, fmt: str, split: str = "", *, bundle: bool = False
) -> str:
    """What a browser saves: ``<dataset>-v<n>-<format>-<split>.jsonl`` (``.zip`` for a
    bundle with images) or ``…-card.md``."""
    stem = f"{slugify(version.dataset.name) or 'dataset'}-v{version.number}"
    if fmt == ExportFormat.CARD:
        return f"{stem}-card.md"
    if bundle:
        return f"{stem}-{fmt}-{split}.zip"
    suffix = "parquet" if fmt in PARQUET_FORMATS else "jsonl"
    return f"{stem}-{fmt}-{split}.{suffix}"


def is_bundle(export: DatasetExport) -> bool:
    return export.path.endswith(".zip")


def row_source(version: DatasetVersion, split: str) -> Iterator[tuple[int, object, object, int]]:
    """``(demonstration id, transcript, tools, tokens)`` of a split in position order, read in
    chunks (server-side cursor on PostgreSQL)."""
    return (
        DatasetRow.objects.filter(version=version, split=split)
        .order_by("position")
        .values_list(
            "demonstration_id",
            "demonstration_version__transcript",
            "demonstration_version__tools",
            "tokens",
        )
        .iterator(chunk_size=CHUNK_SIZE)
    )


def fitted_rows(
    version: DatasetVersion, split: str, counts: LongCounts | None = None
) -> Iterator[tuple[int, list, list]]:
    """``(demonstration id, messages, tools)`` of every exported row of a split, in order:
    each trajectory as it is, or (over ``max_tokens``) its turn rows or nothing."""
    count = None
    if version.max_tokens is not None:
        count = version_token_counter(version).count
    for demonstration_id, transcript, tools, tokens in row_source(version, split):
        messages, tool_list = normalize_messages(transcript), normalize_tools(tools)
        if count is None:
            if counts is not None:
                # ``tokens``: the build's count, so "longest" agrees with the row table's Max
                # (counting with ``len`` gave characters, about four times as many).
                fit(
                    messages,
                    tool_list,
                    max_tokens=None,
                    policy="",
                    count=len,
                    tokens=tokens,
                    counts=counts,
                )
            yield demonstration_id, messages, tool_list
            continue
        for row in fit(
            messages,
            tool_list,
            max_tokens=version.max_tokens,
            policy=version.long_trajectories,
            count=count,
            tokens=tokens,
            counts=counts,
            ref=demonstration_id,
        ):
            yield demonstration_id, row, tool_list


def render_line(fmt: str, messages: list, tools: list, media: Media | None = None) -> str:
    """The exported lines of one transcript (one, or one per trained turn for the ``*_turns``
    formats, each with its newline); ``messages`` and ``tools`` as ``fitted_rows`` gives
    them."""
    rows = format_rows(fmt, messages, tools, media)
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


class Sink:
    """One format's output while a split is written: temp file, hash, size, linter."""

    def __init__(self, directory: Path, fmt: str, split: str):
        self.format, self.split = fmt, split
        handle, self.temp_path = tempfile.mkstemp(dir=directory, prefix=f".{fmt}-{split}-")
        self.file = os.fdopen(handle, "wb")
        self.hash = hashlib.sha256()
        self.size = 0
        self.linter = FORMATS[fmt]["linter"](split)

    def write(self, line: str, ref: int) -> None:
        data = line.encode()
        self.file.write(data)
        self.hash.update(data)
        self.size += len(data)
        for text in line.splitlines():  # JSON escapes newlines: one row a line
            self.linter.check_line(text, ref=ref)

    def discard(self) -> None:
        self.file.close()
        Path(self.temp_path).unlink(missing_ok=True)


def exports_write(
    *,
    version: DatasetVersion,
    split: str,
    formats=SFT_FORMATS,
    on_row: Callable[[int], None] | None = None,
) -> list[DatasetExport]:
    """Write, lint and record the given formats of one split in a single pass over its rows.
    ``on_row(n)`` is called every ``CHUNK_SIZE`` rows (progress, cancellation)."""
    directory = export_directory(version)
    directory.mkdir(parents=True, exist_ok=True)
    media = Media(attachment_bytes) if split_has_images(version, split) else None
    sinks = [Sink(directory, fmt, split) for fmt in formats]
    done = 0
    counts = LongCounts()
    try:
        last = None
        for demonstration_id, messages, tool_list in fitted_rows(version, split, counts):
            for sink in sinks:
                sink.write(render_line(sink.format, messages, tool_list, media), demonstration_id)
            if demonstration_id != last:
                last = demonstration_id
                done += 1
                if on_row is not None and done % CHUNK_SIZE == 0:
                    on_row(done)
    except BaseException:
        for sink in sinks:
            sink.discard()
        raise
    exports = []
    for sink in sinks:
        sink.file.close()
        report = sink.linter.finish()
        if report.rows == 0:
            status = ExportStatus.EMPTY
        else:
            status = ExportStatus.READY if report.ok else ExportStatus.INVALID
        bundle = media is not None and sink.format in BUNDLED_FORMATS
        relative = export_relative_path(version, sink.format, split, bundle=bundle)
        digest = sink.hash.hexdigest()
        if status == ExportStatus.READY and sink.format == ExportFormat.TRL_PARQUET:
            try:
                sink.size, digest = trl_parquet_write(
                    Path(sink.temp_path), Path(settings.MEDIA_ROOT) / relative, media
                )
            except ImportError:
                sink.linter.error(None, PARQUET_MISSING)
                status = ExportStatus.INVALID
            Path(sink.temp_path).unlink(missing_ok=True)
        elif status == ExportStatus.READY and bundle:
            target = Path(settings.MEDIA_ROOT) / relative
            source = Path(sink.temp_path)
            sink.size, digest = bundle_write(source, target, sink.format, split, media)
            Path(sink.temp_path).unlink(missing_ok=True)
        elif status == ExportStatus.READY:
            os.replace(sink.temp_path, Path(settings.MEDIA_ROOT) / relative)
        else:
            Path(sink.temp_path).unlink(missing_ok=True)
        export, _ = DatasetExport.objects.update_or_create(
            version=version,
            format=sink.format,
            split=split,
            defaults={
                "status": status,
                "path": relative if status == ExportStatus.READY else "",
                "rows": report.rows,
                "size": sink.size if status == ExportStatus.READY else 0,
                "sha256": digest if status == ExportStatus.READY else "",
                "lint": report.to_dict(),
            },
        )
        exports.append(export)
    long_counts = dict(version.long_counts or {})
    long_counts[split] = counts.to_dict()
    version.long_counts = long_counts
    DatasetVersion.objects.filter(pk=version.pk).update(long_counts=long_counts)
    return exports


def split_has_images(version: DatasetVersion, split: str) -> bool:
    """Whether any demonstration of the split shows an image (one read of the split)."""
    return any(
        has_images(normalize_messages(transcript))
        for _, transcript, _, _ in row_source(version, split)
    )


def dataset_info(version: DatasetVersion) -> dict:
    """LLaMA-Factory ``dataset_info.json`` entries for the version's offered ShareGPT files."""
    stem = f"{slugify(version.dataset.name).replace('-', '_') or 'dataset'}_v{version.number}"
    entries = {}
    for export in version.exports.all():
        if export.format in SHAREGPT_FORMATS and export.offered:
            if is_bundle(export):  # its own dataset_info.json is inside the zip
                continue
            key = stem if export.format == ExportFormat.SHAREGPT else f"{stem}_turns"
            entries[f"{key}_{export.split}"] = dataset_info_entry(
                file_name=download_filename(version, export.format, export.split)
            )
    return dict(sorted(entries.items()))


def card_info(version: DatasetVersion) -> dict:
    dataset = version.dataset
    exports = [
        {
            "format": e.format,
            "split": e.split,
            "rows": e.rows,
            "size": e.size,
            "sha256": e.sha256,
            "status": e.status,
        }
        for e in version.exports.exclude(format=ExportFormat.CARD).order_by("format", "split")
    ]
    return {
        "dataset": {"id": dataset.pk, "name": dataset.name, "description": dataset.description},
        "version": {
            "number": version.number,
            "created_at": version.created_at.strftime("%Y-%m-%d %H:%M UTC"),
            "created_by": version.created_by.username if version.created_by else "",
            "seed": version.seed,
            "validation_fraction": version.validation_fraction,
            "split_keys": version.split_keys,
            "filters": version.filters,
            "checksum": version.checksum,
            "rebuilt_from": version.rebuilt_from.number if version.rebuilt_from else None,
            "token_counting": version.token_counting,
            "max_tokens": version.max_tokens,
            "long_trajectories": version.long_trajectories,
        },
        "long_counts": version.long_counts,
        "counts": {
            "demonstrations": version.demonstrations,
            "excluded_eval": version.excluded_eval,
            "removed_duplicates": version.removed_duplicates,
            "removed_near_duplicates": version.removed_near_duplicates,
            "train_rows": version.train_rows,
            "validation_rows": version.validation_rows,
        },
        "token_stats": version.token_stats,
        "capability_mix": version.capability_mix,
        "removals": version.removals,
        "groups": version.groups,
        "environments": version.environments,
        "models": version.models_used,
        "exports": exports,
        "dataset_info": dataset_info(version),
        "api": reverse("api:dataset_version_export", args=[dataset.pk, version.number]),
    }


def exports_remove(version: DatasetVersion) -> None:
    """Delete a version's export rows and files (a failed or restarted build)."""
    for export in version.exports.all():
        if export.path:
            export_absolute_path(export).unlink(missing_ok=True)
    version.exports.all().delete()


SPLIT_VALUES = RowSplit.values
