"""Near-duplicate detection against the project's environments, from stored sketches."""

import logging

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from apps.environments.models import Environment
from apps.environments.specs import environment_spec
from apps.synthesis.models import EnvironmentSignature
from apps.synthesis.similarity import document_sketch, most_similar

logger = logging.getLogger(__name__)


def signature_store(*, environment: Environment, sketch: list[int], shingles: int) -> None:
    EnvironmentSignature.objects.update_or_create(
        environment=environment,
        defaults={
            "project_id": environment.project_id,
            "spec_hash": environment.spec_hash,
            "sketch": sketch,
            "shingles": shingles,
        },
    )


def signatures_refresh(*, project) -> int:
    """Sketch every environment of the project whose sketch is missing or out of date (its
    spec changed since). One query when everything is current: only the stale
    environments are read (the index is kept incrementally, never rebuilt). Returns how
    many it made."""
    current = EnvironmentSignature.objects.filter(
        environment=OuterRef("pk"), spec_hash=OuterRef("spec_hash")
    )
    made = 0
    for environment in Environment.objects.filter(project=project).exclude(Exists(current)):
        sketch, shingles = document_sketch(environment_spec(environment))
        try:
            with transaction.atomic():
                signature_store(environment=environment, sketch=sketch, shingles=shingles)
        except IntegrityError:  # another worker sketched it at the same moment
            continue
        made += 1
    return made


def duplicate_find(
    *, project, sketch: list[int], exclude_environment: Environment | None = None
) -> tuple[Environment | None, float]:
    """The project's environment most similar to ``sketch`` and the estimated similarity."""
    signatures = EnvironmentSignature.objects.filter(project=project)
    if exclude_environment is not None:
        signatures = signatures.exclude(environment=exclude_environment)
    best_id, best = most_similar(sketch, signatures.values_list("environment_id", "sketch"))
    if best_id is None:
        return None, 0.0
    return Environment.objects.get(pk=best_id), best
