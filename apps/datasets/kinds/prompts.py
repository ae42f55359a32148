"""RL prompt rows (``DatasetKind.RL_PROMPTS``): environment tasks by seeds, for trainers that
roll out themselves (filters: ``services.prompts.PromptFilter``).

1. the project's valid and approved environments (the filter's, if it names some), oldest
   first, each loaded from its rows as the engine spec a server would serve;
2. their **train** tasks in spec order (eval tasks are counted in ``excluded_eval`` and kept
   out), those exercising one of the filter's capabilities when it names some;
3. one row per (task, seed): the engine's reset observation for that seed with the task's
   identity, the environment's revision and spec hash (``formats.rl_prompts.prompt_entry``),
   stored on the row (``PromptRow.entry``);
4. checksum: sha256 over ``"{split}\\t{environment id}\\t{task key}\\t{seed}\\t{entry
   sha256}\\n"`` in row order;
5. exports, one file per format (all rows are train): ``grpo``, ``nemo_gym`` and
   ``verifiers`` JSONL, ``verl`` parquet (without ``pyarrow`` the export is recorded as
   failed with the reason and the others are still offered).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from django.conf import settings

from apps.core.exceptions import ApplicationError
from apps.core.services import JobContext
from apps.datasets.card import md
from apps.datasets.formats.rl_prompts import (
    RL_PROMPT_FORMATS,
    prompt_entry,
    prompt_messages,
    verl_parquet,
)
from apps.datasets.formats.tokens import TokenCounter
from apps.datasets.formats.transcript import approx_tokens, canonical_json
from apps.datasets.kinds.base import Built, Recheck
from apps.datasets.models import (
    DatasetExport,
    DatasetKind,
    DatasetVersion,
    ExportFormat,
    ExportStatus,
    PromptRow,
    RowSplit,
)
from apps.datasets.services.exports import export_absolute_path, export_directory
from apps.datasets.services.prompts import PromptFilter, prompt_environments
from apps.datasets.splitting import token_stats
from apps.environments.models import Split
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.session import EpisodeSession

PROMPT_FORMATS = (
    ExportFormat.GRPO,
    ExportFormat.VERL,
    ExportFormat.NEMO_GYM,
    ExportFormat.VERIFIERS,
)
ROW_BATCH = 1000
TOKEN_COUNTING = (
    "Estimated: the prompt (system and first user message) and tools as canonical JSON, "
    "characters ÷ 4, rounded up."
)


def _task_entries(spec, environment, filters: PromptFilter):
    """``(task key, seed, entry)`` of one environment's train tasks, and the eval rows
    kept out."""
    wanted = set(filters.capabilities)
    tools = spec.openai_tools()
    entries, excluded_eval = [], 0
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
            entries.append((task.key, seed, entry))
    return entries, excluded_eval


def _entries(version: DatasetVersion, context: JobContext):
    """Steps 1-3: (environment id, task key, seed, entry) in row order, the eval rows kept
    out and the environments' lineage."""
    filters = PromptFilter.from_dict(version.filters)
    environments = list(prompt_environments(version.dataset.project, filters))
    rows: list[tuple[int, str, int, dict]] = []
    excluded_eval = 0
    lineage = []
    for done, environment in enumerate(environments):
        context.progress(done, len(environments), f"Reading {environment.name}…")
        spec = engine_spec.load_spec(environment_spec(environment))
        entries, excluded = _task_entries(spec, environment, filters)
        excluded_eval += excluded
        rows += [(environment.pk, key, seed, entry) for key, seed, entry in entries]
        if entries:
            lineage.append(
                {
                    "id": environment.pk,
                    "name": environment.name,
                    "split": "train",
                    "rows": len(entries),
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


def prompt_entries(version: DatasetVersion, split: str = RowSplit.TRAIN):
    return (
        PromptRow.objects.filter(version=version, split=split)
        .order_by("position")
        .values_list("position", "entry")
        .iterator(chunk_size=ROW_BATCH)
    )


def prompt_export_name(fmt: str, split: str) -> str:
    return f"{fmt}-{split}.parquet" if fmt == ExportFormat.VERL else f"{fmt}-{split}.jsonl"


def prompt_export_bytes(version: DatasetVersion, fmt: str, split: str = RowSplit.TRAIN) -> bytes:
    """A whole export file rendered from the stored rows (the cache refill of a download)."""
    rows = [RL_PROMPT_FORMATS[fmt]["row"](entry, pos) for pos, entry in prompt_entries(version)]
    if fmt == ExportFormat.VERL:
        return verl_parquet(rows)
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def _write_atomic(target: Path, data: bytes, prefix: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_path = tempfile.mkstemp(dir=target.parent, prefix=prefix)
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temp_path, target)


def prompt_export_refill(export: DatasetExport) -> None:
    """Put a cached RL prompt file back from the stored rows when it renders to the
    recorded sha256 (versions are immutable, so it does; else it stays missing)."""
    data = prompt_export_bytes(export.version, export.format, export.split)
    if hashlib.sha256(data).hexdigest() == export.sha256:
        _write_atomic(export_absolute_path(export), data, ".regen-")


def _record(version, fmt, split, status, data: bytes | None, report) -> DatasetExport:
    relative = ""
    if status == ExportStatus.READY:
        target = export_directory(version) / prompt_export_name(fmt, split)
        relative = str(target.relative_to(settings.MEDIA_ROOT))
        _write_atomic(target, data, f".{fmt}-{split}-")
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


def _rendered(fmt: str, rows: list, linter, report) -> tuple[str, bytes | None]:
    """The status and bytes of one linted format's rows (``report``: the linter's, finished;
    a parquet that cannot be written adds its reason)."""
    if report.rows == 0:
        return ExportStatus.EMPTY, None
    if not report.ok:
        return ExportStatus.INVALID, None
    if fmt != ExportFormat.VERL:
        return ExportStatus.READY, "".join(
            json.dumps(r, ensure_ascii=False) + "\n" for r in rows
        ).encode()
    try:
        return ExportStatus.READY, verl_parquet(rows)
    except ImportError:
        linter.error(
            None,
            "Parquet needs pyarrow, which this server does not have (pip install "
            "pyarrow, or the train extra).",
        )
        return ExportStatus.INVALID, None


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
        status, data = _rendered(fmt, rows, linter, report)
        exports.append(_record(version, fmt, split, status, data, report))
    return exports


def _environment_lines(version: DatasetVersion) -> list[str]:
    lines = []
    for env in version.environments:
        revisions = ", ".join(str(r) for r in env.get("revisions") or []) or "—"
        hashes = ", ".join(f"`{h[:12]}`" for h in env.get("spec_hashes") or []) or "—"
        env_id = env["id"] if env.get("id") is not None else "(deleted)"
        lines.append(f"| {env_id} | {md(env['name'])} | {revisions} | {hashes} | {env['rows']} |")
    return lines


USE_SECTION = [
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


class PromptKind:
    kind = DatasetKind.RL_PROMPTS
    formats = PROMPT_FORMATS

    def rows(self, version: DatasetVersion, context: JobContext, counter: TokenCounter) -> Built:
        """Steps 1-4 (tokens always estimated: a prompt is not a training target)."""
        rows, excluded_eval, lineage = _entries(version, context)
        if not rows:
            raise ApplicationError(
                "Nothing to build: no train task of a valid or approved environment matches "
                "the filter any more."
            )
        stored = [
            PromptRow(
                version=version,
                split=RowSplit.TRAIN,
                position=position,
                environment_id=environment_id,
                task_key=task_key,
                seed=seed,
                entry=entry,
                content_sha256=_entry_sha256(entry),
            )
            for position, (environment_id, task_key, seed, entry) in enumerate(rows)
        ]
        PromptRow.objects.bulk_create(stored, batch_size=ROW_BATCH)
        mix = Counter(slug for row in stored for slug in row.entry["capabilities"])
        version.train_rows, version.validation_rows = len(stored), 0
        version.excluded_eval = excluded_eval
        version.environments = lineage
        version.capability_mix = {
            slug: {"train": count, "validation": 0} for slug, count in sorted(mix.items())
        }
        tokens = [approx_tokens(prompt_messages(r.entry), r.entry["tools"]) for r in stored]
        version.token_stats = {"train": token_stats(tokens)}
        version.token_counting = TOKEN_COUNTING
        version.checksum = prompt_checksum(
            (r.split, r.entry["environment_id"], r.task_key, r.seed, r.content_sha256)
            for r in stored
        )
        return Built(
            fields=(
                "train_rows",
                "validation_rows",
                "excluded_eval",
                "environments",
                "capability_mix",
                "token_stats",
                "token_counting",
            ),
            summary=(
                f"v{version.number}: {version.train_rows} prompt rows ({excluded_eval} "
                "eval-task rows kept out)"
            ),
        )

    def exports(self, version: DatasetVersion, context: JobContext) -> list[DatasetExport]:
        context.progress(0, 1, "Writing and linting the exports…")
        return prompt_exports_write(version=version)

    def card(self, version: DatasetVersion) -> str:
        dataset = version.dataset
        lines = [
            f"# {md(dataset.name)} — v{version.number} (RL prompts)",
            "",
            md(dataset.description) if dataset.description else "",
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
            *_environment_lines(version),
            "",
            "## Files",
            "",
            "| format | rows | sha256 | status |",
            "| --- | --- | --- | --- |",
        ]
        for export in version.exports.exclude(format=ExportFormat.CARD).order_by("format"):
            lines.append(
                f"| {export.format} | {export.rows} | `{export.sha256[:12] or '—'}` "
                f"| {export.status} |"
            )
        return "\n".join([*lines, "", *USE_SECTION])

    def recheck(self, version: DatasetVersion, context: JobContext) -> Recheck:
        rows = (
            PromptRow.objects.filter(version=version)
            .order_by("split", "position")
            .values_list("split", "environment_id", "task_key", "seed", "entry", "content_sha256")
        )
        recheck = Recheck(source="tasks")
        hashed = []
        for split, _environment, key, seed, entry, recorded in rows:
            content = _entry_sha256(entry)
            if content != recorded:
                recheck.changed.append(key)
            recheck.counts[split] += 1
            hashed.append((split, entry["environment_id"], key, seed, content))
        recheck.checksum = prompt_checksum(hashed)
        return recheck

    def lines(self, version: DatasetVersion, fmt: str, split: str):
        row_of = RL_PROMPT_FORMATS[fmt]["row"]
        for position, entry in prompt_entries(version, split):
            yield json.dumps(row_of(entry, position), ensure_ascii=False) + "\n", entry["task_key"]
