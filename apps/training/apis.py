"""REST API of training: create, list, retrieve (with down-sampled metrics), its metrics page
by page, cancel, artifacts, the operator's command templates (read only); the callback
endpoints of a ``command`` job's script are in ``apps.training.callback_apis``."""

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.api import StandardPagination, paginated_response
from apps.core.apis import JobOutput
from apps.core.exceptions import ApplicationError
from apps.core.safeinput import ID_MAX, INT32_MAX
from apps.datasets.models import DatasetVersion
from apps.training.access import can_read_log, training_job_get_for_user
from apps.training.callback_apis import urlpatterns as callback_urlpatterns
from apps.training.command_templates import TemplateFileError, command_templates
from apps.training.hyperparameters import DEFAULTS, GRPO_DEFAULTS, PRESETS
from apps.training.models import Backend, TrainingJob, TrainingMethod
from apps.training.redaction import scrub, scrub_json
from apps.training.selectors import (
    project_environments,
    training_job_list,
    training_metrics,
    training_metrics_sampled,
)
from apps.training.services import training_job_cancel, training_job_create


class MetricOutput(serializers.Serializer):
    step = serializers.IntegerField()
    epoch = serializers.FloatField(allow_null=True)
    loss = serializers.FloatField(allow_null=True)
    eval_loss = serializers.FloatField(allow_null=True)
    learning_rate = serializers.FloatField(allow_null=True)
    grad_norm = serializers.FloatField(allow_null=True)
    tokens_per_second = serializers.FloatField(allow_null=True)
    reward = serializers.FloatField(allow_null=True)
    reward_std = serializers.FloatField(allow_null=True)
    group_reward_std = serializers.FloatField(allow_null=True)
    pass_rate = serializers.FloatField(allow_null=True)
    strict_rate = serializers.FloatField(allow_null=True)
    score = serializers.FloatField(allow_null=True)
    kl = serializers.FloatField(allow_null=True)
    completion_length = serializers.FloatField(allow_null=True)


class TrainedModelOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    path = serializers.CharField()
    remote_model = serializers.CharField()
    served_name = serializers.CharField()
    endpoint = serializers.IntegerField(source="endpoint_id", allow_null=True)
    eval_batch = serializers.IntegerField(source="eval_batch_id", allow_null=True)
    base_batch = serializers.IntegerField(source="base_batch_id", allow_null=True)


class TrainingJobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    name = serializers.CharField()
    dataset = serializers.IntegerField(
        source="dataset_version.dataset_id", allow_null=True, default=None
    )
    version = serializers.IntegerField(
        source="dataset_version.number", allow_null=True, default=None
    )
    eval_split = serializers.CharField()
    method = serializers.ChoiceField(choices=TrainingMethod.choices)
    environments = serializers.SerializerMethodField()
    task_split = serializers.CharField()
    backend = serializers.ChoiceField(choices=Backend.choices)
    base_model = serializers.CharField()
    preset = serializers.CharField()
    hyperparameters = serializers.JSONField()
    endpoint = serializers.IntegerField(source="endpoint_id", allow_null=True)
    command_template = serializers.CharField()
    command_parameters = serializers.JSONField()
    external_id = serializers.CharField()
    current_step = serializers.IntegerField()
    total_steps = serializers.IntegerField()
    last_loss = serializers.FloatField(allow_null=True)
    last_reward = serializers.FloatField(allow_null=True)
    job = JobOutput()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_environments(self, training_job) -> list[int]:
        return sorted(e.pk for e in training_job.environments.all())


class TrainingJobDetailOutput(TrainingJobOutput):
    metrics = MetricOutput(
        many=True,
        help_text="At most 500 steps spread over the run (the first and last included); "
        "every row: the metrics endpoint, page by page.",
    )
    metrics_count = serializers.IntegerField()
    log_tail = serializers.CharField(
        allow_null=True,
        help_text="Redacted; null for a command job when the caller's role is below the "
        "operator's TRAINING_COMMAND_LOG_ROLE.",
    )
    trained_model = TrainedModelOutput(allow_null=True)


class TrainingJobInput(serializers.Serializer):
    method = serializers.ChoiceField(
        choices=TrainingMethod.choices, required=False, default=TrainingMethod.SFT
    )
    dataset = serializers.IntegerField(
        min_value=1, max_value=ID_MAX, required=False, help_text="sft: the dataset's id."
    )
    version = serializers.IntegerField(
        min_value=1, max_value=INT32_MAX, required=False, help_text="sft: the version number."
    )
    environments = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX),
        required=False,
        default=list,
        max_length=100,
        help_text="grpo: ids of the environments whose tasks are rolled out.",
    )
    task_split = serializers.ChoiceField(
        choices=["", "train", "eval"],
        required=False,
        allow_blank=True,
        default="train",
        help_text="grpo: the tasks rolled out (blank: every task).",
    )
    backend = serializers.ChoiceField(choices=Backend.choices)
    base_model = serializers.CharField(required=False, allow_blank=True, default="")
    preset = serializers.ChoiceField(
        choices=["", *PRESETS], required=False, allow_blank=True, default=""
    )
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    eval_split = serializers.ChoiceField(
        choices=["", "validation"], required=False, allow_blank=True, default="validation"
    )
    hyperparameters = serializers.JSONField(
        required=False,
        default=dict,
        help_text=f"sft: any of {', '.join(DEFAULTS)}; grpo: any of {', '.join(GRPO_DEFAULTS)}. "
        "Missing ones take the preset's value.",
    )
    endpoint = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=ID_MAX
    )
    command_template = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=64,
        help_text="command backend: the name of one of the operator's templates.",
    )
    command_parameters = serializers.DictField(
        required=False,
        default=dict,
        help_text="command backend: values of the template's declared parameters.",
    )


def _detail(training_job: TrainingJob, user) -> dict:
    data = TrainingJobOutput(training_job).data
    sampled = training_metrics_sampled(training_job=training_job)
    data["metrics"] = MetricOutput(sampled, many=True).data
    data["metrics_count"] = training_metrics(training_job=training_job).count()
    data["log_tail"] = scrub(training_job.log_tail) if can_read_log(user, training_job) else None
    model = getattr(training_job, "trained_model", None)
    data["trained_model"] = TrainedModelOutput(model).data if model else None
    return data


class TrainingJobListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=TrainingJobOutput(many=True), operation_id="training_jobs_list")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        return paginated_response(
            request, self, training_job_list(project=project), TrainingJobOutput
        )

    @extend_schema(
        request=TrainingJobInput,
        responses={201: TrainingJobOutput},
        operation_id="training_jobs_create",
        description="Launch fine-tuning on a ready dataset version (`method` sft, with `dataset` "
        "and `version`) or GRPO on environment tasks (`method` grpo, with `environments` and "
        "`task_split`; local backend). `local`: TRL on a gpu-queue worker; `openai`: an "
        "OpenAI-compatible fine-tuning API (`endpoint`); `command`: one of the operator's "
        "command templates (`command_template`, its name; `command_parameters`, its declared "
        "parameters).",
    )
    def post(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.AUTHOR)
        data = TrainingJobInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        version = (
            DatasetVersion.objects.filter(
                dataset_id=v["dataset"], dataset__project=project, number=v["version"]
            )
            .select_related("dataset")
            .first()
            if v.get("dataset") and v.get("version")
            else None
        )
        environments = list(project_environments(project=project, ids=v["environments"]))
        missing = sorted(set(v["environments"]) - {e.pk for e in environments})
        if missing:
            message = f"No such environment in this project: {', '.join(map(str, missing))}."
            raise ApplicationError(message, {"fields": {"environments": [message]}})
        training_job = training_job_create(
            project=project,
            user=request.user,
            method=v["method"],
            environments=environments,
            task_split=v["task_split"],
            dataset_version=version,
            backend=v["backend"],
            base_model=v["base_model"],
            preset=v["preset"],
            hyperparameters=v["hyperparameters"],
            name=v["name"],
            eval_split=v["eval_split"],
            endpoint=project.model_endpoints.filter(pk=v["endpoint"]).first()
            if v["endpoint"]
            else None,
            command_template=v["command_template"],
            command_parameters=v["command_parameters"],
        )
        return Response(TrainingJobOutput(training_job).data, status=status.HTTP_201_CREATED)


class TrainingJobDetailApi(APIView):
    @extend_schema(responses=TrainingJobDetailOutput, operation_id="training_jobs_retrieve")
    def get(self, request, pk):
        training_job = training_job_get_for_user(request.user, pk)
        return Response(_detail(training_job, request.user))


class TrainingJobMetricsApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=MetricOutput(many=True), operation_id="training_jobs_metrics")
    def get(self, request, pk):
        training_job = training_job_get_for_user(request.user, pk)
        return paginated_response(
            request, self, training_metrics(training_job=training_job), MetricOutput
        )


class CommandTemplateOutput(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_parameters(self, template) -> dict:
        return {
            p.name: {
                "type": p.type,
                "label": p.label,
                "help": p.help,
                "required": p.required,
                "default": p.default,
                "choices": list(p.choices),
                "pattern": p.pattern if p.type == "string" else None,
                "min": p.min,
                "max": p.max,
            }
            for p in template.parameters.values()
        }


class CommandTemplateListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        responses=CommandTemplateOutput(many=True),
        operation_id="training_command_templates_list",
        description="The command templates the operator offers (read only; their command "
        "lines and environments are the operator's and are not shown).",
    )
    def get(self, request):
        try:
            templates = command_templates().values()
        except TemplateFileError as exc:
            raise ApplicationError(exc.message) from None
        return paginated_response(request, self, list(templates), CommandTemplateOutput)


class TrainingJobCancelApi(APIView):
    @extend_schema(
        request=None, responses={202: TrainingJobOutput}, operation_id="training_jobs_cancel"
    )
    def post(self, request, pk):
        training_job = training_job_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        training_job_cancel(training_job=training_job)
        return Response(TrainingJobOutput(training_job).data, status=status.HTTP_202_ACCEPTED)


class TrainingJobArtifactsApi(APIView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        operation_id="training_jobs_artifacts",
        description="Where the checkpoints and the final model are, the exact config the "
        "trainer ran with, the data files' sha256 (as written and as trained on), attempts.",
    )
    def get(self, request, pk):
        training_job = training_job_get_for_user(request.user, pk)
        model = getattr(training_job, "trained_model", None)
        return Response(
            {
                "output_dir": training_job.output_dir,
                "command": scrub(training_job.command),
                "external_id": scrub(training_job.external_id),
                "artifacts": scrub_json(training_job.artifacts),
                "trained_model": TrainedModelOutput(model).data if model else None,
            }
        )


urlpatterns = [
    path("projects/<int:pk>/training-jobs/", TrainingJobListApi.as_view(), name="training-list"),
    path("training-jobs/<int:pk>/", TrainingJobDetailApi.as_view(), name="training-detail"),
    path(
        "training-jobs/<int:pk>/metrics/",
        TrainingJobMetricsApi.as_view(),
        name="training-metrics",
    ),
    path(
        "training-command-templates/",
        CommandTemplateListApi.as_view(),
        name="training-command-templates",
    ),
    path("training-jobs/<int:pk>/cancel/", TrainingJobCancelApi.as_view(), name="training-cancel"),
    path(
        "training-jobs/<int:pk>/artifacts/",
        TrainingJobArtifactsApi.as_view(),
        name="training-artifacts",
    ),
]
urlpatterns += callback_urlpatterns
