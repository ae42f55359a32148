from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "apps.runs"
    label = "runs"
    verbose_name = "Runs and evaluation"

    def ready(self):
        from apps.runs import checks  # noqa: F401  (registers the database check)
