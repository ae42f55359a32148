"""One notion of kind: a dataset's kind says what every one of its versions holds.

Before, a dataset had a kind (sft | rl_prompts) and each version another (sft | rollouts),
so a dataset could hold demonstrations and scored rollouts side by side. From here the kind
belongs to the dataset, with a third value, ``rollouts``, and ``0009`` drops the version's.
Existing rows are mapped so that no version changes what it holds:

- a dataset with no scored-rollout version keeps its kind (sft or rl_prompts);
- a dataset whose versions are all scored rollouts becomes a ``rollouts`` dataset;
- a *mixed* dataset (scored-rollout versions beside sft or rl_prompts ones) is split: it
  keeps its kind and its other versions, and its scored-rollout versions move, with their
  numbers, rows, exports and checksums, to a new ``rollouts`` dataset of the same project
  named “<name> (scored rollouts)” (“… (scored rollouts 2)”, … when taken), with the same
  description, tokenizer and creator; a ``rebuilt_from`` link left pointing across the two
  datasets is cleared. A moved version's export files are copied into the new dataset's
  folder and their stored paths follow, so the old dataset's next version (which may take the
  same number, and so the same folder name) never writes over them; the copies at the old
  paths are left (a rolled-back migration still finds every file it points at).

Backwards: versions of ``rollouts`` datasets get ``kind = rollouts`` again and those datasets
become ``sft``; a split is not undone (the two datasets stay).

The dataset row updates are in this migration and the column drop in the next, so that on
PostgreSQL the moved versions' foreign-key checks run before the table is altered.
"""

import shutil
from pathlib import Path

from django.conf import settings
from django.db import migrations, models

ROLLOUTS = "rollouts"
SUFFIX = " (scored rollouts{})"
NAME_MAX = 120


def _free_name(Dataset, db, project_id, name):
    taken = set(
        Dataset.objects.using(db).filter(project_id=project_id).values_list("name", flat=True)
    )
    for n in range(1, 10_000):
        suffix = SUFFIX.format("" if n == 1 else f" {n}")
        candidate = name[: NAME_MAX - len(suffix)].rstrip() + suffix
        if candidate not in taken:
            return candidate
    raise RuntimeError(f"No free name for the scored rollouts of dataset “{name}”.")


def _exports_follow(DatasetExport, db, version, old_dataset_id):
    """``datasets/<project>/<old>/v<n>/…`` → ``datasets/<project>/<new>/v<n>/…``, the file
    copied when it is there (a missing one is written again on its next download)."""
    media = Path(settings.MEDIA_ROOT)
    old_prefix = f"datasets/{version.dataset.project_id}/{old_dataset_id}/"
    new_prefix = f"datasets/{version.dataset.project_id}/{version.dataset_id}/"
    for export in DatasetExport.objects.using(db).filter(version_id=version.pk):
        path = export.path.replace("\\", "/")
        if not path.startswith(old_prefix):
            continue
        moved_to = new_prefix + path[len(old_prefix) :]
        source, target = media / path, media / moved_to
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        DatasetExport.objects.using(db).filter(pk=export.pk).update(path=moved_to)


def one_kind_per_dataset(apps, schema_editor):
    Dataset = apps.get_model("datasets", "Dataset")
    DatasetVersion = apps.get_model("datasets", "DatasetVersion")
    DatasetExport = apps.get_model("datasets", "DatasetExport")
    db = schema_editor.connection.alias
    versions = DatasetVersion.objects.using(db)
    holding = (
        Dataset.objects.using(db)
        .filter(pk__in=versions.filter(kind=ROLLOUTS).values("dataset_id"))
        .order_by("pk")
    )
    for dataset in holding:
        if not versions.filter(dataset_id=dataset.pk).exclude(kind=ROLLOUTS).exists():
            Dataset.objects.using(db).filter(pk=dataset.pk).update(kind=ROLLOUTS)
            continue
        moved = Dataset.objects.using(db).create(
            project_id=dataset.project_id,
            name=_free_name(Dataset, db, dataset.project_id, dataset.name),
            kind=ROLLOUTS,
            description=dataset.description,
            tokenizer=dataset.tokenizer,
            created_by_id=dataset.created_by_id,
        )
        Dataset.objects.using(db).filter(pk=moved.pk).update(created_at=dataset.created_at)
        versions.filter(dataset_id=dataset.pk, kind=ROLLOUTS).update(dataset_id=moved.pk)
        for version in versions.filter(dataset_id=moved.pk).select_related("dataset"):
            _exports_follow(DatasetExport, db, version, dataset.pk)
        for pk in (dataset.pk, moved.pk):
            versions.filter(dataset_id=pk).exclude(rebuilt_from__isnull=True).exclude(
                rebuilt_from__dataset_id=pk
            ).update(rebuilt_from=None)


def version_kinds_again(apps, schema_editor):
    Dataset = apps.get_model("datasets", "Dataset")
    DatasetVersion = apps.get_model("datasets", "DatasetVersion")
    db = schema_editor.connection.alias
    DatasetVersion.objects.using(db).filter(dataset__kind=ROLLOUTS).update(kind=ROLLOUTS)
    Dataset.objects.using(db).filter(kind=ROLLOUTS).update(kind="sft")


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0007_export_formats_rl"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="dataset",
            name="dataset_kind_valid",
        ),
        migrations.AlterField(
            model_name="dataset",
            name="kind",
            field=models.CharField(
                choices=[
                    ("sft", "SFT (approved demonstrations)"),
                    ("rl_prompts", "RL prompts (environment tasks)"),
                    ("rollouts", "Scored rollouts (student rollout groups)"),
                ],
                default="sft",
                help_text="sft: versions of approved demonstrations (DatasetRow); rl_prompts: "
                "versions of environment tasks (PromptRow: prompts that name the task) for "
                "trainers that roll out themselves; rollouts: versions of the graded runs of "
                "student rollout groups (RolloutRow, filters = {batches, variant}) for offline "
                "RL. Fixed at creation.",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="dataset",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind__in", ["sft", "rl_prompts", "rollouts"])),
                name="dataset_kind_valid",
            ),
        ),
        migrations.RunPython(one_kind_per_dataset, version_kinds_again),
    ]
