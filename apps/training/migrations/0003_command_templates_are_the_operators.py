"""Command templates leave the database: they are the operator's configuration
(TRAINING_COMMAND_TEMPLATES_FILE, apps.training.command_templates). A job names its
template and keeps the parameters it was launched with; the project-written templates are
dropped (none of them may run any more)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0002_grpo_method_environments_rl_metrics"),
    ]

    operations = [
        migrations.RemoveField(model_name="trainingjob", name="command_template"),
        migrations.DeleteModel(name="CommandTemplate"),
        migrations.AddField(
            model_name="trainingjob",
            name="command_template",
            field=models.CharField(
                blank=True,
                help_text="command backend: the name of the operator's template "
                "(apps.training.command_templates).",
                max_length=64,
            ),
        ),
        migrations.AddField(
            model_name="trainingjob",
            name="command_parameters",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="command backend: the template's parameters, checked.",
            ),
        ),
    ]
