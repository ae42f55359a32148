"""The capabilities REST API (the catalogue with its task counts), mounted under /api/v1/."""

from django.db import transaction
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.capabilities.access import capability_get_for_user
from apps.capabilities.models import (
    DESCRIPTION_MAX_LENGTH,
    EXAMPLE_MAX_LENGTH,
    EXAMPLES_MAX,
    GUIDANCE_MAX_LENGTH,
)
from apps.capabilities.services import (
    capability_archive,
    capability_create,
    capability_delete,
    capability_restore,
    capability_update,
)
from apps.core.api import StandardPagination, paginated_response
from apps.core.safeinput import ID_MAX
from apps.environments.capability_selectors import capability_get_with_counts, capability_list


class CapabilityOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    slug = serializers.CharField()
    name = serializers.CharField()
    group = serializers.CharField()
    description = serializers.CharField()
    guidance = serializers.CharField()
    examples = serializers.ListField(child=serializers.CharField())
    archived = serializers.BooleanField(source="is_archived")
    archived_at = serializers.DateTimeField(allow_null=True)
    task_count = serializers.IntegerField(
        help_text="Tasks tagged with it, in environments that are not archived."
    )
    valid_task_count = serializers.IntegerField(
        help_text="Tasks tagged with it whose environment is valid or approved."
    )
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class CapabilityPage(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = CapabilityOutput(many=True)


class CapabilityListFilters(serializers.Serializer):
    project = serializers.IntegerField(required=False, min_value=1, max_value=ID_MAX)
    group = serializers.CharField(required=False, allow_blank=True, default="", max_length=60)
    q = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    archived = serializers.BooleanField(required=False, default=False)


class CapabilityCreateInput(serializers.Serializer):
    project = serializers.IntegerField(min_value=1, max_value=ID_MAX)
    name = serializers.CharField(max_length=120)
    slug = serializers.SlugField(max_length=80, required=False, allow_blank=True)
    group = serializers.CharField(max_length=60, required=False, allow_blank=True, default="")
    description = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=DESCRIPTION_MAX_LENGTH
    )
    guidance = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=GUIDANCE_MAX_LENGTH
    )
    examples = serializers.ListField(
        child=serializers.CharField(max_length=EXAMPLE_MAX_LENGTH, allow_blank=True),
        required=False,
        default=list,
        max_length=EXAMPLES_MAX,
    )


class CapabilityUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=120, required=False)
    slug = serializers.SlugField(
        max_length=80,
        required=False,
        help_text="Can change only while no task uses the capability.",
    )
    group = serializers.CharField(max_length=60, required=False, allow_blank=True)
    description = serializers.CharField(
        required=False, allow_blank=True, max_length=DESCRIPTION_MAX_LENGTH
    )
    guidance = serializers.CharField(
        required=False, allow_blank=True, max_length=GUIDANCE_MAX_LENGTH
    )
    examples = serializers.ListField(
        child=serializers.CharField(max_length=EXAMPLE_MAX_LENGTH, allow_blank=True),
        required=False,
        max_length=EXAMPLES_MAX,
    )
    archived = serializers.BooleanField(
        required=False, help_text="true archives the capability, false restores it."
    )


def _output(capability) -> dict:
    return CapabilityOutput(capability_get_with_counts(pk=capability.pk)).data


class CapabilityListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "project",
                OpenApiTypes.INT,
                description="A project id; without it, the capabilities of all your projects.",
            ),
            OpenApiParameter("group", OpenApiTypes.STR, description="Exact group name."),
            OpenApiParameter(
                "q", OpenApiTypes.STR, description="Search in name, slug, description and group."
            ),
            OpenApiParameter(
                "archived",
                OpenApiTypes.BOOL,
                description="true lists only archived capabilities; default false.",
            ),
            OpenApiParameter("page", OpenApiTypes.INT, description="Page number, from 1."),
            OpenApiParameter(
                "page_size", OpenApiTypes.INT, description="Results per page (at most 500)."
            ),
        ],
        responses=CapabilityPage,
        operation_id="capabilities_list",
        description="Capabilities with their task counts, ordered by group and name.",
    )
    def get(self, request):
        filters = CapabilityListFilters(data=request.query_params)
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        scope = (
            {"project": project_get_for_user_by_pk(request.user, params["project"])}
            if "project" in params
            else {"member": request.user}
        )
        capabilities = capability_list(
            **scope, q=params["q"].strip(), group=params["group"], archived=params["archived"]
        )
        return paginated_response(request, self, capabilities, CapabilityOutput)

    @extend_schema(
        request=CapabilityCreateInput,
        responses={201: CapabilityOutput},
        description="Authors and above. The slug is derived from the name when blank; blank "
        "examples are dropped.",
    )
    def post(self, request):
        data = CapabilityCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        project = project_get_for_user_by_pk(
            request.user, fields.pop("project"), min_role=Role.AUTHOR
        )
        capability = capability_create(project=project, user=request.user, **fields)
        return Response(_output(capability), status=status.HTTP_201_CREATED)


class CapabilityDetailApi(APIView):
    @extend_schema(responses=CapabilityOutput)
    def get(self, request, pk):
        return Response(_output(capability_get_for_user(request.user, pk)))

    @extend_schema(request=CapabilityUpdateInput, responses=CapabilityOutput)
    def patch(self, request, pk):
        capability = capability_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = CapabilityUpdateInput(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        changes = dict(data.validated_data)
        archived = changes.pop("archived", None)
        with transaction.atomic():  # all of the patch, or none of it
            if changes:
                capability = capability_update(capability=capability, **changes)
            if archived is True:
                capability = capability_archive(capability=capability)
            elif archived is False:
                capability = capability_restore(capability=capability)
        return Response(_output(capability))

    @extend_schema(
        responses={204: None},
        description="Admins only. Refused (400) while tasks use the capability: archive it.",
    )
    def delete(self, request, pk):
        capability = capability_get_for_user(request.user, pk, min_role=Role.ADMIN)
        capability_delete(capability=capability)
        return Response(status=status.HTTP_204_NO_CONTENT)


urlpatterns = [
    path("capabilities/", CapabilityListApi.as_view(), name="capability_list"),
    path("capabilities/<int:pk>/", CapabilityDetailApi.as_view(), name="capability_detail"),
]
