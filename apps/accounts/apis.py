from django.http import Http404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import (
    membership_get_for_user,
    project_get_for_user_by_pk,
)
from apps.accounts.models import PROJECT_DESCRIPTION_MAX_LENGTH, ApiToken, Role
from apps.accounts.selectors import api_token_list, membership_list
from apps.accounts.services import (
    api_token_create,
    api_token_revoke,
    membership_add,
    membership_change_role,
    membership_remove,
    project_update,
)
from apps.core.api import StandardPagination, paginated_response


class ProjectOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    slug = serializers.CharField()
    description = serializers.CharField()
    created_at = serializers.DateTimeField()


class ProjectCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=120)
    slug = serializers.SlugField(max_length=60, required=False, allow_blank=True)
    description = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=PROJECT_DESCRIPTION_MAX_LENGTH
    )


class ProjectUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=120, required=False)
    description = serializers.CharField(
        required=False, allow_blank=True, max_length=PROJECT_DESCRIPTION_MAX_LENGTH
    )


class MembershipOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=Role.choices)
    created_at = serializers.DateTimeField()


class MembershipCreateInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.VIEWER)


class MembershipUpdateInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)


class TokenOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class TokenCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)


class TokenCreatedOutput(TokenOutput):
    token = serializers.CharField(help_text="The secret. Shown in this response only.")


class ProjectDetailApi(APIView):
    @extend_schema(responses=ProjectOutput)
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        return Response(ProjectOutput(project).data)

    @extend_schema(request=ProjectUpdateInput, responses=ProjectOutput)
    def patch(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.ADMIN)
        data = ProjectUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        project = project_update(
            project=project,
            name=data.validated_data.get("name", project.name),
            description=data.validated_data.get("description", project.description),
        )
        return Response(ProjectOutput(project).data)


class MembershipListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=MembershipOutput(many=True), operation_id="memberships_list")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        return paginated_response(request, self, membership_list(project=project), MembershipOutput)

    @extend_schema(request=MembershipCreateInput, responses={201: MembershipOutput})
    def post(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.ADMIN)
        data = MembershipCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = membership_add(project=project, **data.validated_data)
        return Response(MembershipOutput(membership).data, status=status.HTTP_201_CREATED)


class MembershipDetailApi(APIView):
    def _get(self, request, pk, membership_pk, min_role):
        project = project_get_for_user_by_pk(request.user, pk, min_role=min_role)
        membership = membership_get_for_user(request.user, membership_pk, min_role=min_role)
        if membership.project_id != project.pk:
            raise Http404("No such membership.")
        return membership

    @extend_schema(responses=MembershipOutput)
    def get(self, request, pk, membership_pk):
        return Response(MembershipOutput(self._get(request, pk, membership_pk, Role.VIEWER)).data)

    @extend_schema(request=MembershipUpdateInput, responses=MembershipOutput)
    def patch(self, request, pk, membership_pk):
        membership = self._get(request, pk, membership_pk, Role.ADMIN)
        data = MembershipUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = membership_change_role(membership=membership, role=data.validated_data["role"])
        return Response(MembershipOutput(membership).data)

    @extend_schema(responses={204: None})
    def delete(self, request, pk, membership_pk):
        membership_remove(membership=self._get(request, pk, membership_pk, Role.ADMIN))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=TokenOutput(many=True), operation_id="tokens_list")
    def get(self, request):
        return paginated_response(request, self, api_token_list(user=request.user), TokenOutput)

    @extend_schema(request=TokenCreateInput, responses={201: TokenCreatedOutput})
    def post(self, request):
        data = TokenCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        token, secret = api_token_create(user=request.user, name=data.validated_data["name"])
        payload = dict(TokenOutput(token).data, token=secret)
        return Response(
            payload, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"}
        )


class TokenDetailApi(APIView):
    @extend_schema(
        responses={
            200: TokenOutput,
        }
    )
    def delete(self, request, token_pk):
        token = ApiToken.objects.filter(pk=token_pk, user=request.user).first()
        if token is None:
            raise Http404("No such token.")
        api_token_revoke(token=token)
        return Response(TokenOutput(token).data)


urlpatterns = [
    path("projects/<int:pk>/", ProjectDetailApi.as_view(), name="project_detail"),
    path("projects/<int:pk>/memberships/", MembershipListApi.as_view(), name="membership_list"),
    path(
        "projects/<int:pk>/memberships/<int:membership_pk>/",
        MembershipDetailApi.as_view(),
        name="membership_detail",
    ),
    path("tokens/", TokenListApi.as_view(), name="token_list"),
    path("tokens/<int:token_pk>/", TokenDetailApi.as_view(), name="token_detail"),
]
