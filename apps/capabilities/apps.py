from django.apps import AppConfig


class CapabilitiesConfig(AppConfig):
    name = "apps.capabilities"
    label = "capabilities"
    verbose_name = "Capabilities"
