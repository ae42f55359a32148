"""The ASGI application: Django, with each project's environment server (OpenEnv's
protocol, ``apps.environments.serving``) mounted under ``/envs/<project-slug>/``.

    uvicorn coworkenv_web.asgi:application --host 0.0.0.0 --port 8000
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coworkenv_web.settings")
django_application = get_asgi_application()

from apps.environments.serving import ProjectEnvServers  # noqa: E402 (needs django.setup())

application = ProjectEnvServers(django_application)
