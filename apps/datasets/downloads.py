"""The HTTP response of an export, shared by the page download and the REST API.

- a cached file is sent whole with ``Content-Length``; a file missing from the cache is
  rendered again from the rows while it streams (no ``Content-Length``) and cached again;
- ``ETag`` is the file's sha256 and ``If-None-Match`` with it answers 304;
- ``X-Dataset-Checksum`` is the version's checksum, ``X-Dataset-Rows`` the line count.
"""

from __future__ import annotations

from django.http import FileResponse, HttpResponse, HttpResponseNotModified, StreamingHttpResponse

from apps.core.exceptions import ApplicationError
from apps.datasets.kinds.prompts import PROMPT_FORMATS, prompt_export_refill
from apps.datasets.models import (
    DatasetExport,
    DatasetVersion,
    ExportFormat,
    ExportStatus,
    VersionStatus,
)
from apps.datasets.services import (
    card_current,
    download_filename,
    export_absolute_path,
    export_regenerate_stream,
    is_bundle,
)

JSONL_TYPE = "application/jsonl; charset=utf-8"
PARQUET_TYPE = "application/vnd.apache.parquet"
ZIP_TYPE = "application/zip"
MARKDOWN_TYPE = "text/markdown; charset=utf-8"


class ExportUnavailable(ApplicationError):
    """The export cannot be served; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int, extra: dict | None = None):
        super().__init__(message, extra or {})
        self.status = status


def export_for(version: DatasetVersion, fmt: str, split: str) -> DatasetExport:
    """The offered export, or ExportUnavailable saying why not."""
    if version.status == VersionStatus.BUILDING:
        raise ExportUnavailable(
            f"Version {version.number} is still building; follow job {version.job_id}.",
            409,
            {"job": version.job_id},
        )
    if version.status == VersionStatus.FAILED:
        raise ExportUnavailable(
            f"Version {version.number} failed to build: nothing to export.", 409
        )
    split = "" if fmt == ExportFormat.CARD else split
    export = DatasetExport.objects.filter(version=version, format=fmt, split=split).first()
    if export is None:
        raise ExportUnavailable(f"Version {version.number} has no {fmt} export.", 404)
    if export.status == ExportStatus.EMPTY:
        raise ExportUnavailable(f"The {split} split of version {version.number} has no rows.", 404)
    if export.status == ExportStatus.INVALID:
        raise ExportUnavailable(
            f"The {fmt} export of the {split} split failed its linter "
            f"({export.lint.get('error_count', 0)} errors), so it is not offered.",
            409,
            {"lint": export.lint},
        )
    return export


def _etag_matches(header: str, etag: str) -> bool:
    if not header:
        return False
    candidates = [value.strip() for value in header.split(",")]
    return any(value == "*" or value.removeprefix("W/") == etag for value in candidates)


def export_response(request, version: DatasetVersion, export: DatasetExport) -> HttpResponse:
    if export.format == ExportFormat.CARD:  # rendered from current data, rewritten if stale
        export = card_current(version=version)[0] or export
    etag = f'"{export.sha256}"'
    headers = {
        "ETag": etag,
        "X-Dataset-Checksum": version.checksum,
        "X-Dataset-Version": f"{version.dataset_id}/{version.number}",
        "Cache-Control": "private, no-cache",
    }
    if export.format != ExportFormat.CARD:
        headers["X-Dataset-Rows"] = str(export.rows)
    if _etag_matches(request.headers.get("If-None-Match", ""), etag):
        response = HttpResponseNotModified()
        for name, value in headers.items():
            response[name] = value
        return response
    bundle = is_bundle(export)
    filename = download_filename(version, export.format, export.split, bundle=bundle)
    content_type = {
        ExportFormat.CARD: MARKDOWN_TYPE,
        ExportFormat.VERL: PARQUET_TYPE,
        ExportFormat.TRL_PARQUET: PARQUET_TYPE,
    }.get(export.format, JSONL_TYPE)
    content_type = ZIP_TYPE if bundle else content_type
    path = export_absolute_path(export)
    if (bundle or export.format == ExportFormat.TRL_PARQUET) and not path.exists():
        what = "bundle" if bundle else "Parquet file"
        raise ExportUnavailable(
            f"The {export.format} {what} of the {export.split} split is no longer cached; "
            "rebuild the version to write it again.",
            410,
        )
    if not path.exists() and export.format in PROMPT_FORMATS:
        prompt_export_refill(export)  # rendered again from the stored prompt rows
        if not path.exists():
            raise ExportUnavailable(
                f"The cached {export.format} file is gone and no longer renders to its "
                "recorded sha256 (another pyarrow version?); rebuild the version.",
                409,
            )
    if path.exists():
        response = FileResponse(
            path.open("rb"), as_attachment=True, filename=filename, content_type=content_type
        )
    else:
        response = StreamingHttpResponse(
            export_regenerate_stream(export), content_type=content_type
        )
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    for name, value in headers.items():
        response[name] = value
    return response
