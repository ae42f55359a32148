"""Synthesize for weaknesses: the second round's capabilities come from the first round's
failures, weakest first, and its page reports whether they improved."""

import pytest
from django.urls import reverse

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.experiments.models import Experiment, Stage
from apps.experiments.services import experiment_create
from apps.experiments.targeting import (
    experiment_synthesize_for_weaknesses,
    targeted_report,
    weak_capabilities,
)
from apps.runs.models import Executor, PolicyKind, RunRole
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
)
from apps.synthesis.models import Generator
from apps.synthesis.services import synthesis_run_inline, synthesis_start
from tests.conftest import HTMX_HEADERS


@pytest.fixture
def first_round(catalogue, author, recipe, student):
    """A succeeded experiment whose base arm is a real student batch on two held-out
    environments: the loopback student that only calls a tool and says "Done."."""
    endpoint, _server = student
    slugs = ["clarify-before-acting", "disambiguate-contacts"]
    synthesis = synthesis_start(
        project=catalogue,
        user=author,
        capabilities=list(Capability.objects.filter(project=catalogue, slug__in=slugs)),
        count=2,
        generator=Generator.TEMPLATE,
        seed=5,
        enqueue=False,
    )
    synthesis_run_inline(synthesis=synthesis)
    environments = tuple(synthesis.slots.values_list("environment_id", flat=True))
    batch = run_batch_create(
        project=catalogue,
        user=author,
        policy_kind=PolicyKind.ENDPOINT,
        endpoint=endpoint,
        role=RunRole.STUDENT,
        selection=TaskSelection(environments=environments),
        settings=BatchSettings(trials=2, concurrency=1),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    experiment.stages.filter(stage=Stage.SYNTHESIS).update(
        outputs={"family_environments": [], "horizons": {}}
    )
    experiment.stages.filter(stage=Stage.EVAL_BASE).update(outputs={"batch": batch.pk})
    Experiment.objects.filter(pk=experiment.pk).update(status="succeeded")
    experiment.refresh_from_db()
    return experiment


def test_the_second_round_targets_the_failures_weakest_first(first_round, author):
    weak = weak_capabilities(first_round)
    assert weak  # the student fails; which capabilities and their order come from pass^k
    second = experiment_synthesize_for_weaknesses(experiment=first_round, user=author)
    assert second.previous == first_round
    assert second.recipe["capabilities"] == weak
    assert second.name == "Clarify and disambiguate, tiny · round 2"
    assert second.stages.count() == 11
    report = targeted_report(second)
    assert [row["capability"] for row in report] == weak
    assert all(row["after"] is None and row["improved"] is None for row in report)
    assert targeted_report(first_round) == []


def test_refused_before_the_experiment_succeeded(catalogue, author, recipe):
    experiment = experiment_create(project=catalogue, user=author, recipe=recipe, enqueue=False)
    with pytest.raises(ApplicationError, match="once the experiment has succeeded"):
        experiment_synthesize_for_weaknesses(experiment=experiment, user=author)
    assert Experiment.objects.count() == 1


def test_the_button(first_round, author, viewer, outsider, client_for):
    url = reverse("experiments:weaknesses", args=[first_round.pk])
    page = client_for(author).get(reverse("experiments:detail", args=[first_round.pk]))
    assert 'data-testid="synthesize-for-weaknesses"' in page.content.decode()
    assert client_for(outsider).post(url).status_code == 404
    assert client_for(viewer).post(url).status_code == 403
    assert Experiment.objects.count() == 1
    response = client_for(author).post(url, **HTMX_HEADERS)
    second = Experiment.objects.exclude(pk=first_round.pk).get()
    assert response["HX-Redirect"] == reverse("experiments:detail", args=[second.pk])
