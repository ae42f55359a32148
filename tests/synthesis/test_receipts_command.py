"""`manage.py synthesize_receipts`: the receipts family lands in a project, valid, with
its images stored by hash."""

import pytest
from django.core.management import CommandError, call_command

from apps.environments.attachments import attachment_bytes
from apps.environments.models import Environment

pytestmark = pytest.mark.django_db


def test_the_command_imports_a_valid_multimodal_environment(project, author, capsys):
    call_command("synthesize_receipts", project=project.slug, seed=4, tasks=2, user=author.username)

    environment = Environment.objects.get(project=project)
    assert (environment.status, environment.source) == ("valid", "synthesized")
    assert len(environment.attachments) == 4
    assert all(attachment_bytes(a["sha256"]) is not None for a in environment.attachments)
    assert capsys.readouterr().out == (
        f"Northwind - expense receipts (#{environment.pk}): valid, 4 attachments.\n"
    )


def test_bad_arguments_are_clear_errors_and_save_nothing(project):
    with pytest.raises(CommandError, match=r"^Choose 1 to 8 tasks\.$"):
        call_command("synthesize_receipts", project=project.slug, tasks=9)
    with pytest.raises(CommandError, match=r"^No project with the slug 'nope'\.$"):
        call_command("synthesize_receipts", project="nope")
    assert Environment.objects.count() == 0
