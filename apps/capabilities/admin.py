from django.contrib import admin

from apps.capabilities.models import Capability


@admin.register(Capability)
class CapabilityAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "group", "project", "archived_at", "updated_at"]
    list_filter = ["group", "project"]
    search_fields = ["name", "slug", "description"]
    raw_id_fields = ["project", "created_by"]
    readonly_fields = ["created_at", "updated_at"]
