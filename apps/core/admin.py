from django.contrib import admin

from apps.core.models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "kind", "project", "status", "progress_done", "progress_total"]
    list_filter = ["status", "kind"]
    search_fields = ["title", "message"]
    raw_id_fields = ["started_by", "project"]
