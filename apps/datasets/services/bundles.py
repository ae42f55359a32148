"""Export files that carry their images: zip bundles, and the ``trl_parquet`` file.

``bundle_write``: a split with images, in ``trl`` or ``sharegpt``, zipped with its
``images/`` (see services/exports.py).

``trl_parquet_write``: TRL rows in one Parquet file, images inside it.

The rows are those of the ``trl`` export (TRL's vision form when the split shows images:
``{"type": "image"}`` placeholders, every ``content`` a list of parts), with ``images`` a
column of ``datasets.Image`` features holding the bytes. ``datasets`` writes the file, so its
schema metadata names the features: ``datasets.load_dataset("parquet", data_files=URL,
storage_options={"headers": {"Authorization": "Bearer …"}})`` reads it straight from the
export URL, nothing to unzip, and decodes each image to a PIL picture. ``messages`` is a
list of ``Json`` values (``datasets>=4.7``), so no message gains another row's keys.

Needs ``datasets`` (the train extra); a server without it records the export as failed with
that reason and offers the others.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

from apps.datasets.formats import dataset_info_entry
from apps.datasets.formats.media import Media
from apps.datasets.models import ExportFormat

PARQUET_MISSING = (
    "The Parquet export needs the datasets library, which this server does not have "
    "(pip install datasets, or the train extra)."
)


def trl_parquet_write(jsonl: Path, target: Path, media: Media | None) -> tuple[int, str]:
    """Write the linted ``trl`` rows of ``jsonl`` as Parquet at ``target`` (atomically);
    returns its (size, sha256). ImportError without ``datasets``."""
    import datasets

    files = media.files if media is not None else {}
    rows = []
    with jsonl.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            row["images"] = [{"bytes": files[path], "path": path} for path in row.get("images", [])]
            rows.append(row)
    table = datasets.Dataset.from_list(rows, on_mixed_types="use_json")
    table = table.cast_column("images", datasets.List(datasets.Image()))
    handle, temp_path = tempfile.mkstemp(dir=target.parent, prefix=".trl-parquet-")
    os.close(handle)
    try:
        table.to_parquet(temp_path)
        data = Path(temp_path).read_bytes()
        os.replace(temp_path, target)
    finally:
        Path(temp_path).unlink(missing_ok=True)
    return len(data), hashlib.sha256(data).hexdigest()


def bundle_write(jsonl: Path, target: Path, fmt: str, split: str, media: Media) -> tuple[int, str]:
    """Zip the linted rows with the images they name; returns (size, sha256) of the zip.
    Entries are written in a fixed order with a fixed date, so a rebuild gives the same
    bytes."""
    handle, temp_path = tempfile.mkstemp(dir=target.parent, prefix=f".{fmt}-{split}-zip-")
    os.close(handle)
    stamp = (2026, 1, 1, 0, 0, 0)

    def add(archive: zipfile.ZipFile, name: str, data: bytes, method: int) -> None:
        info = zipfile.ZipInfo(name, date_time=stamp)
        info.compress_type = method
        archive.writestr(info, data)

    with zipfile.ZipFile(temp_path, "w") as archive:
        if fmt == ExportFormat.TRL:
            lines = []
            for line in jsonl.read_text("utf-8").splitlines():
                row = json.loads(line)
                row["file_names"] = row.pop("images", [])
                lines.append(json.dumps(row, ensure_ascii=False))
            add(archive, "metadata.jsonl", ("\n".join(lines) + "\n").encode(), zipfile.ZIP_DEFLATED)
        else:
            name = f"{fmt}-{split}.jsonl"
            add(archive, name, jsonl.read_bytes(), zipfile.ZIP_DEFLATED)
            info = {f"coworkenv_{split}": dataset_info_entry(file_name=name, images=True)}
            add(
                archive,
                "dataset_info.json",
                (json.dumps(info, indent=2) + "\n").encode(),
                zipfile.ZIP_DEFLATED,
            )
        for path in sorted(media.files):
            add(archive, path, media.files[path], zipfile.ZIP_STORED)
    digest = hashlib.sha256(Path(temp_path).read_bytes()).hexdigest()
    size = Path(temp_path).stat().st_size
    os.replace(temp_path, target)
    return size, digest
