"""Deployment checks of the LLM settings (``manage.py check --deploy``)."""

from django.conf import settings
from django.core.checks import Tags, Warning, register


@register(Tags.security, deploy=True)
def key_hosts_check(app_configs, **kwargs):
    """A server that sends API keys to any origin lets an author point an endpoint at their
    own host and receive the team's key."""
    if settings.DEBUG or getattr(settings, "LLM_KEY_HOSTS", None) is not None:
        return []
    return [
        Warning(
            "LLM_KEY_HOSTS=any: API keys may be sent to any origin an author names.",
            hint="List the origins each key may reach, e.g. "
            "LLM_KEY_HOSTS=OPENAI_API_KEY=https://api.openai.com.",
            id="llm.W001",
        )
    ]
