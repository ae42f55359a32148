"""REST API of model servers: list and start under a project, read one, stop it."""

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.api import StandardPagination, paginated_response
from apps.core.apis import JobOutput
from apps.core.exceptions import ApplicationError
from apps.core.safeinput import ID_MAX
from apps.serving.access import model_server_get_for_user
from apps.serving.models import Engine
from apps.serving.selectors import model_server_list, model_server_ready
from apps.serving.services import MAX_IDLE_TIMEOUT_S, model_server_start, model_server_stop
from apps.training.models import TrainedModel


class ModelServerOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    trained_model = serializers.IntegerField(source="trained_model_id", allow_null=True)
    model_path = serializers.CharField()
    adapter_path = serializers.CharField()
    engine = serializers.ChoiceField(choices=["", *Engine.values])
    base_url = serializers.CharField(help_text="Blank until the worker has chosen a port.")
    endpoint = serializers.IntegerField(
        source="endpoint_id", allow_null=True, help_text="The model endpoint while it answers."
    )
    ready = serializers.SerializerMethodField()
    ready_at = serializers.DateTimeField(allow_null=True)
    idle_timeout_s = serializers.IntegerField()
    job = JobOutput()
    created_at = serializers.DateTimeField()

    def get_ready(self, server) -> bool:
        return model_server_ready(server=server)


class ModelServerDetailOutput(ModelServerOutput):
    command = serializers.CharField()
    log_tail = serializers.CharField()


class ModelServerInput(serializers.Serializer):
    trained_model = serializers.IntegerField(min_value=1, max_value=ID_MAX, required=False)
    model_path = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)
    idle_timeout_s = serializers.IntegerField(
        min_value=0, max_value=MAX_IDLE_TIMEOUT_S, required=False
    )


class ModelServerListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=ModelServerOutput(many=True), operation_id="model_servers_list")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        servers = model_server_list(project=project)
        return paginated_response(request, self, servers, ModelServerOutput)

    @extend_schema(
        request=ModelServerInput,
        responses={202: ModelServerOutput},
        operation_id="model_servers_create",
        description="Serve a trained model of the project, or a hub id / a folder on the gpu "
        "worker: a job on the gpu queue; poll the server until `ready`.",
    )
    def post(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.AUTHOR)
        data = ModelServerInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        trained = None
        if "trained_model" in values:
            trained = TrainedModel.objects.filter(pk=values["trained_model"], project=project)
            trained = trained.first()
            if trained is None:
                raise ApplicationError(
                    "No such trained model in this project.",
                    {"fields": {"trained_model": ["No such trained model in this project."]}},
                )
        server = model_server_start(
            project=project,
            user=request.user,
            trained_model=trained,
            model_path=values["model_path"],
            idle_timeout_s=values.get("idle_timeout_s"),
        )
        return Response(ModelServerOutput(server).data, status=status.HTTP_202_ACCEPTED)


class ModelServerDetailApi(APIView):
    @extend_schema(responses=ModelServerDetailOutput, operation_id="model_servers_retrieve")
    def get(self, request, pk):
        server = model_server_get_for_user(request.user, pk)
        return Response(ModelServerDetailOutput(server).data)


class ModelServerStopApi(APIView):
    @extend_schema(
        request=None, responses={202: ModelServerOutput}, operation_id="model_servers_stop"
    )
    def post(self, request, pk):
        server = model_server_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        server = model_server_stop(server=server)
        return Response(ModelServerOutput(server).data, status=status.HTTP_202_ACCEPTED)


urlpatterns = [
    path(
        "projects/<int:pk>/model-servers/", ModelServerListApi.as_view(), name="model-server-list"
    ),
    path("model-servers/<int:pk>/", ModelServerDetailApi.as_view(), name="model-server-detail"),
    path("model-servers/<int:pk>/stop/", ModelServerStopApi.as_view(), name="model-server-stop"),
]
