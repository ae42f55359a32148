"""Store a validation verdict computed elsewhere (e.g. by synthesis, which validates every
draft before saving it), instead of running the engine a second time on the same spec."""

from django.db import transaction
from django.utils import timezone

from apps.environments.models import Environment, EnvironmentStatus, ValidationReport
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec


@transaction.atomic
def environment_validation_record(
    *, environment: Environment, result: dict, job=None
) -> ValidationReport:
    """Record ``result`` (``validate_spec(doc).to_dict()``) for the current revision.

    ``result["spec_hash"]`` must be the hash of this environment's current spec (the engine
    hashes the canonical form); a mismatch is a programming error and raises ValueError.
    """
    # Every write keeps Environment.spec_hash current, so the rows need not be read again.
    spec_hash = environment.spec_hash or engine_spec.canonical_hash(environment_spec(environment))
    if result.get("spec_hash") and result["spec_hash"] != spec_hash:
        raise ValueError(
            f"The validation result is for spec {result['spec_hash'][:12]}, "
            f"not for environment {environment.pk}'s current spec {spec_hash[:12]}."
        )
    report = ValidationReport.objects.create(
        environment=environment,
        job=job,
        revision=environment.revision,
        spec_hash=spec_hash,
        valid=bool(result["valid"]),
        problems=result.get("problems", []),
        tasks=result.get("tasks", []),
    )
    Environment.objects.filter(
        pk=environment.pk,
        revision=environment.revision,
        status__in=[EnvironmentStatus.DRAFT, EnvironmentStatus.VALID, EnvironmentStatus.INVALID],
    ).update(
        status=EnvironmentStatus.VALID if report.valid else EnvironmentStatus.INVALID,
        latest_validation=report,
        updated_at=timezone.now(),
    )
    environment.refresh_from_db(fields=["status", "latest_validation", "updated_at"])
    return report
