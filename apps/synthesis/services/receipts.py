"""The receipts family in a project: generate, store the images, import, validate."""

from __future__ import annotations

from apps.core.exceptions import ApplicationError
from apps.environments.models import Environment, EnvironmentSource
from apps.environments.services import environment_import_with_files, environment_validate
from apps.synthesis.generators.receipts import VENDORS, generate_receipts_environment


def receipts_environment_create(*, project, user, seed: int, tasks: int = 3) -> Environment:
    """A receipts environment (its Pillow-drawn images stored by hash) as a synthesized
    environment of ``project``, validated against its stored files (``valid`` when it
    passes, as the template generator's environments do)."""
    if not 1 <= tasks <= len(VENDORS):
        raise ApplicationError(f"Choose 1 to {len(VENDORS)} tasks.", {"field": "tasks"})
    document, files = generate_receipts_environment(seed=seed, tasks=tasks)
    environment = environment_import_with_files(
        project=project,
        spec=document,
        files=files,
        user=user,
        source=EnvironmentSource.SYNTHESIZED,
    )
    environment_validate(environment=environment)
    environment.refresh_from_db()
    return environment
