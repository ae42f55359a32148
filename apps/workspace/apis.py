"""``/api/v1/projects/``: list the caller's projects, start a new one (with its catalogue)."""

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.apis import ProjectCreateInput, ProjectOutput
from apps.accounts.selectors import project_list_for_user
from apps.core.api import StandardPagination, paginated_response
from apps.workspace.services import project_start


class ProjectListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=ProjectOutput(many=True), operation_id="projects_list")
    def get(self, request):
        return paginated_response(
            request, self, project_list_for_user(user=request.user), ProjectOutput
        )

    @extend_schema(request=ProjectCreateInput, responses={201: ProjectOutput})
    def post(self, request):
        data = ProjectCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        project = project_start(creator=request.user, **data.validated_data)
        return Response(ProjectOutput(project).data, status=status.HTTP_201_CREATED)


urlpatterns = [
    path("projects/", ProjectListApi.as_view(), name="project_list"),
]
