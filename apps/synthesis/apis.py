from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.access import project_get_for_user_by_pk
from apps.accounts.models import Role
from apps.capabilities.models import Capability
from apps.core.api import StandardPagination, paginated_response
from apps.core.exceptions import ApplicationError
from apps.core.safeinput import ID_MAX
from apps.llm.models import ModelEndpoint
from apps.synthesis.access import synthesis_get_for_user
from apps.synthesis.generators import TEMPLATE_FAMILY_CHOICES
from apps.synthesis.models import (
    MAX_ENVIRONMENTS_PER_JOB,
    MAX_REPAIR_ROUNDS,
    MAX_TASKS_PER_ENVIRONMENT,
    MAX_TURNS,
    SCENARIO_HINT_MAX_LENGTH,
    Difficulty,
    Generator,
    Horizon,
    SlotStatus,
)
from apps.synthesis.selectors import synthesis_list, synthesis_slots, synthesis_summary
from apps.synthesis.services import synthesis_cancel, synthesis_start
from coworkenv_engine import library


class SlotOutput(serializers.Serializer):
    id = serializers.IntegerField()
    index = serializers.IntegerField()
    seed = serializers.IntegerField()
    status = serializers.ChoiceField(choices=SlotStatus.choices)
    environment = serializers.IntegerField(source="environment_id", allow_null=True)
    attempts = serializers.IntegerField(source="attempts_count")
    repair_rounds = serializers.IntegerField()
    error = serializers.CharField()
    model = serializers.CharField()
    prompt_version = serializers.CharField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    duplicate_of = serializers.IntegerField(source="duplicate_of_id", allow_null=True)
    similarity = serializers.FloatField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class SynthesisOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    job = serializers.IntegerField(source="job_id")
    status = serializers.CharField(source="job.status")
    message = serializers.CharField(source="job.message")
    progress_done = serializers.IntegerField(source="job.progress_done")
    progress_total = serializers.IntegerField(source="job.progress_total")
    capabilities = serializers.ListField(child=serializers.CharField(), source="capability_slugs")
    services = serializers.ListField(child=serializers.CharField())
    count = serializers.IntegerField()
    tasks_per_environment = serializers.IntegerField()
    turns = serializers.SerializerMethodField()
    difficulty = serializers.CharField()
    horizon = serializers.ChoiceField(choices=Horizon.choices)
    family = serializers.CharField(help_text="Template family; blank: chosen by the seed.")
    generator = serializers.ChoiceField(choices=Generator.choices)
    endpoint = serializers.IntegerField(source="endpoint_id", allow_null=True)
    endpoint_name = serializers.CharField()
    model = serializers.CharField()
    max_repair_rounds = serializers.IntegerField()
    seed = serializers.IntegerField()
    prompt_version = serializers.CharField()
    domain_hint = serializers.CharField()
    scenario_hint = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()

    def get_turns(self, obj) -> list[int]:
        return [obj.turns_min, obj.turns_max]


class SummaryOutput(serializers.Serializer):
    counts = serializers.DictField(child=serializers.IntegerField())
    finished = serializers.IntegerField()
    repaired = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)


class SynthesisDetailOutput(SynthesisOutput):
    summary = SummaryOutput()
    slots = SlotOutput(many=True, source="slots_list")


class SynthesisInput(serializers.Serializer):
    capabilities = serializers.ListField(
        child=serializers.SlugField(), min_length=1, help_text="Capability slugs, in order."
    )
    count = serializers.IntegerField(min_value=1, max_value=MAX_ENVIRONMENTS_PER_JOB)
    generator = serializers.ChoiceField(choices=Generator.choices)
    endpoint = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=ID_MAX,
        help_text="Model endpoint id (the LLM generator).",
    )
    services = serializers.ListField(
        child=serializers.ChoiceField(choices=list(library.KINDS)), required=False, default=list
    )
    tasks_per_environment = serializers.IntegerField(
        min_value=1, max_value=MAX_TASKS_PER_ENVIRONMENT, default=3
    )
    turns = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_TURNS),
        min_length=2,
        max_length=2,
        default=[1, 3],
        help_text="[from, to]",
    )
    difficulty = serializers.ChoiceField(choices=Difficulty.choices, default=Difficulty.MEDIUM)
    horizon = serializers.ChoiceField(
        choices=Horizon.choices,
        default=Horizon.SHORT,
        help_text="short | medium | long: the share and length of multi-day project tasks.",
    )
    family = serializers.ChoiceField(
        choices=[("", "Any"), *TEMPLATE_FAMILY_CHOICES],
        required=False,
        allow_blank=True,
        default="",
        help_text="Template generator only: the scenario family (blank: the seed chooses "
        "among those covering the services); 'receipts' gives environments with images.",
    )
    max_repair_rounds = serializers.IntegerField(
        min_value=0, max_value=MAX_REPAIR_ROUNDS, default=3
    )
    domain_hint = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default=""
    )
    scenario_hint = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=SCENARIO_HINT_MAX_LENGTH
    )
    seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False)


def _detail(synthesis):
    synthesis.summary = synthesis_summary(synthesis=synthesis)
    synthesis.slots_list = list(synthesis_slots(synthesis=synthesis))
    data = SynthesisDetailOutput(synthesis).data
    return data


class SynthesisListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(responses=SynthesisOutput(many=True), operation_id="synthesis_jobs_list")
    def get(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk)
        return paginated_response(request, self, synthesis_list(project=project), SynthesisOutput)

    @extend_schema(
        request=SynthesisInput,
        responses={201: SynthesisDetailOutput},
        operation_id="synthesis_jobs_create",
        description="Start a synthesis job; its slots are queued for the workers at once.",
    )
    def post(self, request, pk):
        project = project_get_for_user_by_pk(request.user, pk, min_role=Role.AUTHOR)
        data = SynthesisInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        slugs = list(dict.fromkeys(values["capabilities"]))
        found = {c.slug: c for c in Capability.objects.filter(project=project, slug__in=slugs)}
        missing = [slug for slug in slugs if slug not in found]
        if missing:
            raise ApplicationError(
                f"Unknown capability {', '.join(missing)} in this project.",
                {"fields": {"capabilities": missing}},
            )
        endpoint = None
        if values.get("endpoint") is not None:
            endpoint = ModelEndpoint.objects.filter(project=project, pk=values["endpoint"]).first()
            if endpoint is None:
                raise ApplicationError(
                    "No such model endpoint in this project.", {"fields": {"endpoint": []}}
                )
        synthesis = synthesis_start(
            project=project,
            user=request.user,
            capabilities=[found[slug] for slug in slugs],
            count=values["count"],
            generator=values["generator"],
            endpoint=endpoint,
            services=values["services"],
            tasks_per_environment=values["tasks_per_environment"],
            turns=tuple(values["turns"]),
            difficulty=values["difficulty"],
            horizon=values["horizon"],
            family=values["family"],
            max_repair_rounds=values["max_repair_rounds"],
            domain_hint=values["domain_hint"],
            scenario_hint=values["scenario_hint"],
            seed=values.get("seed"),
        )
        synthesis = synthesis_get_for_user(request.user, synthesis.pk)
        return Response(_detail(synthesis), status=status.HTTP_201_CREATED)


class SynthesisDetailApi(APIView):
    @extend_schema(responses=SynthesisDetailOutput, operation_id="synthesis_jobs_retrieve")
    def get(self, request, pk):
        return Response(_detail(synthesis_get_for_user(request.user, pk)))


class SynthesisCancelApi(APIView):
    @extend_schema(
        request=None,
        responses=SynthesisDetailOutput,
        operation_id="synthesis_jobs_cancel",
        description="Cancel the slots not started yet; running ones stop at their next step.",
    )
    def post(self, request, pk):
        synthesis = synthesis_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        synthesis_cancel(synthesis=synthesis)
        return Response(_detail(synthesis_get_for_user(request.user, pk)))


urlpatterns = [
    path("projects/<int:pk>/synthesis-jobs/", SynthesisListApi.as_view(), name="synthesis_list"),
    path("synthesis-jobs/<int:pk>/", SynthesisDetailApi.as_view(), name="synthesis_detail"),
    path("synthesis-jobs/<int:pk>/cancel/", SynthesisCancelApi.as_view(), name="synthesis_cancel"),
]
