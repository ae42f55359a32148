"""Supervised training takes versions of SFT datasets (demonstrations) only: versions of RL
prompt and scored-rollout datasets are neither offered by the launch form nor accepted by the
service."""

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.datasets.models import Dataset, DatasetKind
from apps.datasets.selectors import sft_versions_ready
from apps.training.services import training_job_create
from tests.training.conftest import TINY

pytestmark = pytest.mark.django_db


def _launch(project, author, version):
    return training_job_create(
        project=project,
        user=author,
        dataset_version=version,
        backend="local",
        preset="tiny-cpu",
        hyperparameters=TINY,
    )


@pytest.mark.parametrize("other", [DatasetKind.ROLLOUTS, DatasetKind.RL_PROMPTS])
def test_rl_versions_are_refused_and_not_offered(
    client_for, project, author, training_version, other
):
    assert list(sft_versions_ready(project=project)) == [training_version]
    Dataset.objects.filter(pk=training_version.dataset_id).update(kind=other)
    training_version.refresh_from_db()
    training_version.dataset.refresh_from_db()
    assert list(sft_versions_ready(project=project)) == []
    with pytest.raises(ApplicationError) as refused:
        _launch(project, author, training_version)
    assert refused.value.extra["fields"]["dataset_version"][0].startswith(
        "Supervised training takes a version of demonstrations"
    )
    page = client_for(author).get(reverse("training:create", args=[project.slug]))
    offered = [value for value, _label in page.context["form"].fields["dataset_version"].choices]
    assert str(training_version.pk) not in [str(v) for v in offered]


def test_an_sft_version_is_offered(project, training_version):
    assert list(sft_versions_ready(project=project)) == [training_version]
