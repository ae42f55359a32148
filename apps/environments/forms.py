"""Forms of the environment pages."""

import json

from django import forms
from django.db.models import Q

from apps.capabilities.models import Capability
from apps.core.safeinput import INT32_MAX
from apps.environments.jsontext import JSONTextError, parse_json_text
from apps.environments.models import GraderCategory, Split
from apps.environments.services.imports import human_size, max_upload_bytes

# --- browse: import ------------------------------------------------------------------------


class EnvironmentImportForm(forms.Form):
    """Either a file (a .json spec or a .zip of them) or pasted JSON, not both."""

    file = forms.FileField(
        required=False,
        label="Spec file",
        help_text="A .json spec, a .zip of .json specs (at most 200), or Claw-Eval task "
        "directories (a .zip or .tar.gz holding task.yaml files; one environment per task).",
        widget=forms.ClearableFileInput(
            attrs={"accept": ".json,.zip,.tar,.tgz,.gz,application/json"}
        ),
    )
    text = forms.CharField(
        required=False,
        label="…or paste a spec",
        strip=False,
        widget=forms.Textarea(
            attrs={"rows": 12, "spellcheck": "false", "class": "mono", "placeholder": "{ … }"}
        ),
    )
    validate = forms.BooleanField(
        required=False,
        initial=True,
        label="Validate after importing",
        help_text="Queues a validation job so the status is known in a minute.",
    )

    def clean(self):
        data = super().clean()
        upload, text = data.get("file"), data.get("text", "")
        if upload and text.strip():
            raise forms.ValidationError("Upload a file or paste JSON, not both.")
        if not upload and not text.strip():
            raise forms.ValidationError("Choose a file to upload or paste a spec.")
        if upload:
            limit = max_upload_bytes()
            if upload.size > limit:
                self.add_error(
                    "file",
                    f"This file is {human_size(upload.size)}; the limit is {human_size(limit)}.",
                )
            elif not upload.name.lower().endswith((".json", ".zip", ".tar", ".tar.gz", ".tgz")):
                self.add_error(
                    "file",
                    "Upload a .json spec, a .zip of .json specs, or Claw-Eval tasks "
                    "(.zip, .tar or .tar.gz).",
                )
        return data


# --- editing: environment, task, grader, tool, record ------------------------------------


class JSONTextField(forms.CharField):
    """A textarea of JSON, parsed on the server; syntax errors name their line and column.

    ``kind`` is the JSON type the value must have (``dict`` or ``list``); ``allow_empty``
    turns an empty textarea into ``empty_value``.
    """

    def __init__(self, *, kind: type = dict, allow_empty=False, empty_value=None, rows=8, **kw):
        self.kind, self.allow_empty, self.json_empty = kind, allow_empty, empty_value
        kw.setdefault("required", not allow_empty)
        attrs = {"rows": rows, "spellcheck": "false", "class": "mono json-input"}
        super().__init__(strip=False, widget=forms.Textarea(attrs=attrs), **kw)

    def prepare_value(self, value):
        if isinstance(value, str):
            return value
        if value is None:
            return ""
        return json.dumps(value, indent=2, ensure_ascii=False)

    def clean(self, value):
        text = super().clean(value)
        if not (text or "").strip():
            if self.allow_empty:
                return self.json_empty() if callable(self.json_empty) else self.json_empty
            raise forms.ValidationError("Enter a JSON value.", code="required")
        try:
            parsed = parse_json_text(text)
        except JSONTextError as exc:
            near = f" Near: {exc.line_text.strip()[:120]}" if exc.line_text.strip() else ""
            raise forms.ValidationError(f"{exc}{near}", code="json_syntax") from None
        if not isinstance(parsed, self.kind):
            expected = "an object {…}" if self.kind is dict else "a list […]"
            raise forms.ValidationError(f"Expected {expected}.", code="json_type")
        return parsed


class LinesField(forms.CharField):
    """One item per line; blank lines are dropped."""

    def __init__(self, **kw):
        kw.setdefault("required", False)
        super().__init__(widget=forms.Textarea(attrs={"rows": 3}), **kw)

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list | tuple) else value

    def clean(self, value):
        text = super().clean(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


class EnvironmentEditForm(forms.Form):
    name = forms.CharField(max_length=200)
    domain = forms.CharField(max_length=100, required=False, help_text="e.g. ops, finance.")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))


class TaskForm(forms.Form):
    key = forms.CharField(max_length=100, help_text="Unique in this environment.")
    title = forms.CharField(max_length=300, required=False)
    split = forms.ChoiceField(choices=Split.choices)
    capabilities = forms.ModelMultipleChoiceField(
        queryset=Capability.objects.none(),
        to_field_name="slug",
        required=False,
        widget=forms.SelectMultiple(attrs={"size": 8}),
        help_text="The workflow requirements this task exercises.",
    )
    system = forms.CharField(
        required=False, label="System prompt", widget=forms.Textarea(attrs={"rows": 4})
    )
    constraints = LinesField(help_text="One constraint per line.")
    persona = forms.CharField(
        required=False, label="User persona", widget=forms.Textarea(attrs={"rows": 2})
    )
    reveals_when_asked = LinesField(
        label="The user reveals when asked", help_text="One fact per line."
    )
    turns = JSONTextField(
        kind=list, rows=10, help_text='A list of turns: {"updates": […], "message": "…"}.'
    )
    reference_solution = JSONTextField(
        kind=list,
        rows=10,
        help_text='A list of steps: {"turn": 0, "calls": [{"tool", "arguments"}], "reply": "…"}.',
    )
    scoring = JSONTextField(
        kind=dict,
        allow_empty=True,
        rows=3,
        help_text="Optional: completion_weight, robustness_weight, pass_threshold.",
    )

    graders = JSONTextField(
        kind=list,
        rows=10,
        help_text='A new task needs at least one grader: [{"id", "description", "category", '
        '"weight", "at_turn", "check"}]. Edit them one by one afterwards.',
    )

    def __init__(self, *args, project, task=None, **kwargs):
        if task is not None and "initial" not in kwargs:
            kwargs["initial"] = task_initial(task)
        super().__init__(*args, **kwargs)
        if task is not None:
            del self.fields["graders"]  # an existing task's graders have their own forms
        catalogue = Capability.objects.filter(project=project)
        attached = [link.capability_id for link in task.capability_links.all()] if task else []
        self.fields["capabilities"].queryset = catalogue.filter(
            Q(archived_at__isnull=True) | Q(pk__in=attached)
        ).order_by("group", "name")
        self.user_extra = {
            k: v
            for k, v in ((task.user or {}) if task else {}).items()
            if k not in ("persona", "reveals_when_asked")
        }

    def clean_graders(self):
        return graders_from_spec(self.cleaned_data["graders"])

    def service_data(self) -> dict:
        """The fields as ``task_create`` / ``task_update`` take them."""
        data = self.cleaned_data
        user = {**self.user_extra, "persona": data["persona"]}
        if data["reveals_when_asked"]:
            user["reveals_when_asked"] = data["reveals_when_asked"]
        return {
            "key": data["key"],
            "title": data["title"],
            "split": data["split"],
            "capabilities": [c.slug for c in data["capabilities"]],
            "system": data["system"],
            "constraints": data["constraints"],
            "user": user,
            "turns": data["turns"],
            "reference_solution": data["reference_solution"],
            "scoring": data["scoring"],
        }


GRADER_SPEC_FIELDS = {
    "id": "key",
    "description": "description",
    "category": "category",
    "weight": "weight",
    "at_turn": "at_turn",
    "capability": "capability",
    "check": "check_spec",
}


def graders_from_spec(graders: list) -> list[dict]:
    """Graders as the spec writes them (``id``, ``check``) -> as the services take them."""
    converted = []
    for index, grader in enumerate(graders):
        if not isinstance(grader, dict):
            raise forms.ValidationError(f"Grader {index} is not a JSON object.")
        unknown = sorted(set(grader) - GRADER_SPEC_FIELDS.keys())
        if unknown:
            raise forms.ValidationError(
                f"Grader {index} has unknown field{'' if len(unknown) == 1 else 's'}: "
                f"{', '.join(unknown)}."
            )
        converted.append({GRADER_SPEC_FIELDS[k]: v for k, v in grader.items()})
    return converted


NEW_TASK_INITIAL = {
    "split": "train",
    "turns": [{"message": "What the user asks."}],
    "reference_solution": [{"turn": 0, "calls": [], "reply": "What the agent answers."}],
    "graders": [
        {
            "id": "done",
            "description": "What must be true when the task is done.",
            "category": "completion",
            "weight": 1,
            "at_turn": None,
            "check": {"kind": "state", "query": "length(email.sent)", "op": ">=", "value": 1},
        }
    ],
}


def task_initial(task) -> dict:
    links = sorted(task.capability_links.all(), key=lambda link: link.position)
    return {
        "key": task.key,
        "title": task.title,
        "split": task.split,
        "capabilities": [link.capability.slug for link in links],
        "system": task.system,
        "constraints": task.constraints,
        "persona": (task.user or {}).get("persona", ""),
        "reveals_when_asked": (task.user or {}).get("reveals_when_asked", []),
        "turns": task.turns,
        "reference_solution": task.reference_solution,
        "scoring": task.scoring,
    }


class GraderForm(forms.Form):
    key = forms.CharField(
        max_length=100, label="ID", help_text="Unique in this task; problems name graders by it."
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    category = forms.ChoiceField(choices=GraderCategory.choices)
    weight = forms.FloatField(initial=1.0, help_text="Greater than zero.")
    at_turn = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=INT32_MAX,
        label="At turn",
        help_text="Grade the state right after this turn (0-based); empty = the end.",
    )
    capability = forms.CharField(
        required=False,
        max_length=100,
        label="Tests capability",
        help_text="The task capability this grader tests (e.g. clarify-before-acting); "
        "validation requires that failing it fails the task. Empty = none.",
    )
    check_spec = JSONTextField(
        kind=dict,
        rows=8,
        label="Check",
        help_text='e.g. {"kind": "state", "query": "length(email.sent)", "op": ">=", "value": 1}',
    )

    @classmethod
    def initial_for(cls, grader) -> dict:
        return {
            "key": grader.key,
            "description": grader.description,
            "category": grader.category,
            "weight": grader.weight,
            "at_turn": grader.at_turn,
            "capability": grader.capability,
            "check_spec": grader.check_spec,
        }


class ToolForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="A function name: letters, digits, _ and -.")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    parameters = JSONTextField(
        kind=dict, rows=8, help_text='A JSON Schema object: {"type": "object", "properties": …}.'
    )
    binding = JSONTextField(
        kind=dict,
        rows=6,
        help_text='{"op": "create", "service": "email", "collection": "sent", "values": {…}}.',
    )
    faults = JSONTextField(
        kind=dict,
        allow_empty=True,
        empty_value=dict,
        rows=3,
        help_text='Optional: {"rate": 0.1, "kinds": ["rate_limit", "server_error", "timeout"]}.',
    )

    @classmethod
    def initial_for(cls, tool) -> dict:
        return {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "binding": tool.binding,
            "faults": tool.faults or "",
        }


class RecordForm(forms.Form):
    """A record's JSON; when creating, also where it goes."""

    target = forms.ChoiceField(label="Collection", required=False)
    data = JSONTextField(kind=dict, rows=14, label="Record", help_text='Needs a string "id".')

    def __init__(self, *args, environment=None, tasks=(), **kwargs):
        super().__init__(*args, **kwargs)
        if environment is None:
            del self.fields["target"]
            return
        choices = []
        for service, collections in environment.collections.items():
            choices.extend((f"env|{service}|{c}", f"{service}.{c}") for c in collections)
        for task in tasks:
            choices.extend(
                (f"{task.pk}|{service}|{c}", f"{service}.{c} — task {task.key} only")
                for service, collections in environment.collections.items()
                for c in collections
            )
        self.fields["target"].choices = choices
        self.fields["target"].required = True
        self.tasks = {str(task.pk): task for task in tasks}

    def clean_target(self):
        owner, service, collection = self.cleaned_data["target"].split("|", 2)
        return {"task": self.tasks.get(owner), "service": service, "collection": collection}


class SpecEditForm(forms.Form):
    spec = forms.CharField(
        strip=False,
        label="Spec (coworkenv.environment/v1)",
        widget=forms.Textarea(
            attrs={"rows": 32, "spellcheck": "false", "class": "mono spec-editor", "wrap": "off"}
        ),
    )
