"""The demo's synthesis job: a few template environments, made inline (no worker needed)."""

from apps.capabilities.models import Capability
from apps.synthesis.models import Generator, SynthesisJob
from apps.synthesis.services.jobs import synthesis_run_inline, synthesis_start

DEMO_CAPABILITIES = ("clarify-before-acting", "disambiguate-contacts", "notice-silent-changes")
DEMO_SEED = 2026


def synthesis_demo_seed(*, project, user, count: int = 2) -> SynthesisJob | None:
    """Run one small template synthesis job once per project; later calls do nothing."""
    if SynthesisJob.objects.filter(project=project).exists():
        return None
    capabilities = list(
        Capability.objects.filter(
            project=project, slug__in=DEMO_CAPABILITIES, archived_at__isnull=True
        )
    )
    if not capabilities:
        return None
    capabilities.sort(key=lambda c: DEMO_CAPABILITIES.index(c.slug))
    synthesis = synthesis_start(
        project=project,
        user=user,
        capabilities=capabilities,
        count=count,
        generator=Generator.TEMPLATE,
        tasks_per_environment=3,
        seed=DEMO_SEED,
        enqueue=False,
    )
    synthesis_run_inline(synthesis=synthesis)
    return synthesis
