"""Scored-rollout versions: the graded runs of student rollout groups, with their rewards
and advantages under one variant, as an immutable, checksummed dataset version for offline
RL: the versions of a dataset of kind ``rollouts`` (``DatasetKind.ROLLOUTS``).

Created like an SFT version (a number, a build job, the same page, API, downloads, verify
and rebuild), from ``filters = {"batches": [ids], "variant": {reward, advantage, credit}}``:

1. every scored group of the chosen student batches (batch order, then group order); each
   member with a reward under the variant is one row (unscorable members — errored or
   cancelled runs — are counted and left out); all rows are train (offline RL methods weigh
   rows by advantage; no validation split is drawn);
2. each row is rendered once (``formats/rollouts.py``), its sha256 and tokens stored in a
   ``RolloutRow`` (run, group, member, position);
3. checksum: sha256 over ``"{split}\\t{run}\\t{group}\\t{member}\\t{content sha256}\\n"``
   in position order; *verify* re-renders every row from the stored runs and groups and
   compares; a rebuild over the same groups has the same checksum;
4. the one export (``rollouts-train.jsonl``), linted while written, then the card.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.services import JobContext
from apps.datasets.formats import canonical_json, normalize_messages, normalize_tools
from apps.datasets.formats.rollouts import rollout_row
from apps.datasets.formats.tokens import TokenCounter
from apps.datasets.models import (
    Dataset,
    DatasetKind,
    DatasetVersion,
    ExportFormat,
    ExportStatus,
    RolloutRow,
    RowSplit,
    VersionStatus,
)
from apps.runs.models import RolloutGroup, Run, RunBatch, RunRole
from apps.runs.rollouts import Variant

ROW_BATCH = 500
MAX_BATCHES = 100


def rollout_filters(batches, variant: Variant) -> dict:
    return {"batches": sorted(set(batches)), "variant": variant.to_dict()}


def _check_batches(project, batch_ids) -> list[RunBatch]:
    ids = sorted(set(batch_ids))
    if not ids:
        raise ApplicationError(
            "Choose at least one student batch with rollout groups.",
            {"fields": {"batches": ["Required."]}},
        )
    if len(ids) > MAX_BATCHES:
        raise ApplicationError(
            f"At most {MAX_BATCHES} batches per version.",
            {"fields": {"batches": [f"At most {MAX_BATCHES}."]}},
        )
    found = {b.pk: b for b in RunBatch.objects.filter(project=project, pk__in=ids)}
    if missing := [pk for pk in ids if pk not in found]:
        raise ApplicationError(
            f"No run batch {', '.join(map(str, missing))} in this project.",
            {"fields": {"batches": ["Choose batches of this project."]}},
        )
    plain = [pk for pk in ids if not found[pk].group_size or found[pk].role != RunRole.STUDENT]
    if plain:
        raise ApplicationError(
            f"Batch {', '.join(map(str, plain))} has no rollout groups: scored rollouts come "
            "from student batches started with a group size.",
            {"fields": {"batches": ["Only student batches with a group size."]}},
        )
    if not RolloutGroup.objects.filter(batch_id__in=ids).exists():
        raise ApplicationError(
            "Nothing to build yet: no group of these batches is scored (a group is scored "
            "once all its runs have finished).",
            {"fields": {"batches": ["No scored group yet."]}},
        )
    return [found[pk] for pk in ids]


@transaction.atomic
def rollout_version_create(
    *,
    dataset: Dataset,
    user,
    batches,
    variant: Variant,
    rebuilt_from: DatasetVersion | None = None,
    enqueue: bool = True,
) -> DatasetVersion:
    """Number the next version of ``dataset`` as a scored-rollout version of ``batches``
    under ``variant`` and create its build job (enqueued once this commits; with
    ``enqueue=False`` the caller runs ``dataset_version_build_job``). Batches of another
    project, without groups or with none scored yet are refused before anything exists, and
    so is a dataset of another kind (SFT, RL prompts)."""
    from apps.datasets.services.datasets import (
        dataset_kind_check,
        version_numbered,
        version_tokenizer,
    )

    dataset_kind_check(dataset, DatasetKind.ROLLOUTS)
    chosen = _check_batches(dataset.project, batches)
    tokenizer = version_tokenizer(dataset)
    return version_numbered(
        dataset=dataset,
        user=user,
        enqueue=enqueue,
        label=" (scored rollouts)",
        filters=rollout_filters([b.pk for b in chosen], variant),
        seed=0,
        validation_fraction=0.0,
        rebuilt_from=rebuilt_from,
        tokenizer=tokenizer,
    )


def rollout_version_rebuild(*, version: DatasetVersion, user) -> DatasetVersion:
    return rollout_version_create(
        dataset=version.dataset,
        user=user,
        batches=version.filters["batches"],
        variant=Variant.parse(**version.filters["variant"]),
        rebuilt_from=version,
    )


# --------------------------------------------------------------------------- rows


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


def rollout_export_lines(version: DatasetVersion, split: str):
    """Each exported line of a scored-rollout version and its run id, from the stored rows
    (a cached file that went missing is re-rendered from these)."""
    variant = Variant.parse(**version.filters["variant"])
    rows = (
        RolloutRow.objects.filter(version=version, split=split)
        .select_related("group", "run")
        .order_by("position")
    )
    for row in rows.iterator(chunk_size=ROW_BATCH):
        line = render_rollout(row.group, row.member, row.run, variant)
        if line is not None:
            yield line, row.run_id


def _checksum_line(split, run, group, member, content) -> bytes:
    return f"{split}\t{run}\t{group}\t{member}\t{content}\n".encode()


def rollout_version_build(context: JobContext, version: DatasetVersion, counter: TokenCounter):
    """The build job's work for a scored-rollout version (called by ``build.py``)."""
    from apps.datasets.services.exports import (
        _Sink,
        card_write,
        export_directory,
        export_relative_path,
        exports_remove,
    )
    from apps.datasets.splitting import token_stats

    RolloutRow.objects.filter(version=version).delete()
    exports_remove(version)
    variant = Variant.parse(**version.filters["variant"])
    scored = RolloutGroup.objects.filter(batch_id__in=version.filters["batches"])
    groups = scored.count()
    members = sum(len(ids) for ids in scored.values_list("run_ids", flat=True))
    context.progress(0, max(members, 1), f"Reading the {members} runs of {groups} groups…")
    directory = export_directory(version)
    directory.mkdir(parents=True, exist_ok=True)
    split = RowSplit.TRAIN
    sink = _Sink(directory, ExportFormat.ROLLOUTS, split)
    checksum = hashlib.sha256()
    rows, tokens, unscorable = [], [], 0
    environments: dict[str, dict] = {}
    capability_mix = Counter()
    models = Counter()
    try:
        for group, member, run in _members(version):
            line = render_rollout(group, member, run, variant)
            if line is None:
                unscorable += 1
                continue
            content = hashlib.sha256(line.encode()).hexdigest()
            row = json.loads(line)
            n = counter.count(canonical_json({"messages": row["messages"], "tools": row["tools"]}))
            key = f"{run.environment_name}/{run.task_key}"
            rows.append(
                RolloutRow(
                    version=version,
                    split=split,
                    position=len(rows),
                    group=group,
                    member=member,
                    run=run,
                    environment_key=key[:220],
                    tokens=n,
                    content_sha256=content,
                )
            )
            tokens.append(n)
            env = environments.setdefault(
                run.environment_name,
                {"id": None, "tasks": Counter(), "revisions": set(), "spec_hashes": set()},
            )
            env["id"] = env["id"] or run.environment_id
            env["tasks"][run.task_key] += 1
            if run.environment_revision is not None:
                env["revisions"].add(run.environment_revision)
            if run.spec_hash:
                env["spec_hashes"].add(run.spec_hash)
            capability_mix.update(set(run.capabilities or ()))
            models[run.model or run.policy_name] += 1
            checksum.update(_checksum_line(split, run.pk, group.pk, member, content))
            sink.write(line, run.pk)
            if len(rows) % ROW_BATCH == 0:
                context.progress(len(rows) + unscorable)
    except BaseException:
        sink.discard()
        raise
    sink.file.close()
    if not rows:
        sink.discard()
        raise ApplicationError(
            f"Nothing to build: the {groups} scored group{'s' if groups != 1 else ''} of these "
            f"batches have no member with a reward ({unscorable} unscorable runs)."
        )
    RolloutRow.objects.bulk_create(rows, batch_size=ROW_BATCH)
    report = sink.linter.finish()
    relative = export_relative_path(version, ExportFormat.ROLLOUTS, split)
    status = ExportStatus.READY if report.ok else ExportStatus.INVALID
    if status == ExportStatus.READY:
        os.replace(sink.temp_path, Path(settings.MEDIA_ROOT) / relative)
    else:
        sink.discard()
    version.exports.update_or_create(
        format=ExportFormat.ROLLOUTS,
        split=split,
        defaults={
            "status": status,
            "path": relative if status == ExportStatus.READY else "",
            "rows": report.rows,
            "size": sink.size if status == ExportStatus.READY else 0,
            "sha256": sink.hash.hexdigest() if status == ExportStatus.READY else "",
            "lint": report.to_dict(),
        },
    )
    version.demonstrations = 0
    version.train_rows = len(rows)
    version.validation_rows = 0
    version.removals = []  # unscorable members are counted in ``groups`` (no demonstration)
    version.groups = [
        {
            "key": "rollout groups",
            "split": "train",
            "rows": len(rows),
            "environments": sorted(environments),
            "joined_by_similarity": False,
            "rollout_groups": groups,
            "unscorable": unscorable,
        }
    ]
    version.tokenizer = counter.name if not counter.is_estimate else ""
    version.token_counting = counter.describe()
    version.token_stats = {"all": token_stats(tokens), "train": token_stats(tokens)}
    # the shapes SFT versions have (the page, the card and the API read them): the lineage
    # links each environment (no id: deleted since) with its revisions and spec hashes
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
        for name, env in sorted(environments.items())
    ]
    version.capability_mix = {
        slug: {"train": count, "validation": 0} for slug, count in sorted(capability_mix.items())
    }
    version.models_used = [
        {"model": model, "policy": "student", "rows": count}
        for model, count in sorted(models.items(), key=lambda item: (-item[1], item[0]))
    ]
    version.checksum = checksum.hexdigest()
    context.progress(max(members, 1), max(members, 1))
    version.save(
        update_fields=[
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
            "checksum",
        ]
    )
    card_write(version=version)
    DatasetVersion.objects.filter(pk=version.pk).update(
        status=VersionStatus.READY, built_at=timezone.now()
    )
    message = (
        f"v{version.number}: {len(rows)} scored rollouts from {groups} group"
        f"{'s' if groups != 1 else ''} ({variant.reward} / {variant.advantage} / "
        f"{variant.credit})"
    )
    if unscorable:
        message += f", {unscorable} unscorable runs left out"
    if status != ExportStatus.READY:
        message += "; the export failed its linter"
    if version.rebuilt_from and version.rebuilt_from.checksum:
        same = version.rebuilt_from.checksum == version.checksum
        message += (
            f"; checksum {'matches' if same else 'differs from'} v{version.rebuilt_from.number}"
        )
    return message + "."


def rollout_version_checksum(version: DatasetVersion) -> tuple[str, list[int], int]:
    """Re-render every stored row: (checksum, runs whose line changed, rows)."""
    checksum = hashlib.sha256()
    changed, count = [], 0
    variant = Variant.parse(**version.filters["variant"])
    rows = (
        RolloutRow.objects.filter(version=version)
        .select_related("group", "run")
        .order_by("split", "position")
    )
    for row in rows.iterator(chunk_size=ROW_BATCH):
        line = render_rollout(row.group, row.member, row.run, variant) or ""
        content = hashlib.sha256(line.encode()).hexdigest()
        if content != row.content_sha256:
            changed.append(row.run_id)
        checksum.update(_checksum_line(row.split, row.run_id, row.group_id, row.member, content))
        count += 1
    return checksum.hexdigest(), changed, count


# --------------------------------------------------------------------------- the card


def rollout_card(info: dict) -> str:
    """The Markdown card of a scored-rollout version (``info`` as ``exports.card_info``)."""
    from apps.datasets.card import _fmt_size, _table, md

    dataset, version, counts = info["dataset"], info["version"], info["counts"]
    filters = version["filters"]
    variant = filters.get("variant") or {}
    group = (info.get("groups") or [{}])[0]
    lines = [f"# {md(dataset['name'])} — version {version['number']} (scored rollouts)", ""]
    if dataset.get("description"):
        lines += [md(dataset["description"]), ""]
    lines += [
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
        *_table(
            ["model", "rows"],
            [[md(m["model"]) or "—", m["rows"]] for m in info["models"]],
        ),
        "",
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
    return "\n".join(lines)
