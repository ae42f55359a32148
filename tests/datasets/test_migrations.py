"""The migration to one notion of kind (datasets 0008/0009), run by Django's migration executor
on rows built in the old shape: a version kind (sft | rollouts) beside the dataset kind
(sft | rl_prompts). Each test migrates the database back to 0007, builds rows with the
historical models, migrates forward and reads the result with the current models."""

from importlib import import_module

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.datasets.models import Dataset, DatasetKind, DatasetVersion

pytestmark = pytest.mark.django_db(transaction=True)

OLD = [("datasets", "0007_export_formats_rl")]
NEW = [("datasets", "0009_remove_datasetversion_kind")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def old_apps():
    """The historical models at 0007; afterwards, the database is migrated to the latest
    state again (whatever the test left)."""
    apps = _migrate(OLD)
    yield apps
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


class _Old:
    """Rows in the old shape, made with the historical models."""

    def __init__(self, apps):
        self.apps = apps
        Project = apps.get_model("accounts", "Project")
        self.project = Project.objects.create(name="Old", slug="old-kinds")
        self.jobs = 0

    def dataset(self, name, kind="sft", **fields):
        Dataset = self.apps.get_model("datasets", "Dataset")
        return Dataset.objects.create(project=self.project, name=name, kind=kind, **fields)

    def version(self, dataset, number, kind="sft", **fields):
        Job = self.apps.get_model("core", "Job")
        DatasetVersion = self.apps.get_model("datasets", "DatasetVersion")
        self.jobs += 1
        job = Job.objects.create(
            project=self.project, kind="dataset_build", title=f"job {self.jobs}"
        )
        return DatasetVersion.objects.create(
            dataset=dataset,
            number=number,
            kind=kind,
            job=job,
            status="ready",
            checksum=f"{dataset.name[:20]}-{number}",
            **fields,
        )


def test_datasets_take_their_versions_kind_and_mixed_ones_are_split(old_apps):
    old = _Old(old_apps)
    sft = old.dataset("demos", description="Approved demonstrations.")
    old.version(sft, 1)
    prompts = old.dataset("prompts", kind="rl_prompts")
    old.version(prompts, 1)
    only_rollouts = old.dataset("offline", tokenizer="tiny")
    old.version(only_rollouts, 1, kind="rollouts")
    old.version(only_rollouts, 2, kind="rollouts")
    prompts_rollouts = old.dataset("prompt rollouts", kind="rl_prompts")
    old.version(prompts_rollouts, 1, kind="rollouts")
    empty = old.dataset("empty")
    mixed = old.dataset("mixed", description="Both.", tokenizer="tiny")
    m1 = old.version(mixed, 1)
    m2 = old.version(mixed, 2, kind="rollouts")
    old.version(mixed, 3, rebuilt_from=m1)
    old.version(mixed, 4, kind="rollouts", rebuilt_from=m2)
    old.version(mixed, 5, kind="rollouts", rebuilt_from=m1)  # a link across kinds
    # the name the split would take is already taken: the next one is used
    old.dataset("mixed (scored rollouts)")
    mixed_prompts = old.dataset("p" * 120, kind="rl_prompts")
    old.version(mixed_prompts, 1)
    old.version(mixed_prompts, 2, kind="rollouts")

    _migrate(NEW)

    def kind(pk):
        return Dataset.objects.get(pk=pk).kind

    kept_datasets = (sft, prompts, only_rollouts, prompts_rollouts, empty, mixed, mixed_prompts)
    assert [kind(d.pk) for d in kept_datasets] == [
        DatasetKind.SFT,
        DatasetKind.RL_PROMPTS,
        DatasetKind.ROLLOUTS,
        DatasetKind.ROLLOUTS,
        DatasetKind.SFT,
        DatasetKind.SFT,
        DatasetKind.RL_PROMPTS,
    ]
    assert list(
        DatasetVersion.objects.filter(dataset_id=only_rollouts.pk).values_list("number", flat=True)
    ) == [2, 1]

    # the mixed dataset keeps its own versions; its scored rollouts moved, numbers and all
    moved = Dataset.objects.get(project_id=old.project.pk, name="mixed (scored rollouts 2)")
    assert (moved.kind, moved.description, moved.tokenizer) == ("rollouts", "Both.", "tiny")
    assert moved.created_at == Dataset.objects.get(pk=mixed.pk).created_at
    kept = {v.number: v for v in DatasetVersion.objects.filter(dataset_id=mixed.pk)}
    split = {v.number: v for v in DatasetVersion.objects.filter(dataset_id=moved.pk)}
    assert (sorted(kept), sorted(split)) == ([1, 3], [2, 4, 5])
    assert split[2].checksum == "mixed-2" and split[2].kind == "rollouts"
    assert kept[3].rebuilt_from_id == m1.pk  # same dataset: kept
    assert split[4].rebuilt_from_id == m2.pk  # moved together: kept
    assert split[5].rebuilt_from_id is None  # it pointed into the other dataset

    long_name = Dataset.objects.get(
        project_id=old.project.pk, kind="rollouts", name__endswith="(scored rollouts)"
    )
    assert len(long_name.name) == 120 and long_name.name.startswith("p" * 100)
    assert list(
        DatasetVersion.objects.filter(dataset=long_name).values_list("number", flat=True)
    ) == [2]
    # every version's kind is its dataset's; none of another kind is left in any dataset
    assert Dataset.objects.filter(project_id=old.project.pk).count() == 10
    for version in DatasetVersion.objects.select_related("dataset"):
        assert version.kind == version.dataset.kind


def test_backwards_gives_versions_their_kind_again(old_apps):
    old = _Old(old_apps)
    offline = old.dataset("offline")
    old.version(offline, 1, kind="rollouts")
    demos = old.dataset("demos")
    old.version(demos, 1)
    _migrate(NEW)
    assert Dataset.objects.get(pk=offline.pk).kind == DatasetKind.ROLLOUTS

    apps = _migrate(OLD)
    OldVersion = apps.get_model("datasets", "DatasetVersion")
    OldDataset = apps.get_model("datasets", "Dataset")
    assert [
        (v.dataset.name, v.dataset.kind, v.kind)
        for v in OldVersion.objects.filter(dataset__project_id=old.project.pk).order_by(
            "dataset__name"
        )
    ] == [("demos", "sft", "sft"), ("offline", "sft", "rollouts")]
    assert set(OldDataset.objects.values_list("kind", flat=True)) <= {"sft", "rl_prompts"}


def test_a_moved_version_takes_its_export_files_to_its_new_dataset(old_apps, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    old = _Old(old_apps)
    mixed = old.dataset("mixed")
    old.version(mixed, 1)
    rollouts = old.version(mixed, 2, kind="rollouts")
    DatasetExport = old_apps.get_model("datasets", "DatasetExport")
    written = f"datasets/{old.project.pk}/{mixed.pk}/v2/rollouts-train.jsonl"
    (tmp_path / written).parent.mkdir(parents=True)
    (tmp_path / written).write_text('{"row": 1}\n')
    for fmt, path in (
        ("rollouts", written),
        ("card", f"datasets/{old.project.pk}/{mixed.pk}/v2/card.md"),
    ):
        DatasetExport.objects.create(
            version=rollouts,
            format=fmt,
            split="train" if fmt != "card" else "",
            status="ready",
            path=path,
            sha256="0" * 64,
        )

    _migrate(NEW)

    moved = Dataset.objects.get(project_id=old.project.pk, kind="rollouts")
    exports = {
        e.format: e.path for e in DatasetVersion.objects.get(dataset=moved, number=2).exports.all()
    }
    folder = f"datasets/{old.project.pk}/{moved.pk}/v2"
    assert exports == {"rollouts": f"{folder}/rollouts-train.jsonl", "card": f"{folder}/card.md"}
    assert (tmp_path / exports["rollouts"]).read_text() == '{"row": 1}\n'
    # the old dataset's next v2 writes into the old folder: the moved version's files are apart
    assert (tmp_path / written).is_file()
    assert not (tmp_path / folder / "card.md").exists()  # was never written: rewritten on read


def test_rl_prompt_versions_get_every_kinds_capability_mix_shape():
    from django.apps import apps as current_apps

    from apps.accounts.models import Project
    from apps.core.models import Job

    migration = import_module("apps.datasets.migrations.0010_prompt_capability_mix_shape")
    project = Project.objects.create(name="Mix", slug="mix-shape")

    def version(dataset, number, mix):
        job = Job.objects.create(project=project, kind="dataset_build", title=f"job {number}")
        return DatasetVersion.objects.create(
            dataset=dataset, number=number, job=job, status="ready", capability_mix=mix
        )

    prompts = Dataset.objects.create(project=project, name="p", kind=DatasetKind.RL_PROMPTS)
    sft = Dataset.objects.create(project=project, name="s", kind=DatasetKind.SFT)
    old = version(prompts, 1, {"train": {"triage": 4, "clarify": 2}})
    new = version(prompts, 2, {"triage": {"train": 4, "validation": 0}})
    untouched = version(sft, 1, {"train": {"train": 3, "validation": 1}})  # a slug named train

    with connection.schema_editor() as editor:
        migration.one_shape(current_apps, editor)

    for v in (old, new, untouched):
        v.refresh_from_db()
    assert old.capability_mix == {
        "clarify": {"train": 2, "validation": 0},
        "triage": {"train": 4, "validation": 0},
    }
    assert new.capability_mix == {"triage": {"train": 4, "validation": 0}}
    assert untouched.capability_mix == {"train": {"train": 3, "validation": 1}}
