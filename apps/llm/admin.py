from django.contrib import admin

from apps.llm.models import EndpointSlot, JudgeVerdict, LLMCall, ModelEndpoint, ProjectJudge


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "project", "model", "base_url", "max_concurrency"]
    search_fields = ["name", "model", "base_url"]
    raw_id_fields = ["project", "created_by"]


@admin.register(EndpointSlot)
class EndpointSlotAdmin(admin.ModelAdmin):
    list_display = ["id", "endpoint", "index", "holder", "lease_expires_at"]
    raw_id_fields = ["endpoint"]


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    list_display = ["id", "purpose", "endpoint_name", "status", "attempt", "tokens_in"]
    list_filter = ["status", "purpose"]
    raw_id_fields = ["project", "endpoint", "job"]


@admin.register(ProjectJudge)
class ProjectJudgeAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "endpoint", "updated_at"]
    raw_id_fields = ["project", "endpoint", "updated_by"]


@admin.register(JudgeVerdict)
class JudgeVerdictAdmin(admin.ModelAdmin):
    list_display = ["id", "project", "model", "score", "hits", "created_at"]
    search_fields = ["model", "evidence_hash"]
    raw_id_fields = ["project", "llm_call"]
