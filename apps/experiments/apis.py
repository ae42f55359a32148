"""``/api/v1/projects/{id}/experiments/`` (list, start from a recipe: the request body is the
recipe) and ``/api/v1/experiments/{id}/`` (the experiment with its stages)."""

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.api import StandardPagination, paginated_response
from apps.experiments.access import experiment_get_for_user
from apps.experiments.outcomes import experiment_curves, experiment_results
from apps.experiments.results import table_json, table_summary
from apps.experiments.selectors import experiment_list, experiment_stages
from apps.experiments.services import experiment_create
from apps.experiments.targeting import targeted_report


class StageOutput(serializers.Serializer):
    stage = serializers.CharField()
    status = serializers.CharField()
    job_ids = serializers.ListField(child=serializers.IntegerField())
    outputs = serializers.JSONField()
    message = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class ExperimentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    name = serializers.CharField()
    status = serializers.CharField()
    message = serializers.CharField()
    recipe = serializers.JSONField()
    previous = serializers.IntegerField(source="previous_id", allow_null=True)
    created_at = serializers.DateTimeField()


class ExperimentDetailOutput(ExperimentOutput):
    stages = StageOutput(many=True)


def _detail(experiment) -> dict:
    data = ExperimentOutput(experiment).data
    data["stages"] = StageOutput(experiment_stages(experiment=experiment), many=True).data
    return data


class ExperimentListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=ExperimentOutput(many=True), operation_id="experiments_list")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        return paginated_response(request, self, experiment_list(project=project), ExperimentOutput)

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={201: ExperimentDetailOutput},
        operation_id="experiments_create",
        description="Start an experiment: the body is its recipe (coworkenv.experiment/v1). "
        "A bad recipe is refused with the field named in `details.fields`; nothing is created.",
    )
    def post(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.AUTHOR)
        experiment = experiment_create(project=project, user=request.user, recipe=request.data)
        return Response(_detail(experiment), status=status.HTTP_201_CREATED)


class ExperimentDetailApi(APIView):
    @extend_schema(responses=ExperimentDetailOutput, operation_id="experiments_retrieve")
    def get(self, request, pk):
        return Response(_detail(experiment_get_for_user(request.user, pk)))


class ExperimentResultsApi(APIView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        operation_id="experiments_results",
        description="The results table: per group (all held-out seeds, capability:<slug>, "
        "horizon:<h>, held-out family) and arm (base, sft, grpo) the tasks, runs (their ids), "
        "mean score, pass, strict, pass@k and pass^k, each later arm's paired difference "
        "from the base with its bootstrap 95% CI, a sentence, and the SFT loss and GRPO "
        "reward curves; for a second round, `targeted`: each capability it synthesized for, "
        "its pass^k in the previous round and in this one, and whether it improved.",
    )
    def get(self, request, pk):
        experiment = experiment_get_for_user(request.user, pk)
        table = experiment_results(experiment)
        return Response(
            {
                **table_json(table),
                "summary": table_summary(table),
                "curves": experiment_curves(experiment),
                "targeted": targeted_report(experiment),
            }
        )


urlpatterns = [
    path("projects/<int:pk>/experiments/", ExperimentListApi.as_view(), name="experiment-list"),
    path("experiments/<int:pk>/", ExperimentDetailApi.as_view(), name="experiment-detail"),
    path(
        "experiments/<int:pk>/results/",
        ExperimentResultsApi.as_view(),
        name="experiment-results",
    ),
]
