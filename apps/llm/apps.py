from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "apps.llm"
    label = "llm"
    verbose_name = "Model endpoints and LLM calls"

    def ready(self):
        from apps.llm import checks  # noqa: F401  (registers the deploy checks)
