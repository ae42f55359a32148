"""What every app's API answers about a job (its pages and actions: apps.accounts.job_apis)."""

from rest_framework import serializers

from apps.core.models import JobStatus


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
