"""Jobs queued before the sweeper existed name their task too, so that an active one left
behind by the upgrade is swept like any other (task names are strings: no app import)."""

from django.db import migrations

TASKS_BY_KIND = {
    "worker_check": "apps.core.tasks.check_worker_task",
    "environment_validation": "apps.environments.tasks.validate_environments_task",
    "curation.regrade": "apps.curation.tasks.regrade_demonstrations_task",
    "dataset_build": "apps.datasets.tasks.build_dataset_version_task",
    "dataset_verify": "apps.datasets.tasks.verify_dataset_version_task",
    "endpoint_test": "apps.llm.tasks.check_endpoint_task",
}


def backfill(apps, schema_editor):
    Job = apps.get_model("core", "Job")
    for kind, task in TASKS_BY_KIND.items():
        Job.objects.filter(kind=kind, task_name="").update(task_name=task)


class Migration(migrations.Migration):
    dependencies = [("core", "0002_job_task_name_and_claim")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
