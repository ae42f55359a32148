"""The callback endpoints a ``command``-backend script uses with its per-job secret: post
events, fetch its config and data files (that job's only). No user, no throttle; a wrong
secret reads exactly like a missing job."""

from pathlib import Path

from django.http import FileResponse
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.safeinput import is_id
from apps.training.models import Backend, TrainingJob
from apps.training.services import (
    CallbackGone,
    callback_secret_matches,
    training_callback_receive,
)
from apps.training.services.command import bundle_path, remote_config


def _secret(request) -> str:
    header = request.headers.get("Authorization", "")
    return header[7:].strip() if header.startswith("Bearer ") else ""


def _job_for_secret(request, pk) -> TrainingJob | None:
    training_job = (
        TrainingJob.objects.select_related("dataset_version__dataset", "job")
        .filter(pk=pk, backend=Backend.COMMAND)
        .first()
        if is_id(pk)
        else None
    )
    if training_job is None or not callback_secret_matches(training_job, _secret(request)):
        return None
    return training_job


# A wrong or missing secret reads exactly like a job that does not exist: the callback tells
# nobody which ids are real.
REFUSED = Response(
    {"message": "No such training job.", "details": {}}, status=status.HTTP_404_NOT_FOUND
)


class _SecretOnly:
    """The callback endpoints: no user, the job's own secret; no per-address throttle (a
    cluster behind one NAT address reports every step of every job; the 256-bit secret is
    not guessable)."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = []


class CallbackInput(serializers.Serializer):
    events = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=500)


class CallbackApi(_SecretOnly, APIView):
    @extend_schema(
        request=CallbackInput,
        responses={
            200: OpenApiResponse(description='{"cancel": bool}'),
            404: OpenApiResponse(description="Missing or wrong secret (or no such job)."),
            410: OpenApiResponse(description='The job has ended: {"cancel": true}.'),
        },
        operation_id="training_callback",
        description="For the script a `command` job launched: `Authorization: Bearer <the "
        "job's secret>`; events as `apps.training.reporting` describes (started, metrics, "
        "checkpoint, log, finished). Only that job's metrics and status change.",
    )
    def post(self, request, pk):
        training_job = _job_for_secret(request, pk)
        if training_job is None:
            return Response(REFUSED.data, status=REFUSED.status_code)
        data = CallbackInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            answer = training_callback_receive(
                training_job=training_job, events=data.validated_data["events"]
            )
        except CallbackGone as exc:
            return Response(
                {"message": exc.message, "details": {}, "cancel": True}, status=status.HTTP_410_GONE
            )
        return Response(answer)


class CallbackConfigApi(_SecretOnly, APIView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        operation_id="training_callback_config",
        description="The job.json a cluster node runs `python -m apps.training.sft --config` "
        "with: data as this API's URLs, the secret as their header.",
    )
    def get(self, request, pk):
        training_job = _job_for_secret(request, pk)
        if training_job is None:
            return Response(REFUSED.data, status=REFUSED.status_code)
        return Response(remote_config(training_job, _secret(request)))


class _CallbackFileApi(_SecretOnly, APIView):
    """A file the job launched with, served to its secret's holder (404 when it is missing)."""

    split = "train"
    content_type = "application/jsonl"
    missing = "No such file for this job."

    def file_path(self, training_job) -> Path:
        raise NotImplementedError

    def serve(self, request, pk):
        training_job = _job_for_secret(request, pk)
        if training_job is None:
            return Response(REFUSED.data, status=REFUSED.status_code)
        file_path = self.file_path(training_job)
        if not file_path.exists():
            return Response(
                {"message": self.missing, "details": {}}, status=status.HTTP_404_NOT_FOUND
            )
        return FileResponse(open(file_path, "rb"), content_type=self.content_type)


class CallbackDataApi(_CallbackFileApi):
    def file_path(self, training_job) -> Path:
        return Path(training_job.output_dir) / "data" / f"{self.split}.jsonl"

    @extend_schema(
        responses={(200, "application/jsonl"): OpenApiTypes.BINARY},
        operation_id="training_callback_data_train",
        description="The job's train file (TRL rows), as written when it launched.",
    )
    def get(self, request, pk):
        return self.serve(request, pk)


class CallbackEvalDataApi(CallbackDataApi):
    split = "eval"

    @extend_schema(
        responses={(200, "application/jsonl"): OpenApiTypes.BINARY},
        operation_id="training_callback_data_eval",
        description="The job's eval file (TRL rows), as written when it launched.",
    )
    def get(self, request, pk):
        return self.serve(request, pk)


class CallbackBundleApi(_CallbackFileApi):
    content_type = "application/zip"
    missing = "This job's split has no image bundle."

    def file_path(self, training_job) -> Path:
        return bundle_path(training_job, self.split)

    @extend_schema(
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
        operation_id="training_callback_bundle_train",
        description="The job's train split as a TRL imagefolder bundle (`metadata.jsonl` with "
        "a `file_names` column, and `images/`), written when it launched; 404 when the split "
        "shows no image (its rows are the whole data).",
    )
    def get(self, request, pk):
        return self.serve(request, pk)


class CallbackEvalBundleApi(CallbackBundleApi):
    split = "eval"

    @extend_schema(
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
        operation_id="training_callback_bundle_eval",
        description="The job's eval split as a TRL imagefolder bundle (as for train).",
    )
    def get(self, request, pk):
        return self.serve(request, pk)


urlpatterns = [
    path("training-jobs/<int:pk>/callback/", CallbackApi.as_view(), name="training-callback"),
    path(
        "training-jobs/<int:pk>/callback/config/",
        CallbackConfigApi.as_view(),
        name="training-config",
    ),
    path(
        "training-jobs/<int:pk>/callback/data/train/",
        CallbackDataApi.as_view(),
        name="training-data-train",
    ),
    path(
        "training-jobs/<int:pk>/callback/data/eval/",
        CallbackEvalDataApi.as_view(),
        name="training-data-eval",
    ),
    path(
        "training-jobs/<int:pk>/callback/data/train/bundle/",
        CallbackBundleApi.as_view(),
        name="training-bundle-train",
    ),
    path(
        "training-jobs/<int:pk>/callback/data/eval/bundle/",
        CallbackEvalBundleApi.as_view(),
        name="training-bundle-eval",
    ),
]
