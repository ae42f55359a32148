from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import Role
from apps.core.access import job_get_for_user
from apps.core.models import JobStatus
from apps.core.services import job_cancel


class JobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    kind = serializers.CharField()
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=JobStatus.choices)
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField()
    percent = serializers.IntegerField()
    message = serializers.CharField()
    params = serializers.JSONField()
    result = serializers.JSONField()
    cancel_requested = serializers.BooleanField()
    attempts = serializers.IntegerField()
    started_by = serializers.CharField(source="started_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class JobDetailApi(APIView):
    @extend_schema(responses=JobOutput)
    def get(self, request, pk):
        return Response(JobOutput(job_get_for_user(request.user, pk)).data)


class JobCancelApi(APIView):
    @extend_schema(request=None, responses=JobOutput)
    def post(self, request, pk):
        job = job_cancel(job=job_get_for_user(request.user, pk, min_role=Role.AUTHOR))
        return Response(JobOutput(job).data)


urlpatterns = [
    path("jobs/<int:pk>/", JobDetailApi.as_view(), name="job_detail"),
    path("jobs/<int:pk>/cancel/", JobCancelApi.as_view(), name="job_cancel"),
]
