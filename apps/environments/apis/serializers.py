"""Explicit input and output serializers of the environments API.

Field names follow the spec (``coworkenv.environment/v1``) where a row mirrors a spec element:
a grader's spec ``id`` is exposed as ``key`` (``id`` is the row's primary key, as everywhere in
this API) and its ``check`` keeps the spec's name (the model field is ``check_spec``).
"""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.safeinput import ID_MAX, INT32_MAX
from apps.environments.models import (
    EnvironmentSource,
    EnvironmentStatus,
    GraderCategory,
    Split,
)
from apps.environments.selectors import SORTS

# --- shared ---------------------------------------------------------------------------------


class ErrorOutput(serializers.Serializer):
    message = serializers.CharField()
    details = serializers.JSONField(
        help_text="Structured details: for a bad spec, ``problems`` — each with the JSON "
        "pointer of the element it concerns; for bad fields, the field names and their errors."
    )


class ProblemOutput(serializers.Serializer):
    code = serializers.CharField()
    severity = serializers.ChoiceField(choices=["error", "warning"])
    pointer = serializers.CharField(help_text="RFC 6901 JSON pointer into the spec.")
    message = serializers.CharField()
    hint = serializers.CharField(allow_blank=True)


class SpecProblemsErrorOutput(serializers.Serializer):
    """A 400 whose ``details.problems`` lists what is wrong with the spec — or, for a request
    that never got as far as the spec, the bad fields and their errors (as ``ErrorOutput``)."""

    class Details(serializers.Serializer):
        problems = ProblemOutput(many=True, required=False)

    message = serializers.CharField()
    details = Details()


def text_field(max_length: int | None = None, **kwargs) -> serializers.CharField:
    """Free text stored as sent (spec text is never trimmed, so exports match imports)."""
    return serializers.CharField(
        max_length=max_length, required=False, allow_blank=True, trim_whitespace=False, **kwargs
    )


# --- environments ---------------------------------------------------------------------------


class ValidationSummaryOutput(serializers.Serializer):
    id = serializers.IntegerField()
    revision = serializers.IntegerField(help_text="The revision that was validated.")
    spec_hash = serializers.CharField()
    valid = serializers.BooleanField()
    error_count = serializers.IntegerField()
    warning_count = serializers.IntegerField()
    job = serializers.IntegerField(source="job_id", allow_null=True)
    created_at = serializers.DateTimeField()


class ValidationTaskOutput(serializers.Serializer):
    key = serializers.CharField()
    oracle_score = serializers.FloatField(allow_null=True)
    null_score = serializers.FloatField(allow_null=True)
    echo_score = serializers.FloatField(allow_null=True)
    adversary_scores = serializers.DictField(
        child=serializers.FloatField(),
        required=False,
        default=dict,
        help_text="Score of each adversarial agent that applies to the task (reader-paster, "
        "sprayer, spray-paster, vague-asker, …), run fault-free; each must fail. Absent in "
        "reports made before adversaries existed.",
    )
    sensitivity = serializers.FloatField(allow_null=True)
    mutants_total = serializers.IntegerField()
    mutants_caught = serializers.IntegerField()
    oracle_strict = serializers.BooleanField(allow_null=True)
    deterministic = serializers.BooleanField(allow_null=True)


class ValidationReportOutput(ValidationSummaryOutput):
    problems = ProblemOutput(many=True)
    tasks = ValidationTaskOutput(many=True)


class EnvironmentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    name = serializers.CharField()
    domain = serializers.CharField()
    description = serializers.CharField()
    status = serializers.ChoiceField(choices=EnvironmentStatus.choices)
    source = serializers.ChoiceField(choices=EnvironmentSource.choices)
    revision = serializers.IntegerField()
    spec_hash = serializers.CharField(help_text="sha256 of the canonical spec of this revision.")
    task_count = serializers.IntegerField()
    latest_validation = ValidationSummaryOutput(allow_null=True)
    validation_current = serializers.SerializerMethodField(
        help_text="Whether the latest validation is of the current revision."
    )
    duplicated_from = serializers.IntegerField(source="duplicated_from_id", allow_null=True)
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_validation_current(self, environment) -> bool:
        report = environment.latest_validation
        return report is not None and report.revision == environment.revision


class EnvironmentDetailOutput(EnvironmentOutput):
    tool_count = serializers.IntegerField()
    record_count = serializers.IntegerField()
    collections = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Service name → its collection names, in spec order.",
    )
    latest_validation = ValidationReportOutput(allow_null=True)


class EnvironmentWithProblemsOutput(EnvironmentDetailOutput):
    problems = ProblemOutput(
        many=True,
        help_text="What static validation (no simulation) finds in the imported spec; "
        "run /validate for the full verdict.",
    )


class EnvironmentFilterInput(serializers.Serializer):
    project = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=ID_MAX,
        help_text="A project id; without it, every project you belong to.",
    )
    # A blank value means "no filter", as a submitted form sends it.
    status = serializers.ChoiceField(
        choices=EnvironmentStatus.choices,
        required=False,
        allow_blank=True,
        help_text="Archived environments are listed only when asked for by this filter.",
    )
    domain = serializers.CharField(max_length=100, required=False, allow_blank=True)
    capability = serializers.SlugField(
        max_length=80, required=False, allow_blank=True, help_text="A slug."
    )
    split = serializers.ChoiceField(
        choices=Split.choices,
        required=False,
        allow_blank=True,
        help_text="Has at least one task of this split.",
    )
    source = serializers.ChoiceField(
        choices=EnvironmentSource.choices, required=False, allow_blank=True
    )
    q = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="Words in the name, description or domain.",
    )
    sort = serializers.ChoiceField(choices=sorted(SORTS), required=False, allow_blank=True)


class EnvironmentImportInput(serializers.Serializer):
    project = serializers.IntegerField(
        min_value=1, max_value=ID_MAX, help_text="The id of the project to import into."
    )
    # null is let through so that every non-object spec gets the same answer (with a pointer).
    spec = serializers.JSONField(
        allow_null=True, help_text="A coworkenv.environment/v1 document (a JSON object)."
    )


class EnvironmentUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    domain = text_field(100)
    description = text_field()


# --- tasks and graders ----------------------------------------------------------------------


class GraderOutput(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.IntegerField(source="task_id")
    key = serializers.CharField(help_text="The grader's ``id`` in the spec.")
    position = serializers.IntegerField()
    description = serializers.CharField()
    category = serializers.ChoiceField(choices=GraderCategory.choices)
    weight = serializers.FloatField()
    at_turn = serializers.IntegerField(allow_null=True)
    capability = serializers.CharField(
        help_text="The task capability this grader tests (its capability-defining grader); "
        "empty when none."
    )
    check = serializers.JSONField(source="check_spec", help_text="The spec's ``check``.")


class GraderUpdateInput(serializers.Serializer):
    key = serializers.CharField(
        max_length=100, required=False, help_text="The grader's ``id`` in the spec."
    )
    description = text_field()
    category = serializers.ChoiceField(choices=GraderCategory.choices, required=False)
    weight = serializers.FloatField(required=False)
    at_turn = serializers.IntegerField(
        min_value=0, max_value=INT32_MAX, allow_null=True, required=False
    )
    capability = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        help_text="The task capability this grader tests; failing it must fail the task.",
    )
    check = serializers.JSONField(
        source="check_spec", required=False, help_text="A check, as in the spec's ``check``."
    )


class GraderCreateInput(GraderUpdateInput):
    key = serializers.CharField(max_length=100, help_text="The grader's ``id`` in the spec.")
    check = serializers.JSONField(
        source="check_spec", help_text="A check, as in the spec's ``check``."
    )


class TaskOutput(serializers.Serializer):
    id = serializers.IntegerField()
    environment = serializers.IntegerField(source="environment_id")
    position = serializers.IntegerField()
    key = serializers.CharField()
    title = serializers.CharField()
    split = serializers.ChoiceField(choices=Split.choices)
    system = serializers.CharField()
    constraints = serializers.ListField(child=serializers.CharField())
    capabilities = serializers.SerializerMethodField(help_text="Capability slugs, in order.")
    user = serializers.JSONField()
    turns = serializers.JSONField()
    reference_solution = serializers.JSONField()
    scoring = serializers.JSONField(allow_null=True)
    metadata = serializers.JSONField()
    record_count = serializers.IntegerField(
        source="task_record_count", help_text="Records this task adds or overrides."
    )
    graders = GraderOutput(many=True)

    def get_capabilities(self, task) -> list[str]:
        return [link.capability.slug for link in task.capability_links.all()]


class TaskUpdateInput(serializers.Serializer):
    key = serializers.CharField(max_length=100, required=False)
    title = text_field(300)
    split = serializers.ChoiceField(choices=Split.choices, required=False)
    system = text_field()
    constraints = serializers.ListField(child=serializers.CharField(), required=False)
    capabilities = serializers.ListField(
        child=serializers.SlugField(max_length=80),
        required=False,
        help_text="Slugs of capabilities of the project's catalogue.",
    )
    user = serializers.JSONField(required=False, help_text="As in the spec: persona, reveals.")
    turns = serializers.JSONField(required=False, help_text="As in the spec.")
    reference_solution = serializers.JSONField(required=False, help_text="As in the spec.")
    scoring = serializers.JSONField(required=False, allow_null=True)
    metadata = serializers.JSONField(required=False)


class TaskCreateInput(TaskUpdateInput):
    key = serializers.CharField(max_length=100)
    turns = serializers.JSONField(help_text="As in the spec: at least one turn.")
    graders = GraderCreateInput(
        many=True, allow_empty=False, help_text="A task needs at least one grader."
    )


class TaskFilterInput(serializers.Serializer):
    split = serializers.ChoiceField(choices=Split.choices, required=False, allow_blank=True)
    capability = serializers.SlugField(
        max_length=80, required=False, allow_blank=True, help_text="A slug."
    )


class GraderFilterInput(serializers.Serializer):
    category = serializers.ChoiceField(
        choices=GraderCategory.choices, required=False, allow_blank=True
    )


# --- tools ----------------------------------------------------------------------------------


class ToolOutput(serializers.Serializer):
    id = serializers.IntegerField()
    environment = serializers.IntegerField(source="environment_id")
    position = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.JSONField(help_text="A JSON Schema object.")
    binding = serializers.JSONField()
    faults = serializers.JSONField()


class ToolUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=64, required=False)
    description = text_field()
    parameters = serializers.JSONField(required=False, help_text="A JSON Schema object.")
    binding = serializers.JSONField(required=False, help_text="As in the spec.")
    faults = serializers.JSONField(required=False, help_text="As in the spec; {} for none.")


class ToolCreateInput(ToolUpdateInput):
    name = serializers.CharField(max_length=64)
    parameters = serializers.JSONField(help_text="A JSON Schema object.")
    binding = serializers.JSONField(help_text="As in the spec.")


# --- records --------------------------------------------------------------------------------


class RecordOutput(serializers.Serializer):
    id = serializers.IntegerField()
    environment = serializers.IntegerField(source="environment_id")
    task = serializers.IntegerField(
        source="task_id", allow_null=True, help_text="Set for a task's own record."
    )
    task_key = serializers.CharField(source="task.key", allow_null=True, default=None)
    service = serializers.CharField()
    collection = serializers.CharField()
    record_id = serializers.CharField(help_text="The record's ``id`` inside ``data``.")
    position = serializers.IntegerField()
    data = serializers.JSONField()


@extend_schema_field(OpenApiTypes.OBJECT)
class JsonObjectField(serializers.JSONField):
    default_error_messages = {"not_object": "Expected a JSON object."}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object")
        return value


class RecordCreateInput(serializers.Serializer):
    service = serializers.CharField(max_length=64)
    collection = serializers.CharField(max_length=64)
    task = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=ID_MAX,
        help_text="A task of this environment, for its own record.",
    )
    data = JsonObjectField(help_text="The record: a JSON object with a string ``id``.")


class RecordUpdateInput(serializers.Serializer):
    data = JsonObjectField(help_text="The whole record: a JSON object with a string ``id``.")


class RecordFilterInput(serializers.Serializer):
    service = serializers.CharField(max_length=64, required=False, allow_blank=True)
    collection = serializers.CharField(max_length=64, required=False, allow_blank=True)
    task = serializers.RegexField(
        r"^(\d+|none)$",
        required=False,
        help_text="A task id for that task's own records, or ``none`` for the records every "
        "task shares.",
    )
