import pytest
from django.core.management import call_command
from django.test import Client

from apps.accounts.models import Membership, Project, Role
from apps.curation.models import Demonstration
from apps.datasets.models import DatasetExport, DatasetVersion, ExportStatus, VersionStatus
from apps.environments.models import Environment, EnvironmentStatus
from apps.runs.models import RolloutGroup, RunBatch
from apps.workspace.demo import (
    DEMO_DATASET_NAME,
    DEMO_LEFT_FOR_REVIEW,
    DEMO_PASSWORD,
    DEMO_SYNTHESIZED,
    DEMO_USERNAME,
    SAMPLES_DIR,
)

pytestmark = pytest.mark.django_db


def test_seed_demo_is_idempotent_and_fills_every_part(capsys):
    call_command("seed_demo")
    out = capsys.readouterr().out
    assert f"User:     {DEMO_USERNAME}" in out and f"Password: {DEMO_PASSWORD}" in out
    project = Project.objects.get(slug="demo")
    user = Membership.objects.get(project=project, role=Role.ADMIN).user
    assert user.check_password(DEMO_PASSWORD)
    samples = len(list(SAMPLES_DIR.glob("*.json")))
    assert samples == 3
    assert Environment.objects.filter(project=project, source="imported").count() == samples
    assert Environment.objects.filter(project=project, source="synthesized").count() == 6
    assert DEMO_SYNTHESIZED == 6
    assert set(Environment.objects.values_list("status", flat=True)) == {EnvironmentStatus.VALID}
    assert set(RunBatch.objects.values_list("role", flat=True)) == {"eval", "teacher", "student"}
    # The rollout groups page opens with groups: one per task of the first sample, G=4 each.
    student = RunBatch.objects.get(project=project, role="student")
    groups = RolloutGroup.objects.filter(batch=student)
    assert student.group_size == 4 and groups.count() == len(student.task_ids) >= 1
    assert all(group.size == 4 for group in groups)
    page = Client()
    page.force_login(user)
    html = page.get(f"/runs/batches/{student.pk}/").content.decode()
    assert f'href="/runs/batches/{student.pk}/groups/"' in html

    # The review queue keeps work; eval tasks gave no demonstration.
    demonstrations = Demonstration.objects.filter(project=project)
    assert set(demonstrations.values_list("split", flat=True)) == {"train"}
    assert demonstrations.filter(status="pending").count() == DEMO_LEFT_FOR_REVIEW
    approved = demonstrations.filter(status="approved").count()

    # A built dataset version that offers every export format, OpenAI's included.
    version = DatasetVersion.objects.get(dataset__project=project, dataset__name=DEMO_DATASET_NAME)
    assert version.status == VersionStatus.READY
    assert version.train_rows >= 10 and version.validation_rows >= 1
    assert version.train_rows + version.validation_rows + version.removed_duplicates == approved
    offered = set(
        DatasetExport.objects.filter(version=version, status=ExportStatus.READY).values_list(
            "format", "split"
        )
    )
    assert offered == {
        (fmt, split)
        for fmt in ("openai", "trl", "sharegpt", "trl_parquet", "trl_turns", "sharegpt_turns")
        for split in ("train", "validation")
    } | {("card", "")}
    assert f"built dataset “{DEMO_DATASET_NAME}” v1: {version.train_rows} train" in out

    Environment.objects.filter(project=project).update(description="edited by a person")
    call_command("seed_demo")
    assert Project.objects.count() == 1
    assert Environment.objects.filter(project=project).count() == samples + 6
    assert set(Environment.objects.values_list("description", flat=True)) == {"edited by a person"}
    assert DatasetVersion.objects.count() == 1
    assert demonstrations.count() == approved + DEMO_LEFT_FOR_REVIEW
    assert RunBatch.objects.filter(project=project, role="student").count() == 1
