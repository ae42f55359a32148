"""Scored-rollout rows (``DatasetKind.ROLLOUTS``): the graded runs of student rollout groups
with their rewards and advantages under one variant, for offline RL (filters:
``{"batches": [ids], "variant": {reward, advantage, credit}}``, ``services/rollouts.py``).

1. every scored group of the chosen batches (batch order, then group order); each member
   with a reward under the variant is one row (unscorable members — errored or cancelled
   runs — are counted and left out); all rows are train (no validation split is drawn);
2. each row is rendered (``formats/rollouts.py``), its line's sha256 and tokens stored in a
   ``RolloutRow`` (run, group, member, position);
3. checksum: sha256 over ``"{split}\\t{run}\\t{group}\\t{member}\\t{content sha256}\\n"``
   in position order; a recheck re-renders every row from the stored runs and groups;
4. the one export, ``rollouts-train.jsonl``, linted while written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from django.conf import settings

from apps.core.exceptions import ApplicationError
from apps.core.services import JobContext
from apps.datasets.card import _fmt_size, _table, md
from apps.datasets.formats import canonical_json, normalize_messages, normalize_tools
from apps.datasets.formats.rollouts import rollout_row
from apps.datasets.formats.tokens import TokenCounter
from apps.datasets.kinds.base import Built, Recheck
from apps.datasets.models import (
    DatasetExport,
    DatasetKind,
    DatasetVersion,
    ExportFormat,
    ExportStatus,
    RolloutRow,
    RowSplit,
)
from apps.datasets.services.exports import (
    Sink,
    card_info,
    export_directory,
    export_relative_path,
)
from apps.datasets.splitting import token_stats
from apps.runs.models import RolloutGroup, Run
from apps.runs.rollouts import Variant

ROW_BATCH = 500


def _scores(group: RolloutGroup, member: int, variant: Variant, run: Run) -> dict | None:
    v = group.variants
    reward = v["rewards"][variant.reward][member]
    if reward is None:
        return None
    scores = {
        "reward": reward,
        "advantage": v["advantages"][variant.reward][variant.advantage][member],
        "turn_rewards": v["turn_rewards"][member],
        "variant": {**variant.to_dict(), "gamma": v["gamma"]},
    }
    if variant.credit == "turn":
        scores["turn_advantages"] = v["turn_advantages"][variant.advantage][member]
    elif variant.credit == "call":
        scores["calls"] = [
            {
                "seq": entry.get("seq"),
                "tool": entry.get("tool"),
                "turn": entry.get("turn"),
                "reward": r,
                "advantage": a,
            }
            for entry, r, a in zip(
                run.audit_log,
                v["call_rewards"][member],
                v["call_advantages"][variant.advantage][member],
                strict=False,
            )
        ]
    return scores


def render_rollout(group: RolloutGroup, member: int, run: Run, variant: Variant) -> str | None:
    """The exported line (with its newline) of one group member, or None if unscorable."""
    scores = _scores(group, member, variant, run)
    if scores is None:
        return None
    row = rollout_row(
        normalize_messages(run.transcript),
        normalize_tools(run.tools),
        scores=scores,
        group={"id": group.pk, "batch": group.batch_id, "size": group.size, "index": member},
        episode={
            "run": run.pk,
            "environment": run.environment_name,
            "task_key": run.task_key,
            "seed": run.seed,
            "model": run.model or run.policy_name,
        },
    )
    return json.dumps(row, ensure_ascii=False) + "\n"


def _members(version: DatasetVersion):
    """``(group, member index, run)`` of the version's batches, in build order."""
    groups = RolloutGroup.objects.filter(batch_id__in=version.filters["batches"]).order_by(
        "batch_id", "id"
    )
    for group in groups.iterator(chunk_size=100):
        runs = {run.pk: run for run in Run.objects.filter(pk__in=group.run_ids)}
        for member, run_id in enumerate(group.run_ids):
            run = runs.get(run_id)
            if run is not None:
                yield group, member, run


def _stored(version: DatasetVersion, split: str | None = None):
    rows = RolloutRow.objects.filter(version=version).select_related("group", "run")
    if split is not None:
        rows = rows.filter(split=split)
    return rows.order_by("split", "position").iterator(chunk_size=ROW_BATCH)


def _checksum_line(split, run, group, member, content) -> bytes:
    return f"{split}\t{run}\t{group}\t{member}\t{content}\n".encode()


class _Lineage:
    """The environments, capabilities and models of the rows, in every kind's shapes."""

    def __init__(self) -> None:
        self.environments: dict[str, dict] = {}
        self.capabilities: Counter = Counter()
        self.models: Counter = Counter()

    def add(self, run: Run) -> None:
        env = self.environments.setdefault(
            run.environment_name,
            {"id": None, "tasks": Counter(), "revisions": set(), "spec_hashes": set()},
        )
        env["id"] = env["id"] or run.environment_id
        env["tasks"][run.task_key] += 1
        if run.environment_revision is not None:
            env["revisions"].add(run.environment_revision)
        if run.spec_hash:
            env["spec_hashes"].add(run.spec_hash)
        self.capabilities.update(set(run.capabilities or ()))
        self.models[run.model or run.policy_name] += 1

    def apply(self, version: DatasetVersion) -> None:
        # the lineage links each environment (no id: deleted since) with its revisions
        version.environments = [
            {
                "id": env["id"],
                "name": name,
                "split": "train",
                "rows": sum(env["tasks"].values()),
                "tasks": dict(env["tasks"]),
                "revisions": sorted(env["revisions"]),
                "spec_hashes": sorted(env["spec_hashes"]),
            }
            for name, env in sorted(self.environments.items())
        ]
        version.capability_mix = {
            slug: {"train": count, "validation": 0}
            for slug, count in sorted(self.capabilities.items())
        }
        version.models_used = [
            {"model": model, "policy": "student", "rows": count}
            for model, count in sorted(self.models.items(), key=lambda item: (-item[1], item[0]))
        ]


def _read(version: DatasetVersion, context: JobContext, counter: TokenCounter):
    """Steps 1-3: the rows (unsaved), the checksum, the lineage and the unscorable count."""
    variant = Variant.parse(**version.filters["variant"])
    scored = RolloutGroup.objects.filter(batch_id__in=version.filters["batches"])
    members = sum(len(ids) for ids in scored.values_list("run_ids", flat=True))
    context.progress(0, max(members, 1), f"Reading the {members} runs of {scored.count()} groups…")
    checksum, lineage = hashlib.sha256(), _Lineage()
    rows, unscorable = [], 0
    for group, member, run in _members(version):
        line = render_rollout(group, member, run, variant)
        if line is None:
            unscorable += 1
            continue
        content = hashlib.sha256(line.encode()).hexdigest()
        row = json.loads(line)
        rows.append(
            RolloutRow(
                version=version,
                split=RowSplit.TRAIN,
                position=len(rows),
                group=group,
                member=member,
                run=run,
                environment_key=f"{run.environment_name}/{run.task_key}"[:220],
                tokens=counter.count(
                    canonical_json({"messages": row["messages"], "tools": row["tools"]})
                ),
                content_sha256=content,
            )
        )
        lineage.add(run)
        checksum.update(_checksum_line(RowSplit.TRAIN, run.pk, group.pk, member, content))
        if len(rows) % ROW_BATCH == 0:
            context.progress(len(rows) + unscorable)
    return rows, checksum.hexdigest(), lineage, unscorable


def _card_lines(info: dict) -> list[str]:
    dataset, version, counts = info["dataset"], info["version"], info["counts"]
    filters = version["filters"]
    variant = filters.get("variant") or {}
    group = (info.get("groups") or [{}])[0]
    lines = [f"# {md(dataset['name'])} — version {version['number']} (scored rollouts)", ""]
    if dataset.get("description"):
        lines += [md(dataset["description"]), ""]
    return [
        *lines,
        f"Built by CoworkEnv on {md(version['created_at'])}"
        + (f" by {md(version['created_by'])}" if version.get("created_by") else "")
        + " from the rollout groups of student run batches, for offline RL.",
        "",
        "## Contents",
        "",
        *_table(
            ["", "count"],
            [
                ["run batches", ", ".join(str(b) for b in filters.get("batches") or [])],
                ["rollout groups", group.get("rollout_groups", 0)],
                ["unscorable runs left out (errored, cancelled)", group.get("unscorable", 0)],
                ["**rows (train)**", counts["train_rows"]],
            ],
        ),
        "",
        "## Variant",
        "",
        f"- reward: `{md(variant.get('reward', ''))}`; advantage: "
        f"`{md(variant.get('advantage', ''))}`; credit: `{md(variant.get('credit', ''))}`",
        "- Formulas (GRPO, Dr. GRPO, RLOO, turn rewards, reward-to-go, per-call credit): the "
        "engine README, section Reward processing.",
        "",
    ]


def _card_lineage(info: dict) -> list[str]:
    version = info["version"]
    return [
        "## Lineage",
        "",
        f"- Checksum (sha256 over split, run, group, member and line hash): "
        f"`{version['checksum']}`"
        + (
            f"; rebuilt from version {version['rebuilt_from']}"
            if version.get("rebuilt_from")
            else ""
        ),
        f"- Tokens per row: {md(version.get('token_counting') or '')}",
        "",
        *_table(["model", "rows"], [[md(m["model"]) or "—", m["rows"]] for m in info["models"]]),
        "",
    ]


def _card_files(info: dict) -> list[str]:
    lines = [
        "## Files",
        "",
        *_table(
            ["format", "split", "rows", "size", "sha256", "linter"],
            [
                [
                    e["format"],
                    e["split"],
                    e["rows"],
                    _fmt_size(e["size"]),
                    f"`{e['sha256'][:16]}…`" if e.get("sha256") else "—",
                    e["status"],
                ]
                for e in info.get("exports") or []
            ],
        ),
        "",
        "- `rollouts`: one graded run per line: `messages` (TRL shape; each assistant "
        "message carries the `advantage` its tokens take), `tools` (JSON string), `reward`, "
        "`advantage`, `turn_rewards`, `turn_advantages` (credit turn), `call_credit` (credit "
        "call), `variant`, `group`, `episode`.",
        "",
    ]
    if info.get("api"):
        lines += [
            "Download over the REST API (a token from Account → API tokens):",
            "",
            "```sh",
            'curl -H "Authorization: Bearer $COWORKENV_TOKEN" \\',
            f'  "$COWORKENV_URL{info["api"]}?format=rollouts&split=train" -o rollouts.jsonl',
            "```",
            "",
        ]
    return lines


def _export_record(version: DatasetVersion, sink: Sink) -> DatasetExport:
    report = sink.linter.finish()
    relative = export_relative_path(version, ExportFormat.ROLLOUTS, sink.split)
    ready = report.ok and report.rows > 0
    if ready:
        os.replace(sink.temp_path, Path(settings.MEDIA_ROOT) / relative)
    else:
        sink.discard()
    export, _ = version.exports.update_or_create(
        format=ExportFormat.ROLLOUTS,
        split=sink.split,
        defaults={
            "status": ExportStatus.READY if ready else ExportStatus.INVALID,
            "path": relative if ready else "",
            "rows": report.rows,
            "size": sink.size if ready else 0,
            "sha256": sink.hash.hexdigest() if ready else "",
            "lint": report.to_dict(),
        },
    )
    return export


class RolloutKind:
    kind = DatasetKind.ROLLOUTS
    formats = (ExportFormat.ROLLOUTS,)

    def rows(self, version: DatasetVersion, context: JobContext, counter: TokenCounter) -> Built:
        rows, checksum, lineage, unscorable = _read(version, context, counter)
        groups = RolloutGroup.objects.filter(batch_id__in=version.filters["batches"]).count()
        if not rows:
            raise ApplicationError(
                f"Nothing to build: the {groups} scored group{'s' if groups != 1 else ''} of "
                f"these batches have no member with a reward ({unscorable} unscorable runs)."
            )
        RolloutRow.objects.bulk_create(rows, batch_size=ROW_BATCH)
        tokens = [row.tokens for row in rows]
        version.demonstrations, version.train_rows, version.validation_rows = 0, len(rows), 0
        version.removals = []  # unscorable members are counted in ``groups`` (no demonstration)
        version.groups = [
            {
                "key": "rollout groups",
                "split": "train",
                "rows": len(rows),
                "environments": sorted(lineage.environments),
                "joined_by_similarity": False,
                "rollout_groups": groups,
                "unscorable": unscorable,
            }
        ]
        version.tokenizer = counter.name if not counter.is_estimate else ""
        version.token_counting = counter.describe()
        version.token_stats = {"all": token_stats(tokens), "train": token_stats(tokens)}
        lineage.apply(version)
        version.checksum = checksum
        variant = Variant.parse(**version.filters["variant"])
        summary = (
            f"v{version.number}: {len(rows)} scored rollouts from {groups} group"
            f"{'s' if groups != 1 else ''} ({variant.reward} / {variant.advantage} / "
            f"{variant.credit})"
        )
        if unscorable:
            summary += f", {unscorable} unscorable runs left out"
        return Built(
            fields=(
                "demonstrations",
                "train_rows",
                "validation_rows",
                "removals",
                "groups",
                "tokenizer",
                "token_counting",
                "token_stats",
                "environments",
                "capability_mix",
                "models_used",
            ),
            summary=summary,
        )

    def exports(self, version: DatasetVersion, context: JobContext) -> list[DatasetExport]:
        context.progress(0, max(version.train_rows, 1), "Writing and linting the export…")
        directory = export_directory(version)
        directory.mkdir(parents=True, exist_ok=True)
        sink = Sink(directory, ExportFormat.ROLLOUTS, RowSplit.TRAIN)
        try:
            for line, run_id in self.lines(version, ExportFormat.ROLLOUTS, RowSplit.TRAIN):
                sink.write(line, run_id)
        except BaseException:
            sink.discard()
            raise
        sink.file.close()
        return [_export_record(version, sink)]

    def card(self, version: DatasetVersion) -> str:
        info = card_info(version)
        return "\n".join([*_card_lines(info), *_card_lineage(info), *_card_files(info)])

    def recheck(self, version: DatasetVersion, context: JobContext) -> Recheck:
        """Re-render every stored row from its run and group."""
        checksum = hashlib.sha256()
        recheck = Recheck(source="runs")
        variant = Variant.parse(**version.filters["variant"])
        for row in _stored(version):
            line = render_rollout(row.group, row.member, row.run, variant) or ""
            content = hashlib.sha256(line.encode()).hexdigest()
            if content != row.content_sha256:
                recheck.changed.append(row.run_id)
            checksum.update(
                _checksum_line(row.split, row.run_id, row.group_id, row.member, content)
            )
            recheck.counts[row.split] += 1
        recheck.checksum = checksum.hexdigest()
        return recheck

    def lines(self, version: DatasetVersion, fmt: str, split: str):
        """Each exported line and its run id, from the stored rows."""
        variant = Variant.parse(**version.filters["variant"])
        for row in _stored(version, split):
            line = render_rollout(row.group, row.member, row.run, variant)
            if line is not None:
                yield line, row.run_id
