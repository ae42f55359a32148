from django.contrib import admin

from apps.training.models import TrainedModel, TrainingJob


@admin.register(TrainingJob)
class TrainingJobAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "project", "backend", "base_model", "current_step", "created_at")
    list_filter = ("backend", "method")
    search_fields = ("name", "base_model", "external_id")
    raw_id_fields = ("project", "job", "dataset_version", "endpoint")


@admin.register(TrainedModel)
class TrainedModelAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "project", "kind", "path", "remote_model", "created_at")
    raw_id_fields = ("project", "training_job", "endpoint", "base_endpoint")
    raw_id_fields += ("eval_batch", "base_batch")
