"""The split is keyed by content, not database ids: the same demonstrations recorded in
another database (other ids, another order) split and order the same."""

import json

import pytest
from django.urls import reverse

from apps.curation.models import Demonstration
from apps.datasets.models import DatasetRow, DatasetVersion
from apps.datasets.services import (
    dataset_create,
    dataset_version_build_job,
    dataset_version_rebuild,
    export_absolute_path,
)
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import
from tests.datasets.conftest import SAMPLES, TAKES, build_version, make_demonstration, variant
from tests.datasets.conftest import oracle_transcript as oracle
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


def _record(project, author, *, backwards: bool) -> list[Environment]:
    """The samples imported and their demonstrations recorded (``approved_demonstrations``'s
    takes), in file order or backwards."""
    order = -1 if backwards else 1
    environments = []
    for path in SAMPLES[::order]:
        env = environment_import(project=project, spec=json.loads(path.read_text()), user=author)
        Environment.objects.filter(pk=env.pk).update(status=EnvironmentStatus.VALID)
        env.refresh_from_db()
        environments.append(env)
    for env in environments:
        for task in list(env.tasks.order_by("position"))[::order]:
            transcript, tools, score = oracle(env, task.key)
            takes = range(TAKES if task.split == "train" else 1)
            for take in list(takes)[::order]:
                make_demonstration(
                    env, task.key, transcript=variant(transcript, take), tools=tools, score=score
                )
    return environments


def _split(version: DatasetVersion) -> tuple[list, list]:
    rows = DatasetRow.objects.filter(version=version).order_by("split", "position")
    groups = [(g["key"], g["split"], g["rows"], g["environments"]) for g in version.groups]
    return list(rows.values_list("split", "position", "content_sha256", "group_key")), groups


def test_the_same_data_in_another_database_splits_and_orders_the_same(
    project, other_project, author
):
    here = _record(project, author, backwards=False)
    # "another database": rows there first, so every id shifts, and then the same data
    # recorded in the other order
    _record(ProjectFactory(name="Scratch", slug="scratch"), author, backwards=True)
    there = _record(other_project, author, backwards=True)
    assert not {e.pk for e in here} & {e.pk for e in there}
    ids = lambda p: set(Demonstration.objects.filter(project=p).values_list("pk", flat=True))  # noqa: E731
    assert not ids(project) & ids(other_project)

    for seed, fraction in ((0, 0.3), (7, 0.5)):
        first = build_version(
            dataset_create(project=project, name=f"SFT {seed}", user=author),
            author,
            seed=seed,
            validation_fraction=fraction,
        )
        second = build_version(
            dataset_create(project=other_project, name=f"SFT {seed}", user=author),
            author,
            seed=seed,
            validation_fraction=fraction,
        )
        assert first.split_keys == second.split_keys == "content"
        assert first.validation_rows and first.train_rows
        assert _split(first) == _split(second)
        # every group is one sample's revision, named by its spec hash
        assert {g["key"] for g in first.groups} == {f"spec:{e.spec_hash}" for e in here}
        assert {e.spec_hash for e in here} == {e.spec_hash for e in there}


def test_an_environments_revisions_stay_in_one_group(dataset, author, sample_environments):
    ops, finance, support = sample_environments
    make_demonstration(ops, "book-q3-review")
    make_demonstration(finance, "book-invoices")
    make_demonstration(support, "answer-refund-ticket")
    # ops edited: its next demonstration is of revision 2, with another spec hash
    before = ops.spec_hash
    after = "f" * 64
    Environment.objects.filter(pk=ops.pk).update(revision=2, spec_hash=after)
    ops.refresh_from_db()
    make_demonstration(ops, "budget-figure-clarify")  # shares no masked prompt or reply

    for seed in range(6):
        version = build_version(dataset, author, seed=seed, validation_fraction=0.5)
        rows = DatasetRow.objects.filter(version=version, environment_key=f"env:{ops.pk}")
        assert rows.count() == 2
        # one group, named by the smaller spec key, on one side
        assert set(rows.values_list("group_key", "split")) == {
            (f"spec:{min(before, after)}", rows.first().split)
        }
        assert len(version.groups) == 3


def test_the_version_says_how_its_split_was_keyed(
    dataset, author, approved_demonstrations, client_for, api_client_for, viewer
):
    version = build_version(dataset, author)
    card = export_absolute_path(version.exports.get(format="card")).read_text()
    assert "- Split keys: content. A group is named by an environment revision's spec" in card
    api = api_client_for(viewer).get(f"/api/v1/datasets/{dataset.pk}/versions/{version.number}/")
    assert api.json()["split_keys"] == "content"

    # as a version built before content keys is: its rows in another order, so another
    # checksum; its rebuild says why the checksum differs rather than blame the rows
    DatasetVersion.objects.filter(pk=version.pk).update(split_keys="", checksum="0" * 64)
    version.refresh_from_db()
    rebuild = dataset_version_rebuild(version=version, user=author)
    dataset_version_build_job(rebuild.job_id)
    rebuild.refresh_from_db()
    assert rebuild.split_keys == "content"
    assert rebuild.job.message.endswith(
        "; checksum differs from v1 (its split was keyed by database ids)."
    )
    page = lambda v: (  # noqa: E731
        client_for(viewer)
        .get(reverse("datasets:version_detail", args=[dataset.pk, v.number]))
        .content.decode()
    )
    assert (
        "v1's split was keyed by database ids, this one's by content, so the same "
        "demonstrations split and order differently" in page(rebuild)
    )
    assert "database ids (built before content keys" in page(version)
