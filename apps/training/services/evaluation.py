"""Trained model → endpoint → evaluation, and the before/after comparison.

The page shows the exact command that serves a trained model with vLLM (OpenAI-compatible,
with tool calling); once it is served, ``trained_model_evaluate`` creates the model endpoint
and a ``student`` run batch on the eval split of the environments the dataset version came
from — and, given the base model's endpoint, the same batch for the base model. The
comparison reads both batches' final runs over the tasks they share.
"""

from __future__ import annotations

import shlex

from django.db import transaction

from apps.core.exceptions import ApplicationError
from apps.llm.models import ModelEndpoint
from apps.llm.services import endpoint_create
from apps.runs.evaluation import batch_evaluation
from apps.runs.models import PolicyKind, RunRole
from apps.runs.selectors import batch_final_rows
from apps.runs.services.batches import BatchSettings, TaskSelection, run_batch_create
from apps.training.models import ModelKind, TrainedModel

SERVE_PORT = 8001
# vLLM's --tool-call-parser by model family (the chat template decides the call syntax).
TOOL_PARSERS = (
    ("qwen3", "hermes"),
    ("qwen", "hermes"),
    ("preset:", "hermes"),  # the tiny preset uses Qwen2.5's template
    ("llama-3", "llama3_json"),
    ("llama3", "llama3_json"),
    ("mistral", "mistral"),
    ("granite", "granite"),
    ("deepseek", "deepseek_v3"),
)


def tool_call_parser(base_model: str) -> str:
    lowered = base_model.lower()
    for needle, parser in TOOL_PARSERS:
        if needle in lowered:
            return parser
    return "hermes"


def serve_command(trained_model: TrainedModel) -> str:
    """The command that serves the model under ``served_name`` on port 8001 (empty for a
    model the provider hosts)."""
    if trained_model.kind == ModelKind.REMOTE:
        return ""
    parser = tool_call_parser(trained_model.base_model)
    name = trained_model.served_name
    tools = ["--enable-auto-tool-choice", "--tool-call-parser", parser]
    if trained_model.kind == ModelKind.ADAPTER:
        command = [
            "vllm",
            "serve",
            trained_model.base_model,
            "--enable-lora",
            "--lora-modules",
            f"{name}={trained_model.path}",
        ]
    else:
        command = ["vllm", "serve", trained_model.path, "--served-model-name", name]
    return " ".join(shlex.quote(part) for part in [*command, *tools, "--port", str(SERVE_PORT)])


def _eval_selection(trained_model: TrainedModel) -> TaskSelection:
    """The eval tasks of the environments trained on: the dataset version's (SFT) or the
    job's own (GRPO)."""
    version = trained_model.training_job.dataset_version
    if version is None:
        ids = tuple(sorted(trained_model.training_job.environments.values_list("pk", flat=True)))
    else:
        ids = tuple(sorted({env["id"] for env in version.environments if env.get("id")}))
    return TaskSelection(environments=ids, split="eval")


def _endpoint_for(trained_model: TrainedModel, *, base_url: str, api_key_env: str, user):
    job = trained_model.training_job
    if trained_model.kind == ModelKind.REMOTE:
        if job.endpoint is None:
            raise ApplicationError("The fine-tuning API's endpoint was deleted.")
        base_url, api_key_env = job.endpoint.base_url, job.endpoint.api_key_env
    if trained_model.endpoint is not None and not base_url:
        return trained_model.endpoint  # served by the app (apps.serving)
    if not base_url:
        raise ApplicationError(
            "Serve the model first, or give the base URL it is served at.",
            {"fields": {"base_url": ["Where the trained model is served."]}},
        )
    name = f"trained-{job.pk}"
    existing = ModelEndpoint.objects.filter(project_id=trained_model.project_id, name=name).first()
    if existing is not None:
        return existing
    return endpoint_create(
        project=trained_model.project,
        created_by=user,
        name=name,
        base_url=base_url,
        model=trained_model.served_name,
        api_key_env=api_key_env,
        temperature=0.0,
    )


@transaction.atomic
def trained_model_evaluate(
    *,
    trained_model: TrainedModel,
    user,
    base_url: str = "",
    api_key_env: str = "",
    base_endpoint=None,
    trials: int = 3,
) -> TrainedModel:
    """Create the trained model's endpoint and a student batch on the eval split (and the
    base model's, when its endpoint is given): same tasks, same trials, same seed."""
    if base_endpoint is not None and base_endpoint.project_id != trained_model.project_id:
        raise ApplicationError(
            "The base model's endpoint belongs to another project.",
            {"fields": {"base_endpoint": ["Choose an endpoint of this project."]}},
        )
    endpoint = _endpoint_for(trained_model, base_url=base_url, api_key_env=api_key_env, user=user)
    selection = _eval_selection(trained_model)
    settings = BatchSettings(trials=trials)
    name = trained_model.name[:150]
    trained_model.endpoint = endpoint
    trained_model.eval_batch = run_batch_create(
        project=trained_model.project,
        user=user,
        name=f"{name} · trained · eval split",
        policy_kind=PolicyKind.ENDPOINT,
        endpoint=endpoint,
        role=RunRole.STUDENT,
        selection=selection,
        settings=settings,
    )
    if base_endpoint is not None:
        trained_model.base_endpoint = base_endpoint
        trained_model.base_batch = run_batch_create(
            project=trained_model.project,
            user=user,
            name=f"{name} · base · eval split",
            policy_kind=PolicyKind.ENDPOINT,
            endpoint=base_endpoint,
            role=RunRole.STUDENT,
            selection=selection,
            settings=settings,
        )
    trained_model.save(update_fields=["endpoint", "eval_batch", "base_endpoint", "base_batch"])
    return trained_model


def _delta(after, before):
    return None if after is None or before is None else after - before


def _compare_stats(before: dict, after: dict, k_max: int) -> dict:
    row = {}
    for key in ("average_score", "pass_rate", "strict_rate"):
        row[key] = {
            "before": before.get(key),
            "after": after.get(key),
            "delta": _delta(after.get(key), before.get(key)),
        }
    for key in ("pass_at_k", "pass_hat_k"):
        row[key] = [
            {
                "k": k,
                "before": before[key].get(k),
                "after": after[key].get(k),
                "delta": _delta(after[key].get(k), before[key].get(k)),
            }
            for k in range(1, k_max + 1)
        ]
    row["graded"] = {"before": before.get("graded"), "after": after.get("graded")}
    return row


def before_after(trained_model: TrainedModel) -> dict | None:
    """Base vs trained on the tasks both batches ran: overall, per capability, per grader
    category, with deltas (after - before). None until both batches exist."""
    base, trained = trained_model.base_batch, trained_model.eval_batch
    if base is None or trained is None:
        return None
    before_rows = batch_final_rows(batch=base)
    after_rows = batch_final_rows(batch=trained)
    shared = {r["task_ref"] for r in before_rows} & {r["task_ref"] for r in after_rows}
    before_rows = [r for r in before_rows if r["task_ref"] in shared]
    after_rows = [r for r in after_rows if r["task_ref"] in shared]
    k_max = min(base.trials, trained.trials)
    before = batch_evaluation(before_rows, trials=k_max)
    after = batch_evaluation(after_rows, trials=k_max)
    capabilities = []
    before_caps = {row["name"]: row for row in before["by_capability"]}
    for row in after["by_capability"]:
        previous = before_caps.get(row["name"])
        if previous is not None:
            capabilities.append({"name": row["name"], **_compare_stats(previous, row, k_max)})
    categories = []
    before_cats = {row["name"]: row for row in before["by_category"]}
    for row in after["by_category"]:
        previous = before_cats[row["name"]]
        categories.append(
            {
                "name": row["name"],
                "before": previous["pass_rate"],
                "after": row["pass_rate"],
                "delta": _delta(row["pass_rate"], previous["pass_rate"]),
                "verdicts": row["verdicts"],
            }
        )
    return {
        "tasks": len(shared),
        "k_max": k_max,
        "base_batch": base,
        "trained_batch": trained,
        "summary": _compare_stats(before["summary"], after["summary"], k_max),
        "by_capability": capabilities,
        "by_category": categories,
        "complete": base.job.status not in ("pending", "running")
        and trained.job.status not in ("pending", "running"),
    }
