from django.apps import AppConfig


class SynthesisConfig(AppConfig):
    name = "apps.synthesis"
    label = "synthesis"
    verbose_name = "Synthesis"
