from django.apps import AppConfig


class WorkspaceConfig(AppConfig):
    name = "apps.workspace"
    label = "workspace"
    verbose_name = "Workspace (dashboard, new projects, demo)"
