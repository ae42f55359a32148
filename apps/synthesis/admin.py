from django.contrib import admin

from apps.synthesis.models import (
    EnvironmentSignature,
    SynthesisAttempt,
    SynthesisJob,
    SynthesisSlot,
)


@admin.register(SynthesisJob)
class SynthesisJobAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "generator", "count", "endpoint_name", "created_at"]
    list_filter = ["generator"]
    raw_id_fields = ["project", "job", "endpoint", "created_by"]
    filter_horizontal = ["capabilities"]


@admin.register(SynthesisSlot)
class SynthesisSlotAdmin(admin.ModelAdmin):
    list_display = ["id", "synthesis", "index", "status", "attempts_count", "environment"]
    list_filter = ["status"]
    raw_id_fields = ["synthesis", "environment", "duplicate_of"]


@admin.register(SynthesisAttempt)
class SynthesisAttemptAdmin(admin.ModelAdmin):
    list_display = ["id", "slot", "round", "kind", "valid", "error_count", "tokens_in"]
    raw_id_fields = ["slot"]


@admin.register(EnvironmentSignature)
class EnvironmentSignatureAdmin(admin.ModelAdmin):
    list_display = ["id", "environment", "project", "shingles", "updated_at"]
    raw_id_fields = ["environment", "project"]
