from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from apps.core.api import ApiDocsPermission, api_docs_view

api_v1 = [
    path("", include("apps.accounts.apis")),
    path("", include("apps.accounts.job_apis")),
    path("", include("apps.environments.apis.capabilities")),
    path("", include("apps.environments.apis")),
    path("", include("apps.llm.apis")),
    path("", include("apps.synthesis.apis")),
    path("", include("apps.runs.apis")),
    path("", include("apps.curation.apis")),
    path("", include("apps.datasets.apis")),
    path("", include("apps.workspace.apis")),
    path("", include("apps.training.apis")),
    path("", include("apps.serving.apis")),
    path("", include("apps.experiments.apis")),
    path(
        "schema/",
        SpectacularAPIView.as_view(permission_classes=[ApiDocsPermission]),
        name="schema",
    ),
    path(
        "docs/",
        api_docs_view(SpectacularSwaggerView.as_view(url_name="api:schema")),
        name="docs",
    ),
    path(
        "redoc/",
        api_docs_view(
            SpectacularRedocView.as_view(url_name="api:schema", template_name="core/redoc.html")
        ),
        name="redoc",
    ),
]

urlpatterns = [
    path("", include("apps.accounts.urls")),
    path("", include("apps.accounts.job_urls")),
    path("", include("apps.environments.capability_urls")),
    path("", include("apps.environments.urls")),
    path("", include("apps.llm.urls")),
    path("", include("apps.synthesis.urls")),
    path("", include("apps.runs.urls")),
    path("", include("apps.curation.urls")),
    path("", include("apps.datasets.urls")),
    path("", include("apps.workspace.urls")),
    path("", include("apps.training.urls")),
    path("", include("apps.serving.urls")),
    path("", include("apps.experiments.urls")),
    path("api/v1/", include((api_v1, "api"))),
    path("admin/", admin.site.urls),
]

handler400 = "apps.core.middleware.bad_request_view"
handler404 = "apps.core.middleware.not_found_view"
handler500 = "apps.core.middleware.server_error_view"
