"""The export download: one format and split of a dataset version, as a file (JSONL, Parquet
or a zip bundle) or a clear JSON error."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.datasets.access import version_get_for_user
from apps.datasets.downloads import (
    PARQUET_TYPE,
    ZIP_TYPE,
    ExportUnavailable,
    export_for,
    export_response,
)
from apps.datasets.models import (
    ExportFormat,
    RowSplit,
)
from apps.datasets.services import (
    dataset_info,
)


class _JsonErrorsOnly(DefaultContentNegotiation):
    """``?format=`` names the export format here, not a DRF renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


EXPORT_FORMATS = [*ExportFormat.values, "dataset_info"]


class VersionExportApi(APIView):
    content_negotiation_class = _JsonErrorsOnly

    @extend_schema(
        operation_id="dataset_versions_export",
        parameters=[
            OpenApiParameter("format", str, enum=EXPORT_FORMATS, required=True),
            OpenApiParameter(
                "split",
                str,
                enum=RowSplit.values,
                required=False,
                description="Required for every format but card and dataset_info.",
            ),
            OpenApiParameter(
                "If-None-Match",
                str,
                OpenApiParameter.HEADER,
                required=False,
                description="The ETag of a copy you have: 304 when unchanged.",
            ),
        ],
        responses={
            (200, "application/jsonl"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="JSONL, one example per line (streamed; Content-Length when "
                "cached). Headers: ETag (the file's sha256), X-Dataset-Checksum, "
                "X-Dataset-Rows.",
            ),
            (200, ZIP_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="A split whose demonstrations show images (trl, sharegpt): a zip "
                "of its rows and images (trl: metadata.jsonl with file_names and images/; "
                "sharegpt: the file, dataset_info.json and images/). Save it as bytes.",
            ),
            (200, PARQUET_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="format=verl or trl_parquet: one Parquet file (trl_parquet: "
                "images inside, as a datasets Image feature).",
            ),
            (200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR, description="format=card"),
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT, description="format=dataset_info"
            ),
            304: OpenApiResponse(description="If-None-Match matched the ETag."),
            404: OpenApiResponse(description="No such version, or the split has no rows."),
            410: OpenApiResponse(
                description="A zip bundle or trl_parquet file gone from the cache: rebuild."
            ),
            409: OpenApiResponse(
                description="Still building, failed, or the export failed its linter "
                "(details.lint)."
            ),
        },
    )
    def get(self, request, pk, number):
        version = version_get_for_user(request.user, pk, number)
        fmt = request.query_params.get("format", "")
        split = request.query_params.get("split", "")
        if fmt not in EXPORT_FORMATS:
            return error_response(f"format is one of {', '.join(EXPORT_FORMATS)}.", 400)
        if fmt == "dataset_info":
            return Response(dataset_info(version))
        if fmt != ExportFormat.CARD and split not in RowSplit.values:
            return error_response(f"split is one of {', '.join(RowSplit.values)}.", 400)
        try:
            return export_response(request, version, export_for(version, fmt, split))
        except ExportUnavailable as exc:  # 410 from the response: a bundle gone from the cache
            return error_response(exc.message, exc.status, exc.extra)


def error_response(message: str, code: int, details: dict | None = None) -> Response:
    return Response({"message": message, "details": details or {}}, status=code)
