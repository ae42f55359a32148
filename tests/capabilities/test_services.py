import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.accounts.models import Project
from apps.capabilities.models import Capability
from apps.capabilities.services import (
    capability_archive,
    capability_catalogue,
    capability_catalogue_seed,
    capability_create,
    capability_delete,
    capability_restore,
    capability_update,
)
from apps.core.exceptions import ApplicationError
from apps.environments.models import TaskCapability
from apps.environments.services import environment_import
from apps.workspace.services import project_start
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
ONLY_BOOKING_USES_POLICY = {
    "book-q3-review": ["follow-policy"],
    "budget-figure-clarify": [],
    "notice-moved-dentist": [],
}
CATALOGUE_SLUGS = [entry["slug"] for entry in capability_catalogue()["capabilities"]]


# --- the catalogue file ----------------------------------------------------------------------


def test_catalogue_entries_are_complete():
    catalogue = capability_catalogue()
    assert catalogue["version"] == 1
    entries = catalogue["capabilities"]
    assert 12 <= len(entries) <= 16
    assert len(set(CATALOGUE_SLUGS)) == len(entries)
    for entry in entries:
        assert set(entry) == {"slug", "name", "group", "description", "guidance", "examples"}
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry["slug"]), entry["slug"]
        assert entry["name"] and entry["group"] and entry["description"], entry["slug"]
        assert len(entry["guidance"]) > 200, entry["slug"]
        assert "grader" in entry["guidance"].lower(), entry["slug"]
        assert 2 <= len(entry["examples"]) <= 3, entry["slug"]


def test_catalogue_covers_every_slug_the_samples_use():
    used = set()
    for path in sorted((ROOT / "samples").glob("*.json")):
        for task in json.loads(path.read_text())["tasks"]:
            used.update(task.get("capabilities", []))
    assert used, "the samples tag their tasks"
    assert used <= set(CATALOGUE_SLUGS), used - set(CATALOGUE_SLUGS)


# --- seeding ---------------------------------------------------------------------------------


def test_seed_adds_the_catalogue_once(project):
    user = UserFactory(username="seeder")
    assert capability_catalogue_seed(project=project, user=user) == len(CATALOGUE_SLUGS)
    assert sorted(Capability.objects.filter(project=project).values_list("slug", flat=True)) == (
        sorted(CATALOGUE_SLUGS)
    )
    first = Capability.objects.get(project=project, slug="clarify-before-acting")
    assert first.name == "Clarify before acting"
    assert first.group == "Judgement"
    assert first.created_by == user
    assert first.examples[0] == "Email Dana the budget figure."
    assert capability_catalogue_seed(project=project) == 0
    assert Capability.objects.filter(project=project).count() == len(CATALOGUE_SLUGS)


def test_seed_never_overwrites_edits_and_fills_gaps(project, other_project):
    capability_catalogue_seed(project=project)
    edited = Capability.objects.get(project=project, slug="follow-policy")
    capability_update(capability=edited, name="Our approval rules", examples=["Mine"])
    capability_archive(capability=Capability.objects.get(project=project, slug="resolve-conflicts"))
    Capability.objects.filter(project=project, slug="multi-day-follow-up").delete()

    assert capability_catalogue_seed(project=project) == 1

    edited.refresh_from_db()
    assert (edited.name, edited.examples) == ("Our approval rules", ["Mine"])
    assert Capability.objects.get(project=project, slug="resolve-conflicts").is_archived
    assert Capability.objects.filter(project=project, slug="multi-day-follow-up").exists()
    assert not Capability.objects.filter(project=other_project).exists()


def test_project_create_seeds_the_catalogue(db):
    creator = UserFactory(username="founder")
    project = project_start(name="Fresh team", creator=creator)
    slugs = set(Capability.objects.filter(project=project).values_list("slug", flat=True))
    assert slugs == set(CATALOGUE_SLUGS)
    assert Capability.objects.filter(project=project, created_by=creator).count() == len(slugs)


def test_project_create_failure_seeds_nothing(db):
    creator = UserFactory(username="founder")
    project_start(name="Taken", creator=creator)
    with pytest.raises(ApplicationError):
        project_start(name="Taken", creator=creator)
    assert Project.objects.count() == 1
    assert Capability.objects.count() == len(CATALOGUE_SLUGS)


def test_seed_demo_gives_the_demo_project_the_catalogue_first(db):
    call_command("seed_demo", stdout=StringIO())
    project = Project.objects.get(slug="demo")
    assert Capability.objects.filter(project=project).count() == len(CATALOGUE_SLUGS)
    # The samples' tasks link to catalogue entries, none was auto-created by the import.
    linked = set(
        TaskCapability.objects.filter(task__environment__project=project).values_list(
            "capability__slug", flat=True
        )
    )
    assert linked and linked <= set(CATALOGUE_SLUGS)
    # An older demo project missing some capabilities gets them on the next run.
    Capability.objects.filter(project=project, slug="exact-output-contract").delete()
    call_command("seed_demo", stdout=StringIO())
    assert Capability.objects.filter(project=project, slug="exact-output-contract").exists()


def test_import_links_tasks_to_catalogue_entries(project, author, catalogue, make_spec):
    spec = make_spec(
        {
            "book-q3-review": ["cross-service-orchestration", "resolve-conflicts"],
            "budget-figure-clarify": ["clarify-before-acting"],
            "notice-moved-dentist": ["notice-silent-changes"],
        }
    )
    environment_import(project=project, spec=spec, user=author)
    assert Capability.objects.filter(project=project).count() == len(CATALOGUE_SLUGS)
    assert catalogue["resolve-conflicts"].task_links.count() == 1


# --- create / update / archive / delete -----------------------------------------------------


def test_create_derives_slug_and_cleans_examples(project, author):
    capability = capability_create(
        project=project,
        user=author,
        name="  Plan a trip  ",
        group=" Travel ",
        examples=["Book Lisbon", "  ", "", " Find a hotel "],
    )
    assert (capability.slug, capability.name, capability.group) == (
        "plan-a-trip",
        "Plan a trip",
        "Travel",
    )
    assert capability.examples == ["Book Lisbon", "Find a hotel"]
    assert capability.created_by == author


def test_create_refuses_a_taken_slug(project, author, catalogue):
    with pytest.raises(ApplicationError) as exc:
        capability_create(project=project, user=author, name="Again", slug="follow-policy")
    assert exc.value.message == (
        "The slug “follow-policy” is already used by “Respect approval policies” in this project."
    )
    assert exc.value.extra == {"slug": [exc.value.message]}


def test_create_names_an_archived_clash(project, author, catalogue):
    capability_archive(capability=catalogue["follow-policy"])
    with pytest.raises(ApplicationError, match=r"archived capability .* restore that one"):
        capability_create(project=project, user=author, name="Again", slug="follow-policy")


def test_same_slug_in_another_project_is_fine(project, other_project, author, catalogue):
    capability = capability_create(
        project=other_project, user=author, name="Policy", slug="follow-policy"
    )
    assert capability.project == other_project


def test_create_needs_a_usable_name(project, author):
    with pytest.raises(ApplicationError, match="at least one letter or digit"):
        capability_create(project=project, user=author, name="!!!")


def test_update_changes_fields(catalogue):
    capability = capability_update(
        capability=catalogue["follow-policy"],
        name="Approvals",
        slug="approvals",
        group="Policy",
        description="D",
        guidance="G",
        examples=["a", " b "],
    )
    capability.refresh_from_db()
    assert capability.name == "Approvals"
    assert capability.slug == "approvals"
    assert capability.group == "Policy"
    assert (capability.description, capability.guidance) == ("D", "G")
    assert capability.examples == ["a", "b"]


def test_update_refuses_slug_change_while_tasks_use_it(project, author, catalogue, make_spec):
    spec = make_spec(ONLY_BOOKING_USES_POLICY)
    environment_import(project=project, spec=spec, user=author)
    with pytest.raises(ApplicationError, match=r"cannot change while 1 task uses"):
        capability_update(capability=catalogue["follow-policy"], slug="approvals")
    assert Capability.objects.filter(project=project, slug="follow-policy").exists()
    # Other fields of a used capability may change.
    capability_update(capability=catalogue["follow-policy"], name="Approvals")


def test_update_refuses_a_taken_slug(catalogue):
    with pytest.raises(ApplicationError, match="already used by “Clarify before acting”"):
        capability_update(capability=catalogue["follow-policy"], slug="clarify-before-acting")


def test_update_rejects_unknown_fields(catalogue):
    with pytest.raises(TypeError):
        capability_update(capability=catalogue["follow-policy"], project=None)


def test_archive_and_restore_are_idempotent_and_keep_links(project, author, catalogue, make_spec):
    spec = make_spec(ONLY_BOOKING_USES_POLICY)
    environment_import(project=project, spec=spec, user=author)
    capability = capability_archive(capability=catalogue["follow-policy"])
    stamp = capability.archived_at
    assert stamp is not None
    assert capability_archive(capability=capability).archived_at == stamp
    assert capability.task_links.count() == 1
    capability = capability_restore(capability=capability)
    assert capability.archived_at is None
    assert capability_restore(capability=capability).archived_at is None


def test_delete_unused(catalogue, project):
    capability_delete(capability=catalogue["follow-policy"])
    assert not Capability.objects.filter(project=project, slug="follow-policy").exists()


def test_delete_refuses_a_used_capability(project, author, catalogue, make_spec):
    spec = make_spec(ONLY_BOOKING_USES_POLICY)
    environment_import(project=project, spec=spec, user=author)
    with pytest.raises(ApplicationError) as exc:
        capability_delete(capability=catalogue["follow-policy"])
    assert exc.value.message.startswith("“Respect approval policies” is used by 1 task;")
    assert "Archive it instead" in exc.value.message
    assert exc.value.extra == {"tasks": 1}
    assert Capability.objects.filter(project=project, slug="follow-policy").exists()
