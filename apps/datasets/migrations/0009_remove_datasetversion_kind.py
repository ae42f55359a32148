"""A version's kind is its dataset's (``DatasetVersion.kind`` is now a property); the rows
were mapped by 0008."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0008_rollouts_dataset_kind"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="datasetversion",
            name="kind",
        ),
    ]
