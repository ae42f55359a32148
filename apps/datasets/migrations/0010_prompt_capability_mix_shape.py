"""RL prompt versions built before this stored their capability mix as
``{"train": {slug: rows}}``; every kind now stores ``{slug: {"train": rows, "validation": 0}}``
(what the page, the card and the API read). Rewrites the old shape; nothing else changes."""

from django.db import migrations


def is_old_shape(mix) -> bool:
    if not isinstance(mix, dict) or set(mix) != {"train"}:
        return False
    inner = mix["train"]
    return (
        isinstance(inner, dict)
        and set(inner) != {"train", "validation"}
        and all(isinstance(rows, int) for rows in inner.values())
    )


def one_shape(apps, schema_editor):
    DatasetVersion = apps.get_model("datasets", "DatasetVersion")
    db = schema_editor.connection.alias
    versions = DatasetVersion.objects.using(db).filter(dataset__kind="rl_prompts")
    for version in versions.only("pk", "capability_mix").iterator():
        if is_old_shape(version.capability_mix):
            mix = {
                slug: {"train": rows, "validation": 0}
                for slug, rows in sorted(version.capability_mix["train"].items())
            }
            DatasetVersion.objects.using(db).filter(pk=version.pk).update(capability_mix=mix)


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0009_remove_datasetversion_kind"),
    ]

    operations = [
        migrations.RunPython(one_shape, migrations.RunPython.noop),
    ]
