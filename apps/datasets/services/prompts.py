"""RL prompt versions: environment tasks (not demonstrations) for trainers that roll out
themselves, versioned and checksummed like SFT versions.

A dataset of kind ``rl_prompts`` has versions built by the same job as SFT versions
(``build.dataset_version_build`` hands them here). A version draws from a filter
(``PromptFilter``: environments, capabilities, seeds):

1. the project's valid and approved environments (the filter's, if it names some), oldest
   first, each loaded from its rows as the engine spec a server would serve;
2. their **train** tasks in spec order (eval tasks are counted in ``excluded_eval`` and kept
   out: evaluate on them with a run batch), those exercising one of the filter's
   capabilities when it names some;
3. one row per (task, seed): the prompt entry is the engine's reset observation for that
   seed (``EpisodeSession.start()``: system prompt, first user message, tools) with the
   task's identity and the environment's revision and spec hash
   (``formats.rl_prompts.prompt_entry``), stored on the row (``PromptRow.entry``);
4. checksum: sha256 over ``"{split}\\t{environment id}\\t{task key}\\t{seed}\\t{entry
   sha256}\\n"`` in row order, so a rebuild over unchanged environments has the same one;
5. exports, one file per format (all rows are ``train``): ``grpo``, ``nemo_gym`` and
   ``verifiers`` JSONL, ``verl`` parquet (needs ``pyarrow``; without it the export is
   recorded as failed with the reason and the others are still offered), and the card.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.core.services import JobContext
from apps.datasets.formats.rl_prompts import (
    RL_PROMPT_FORMATS,
    prompt_entry,
    prompt_messages,
    verl_parquet,
)
from apps.datasets.formats.transcript import approx_tokens, canonical_json
from apps.datasets.models import (
    Dataset,
    DatasetExport,
    DatasetKind,
    DatasetVersion,
    ExportFormat,
    ExportStatus,
    PromptRow,
    RowSplit,
    VersionStatus,
)
from apps.datasets.splitting import token_stats
from apps.environments.models import Environment, EnvironmentStatus, Split, Task
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.session import EpisodeSession

PROMPT_FORMATS = (
    ExportFormat.GRPO,
    ExportFormat.VERL,
    ExportFormat.NEMO_GYM,
    ExportFormat.VERIFIERS,
)
SERVED_STATUSES = (EnvironmentStatus.VALID, EnvironmentStatus.APPROVED)
MAX_SEEDS = 64
MAX_SEED = 2**31 - 1
ROW_BATCH = 1000


@dataclass(frozen=True)
class PromptFilter:
    """Which tasks an RL prompt version draws from, and with which seeds (one row each)."""

    environments: tuple[int, ...] = ()
    capabilities: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0,)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": DatasetKind.RL_PROMPTS.value,
            "environments": sorted(self.environments),
            "capabilities": sorted(self.capabilities),
            "seeds": list(self.seeds),
            "splits": ["train"],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromptFilter:
        return cls(
            environments=tuple(int(pk) for pk in data.get("environments") or ()),
            capabilities=tuple(data.get("capabilities") or ()),
            seeds=tuple(int(s) for s in data.get("seeds") or (0,)),
        )


def _environments(project, filters: PromptFilter):
    environments = Environment.objects.filter(project=project, status__in=SERVED_STATUSES)
    if filters.environments:
        environments = environments.filter(pk__in=filters.environments)
    return environments.order_by("created_at", "pk")


def _seed_ok(seed: Any) -> bool:
    return isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED


def _check(project, filters: PromptFilter) -> None:
    problems: dict[str, list[str]] = {}
    if filters.environments:
        known = set(
            Environment.objects.filter(project=project, pk__in=filters.environments).values_list(
                "pk", flat=True
            )
        )
        unknown = sorted(set(filters.environments) - known)
        if unknown:
            problems["environments"] = [
                f"Not in this project: {', '.join(str(pk) for pk in unknown)}."
            ]
    if filters.capabilities:
        known_slugs = set(
            Capability.objects.filter(project=project, slug__in=filters.capabilities).values_list(
                "slug", flat=True
            )
        )
        unknown_slugs = sorted(set(filters.capabilities) - known_slugs)
        if unknown_slugs:
            problems["capabilities"] = [f"Not in this project: {', '.join(unknown_slugs)}."]
    seeds = filters.seeds
    if not seeds or len(seeds) > MAX_SEEDS:
        problems["seeds"] = [f"Between 1 and {MAX_SEEDS} seeds."]
    elif len(set(seeds)) != len(seeds):
        problems["seeds"] = ["Each seed once."]
    elif not all(_seed_ok(s) for s in seeds):
        problems["seeds"] = [f"Integers from 0 to {MAX_SEED}."]
    if problems:
        first = next(iter(problems.values()))[0]
        raise ApplicationError(f"The filter is not valid: {first}", {"fields": problems})
    tasks = Task.objects.filter(environment__in=_environments(project, filters), split=Split.TRAIN)
    if filters.capabilities:
        tasks = tasks.filter(capability_links__capability__slug__in=filters.capabilities)
    if not tasks.exists():
        raise ApplicationError(
            "Nothing to build: no train task of a valid or approved environment matches this "
            "filter. Validate environments (eval tasks never enter), or widen the filter."
        )


@transaction.atomic
def prompt_version_create(
    *,
    dataset: Dataset,
    user,
    filters: PromptFilter,
    rebuilt_from: DatasetVersion | None = None,
    enqueue: bool = True,
) -> DatasetVersion:
    """Number the next version of an RL prompt dataset and create its build job (enqueued
    once this commits; ``enqueue=False``: the caller runs ``dataset_version_build_job``)."""

    from apps.datasets.services.datasets import dataset_kind_check, version_numbered

    dataset_kind_check(dataset, DatasetKind.RL_PROMPTS)
    _check(dataset.project, filters)

    return version_numbered(
        dataset=dataset,
        user=user,
        enqueue=enqueue,
        filters=filters.to_dict(),
        seed=0,
        validation_fraction=0.0,
        rebuilt_from=rebuilt_from,
    )


def _entries(version: DatasetVersion, context: JobContext):
    """Steps 1-3: (environment id, task key, seed, entry) in row order, and the counts."""
    filters = PromptFilter.from_dict(version.filters)
    wanted = set(filters.capabilities)
    environments = list(_environments(version.dataset.project, filters))
    rows: list[tuple[int, str, int, dict]] = []
    excluded_eval = 0
    lineage = []
    for done, environment in enumerate(environments):
        context.progress(done, len(environments), f"Reading {environment.name}…")
        spec = engine_spec.load_spec(environment_spec(environment))
        tools = spec.openai_tools()
        count = 0
        for task in spec.tasks:
            if wanted and not wanted & set(task.capabilities):
                continue
            if task.split != Split.TRAIN:
                excluded_eval += len(filters.seeds)
                continue
            for seed in filters.seeds:
                observation = EpisodeSession(spec, task.key, seed, tools=tools).start()
                entry = prompt_entry(
                    observation,
                    environment_id=environment.pk,
                    revision=environment.revision,
                    spec_hash=environment.spec_hash,
                    title=task.title,
                    split=task.split,
                    capabilities=list(task.capabilities),
                    turns=len(task.turns),
                )
                rows.append((environment.pk, task.key, seed, entry))
                count += 1
        if count:
            lineage.append(
                {
                    "id": environment.pk,
                    "name": environment.name,
                    "split": "train",
                    "rows": count,
                    "revisions": [environment.revision],
                    "spec_hashes": [environment.spec_hash],
                }
            )
    return rows, excluded_eval, lineage


def _entry_sha256(entry: dict) -> str:
    return hashlib.sha256(canonical_json(entry).encode()).hexdigest()


def prompt_checksum(rows) -> str:
    """``rows``: (split, environment id, task key, seed, entry sha256) in order."""
    digest = hashlib.sha256()
    for split, environment_id, task_key, seed, content in rows:
        digest.update(f"{split}\t{environment_id}\t{task_key}\t{seed}\t{content}\n".encode())
    return digest.hexdigest()


def prompt_version_build(context: JobContext, version: DatasetVersion) -> str:
    """Steps 1-5 of the module docstring (the build job's work for an RL prompt version)."""
    from apps.datasets.services.exports import exports_remove

    PromptRow.objects.filter(version=version).delete()
    exports_remove(version)
    rows, excluded_eval, lineage = _entries(version, context)
    if not rows:
        raise ApplicationError(
            "Nothing to build: no train task of a valid or approved environment matches the "
            "filter any more."
        )
    split = RowSplit.TRAIN
    stored = []
    mix: Counter = Counter()
    tokens = []
    for position, (environment_id, task_key, seed, entry) in enumerate(rows):
        content = _entry_sha256(entry)
        stored.append(
            PromptRow(
                version=version,
                split=split,
                position=position,
                environment_id=environment_id,
                task_key=task_key,
                seed=seed,
                entry=entry,
                content_sha256=content,
            )
        )
        mix.update(entry["capabilities"])
        tokens.append(approx_tokens(prompt_messages(entry), entry["tools"]))
    PromptRow.objects.bulk_create(stored, batch_size=ROW_BATCH)
    version.train_rows = len(stored)
    version.validation_rows = 0
    version.excluded_eval = excluded_eval
    version.environments = lineage
    # the shape every kind shares (the page, the card and the API read it): slug -> splits
    version.capability_mix = {
        slug: {"train": count, "validation": 0} for slug, count in sorted(mix.items())
    }
    version.token_stats = {"train": token_stats(tokens)}
    version.token_counting = (
        "Estimated: the prompt (system and first user message) and tools as canonical JSON, "
        "characters ÷ 4, rounded up."
    )
    version.checksum = prompt_checksum(
        (r.split, r.entry["environment_id"], r.task_key, r.seed, r.content_sha256) for r in stored
    )
    version.save(
        update_fields=[
            "train_rows",
            "validation_rows",
            "excluded_eval",
            "environments",
            "capability_mix",
            "token_stats",
            "token_counting",
            "checksum",
        ]
    )
    context.progress(len(lineage), max(len(lineage), 1), "Writing and linting the exports…")
    exports = prompt_exports_write(version=version)
    prompt_card_write(version=version)
    DatasetVersion.objects.filter(pk=version.pk).update(
        status=VersionStatus.READY, built_at=timezone.now()
    )
    offered = sum(1 for e in exports if e.status == ExportStatus.READY)
    message = (
        f"v{version.number}: {version.train_rows} prompt rows ({excluded_eval} eval-task rows "
        f"kept out); {offered} of {len(exports)} exports offered"
    )
    failed = [e for e in exports if e.status == ExportStatus.INVALID]
    if failed:
        message += "; not offered: " + ", ".join(
            f"{e.format} ({e.lint['errors'][0]['message']})" for e in failed
        )
    if version.rebuilt_from and version.rebuilt_from.checksum:
        same = version.rebuilt_from.checksum == version.checksum
        message += (
            f"; checksum {'matches' if same else 'differs from'} v{version.rebuilt_from.number}"
        )
    return message + "."


# --------------------------------------------------------------------------- exports


def prompt_entries(version: DatasetVersion, split: str = RowSplit.TRAIN):
    return (
        PromptRow.objects.filter(version=version, split=split)
        .order_by("position")
        .values_list("position", "entry")
        .iterator(chunk_size=ROW_BATCH)
    )


def prompt_export_bytes(version: DatasetVersion, fmt: str, split: str = RowSplit.TRAIN) -> bytes:
    """A whole export file rendered from the stored rows (the cache refill of a download)."""
    rows = [RL_PROMPT_FORMATS[fmt]["row"](entry, pos) for pos, entry in prompt_entries(version)]
    if fmt == ExportFormat.VERL:
        return verl_parquet(rows)
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def prompt_export_refill(export: DatasetExport) -> None:
    """Put a cached RL prompt file back from the stored rows when it renders to the
    recorded sha256 (versions are immutable, so it does; else it stays missing)."""
    from apps.datasets.services.exports import export_absolute_path

    data = prompt_export_bytes(export.version, export.format, export.split)
    if hashlib.sha256(data).hexdigest() != export.sha256:
        return
    target = export_absolute_path(export)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_path = tempfile.mkstemp(dir=target.parent, prefix=".regen-")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temp_path, target)


def _record(version, fmt, split, status, data: bytes | None, report) -> DatasetExport:
    from apps.datasets.services.exports import export_directory

    relative = ""
    if status == ExportStatus.READY:
        directory = export_directory(version)
        directory.mkdir(parents=True, exist_ok=True)
        relative = str(
            (directory / prompt_export_name(fmt, split)).relative_to(settings.MEDIA_ROOT)
        )
        handle, temp_path = tempfile.mkstemp(dir=directory, prefix=f".{fmt}-{split}-")
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temp_path, Path(settings.MEDIA_ROOT) / relative)
    export, _ = DatasetExport.objects.update_or_create(
        version=version,
        format=fmt,
        split=split,
        defaults={
            "status": status,
            "path": relative,
            "rows": report.rows,
            "size": len(data) if status == ExportStatus.READY else 0,
            "sha256": hashlib.sha256(data).hexdigest() if status == ExportStatus.READY else "",
            "lint": report.to_dict(),
        },
    )
    return export


def prompt_export_name(fmt: str, split: str) -> str:
    return f"{fmt}-{split}.parquet" if fmt == ExportFormat.VERL else f"{fmt}-{split}.jsonl"


def prompt_exports_write(*, version: DatasetVersion, split: str = RowSplit.TRAIN):
    """Render, lint and record every RL prompt format of ``split``."""
    exports = []
    for fmt in PROMPT_FORMATS:
        linter = RL_PROMPT_FORMATS[fmt]["linter"](split)
        rows = []
        for position, entry in prompt_entries(version, split):
            row = RL_PROMPT_FORMATS[fmt]["row"](entry, position)
            rows.append(row)
            linter.check_line(json.dumps(row, ensure_ascii=False), ref=entry["task_key"])
        report = linter.finish()
        data = None
        if report.rows == 0:
            status = ExportStatus.EMPTY
        elif not report.ok:
            status = ExportStatus.INVALID
        elif fmt == ExportFormat.VERL:
            try:
                data = verl_parquet(rows)
                status = ExportStatus.READY
            except ImportError:
                linter.error(
                    None,
                    "Parquet needs pyarrow, which this server does not have (pip install "
                    "pyarrow, or the train extra).",
                )
                status = ExportStatus.INVALID
        else:
            data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
            status = ExportStatus.READY
        exports.append(_record(version, fmt, split, status, data, report))
    return exports


def prompt_card_markdown(version: DatasetVersion) -> str:
    from apps.datasets.card import md as md_escape

    dataset = version.dataset
    lines = [
        f"# {md_escape(dataset.name)} — v{version.number} (RL prompts)",
        "",
        md_escape(dataset.description) if dataset.description else "",
        "",
        f"- Rows: {version.train_rows} (train; one per task and seed)",
        f"- Eval-task rows kept out: {version.excluded_eval}",
        f"- Seeds: {', '.join(str(s) for s in version.filters.get('seeds', []))}",
        f"- Checksum: `{version.checksum}`",
        "",
        "## Environments",
        "",
        "| id | environment | revision | spec hash | rows |",
        "| --- | --- | --- | --- | --- |",
    ]
    for env in version.environments:
        revisions = ", ".join(str(r) for r in env.get("revisions") or []) or "—"
        hashes = ", ".join(f"`{h[:12]}`" for h in env.get("spec_hashes") or []) or "—"
        env_id = env["id"] if env.get("id") is not None else "(deleted)"
        lines.append(
            f"| {env_id} | {md_escape(env['name'])} | {revisions} | {hashes} | {env['rows']} |"
        )
    lines += ["", "## Files", "", "| format | rows | sha256 | status |"]
    lines.append("| --- | --- | --- | --- |")
    for export in version.exports.exclude(format=ExportFormat.CARD).order_by("format"):
        lines.append(
            f"| {export.format} | {export.rows} | `{export.sha256[:12] or '—'}` | {export.status} |"
        )
    lines += [
        "",
        "## Use",
        "",
        "Every row names its environment (`environment`), task (`task_key`) and `seed`; a "
        "trainer's environment resets that task on CoworkEnv's environment server "
        "(`manage.py envserver`, or `python -m coworkenv_engine serve`) or in "
        "process (`engine/trl_env.py`).",
        "",
        "- `grpo`: TRL `GRPOTrainer` rows (`prompt` messages; `environment`, `task_key`, "
        "`seed`, `info` columns).",
        "- `verl`: parquet with `data_source`, `prompt`, `ability`, `reward_model`, "
        "`extra_info` (environment, task_key, seed, interaction_kwargs), `agent_name`.",
        "- `nemo_gym`: `responses_create_params` (input, tools) plus environment, task_key, "
        "seed; `agent_ref` is added by NeMo Gym's prepare step.",
        "- `verifiers`: `prompt`, `answer`, `info` (JSON string), `task`, `example_id`.",
        "",
    ]
    return "\n".join(lines)


def prompt_card_write(*, version: DatasetVersion) -> DatasetExport:
    """The card, written as every kind's is (``card.md`` in the version's folder)."""
    from apps.datasets.services.exports import card_write

    return card_write(version=version)


def prompt_version_verify(context: JobContext, version: DatasetVersion) -> list[str]:
    """Problems found recomputing the rows' hashes and the checksum (empty: verified)."""
    rows = list(
        PromptRow.objects.filter(version=version)
        .order_by("split", "position")
        .values_list("split", "environment_id", "task_key", "seed", "entry", "content_sha256")
    )
    problems = []
    changed = [key for _s, _e, key, _seed, entry, sha in rows if _entry_sha256(entry) != sha]
    if changed:
        problems.append(f"{len(changed)} rows changed content (tasks {', '.join(changed[:10])})")
    if len(rows) != version.rows_total:
        problems.append(f"{len(rows)} rows, not the recorded {version.rows_total}")
    checksum = prompt_checksum(
        (split, entry["environment_id"], key, seed, _entry_sha256(entry))
        for split, _env, key, seed, entry, _ in rows
    )
    if checksum != version.checksum:
        problems.append(f"the checksum is now {checksum}, not {version.checksum}")
    return problems
