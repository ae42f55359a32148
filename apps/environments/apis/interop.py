"""Benchmarks in and out over the API: Claw-Eval and ClawMark exports, Claw-Eval import."""

import base64
import binascii

from django.http import HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.safeinput import ID_MAX
from apps.environments.access import environment_get_for_user
from apps.environments.apis.common import E400, E403, E404, READ_ERRORS, validated
from apps.environments.apis.environments import TAG, _reloaded, environment_payload
from apps.environments.apis.serializers import EnvironmentOutput
from apps.environments.services.interop import (
    claw_eval_export_filename,
    claw_eval_import_upload,
    clawmark_export_filename,
    environment_claw_eval_zip,
    environment_clawmark_zip,
)

ZIP = OpenApiResponse(OpenApiTypes.BINARY, description="A zip archive.")


def _zip(content: bytes, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type="application/zip")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


class ClawEvalExportApi(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="environments_export_claw_eval",
        summary="The environment's tasks as Claw-Eval task directories (zip)",
        description="Unzip at the root of a Claw-Eval checkout: ``tasks/<task_id>/`` (task.yaml, "
        "fixtures, a grader.py generated from the checks) and the generic mock service under "
        "``mock_services/coworkenv/``; the images view tools show under ``fixtures/media/``. "
        "400 when a record refers to an attachment that is not stored.",
        responses={200: ZIP, 400: E400, **READ_ERRORS},
    )
    def get(self, request, pk):
        environment = environment_get_for_user(request.user, pk)
        return _zip(environment_claw_eval_zip(environment), claw_eval_export_filename(environment))


class ClawMarkExportApi(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="environments_export_clawmark",
        summary="The environment's tasks as ClawMark task.py files (zip)",
        description="``tasks/<domain>/task<N>/task.py`` with METADATA, PROMPT, one stage per turn "
        "and checkers from the state checks; the engine and helper under ``_coworkenv/``; the "
        "images view tools show under ``assets/attachments/``. 400 when a record refers to an "
        "attachment that is not stored.",
        responses={200: ZIP, 400: E400, **READ_ERRORS},
    )
    def get(self, request, pk):
        environment = environment_get_for_user(request.user, pk)
        return _zip(environment_clawmark_zip(environment), clawmark_export_filename(environment))


# the archive travels base64-encoded in the JSON body (the API takes JSON only)
MAX_ARCHIVE_BASE64_CHARS = (10 * 1024 * 1024 * 4) // 3 + 4


class ClawEvalImportInput(serializers.Serializer):
    project = serializers.IntegerField(
        min_value=1, max_value=ID_MAX, help_text="The id of the project to import into."
    )
    filename = serializers.CharField(
        max_length=255, help_text="The archive's name: it says the kind (.zip, .tar, .tar.gz)."
    )
    content_base64 = serializers.CharField(
        max_length=MAX_ARCHIVE_BASE64_CHARS,
        trim_whitespace=False,
        help_text="A .zip, .tar or .tar.gz of Claw-Eval task directories (each with "
        "task.yaml), base64-encoded.",
    )


class ClawEvalImportOutput(serializers.Serializer):
    environments = EnvironmentOutput(many=True, help_text="One draft environment per task.")


class ClawEvalImportApi(APIView):
    @extend_schema(
        tags=[TAG],
        operation_id="environments_import_claw_eval",
        summary="Import Claw-Eval tasks as draft environments",
        description="One draft environment per task directory (author role or higher); nothing "
        "from the archive is executed. Any problem saves nothing (400 naming the file).",
        request=ClawEvalImportInput,
        responses={201: ClawEvalImportOutput, 400: E400, 403: E403, 404: E404},
    )
    def post(self, request):
        data = validated(ClawEvalImportInput, request.data)
        project = project_get_for_user_by_pk(request.user, data["project"], min_role=Role.AUTHOR)
        try:
            content = base64.b64decode(data["content_base64"], validate=True)
        except (binascii.Error, ValueError):
            raise ApplicationError(
                "content_base64 is not valid base64.", {"field": "content_base64"}
            ) from None
        environments = claw_eval_import_upload(
            project=project, user=request.user, filename=data["filename"], content=content
        )
        payload = [environment_payload(_reloaded(e, request.user)) for e in environments]
        return Response({"environments": payload}, status=status.HTTP_201_CREATED)
