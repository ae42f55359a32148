"""One access helper per entity: other projects' training jobs and models are 404, too-low
roles 403; who reads a command job's log is the operator's TRAINING_COMMAND_LOG_ROLE."""

from django.conf import settings
from django.http import Http404

from apps.accounts.access import check_project_role, membership_for
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.training.models import Backend, TrainedModel, TrainingJob


def _get_for_user(queryset, user, pk, min_role: str, what: str):
    """The object ``pk`` of ``queryset`` if ``user`` has ``min_role`` in its project; a missing
    id and another project's object are the same 404 ("No such <what>.")."""
    found = queryset.filter(pk=pk).first() if is_id(pk) else None
    missing = f"No such {what}."
    if found is None:
        raise Http404(missing)
    check_project_role(user, found.project, min_role, missing=missing)
    return found


def training_job_get_for_user(user, pk, min_role: str = Role.VIEWER) -> TrainingJob:
    queryset = TrainingJob.objects.select_related(
        "project",
        "job",
        "dataset_version__dataset",
        "endpoint",
        "created_by",
    )
    return _get_for_user(queryset, user, pk, min_role, "training job")


def trained_model_get_for_user(user, pk, min_role: str = Role.VIEWER) -> TrainedModel:
    queryset = TrainedModel.objects.select_related(
        "project",
        "training_job__job",
        "training_job__dataset_version__dataset",
        "endpoint",
        "base_endpoint",
        "eval_batch__job",
        "base_batch__job",
    )
    return _get_for_user(queryset, user, pk, min_role, "trained model")


def can_read_log(user, training_job: TrainingJob) -> bool:
    """A command job's log (what an operator's scheduler and the job's script printed) is
    read from TRAINING_COMMAND_LOG_ROLE up; other backends' logs by every member."""
    if training_job.backend != Backend.COMMAND:
        return True
    membership = membership_for(user, training_job.project)
    return membership is not None and membership.has_role(settings.TRAINING_COMMAND_LOG_ROLE)
