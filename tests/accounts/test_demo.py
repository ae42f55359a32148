import pytest
from django.core.management import call_command

from apps.accounts.demo import DEMO_PASSWORD, DEMO_USERNAME, SAMPLES_DIR
from apps.accounts.models import Membership, Project, Role
from apps.environments.models import Environment, EnvironmentStatus

pytestmark = pytest.mark.django_db


def test_seed_demo_is_idempotent_and_imports_valid_samples(capsys):
    call_command("seed_demo")
    out = capsys.readouterr().out
    assert f"User:     {DEMO_USERNAME}" in out and f"Password: {DEMO_PASSWORD}" in out
    project = Project.objects.get(slug="demo")
    user = Membership.objects.get(project=project, role=Role.ADMIN).user
    assert user.check_password(DEMO_PASSWORD)
    samples = len(list(SAMPLES_DIR.glob("*.json")))
    assert samples >= 3
    # The samples, plus the two environments of the demo's template synthesis job.
    assert Environment.objects.filter(project=project, source="imported").count() == samples
    assert Environment.objects.filter(project=project, source="synthesized").count() == 2
    assert set(Environment.objects.values_list("status", flat=True)) == {EnvironmentStatus.VALID}

    Environment.objects.filter(project=project).update(description="edited by a person")
    call_command("seed_demo")
    assert Project.objects.count() == 1
    assert Environment.objects.filter(project=project).count() == samples + 2
    assert set(Environment.objects.values_list("description", flat=True)) == {"edited by a person"}
