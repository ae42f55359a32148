"""One access helper per entity: other projects' training jobs, models and command templates
are 404, too-low roles 403."""

from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.training.models import CommandTemplate, TrainedModel, TrainingJob


def _check_role(user, project, min_role: str, what: str) -> None:
    try:
        check_project_role(user, project, min_role)
    except Http404:
        raise Http404(f"No such {what}.") from None


def training_job_get_for_user(user, pk, min_role: str = Role.VIEWER) -> TrainingJob:
    training_job = (
        TrainingJob.objects.select_related(
            "project",
            "job",
            "dataset_version__dataset",
            "endpoint",
            "command_template",
            "created_by",
        )
        .filter(pk=pk)
        .first()
        if str(pk).isdigit()
        else None
    )
    if training_job is None:
        raise Http404("No such training job.")
    _check_role(user, training_job.project, min_role, "training job")
    return training_job


def trained_model_get_for_user(user, pk, min_role: str = Role.VIEWER) -> TrainedModel:
    model = (
        TrainedModel.objects.select_related(
            "project",
            "training_job__job",
            "training_job__dataset_version__dataset",
            "endpoint",
            "base_endpoint",
            "eval_batch__job",
            "base_batch__job",
        )
        .filter(pk=pk)
        .first()
        if str(pk).isdigit()
        else None
    )
    if model is None:
        raise Http404("No such trained model.")
    _check_role(user, model.project, min_role, "trained model")
    return model


def command_template_get_for_user(user, pk, min_role: str = Role.VIEWER) -> CommandTemplate:
    template = (
        CommandTemplate.objects.select_related("project").filter(pk=pk).first()
        if str(pk).isdigit()
        else None
    )
    if template is None:
        raise Http404("No such command template.")
    _check_role(user, template.project, min_role, "command template")
    return template
