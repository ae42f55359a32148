"""Building and verifying a dataset version: the work of its jobs.

Build (one job, at-least-once safe: a redelivered message finds the version ready and does
nothing; a build taken over after a crash starts again from a clean slate):

1. read the approved demonstrations the filter matches, oldest first, in chunks;
2. keep eval-task ones out (the demonstration's split *or* its task's current split is
   ``eval``) and only count them;
3. drop exact duplicates (same canonical transcript, see ``transcript_sha256``), then
   near-duplicates (same once retries after injected faults are collapsed and ids and dates
   masked, see ``formats.similarity``), keeping the oldest demonstration and recording what
   was removed and why;
4. group the rows (template family, joined by shared masked prompts and replies), split by
   group stratified by capability with the seed (``splitting.py``), order each split with
   the seed, store the rows;
5. figures: counts, token statistics (the version's tokenizer, or the estimate), capability
   mix, groups, environment and model lineage, and the checksum over the rows;
6. write and lint every export (one pass per split), then the card; the version is ready.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.core.services import JobContext, job_execute
from apps.curation.selectors import demonstrations_for_dataset
from apps.datasets.formats import (
    canonical_json,
    fingerprint,
    normalize_messages,
    normalize_tools,
    transcript_sha256,
)
from apps.datasets.formats.similarity import (
    leak_keys,
    masked_signature,
    near_duplicate_reason,
    near_signature,
    retry_signature,
)
from apps.datasets.formats.tokens import TokenCounter, TokenizerUnavailable, token_counter
from apps.datasets.models import (
    DatasetKind,
    DatasetRow,
    DatasetVersion,
    ExportStatus,
    PromptRow,
    RolloutRow,
    VersionStatus,
)
from apps.datasets.services.datasets import VersionFilter
from apps.datasets.services.exports import (
    CHUNK_SIZE,
    card_write,
    export_absolute_path,
    exports_remove,
    exports_write,
)
from apps.datasets.services.prompts import prompt_version_build, prompt_version_verify
from apps.datasets.services.rollouts import rollout_version_build, rollout_version_checksum
from apps.datasets.splitting import (
    SPLITS,
    Checksum,
    choose_validation,
    group_rows,
    row_order_key,
    token_stats,
)

ROW_BATCH = 1000
MAX_REMOVALS_KEPT = 1000


class _Fixed:
    """A checksum already computed (a scored-rollout version's, see services/rollouts.py)."""

    def __init__(self, digest: str):
        self.digest = digest

    def hexdigest(self) -> str:
        return self.digest


def _base_group(env: dict) -> str:
    return f"family:{env['family']}" if env["family"] else env["key"]


def version_token_counter(version: DatasetVersion) -> TokenCounter:
    """The version's token counter: its tokenizer, loaded from settings.DATASET_TOKENIZERS,
    or the estimate."""
    if not version.tokenizer:
        return token_counter()
    path = settings.DATASET_TOKENIZERS.get(version.tokenizer)
    if path is None:
        raise ApplicationError(
            f"The tokenizer “{version.tokenizer}” is no longer configured on this server "
            "(DATASET_TOKENIZERS)."
        )
    try:
        return token_counter(version.tokenizer, path)
    except TokenizerUnavailable as exc:
        raise ApplicationError(str(exc)) from None


def _matching(version: DatasetVersion):
    filters = VersionFilter.from_dict(version.filters)
    return demonstrations_for_dataset(
        project=version.dataset.project,
        capabilities=list(filters.capabilities) or None,
        environment_ids=list(filters.environments) or None,
        min_score=filters.min_score,
        splits=None,  # eval ones are read to be counted, then kept out
        min_agreement=filters.min_agreement,
    )


@dataclass
class _Read:
    """What one pass over the matching demonstrations kept, and what it left out."""

    total: int
    # (demonstration, version, environment key, tokens, content sha256, capabilities)
    candidates: list[tuple] = field(default_factory=list)
    leak_rows: list[tuple] = field(default_factory=list)  # (demonstration, base group, keys)
    environments: dict[str, dict] = field(default_factory=dict)
    removals: list[dict] = field(default_factory=list)
    excluded_eval: int = 0
    removed_duplicates: int = 0
    removed_near: int = 0


def _read(version: DatasetVersion, context: JobContext, counter: TokenCounter) -> _Read:
    """Steps 1-3: read the matching demonstrations, keep eval-task ones out, drop exact and
    near duplicates (recording why), hash and count each kept row."""
    matching = _matching(version)
    total = matching.count()
    context.progress(0, max(total, 1), f"Reading {total} approved demonstrations…")
    read = _Read(total=total)
    candidates, leak_rows, environments = read.candidates, read.leak_rows, read.environments
    seen: dict[bytes, int] = {}  # exact digest -> kept demonstration
    near_seen: dict[bytes, tuple[int, tuple[str, str]]] = {}  # near digest -> kept, why-keys
    removals = read.removals
    rows = matching.values_list(
        "pk",
        "current_version_id",
        "current_version__transcript",
        "current_version__tools",
        "current_version__environment_revision",
        "current_version__spec_hash",
        "split",
        "task__split",
        "environment_id",
        "environment_name",
        "environment__metadata__family",
        "capability_slugs",
        "model_name",
        "policy",
    ).iterator(chunk_size=CHUNK_SIZE)
    for done, row in enumerate(rows, start=1):
        (pk, version_id, transcript, tools, revision, spec_hash, split, task_split, env_id,
         env_name, family, capabilities, model_name, policy) = row  # fmt: skip
        if done % CHUNK_SIZE == 0:
            context.progress(done, max(total, 1))
        if split == "eval" or task_split == "eval":
            read.excluded_eval += 1
            continue
        messages, tool_list = normalize_messages(transcript), normalize_tools(tools)
        digest = bytes.fromhex(transcript_sha256(messages))
        if digest in seen:
            read.removed_duplicates += 1
            if len(removals) < MAX_REMOVALS_KEPT:
                removals.append(
                    {
                        "demonstration": pk,
                        "kept": seen[digest],
                        "kind": "exact",
                        "reason": "the same messages (tool-call ids renumbered)",
                    }
                )
            continue
        seen[digest] = pk
        near = bytes.fromhex(near_signature(messages))
        why = (retry_signature(messages), masked_signature(messages))
        if near in near_seen:
            kept, kept_why = near_seen[near]
            read.removed_near += 1
            if len(removals) < MAX_REMOVALS_KEPT:
                removals.append(
                    {
                        "demonstration": pk,
                        "kept": kept,
                        "kind": "near",
                        "reason": near_duplicate_reason(kept_why, why),
                    }
                )
            continue
        near_seen[near] = (pk, why)
        text = canonical_json({"messages": messages, "tools": tool_list})
        content = hashlib.sha256(text.encode()).hexdigest()
        tokens = counter.count(text)
        key = f"env:{env_id}" if env_id is not None else f"name:{env_name}"
        env = environments.setdefault(
            key,
            {
                "key": key,
                "id": env_id,
                "name": env_name,
                "family": family if isinstance(family, str) and family else "",
                "rows": 0,
                "revisions": set(),
                "spec_hashes": set(),
                "models": Counter(),
            },
        )
        env["rows"] += 1
        if revision is not None:
            env["revisions"].add(revision)
        if spec_hash:
            env["spec_hashes"].add(spec_hash)
        env["models"][(model_name, policy)] += 1
        caps = tuple(sorted(set(capabilities or [])))
        candidates.append((pk, version_id, key, tokens, content, caps))
        base = f"family:{env['family']}" if env["family"] else key
        leak_rows.append((pk, base, leak_keys(messages)))
    return read


def dataset_version_build(context: JobContext) -> str:
    version = DatasetVersion.objects.select_related("dataset__project", "rebuilt_from").get(
        job=context.job
    )
    if version.status == VersionStatus.READY:
        return "Already built."
    if version.dataset.kind == DatasetKind.ROLLOUTS:
        return rollout_version_build(context, version, version_token_counter(version))
    if version.dataset.kind == DatasetKind.RL_PROMPTS:
        return prompt_version_build(context, version)
    # A build taken over after a crash starts again: nothing half-written survives.
    DatasetRow.objects.filter(version=version).delete()
    exports_remove(version)

    counter = version_token_counter(version)
    read = _read(version, context, counter)
    if not read.candidates:
        raise ApplicationError(
            f"Nothing to build: the filter matches {read.total} approved demonstration"
            f"{'' if read.total == 1 else 's'}"
            + (
                f", {read.excluded_eval} of eval tasks (always kept out)"
                f" and {read.removed_duplicates + read.removed_near} duplicates"
                if read.total
                else ""
            )
            + ". Approve train-task demonstrations in the review queue, or widen the filter."
        )

    total, candidates, environments = read.total, read.candidates, read.environments
    excluded_eval, removed_duplicates, removed_near = (
        read.excluded_eval,
        read.removed_duplicates,
        read.removed_near,
    )
    removals = read.removals

    group_of = group_rows(read.leak_rows)
    read.leak_rows.clear()
    group_sizes: dict[str, list] = {}
    for pk, _version_id, key, _tokens, _content, caps in candidates:
        entry = group_sizes.setdefault(group_of[pk], [0, Counter(), set()])
        entry[0] += 1
        entry[1].update(caps)
        entry[2].add(key)
    validation = choose_validation(
        {group: (size, caps) for group, (size, caps, _) in group_sizes.items()},
        seed=version.seed,
        fraction=version.validation_fraction,
    )
    by_split: dict[str, list] = {"train": [], "validation": []}
    for candidate in candidates:
        by_split["validation" if group_of[candidate[0]] in validation else "train"].append(
            candidate
        )
    for split in SPLITS:
        by_split[split].sort(key=lambda c: row_order_key(version.seed, c[0]))
    env_group = {key: group_of[pk] for pk, _v, key, *_ in candidates}

    checksum = Checksum()
    tokens_by_split: dict[str, list[int]] = {split: [] for split in SPLITS}
    mix: dict[str, Counter] = defaultdict(Counter)
    batch: list[DatasetRow] = []
    for split in SPLITS:
        for position, (pk, version_id, key, tokens, content, caps) in enumerate(by_split[split]):
            checksum.add(split=split, demonstration=pk, version=version_id, content_sha256=content)
            tokens_by_split[split].append(tokens)
            for slug in caps or ("",):
                mix[slug][split] += 1
            batch.append(
                DatasetRow(
                    version=version,
                    split=split,
                    position=position,
                    demonstration_id=pk,
                    demonstration_version_id=version_id,
                    environment_key=key,
                    group_key=group_of[pk][:240],
                    tokens=tokens,
                    content_sha256=content,
                )
            )
            if len(batch) >= ROW_BATCH:
                DatasetRow.objects.bulk_create(batch)
                batch = []
    if batch:
        DatasetRow.objects.bulk_create(batch)

    models = Counter()
    for env in environments.values():
        models.update(env["models"])
    version.demonstrations = total
    version.train_rows = len(by_split["train"])
    version.validation_rows = len(by_split["validation"])
    version.excluded_eval = excluded_eval
    version.removed_duplicates = removed_duplicates
    version.removed_near_duplicates = removed_near
    version.removals = removals
    version.tokenizer = counter.name if not counter.is_estimate else ""
    version.token_counting = counter.describe()
    version.token_stats = {
        "all": token_stats(tokens_by_split["train"] + tokens_by_split["validation"]),
        **{split: token_stats(tokens_by_split[split]) for split in SPLITS},
    }
    version.capability_mix = {
        slug: {split: counts.get(split, 0) for split in SPLITS}
        for slug, counts in sorted(mix.items())
    }
    version.groups = sorted(
        (
            {
                "key": group,
                "split": "validation" if group in validation else "train",
                "rows": size,
                "environments": sorted(environments[key]["name"] for key in keys),
                "joined_by_similarity": len({_base_group(environments[key]) for key in keys}) > 1,
            }
            for group, (size, _caps, keys) in group_sizes.items()
        ),
        key=lambda g: (g["split"] != "train", g["key"]),
    )
    version.environments = sorted(
        (
            {
                "key": env["key"],
                "id": env["id"],
                "name": env["name"],
                "group": env_group[key],
                "split": "validation" if env_group[key] in validation else "train",
                "rows": env["rows"],
                "revisions": sorted(env["revisions"]),
                "spec_hashes": sorted(env["spec_hashes"]),
            }
            for key, env in environments.items()
        ),
        key=lambda env: (env["split"] != "train", env["name"], env["key"]),
    )
    version.models_used = [
        {"model": model, "policy": policy, "rows": count}
        for (model, policy), count in sorted(models.items(), key=lambda item: (-item[1], item[0]))
    ]
    version.checksum = checksum.hexdigest()
    version.save(
        update_fields=[
            "demonstrations",
            "train_rows",
            "validation_rows",
            "excluded_eval",
            "removed_duplicates",
            "removed_near_duplicates",
            "removals",
            "groups",
            "tokenizer",
            "token_counting",
            "token_stats",
            "capability_mix",
            "environments",
            "models_used",
            "checksum",
        ]
    )
    del candidates, by_split

    # Exports: progress continues over the rows of each split.
    written = 0
    grand_total = total + version.rows_total
    context.progress(total, grand_total, "Writing and linting the exports…")
    for split in SPLITS:
        exports_write(
            version=version,
            split=split,
            on_row=lambda n, base=written: context.progress(min(total + base + n, grand_total)),
        )
        written += version.train_rows if split == "train" else version.validation_rows
    card_write(version=version)
    DatasetVersion.objects.filter(pk=version.pk).update(
        status=VersionStatus.READY, built_at=timezone.now()
    )
    context.progress(grand_total, grand_total)
    offered = version.exports.filter(status=ExportStatus.READY).exclude(format="card").count()
    refused = version.exports.filter(status=ExportStatus.INVALID).count()
    message = (
        f"v{version.number}: {version.train_rows} train and {version.validation_rows} "
        f"validation rows ({excluded_eval} eval-task kept out, {removed_duplicates} duplicates "
        f"and {removed_near} near-duplicates removed); {offered} exports offered"
    )
    if refused:
        message += f", {refused} failed their linter"
    if version.rebuilt_from and version.rebuilt_from.checksum:
        same = version.rebuilt_from.checksum == version.checksum
        message += (
            f"; checksum {'matches' if same else 'differs from'} v{version.rebuilt_from.number}"
        )
    return message + "."


def dataset_version_build_job(job_id: int) -> None:
    """Run the build job; a build that failed or was cancelled leaves a failed version with
    no rows or files behind."""
    job_execute(job_id=job_id, work=dataset_version_build)
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.status not in (JobStatus.FAILED, JobStatus.CANCELLED):
        return
    version = DatasetVersion.objects.filter(job_id=job_id, status=VersionStatus.BUILDING).first()
    if version is None:
        return
    with transaction.atomic():
        DatasetRow.objects.filter(version=version).delete()
        RolloutRow.objects.filter(version=version).delete()
        PromptRow.objects.filter(version=version).delete()
        exports_remove(version)
        DatasetVersion.objects.filter(pk=version.pk).update(status=VersionStatus.FAILED)


def dataset_version_verify(context: JobContext) -> str:
    """Recompute every row's content hash and the checksum from the stored ids, and check
    the cached files against their recorded sha256."""
    version = DatasetVersion.objects.select_related("dataset").get(pk=context.job.params["version"])
    if version.status != VersionStatus.READY:
        raise ApplicationError("Only a ready version can be verified.")
    if version.dataset.kind == DatasetKind.RL_PROMPTS:
        return _verified(version, prompt_version_verify(context, version), version.rows_total)
    checksum = Checksum()
    changed: list[int] = []
    counts = {split: 0 for split in SPLITS}
    total = version.rows_total
    done = 0
    rollouts = version.dataset.kind == DatasetKind.ROLLOUTS
    if rollouts:
        # rows are runs of rollout groups, re-rendered from the runs and groups they name
        digest, changed, done = rollout_version_checksum(version)
        checksum = _Fixed(digest)
        counts["train"] = done
    for split in SPLITS if not rollouts else ():
        rows = (
            DatasetRow.objects.filter(version=version, split=split)
            .order_by("position")
            .values_list(
                "demonstration_id",
                "demonstration_version_id",
                "content_sha256",
                "demonstration_version__transcript",
                "demonstration_version__tools",
            )
            .iterator(chunk_size=CHUNK_SIZE)
        )
        for pk, version_id, recorded, transcript, tools in rows:
            content, _ = fingerprint(normalize_messages(transcript), normalize_tools(tools))
            if content != recorded:
                changed.append(pk)
            checksum.add(split=split, demonstration=pk, version=version_id, content_sha256=content)
            counts[split] += 1
            done += 1
            if done % CHUNK_SIZE == 0:
                context.progress(done, max(total, done))
    problems = []
    if counts["train"] != version.train_rows or counts["validation"] != version.validation_rows:
        problems.append(
            f"row counts {counts['train']}/{counts['validation']} differ from the recorded "
            f"{version.train_rows}/{version.validation_rows}"
        )
    if changed:
        shown = ", ".join(str(pk) for pk in changed[:10])
        source = "runs" if rollouts else "demonstrations"
        problems.append(f"{len(changed)} rows changed content ({source} {shown})")
    if checksum.hexdigest() != version.checksum:
        problems.append(f"the checksum is now {checksum.hexdigest()}, not {version.checksum}")
    return _verified(version, problems, done)


def _verified(version: DatasetVersion, problems: list[str], done: int) -> str:
    """Check the cached files against their sha256, record the verdict, and fail the job
    when anything (``problems`` included) is wrong."""
    files_ok = files_missing = 0
    for export in version.exports.filter(status=ExportStatus.READY):
        path: Path = export_absolute_path(export)
        if not path.exists():
            files_missing += 1
            continue
        digest = hashlib.sha256()
        with path.open("rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() == export.sha256:
            files_ok += 1
        else:
            problems.append(f"the cached {export.format} {export.split or ''} file was altered")
            path.unlink(missing_ok=True)  # re-rendered from the rows on the next download
    ok = not problems
    files = f"{files_ok} cached files match their sha256"
    if files_missing:
        files += f", {files_missing} not cached (re-rendered on the next download)"
    message = (
        f"Verified: {done} rows hash to the recorded checksum; {files}."
        if ok
        else "Verification failed: " + "; ".join(problems) + "."
    )
    DatasetVersion.objects.filter(pk=version.pk).update(
        verified_at=timezone.now(), verify_ok=ok, verify_message=message
    )
    if not ok:
        raise ApplicationError(message)
    return message


def dataset_version_verify_job(job_id: int) -> None:
    job_execute(job_id=job_id, work=dataset_version_verify)
