"""Building and verifying a dataset version of any kind: the work of its jobs. What differs
between kinds (their rows, checksum, exports, card, recheck) is the kind's
(``apps.datasets.kinds``); what they share is here.

Build (one job, at-least-once safe: a redelivered message finds the version ready and does
nothing; a build taken over after a crash starts again from a clean slate):

1. the kind reads its sources and stores the rows with their figures and checksum;
2. the figures are saved;
3. the kind writes and lints its exports, then the card is written; the version is ready.

Verify hashes the stored rows again from their sources (the kind's recheck), compares the
counts and the checksum, and checks every cached file against its recorded sha256.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.core.services import JobContext, job_execute

# the module, not its names: the kinds build on services.exports, which loads this package
from apps.datasets import kinds
from apps.datasets.models import (
    DatasetExport,
    DatasetRow,
    DatasetVersion,
    ExportStatus,
    PromptRow,
    RolloutRow,
    VersionStatus,
)
from apps.datasets.services.exports import (
    export_absolute_path,
    exports_remove,
    version_token_counter,
)
from apps.datasets.services.rendering import card_write

ROW_MODELS = (DatasetRow, PromptRow, RolloutRow)


def _clean_slate(version: DatasetVersion) -> None:
    """A build taken over after a crash starts again: nothing half-written survives."""
    for model in ROW_MODELS:
        model.objects.filter(version=version).delete()
    exports_remove(version)


def _exports_phrase(exports: list[DatasetExport]) -> str:
    offered = sum(1 for e in exports if e.status == ExportStatus.READY)
    phrase = f"; {offered} of {len(exports)} exports offered"
    failed = [e for e in exports if e.status == ExportStatus.INVALID]
    if failed:
        phrase += "; not offered: " + ", ".join(
            f"{e.format}{'' if e.split == 'train' else ' ' + e.split} "
            f"({e.lint['errors'][0]['message']})"
            for e in failed
        )
    return phrase


def _rebuild_phrase(version: DatasetVersion) -> str:
    before = version.rebuilt_from
    if not (before and before.checksum):
        return ""
    same = before.checksum == version.checksum
    phrase = f"; checksum {'matches' if same else 'differs from'} v{before.number}"
    if not same and before.split_keys != version.split_keys:
        phrase += f" (its split was keyed by {before.split_keys or 'database ids'})"
    return phrase


def dataset_version_build(context: JobContext) -> str:
    version = DatasetVersion.objects.select_related("dataset__project", "rebuilt_from").get(
        job=context.job
    )
    if version.status == VersionStatus.READY:
        return "Already built."
    kind = kinds.kind_of(version)
    _clean_slate(version)
    built = kind.rows(version, context, version_token_counter(version))
    version.save(update_fields=[*built.fields, "checksum"])
    exports = kind.exports(version, context)
    card_write(version=version)
    DatasetVersion.objects.filter(pk=version.pk).update(
        status=VersionStatus.READY, built_at=timezone.now()
    )
    return built.summary + _exports_phrase(exports) + _rebuild_phrase(version) + "."


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
        _clean_slate(version)
        DatasetVersion.objects.filter(pk=version.pk).update(status=VersionStatus.FAILED)


def dataset_version_verify(context: JobContext) -> str:
    """Hash every row again from its sources, recompute the checksum, and check the cached
    files against their recorded sha256."""
    version = DatasetVersion.objects.select_related("dataset").get(pk=context.job.params["version"])
    if version.status != VersionStatus.READY:
        raise ApplicationError("Only a ready version can be verified.")
    recheck = kinds.kind_of(version).recheck(version, context)
    return _verified(version, recheck.problems(version), recheck.rows)


def _file_altered(export: DatasetExport) -> bool | None:
    """Whether a cached file differs from its recorded sha256 (None: not cached)."""
    path: Path = export_absolute_path(export)
    if not path.exists():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() != export.sha256


def _verified(version: DatasetVersion, problems: list[str], done: int) -> str:
    """Check the cached files against their sha256, record the verdict, and fail the job
    when anything (``problems`` included) is wrong."""
    files_ok = files_missing = 0
    for export in version.exports.filter(status=ExportStatus.READY):
        altered = _file_altered(export)
        if altered is None:
            files_missing += 1
        elif altered:
            problems.append(f"the cached {export.format} {export.split or ''} file was altered")
            export_absolute_path(export).unlink(missing_ok=True)  # re-rendered on download
        else:
            files_ok += 1
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
