import pytest

from apps.capabilities.models import Capability
from apps.capabilities.services import capability_archive
from apps.environments.capability_selectors import (
    capability_coverage,
    capability_groups,
    capability_list,
    capability_tasks,
)
from apps.environments.models import Environment, Task, TaskCapability
from apps.environments.services import environment_import
from tests.capabilities.conftest import set_validation

pytestmark = pytest.mark.django_db

BOOK, CLARIFY, NOTICE = "book-q3-review", "budget-figure-clarify", "notice-moved-dentist"


@pytest.fixture
def coverage_set(project, author, catalogue, make_spec):
    """Three environments of the same three tasks, tagged and validated differently.

    valid:    book [orchestration, conflicts] s=1.0 · clarify [clarify] s=0.5 · notice [silent] s=—
    draft:    book [orchestration, conflicts] s=0.5 · clarify [] s=0.25 · notice [silent] s=1.0
    archived: everything tagged follow-policy (must count nowhere)
    """
    tagged = {
        BOOK: ["cross-service-orchestration", "resolve-conflicts"],
        CLARIFY: ["clarify-before-acting"],
        NOTICE: ["notice-silent-changes"],
    }
    valid = environment_import(project=project, spec=make_spec(tagged), user=author)
    set_validation(valid, status="valid", sensitivities={BOOK: 1.0, CLARIFY: 0.5, NOTICE: None})
    draft = environment_import(
        project=project, spec=make_spec({**tagged, CLARIFY: []}), user=author
    )
    set_validation(draft, status="draft", sensitivities={BOOK: 0.5, CLARIFY: 0.25, NOTICE: 1})
    archived = environment_import(
        project=project,
        spec=make_spec({BOOK: ["follow-policy"], CLARIFY: ["follow-policy"], NOTICE: []}),
        user=author,
    )
    set_validation(archived, status="archived", sensitivities={BOOK: 1.0})
    return {"valid": valid, "draft": draft, "archived": archived}


def _by_slug(coverage):
    return {row.capability.slug: row for row in coverage.rows}


def _figures(row):
    return (row.tasks, row.valid, row.sensitivity, row.train, row.eval, row.environment_count)


def test_coverage_numbers_are_exact(project, coverage_set, catalogue):
    coverage = capability_coverage(project=project)
    rows = _by_slug(coverage)
    assert len(coverage.rows) == len(catalogue)
    assert _figures(rows["cross-service-orchestration"]) == (2, 1, 0.75, 2, 0, 2)
    assert _figures(rows["resolve-conflicts"]) == (2, 1, 0.75, 2, 0, 2)
    assert _figures(rows["clarify-before-acting"]) == (1, 1, 0.5, 1, 0, 1)
    assert _figures(rows["notice-silent-changes"]) == (2, 1, 1.0, 0, 2, 2)
    assert rows["notice-silent-changes"].measured == 1
    # Tasks of the archived environment count nowhere.
    assert _figures(rows["follow-policy"]) == (0, 0, None, 0, 0, 0)
    assert _figures(coverage.untagged) == (1, 0, 0.25, 1, 0, 1)
    assert (coverage.total_tasks, coverage.total_valid) == (6, 3)


def test_coverage_flags_thin_spots(project, coverage_set, catalogue):
    coverage = capability_coverage(project=project)
    rows = _by_slug(coverage)
    orchestration = rows["cross-service-orchestration"]
    assert (orchestration.no_valid, orchestration.no_eval, orchestration.low_sensitivity) == (
        False,
        True,
        True,
    )
    notice = rows["notice-silent-changes"]
    assert (notice.no_valid, notice.no_eval, notice.low_sensitivity, notice.thin) == (
        False,
        False,
        False,
        False,
    )
    unused = rows["follow-policy"]
    assert (unused.no_valid, unused.no_eval, unused.low_sensitivity) == (True, True, False)
    # Every catalogue entry but the silent-change one is thin.
    assert coverage.thin_count == len(catalogue) - 1


def test_coverage_sorting(project, coverage_set, catalogue):
    by_name = capability_coverage(project=project, sort="name")
    names = [row.name for row in by_name.rows]
    assert names == sorted(names, key=str.lower)
    assert (by_name.sort, by_name.descending) == ("name", False)

    by_tasks = capability_coverage(project=project, sort="-tasks")
    assert [row.tasks for row in by_tasks.rows][:4] == [2, 2, 2, 1]
    assert (by_tasks.sort, by_tasks.descending) == ("tasks", True)
    # Ties keep alphabetical order.
    assert [row.capability.slug for row in by_tasks.rows][:3] == [
        "cross-service-orchestration",
        "notice-silent-changes",
        "resolve-conflicts",
    ]

    by_sensitivity = capability_coverage(project=project, sort="sensitivity")
    values = [row.sensitivity for row in by_sensitivity.rows]
    # Unmeasured first, then the weakest graders.
    assert values[: len(catalogue) - 4] == [None] * (len(catalogue) - 4)
    assert values[-4:] == [0.5, 0.75, 0.75, 1.0]

    assert capability_coverage(project=project, sort="-eval").rows[0].eval == 2
    assert capability_coverage(project=project, sort="bogus").sort == "name"


def test_coverage_shows_archived_capabilities_only_while_used(project, coverage_set, catalogue):
    capability_archive(capability=catalogue["clarify-before-acting"])
    capability_archive(capability=catalogue["follow-policy"])
    rows = _by_slug(capability_coverage(project=project))
    assert rows["clarify-before-acting"].tasks == 1
    assert "follow-policy" not in rows


def test_coverage_of_an_empty_project(project):
    coverage = capability_coverage(project=project)
    assert coverage.rows == []
    assert _figures(coverage.untagged) == (0, 0, None, 0, 0, 0)
    assert (coverage.total_tasks, coverage.total_valid, coverage.thin_count) == (0, 0, 0)


def test_coverage_ignores_other_projects(project, other_project, author, coverage_set, make_spec):
    environment_import(
        project=other_project,
        spec=make_spec({BOOK: ["cross-service-orchestration"], CLARIFY: [], NOTICE: []}),
        user=author,
    )
    rows = _by_slug(capability_coverage(project=project))
    assert rows["cross-service-orchestration"].tasks == 2


def test_coverage_ignores_malformed_report_entries(project, author, catalogue, make_spec):
    environment = environment_import(
        project=project,
        spec=make_spec({BOOK: ["follow-policy"], CLARIFY: [], NOTICE: []}),
        user=author,
    )
    set_validation(environment, status="valid", sensitivities={})
    environment.latest_validation.tasks = ["junk", {"key": BOOK, "sensitivity": "high"}, None]
    environment.latest_validation.save()
    row = _by_slug(capability_coverage(project=project))["follow-policy"]
    assert (row.tasks, row.sensitivity, row.measured) == (1, None, 0)


def _bulk_environments(project, capabilities, count):
    """``count`` valid environments of three tasks each, tagged round-robin, built directly."""
    environments = Environment.objects.bulk_create(
        Environment(project=project, name=f"Bulk {i}", status="valid") for i in range(count)
    )
    tasks = Task.objects.bulk_create(
        Task(environment=env, key=f"t{k}", position=k, split="eval" if k == 2 else "train")
        for env in environments
        for k in range(3)
    )
    TaskCapability.objects.bulk_create(
        TaskCapability(task=task, capability=capabilities[i % len(capabilities)])
        for i, task in enumerate(tasks)
    )


def test_coverage_query_count_is_flat(project, catalogue, coverage_set, django_assert_num_queries):
    capabilities = list(catalogue.values())
    _bulk_environments(project, capabilities, 5)
    with django_assert_num_queries(4):
        small = capability_coverage(project=project)
    _bulk_environments(project, capabilities, 120)
    with django_assert_num_queries(4):
        large = capability_coverage(project=project)
    assert large.total_tasks - small.total_tasks == 360


def test_capability_list_counts_and_filters(project, coverage_set, catalogue):
    rows = {c.slug: c for c in capability_list(project=project)}
    assert len(rows) == len(catalogue)
    assert (rows["resolve-conflicts"].task_count, rows["resolve-conflicts"].valid_task_count) == (
        2,
        1,
    )
    assert (rows["follow-policy"].task_count, rows["follow-policy"].valid_task_count) == (0, 0)

    assert [c.slug for c in capability_list(project=project, q="A MOVED MEETING")] == [
        "notice-silent-changes"
    ]
    assert {c.slug for c in capability_list(project=project, group="Robustness")} == {
        "recover-from-tool-errors"
    }
    capability_archive(capability=catalogue["follow-policy"])
    assert "follow-policy" not in {c.slug for c in capability_list(project=project)}
    assert [c.slug for c in capability_list(project=project, archived=True)] == ["follow-policy"]


def test_capability_list_for_a_member(project, other_project, admin, catalogue):
    from apps.accounts.models import Membership

    Capability.objects.create(project=other_project, slug="theirs", name="Theirs")
    assert {c.project_id for c in capability_list(member=admin)} == {project.pk}
    Membership.objects.create(project=other_project, user=admin, role="viewer")
    assert "theirs" in {c.slug for c in capability_list(member=admin)}


def test_capability_list_query_count_is_flat(project, catalogue, django_assert_num_queries):
    capabilities = list(catalogue.values())
    _bulk_environments(project, capabilities, 2)
    with django_assert_num_queries(1):
        assert len(list(capability_list(project=project))) == len(catalogue)
    _bulk_environments(project, capabilities, 60)
    with django_assert_num_queries(1):
        assert len(list(capability_list(project=project))) == len(catalogue)


def test_capability_groups(project, catalogue):
    assert capability_groups(project=project) == [
        "Coordination",
        "Information",
        "Judgement",
        "Long horizon",
        "Policy and safety",
        "Robustness",
    ]


def test_capability_tasks_include_archived_environments(project, coverage_set, catalogue):
    tasks = list(capability_tasks(capability=catalogue["follow-policy"]))
    assert [(t.key, t.environment.status) for t in tasks] == [
        (BOOK, "archived"),
        (CLARIFY, "archived"),
    ]
