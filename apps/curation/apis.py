"""REST API for reviewers: demonstrations (filtered list, retrieve with the current version)
and the decisions on them — approve, reject (reason tags, comment), correct (edits → a new
version, returned with its re-grade)."""

from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.core.api import StandardPagination
from apps.core.safeinput import INT32_MAX
from apps.curation.access import demonstration_get_for_user
from apps.curation.models import Decision, DemonstrationStatus
from apps.curation.selectors import (
    FLAGS,
    DemonstrationFilters,
    demonstration_list,
    round_progress,
    visible_reviews,
)
from apps.curation.services import demonstration_correct, demonstration_review
from apps.curation.services.corrections import EDIT_OPS, MAX_EDITS
from apps.curation.services.reviews import MAX_COMMENT


class DemonstrationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    run = serializers.IntegerField(source="run_id", allow_null=True)
    task = serializers.IntegerField(source="task_id", allow_null=True)
    environment = serializers.IntegerField(source="environment_id", allow_null=True)
    task_key = serializers.CharField()
    task_title = serializers.CharField()
    environment_name = serializers.CharField()
    split = serializers.CharField()
    capability_slugs = serializers.ListField(child=serializers.CharField())
    model_name = serializers.CharField()
    policy = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    status = serializers.ChoiceField(choices=DemonstrationStatus.choices)
    current_version = serializers.IntegerField(
        source="current_version.number", allow_null=True, default=None
    )
    reviews_required = serializers.IntegerField()
    review_round = serializers.IntegerField()
    disputed = serializers.BooleanField()
    agreement = serializers.FloatField(allow_null=True)
    regrade_flag = serializers.CharField()
    claimed_by = serializers.CharField(source="claimed_by.username", allow_null=True, default=None)
    claim_expires_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    approved_by_policy = serializers.CharField(
        help_text="The rule that approved it (policy:approve-strict-passes); blank when a "
        "person decided (see its reviews) or while pending."
    )


class DemonstrationVersionOutput(serializers.Serializer):
    number = serializers.IntegerField()
    transcript = serializers.JSONField(
        help_text='OpenAI chat messages; assistant messages may carry "weight": 0.'
    )
    tools = serializers.JSONField(help_text="OpenAI function tools.")
    grading = serializers.JSONField(
        help_text="score, passed, strict, completion, safety, robustness, verdicts; for "
        "re-graded versions also divergent_calls, environment_revision, graded_at."
    )
    score = serializers.FloatField(allow_null=True)
    passed = serializers.BooleanField(allow_null=True)
    strict = serializers.BooleanField(allow_null=True)
    environment_revision = serializers.IntegerField(allow_null=True)
    changes = serializers.JSONField(help_text="The edits that made this version.")
    flag = serializers.CharField(help_text='"passed→failed" when the correction broke the task.')
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    note = serializers.CharField()
    created_at = serializers.DateTimeField()


class DemonstrationVersionSummaryOutput(serializers.Serializer):
    number = serializers.IntegerField()
    score = serializers.FloatField(allow_null=True)
    passed = serializers.BooleanField(allow_null=True)
    flag = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()


class DemonstrationReviewOutput(serializers.Serializer):
    id = serializers.IntegerField()
    demonstration = serializers.IntegerField(source="demonstration_id")
    version = serializers.IntegerField(source="version.number")
    round = serializers.IntegerField()
    reviewer = serializers.CharField(source="reviewer_name")
    decision = serializers.ChoiceField(choices=Decision.choices)
    reason_tags = serializers.ListField(child=serializers.CharField())
    comment = serializers.CharField()
    adjudication = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class ReviewRoundOutput(serializers.Serializer):
    done = serializers.IntegerField()
    required = serializers.IntegerField()


class DemonstrationDetailOutput(DemonstrationOutput):
    version = DemonstrationVersionOutput(source="current_version", allow_null=True)
    versions = DemonstrationVersionSummaryOutput(source="versions_list", many=True)
    reviews = DemonstrationReviewOutput(
        source="visible_reviews",
        many=True,
        help_text="Closed rounds only: reviewers stay blind until a round completes.",
    )
    round = ReviewRoundOutput(
        source="round_progress", help_text="Reviews in the current round, and how many it needs."
    )


class DemonstrationDecisionOutput(serializers.Serializer):
    review = DemonstrationReviewOutput()
    demonstration = DemonstrationOutput()


class DemonstrationApproveInput(serializers.Serializer):
    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_COMMENT
    )


class DemonstrationRejectInput(serializers.Serializer):
    reason_tags = serializers.ListField(
        child=serializers.CharField(max_length=60),
        required=False,
        default=list,
        help_text="Names of the project's reason tags; a reason tag or a comment is required.",
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_COMMENT
    )


class DemonstrationEditInput(serializers.Serializer):
    op = serializers.ChoiceField(choices=EDIT_OPS)
    index = serializers.IntegerField(
        min_value=0, max_value=INT32_MAX, help_text="Message position in the transcript."
    )
    content = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="For op=edit."
    )
    weight = serializers.ChoiceField(choices=[0, 1], required=False, help_text="For op=weight.")


class DemonstrationCorrectInput(serializers.Serializer):
    edits = DemonstrationEditInput(
        many=True,
        help_text="Applied in order to the current version: edit an assistant message's text, "
        "set an assistant turn's training weight (0 excludes it), or truncate (drop from index "
        f"on). At most {MAX_EDITS}.",
    )
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


DEMONSTRATION_FILTERS = [
    OpenApiParameter("status", str, enum=DemonstrationStatus.values, required=False),
    OpenApiParameter("capability", str, required=False, description="A capability slug."),
    OpenApiParameter("environment", int, required=False),
    OpenApiParameter("model", str, required=False),
    OpenApiParameter("score_min", float, required=False),
    OpenApiParameter("score_max", float, required=False),
    OpenApiParameter("split", str, enum=["train", "eval"], required=False),
    OpenApiParameter(
        "flag",
        str,
        enum=list(FLAGS),
        required=False,
        description="flipped: a re-grade or correction flipped pass/fail; broken: passed→failed.",
    ),
    OpenApiParameter("q", str, required=False, description="Task key or title contains."),
]


class DemonstrationListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        parameters=DEMONSTRATION_FILTERS,
        responses=DemonstrationOutput(many=True),
        operation_id="demonstrations_list",
    )
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        rows = demonstration_list(
            project=project, filters=DemonstrationFilters.from_query(request.query_params)
        ).select_related("current_version")
        paginator = StandardPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(DemonstrationOutput(page, many=True).data)


def _detail(demo) -> dict:
    demo.versions_list = list(demo.versions.select_related("created_by").order_by("number"))
    demo.visible_reviews = visible_reviews(demo)
    demo.round_progress = round_progress(demo)
    return DemonstrationDetailOutput(demo).data


class DemonstrationDetailApi(APIView):
    @extend_schema(responses=DemonstrationDetailOutput, operation_id="demonstrations_retrieve")
    def get(self, request, pk):
        return Response(_detail(demonstration_get_for_user(request.user, pk)))


def _decide(request, pk, decision, data):
    demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
    review = demonstration_review(
        demonstration=demo,
        user=request.user,
        decision=decision,
        reason_tags=data.get("reason_tags") or [],
        comment=data.get("comment", ""),
    )
    return Response(DemonstrationDecisionOutput({"review": review, "demonstration": demo}).data)


class DemonstrationApproveApi(APIView):
    @extend_schema(
        request=DemonstrationApproveInput,
        responses=DemonstrationDecisionOutput,
        operation_id="demonstrations_approve",
        description="Approve the current version (reviewer or admin). With several reviews "
        "required, the demonstration is approved once every reviewer of the round agrees.",
    )
    def post(self, request, pk):
        data = DemonstrationApproveInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _decide(request, pk, Decision.APPROVED, data.validated_data)


class DemonstrationRejectApi(APIView):
    @extend_schema(
        request=DemonstrationRejectInput,
        responses=DemonstrationDecisionOutput,
        operation_id="demonstrations_reject",
        description="Reject the current version with reason tags and/or a comment.",
    )
    def post(self, request, pk):
        data = DemonstrationRejectInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _decide(request, pk, Decision.REJECTED, data.validated_data)


class DemonstrationCorrectApi(APIView):
    @extend_schema(
        request=DemonstrationCorrectInput,
        responses={201: DemonstrationVersionOutput},
        operation_id="demonstrations_correct",
        description="Make a new version from the current one with the edits, re-grade it by "
        "replaying it against the environment, and re-open the demonstration for review. "
        "The response is the new version with its grading; `flag` is passed→failed when "
        "the correction broke the task.",
    )
    def post(self, request, pk):
        demo = demonstration_get_for_user(request.user, pk, Role.REVIEWER)
        data = DemonstrationCorrectInput(data=request.data)
        data.is_valid(raise_exception=True)
        edits = [dict(edit) for edit in data.validated_data["edits"]]
        version = demonstration_correct(
            demonstration=demo, user=request.user, edits=edits, note=data.validated_data["note"]
        )
        return Response(DemonstrationVersionOutput(version).data, status=status.HTTP_201_CREATED)


urlpatterns = [
    path(
        "projects/<int:pk>/demonstrations/",
        DemonstrationListApi.as_view(),
        name="demonstration_list",
    ),
    path("demonstrations/<int:pk>/", DemonstrationDetailApi.as_view(), name="demonstration_detail"),
    path(
        "demonstrations/<int:pk>/approve/",
        DemonstrationApproveApi.as_view(),
        name="demonstration_approve",
    ),
    path(
        "demonstrations/<int:pk>/reject/",
        DemonstrationRejectApi.as_view(),
        name="demonstration_reject",
    ),
    path(
        "demonstrations/<int:pk>/correct/",
        DemonstrationCorrectApi.as_view(),
        name="demonstration_correct",
    ),
]
