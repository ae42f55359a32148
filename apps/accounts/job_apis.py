"""The job API (read one, cancel one), checked against the job's project roles."""

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.job_access import job_get_for_user
from apps.accounts.models import Role
from apps.core.apis import JobOutput
from apps.core.services import job_cancel


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
