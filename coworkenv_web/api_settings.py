"""The REST API's wiring, for ``settings.py``: DRF's classes and drf-spectacular's schema.

Nothing here comes from the environment: ``settings.py`` adds what does (the throttle rates,
the browsable API in the local mode), so that it stays the one table an operator reads.
"""

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "apps.core.api.StandardPagination",
    # Bodies are JSON only, through the one parser with the size, text and depth limits.
    "DEFAULT_PARSER_CLASSES": ["apps.core.api.JSONParser"],
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.core.api.exception_handler",
    # Their rates (settings.py) are per signed-in user or token, and per address.
    "DEFAULT_THROTTLE_CLASSES": [
        "apps.accounts.throttling.UserRateThrottle",
        "apps.accounts.throttling.AnonRateThrottle",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "CoworkEnv API",
    "DESCRIPTION": "Environments, synthesis, runs, review and datasets for AI coworker agents.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "PREPROCESSING_HOOKS": ["apps.core.api.legacy_paths_hook"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apps.core.api.error_responses_hook",
    ],
    # Several models have a "status"; name each choice set after its model.
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "apps.core.models.JobStatus",
        "EnvironmentStatusEnum": "apps.environments.models.EnvironmentStatus",
        "SynthesisSlotStatusEnum": "apps.synthesis.models.SlotStatus",
        "RunStatusEnum": "apps.runs.models.RunStatus",
        "RunRoleEnum": "apps.runs.models.RunRole",
        "RunPolicyKindEnum": "apps.runs.models.PolicyKind",
        "RoleEnum": "apps.accounts.models.Role",
        "DemonstrationStatusEnum": "apps.curation.models.DemonstrationStatus",
        "ReviewDecisionEnum": "apps.curation.models.Decision",
        "DatasetVersionStatusEnum": "apps.datasets.models.VersionStatus",
        "DatasetKindEnum": "apps.datasets.models.DatasetKind",
    },
}
