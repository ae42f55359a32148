"""Datasets and the creation of their versions (the build itself runs in a job: build.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, ProtectedError
from django.template.defaultfilters import pluralize

from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.core.services import job_create
from apps.curation.selectors import demonstrations_for_dataset
from apps.datasets.models import (
    MAX_TOKENS_LIMIT,
    MAX_VALIDATION_FRACTION,
    Dataset,
    DatasetKind,
    DatasetVersion,
    LongTrajectories,
    VersionStatus,
)
from apps.environments.models import Environment

BUILD_JOB_KIND = "dataset_build"
VERIFY_JOB_KIND = "dataset_verify"


@dataclass(frozen=True)
class VersionFilter:
    """Which approved demonstrations a version draws from. Eval-task demonstrations never
    enter (``splits`` is always ``["train"]``; matching eval ones are only counted)."""

    capabilities: tuple[str, ...] = ()
    environments: tuple[int, ...] = ()
    min_score: float | None = None
    min_agreement: float | None = None
    splits: tuple[str, ...] = field(default=("train",))

    @property
    def is_default(self) -> bool:
        return not (
            self.capabilities
            or self.environments
            or self.min_score is not None
            or self.min_agreement is not None
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "approved_only": True,
            "capabilities": sorted(self.capabilities),
            "environments": sorted(self.environments),
            "min_score": self.min_score,
            "min_agreement": self.min_agreement,
            "splits": list(self.splits),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VersionFilter:
        return cls(
            capabilities=tuple(data.get("capabilities") or ()),
            environments=tuple(int(pk) for pk in data.get("environments") or ()),
            min_score=data.get("min_score"),
            min_agreement=data.get("min_agreement"),
        )


# What each kind of dataset holds (for the error that refuses a version of another kind).
KIND_HOLDS = {
    DatasetKind.SFT: "approved demonstrations",
    DatasetKind.RL_PROMPTS: "RL prompts (environment tasks and seeds)",
    DatasetKind.ROLLOUTS: "scored rollouts (the graded runs of student rollout groups)",
}


def dataset_kind_check(dataset: Dataset, kind: str) -> None:
    """Refuse to build a version of ``kind`` in a dataset of another kind: every version of
    a dataset holds what its dataset holds (``Dataset.kind``), so kinds are never mixed."""
    if dataset.kind == kind:
        return
    holds, wanted = KIND_HOLDS[DatasetKind(dataset.kind)], KIND_HOLDS[DatasetKind(kind)]
    raise ApplicationError(
        f"“{dataset.name}” is a dataset of {holds} (kind {dataset.kind}): a version of "
        f"{wanted} goes in a dataset of kind {kind}. Create one, or build this dataset's "
        "own kind of version.",
        {"kind": dataset.kind},
    )


def dataset_create(
    *,
    project,
    name: str,
    description: str = "",
    tokenizer: str = "",
    user=None,
    kind: str = DatasetKind.SFT,
) -> Dataset:
    name = name.strip()
    if kind not in DatasetKind.values:
        message = f"kind is one of {', '.join(DatasetKind.values)}."
        raise ApplicationError(message, {"fields": {"kind": [message]}})
    _check_tokenizer(tokenizer)
    if not name:
        raise ApplicationError("Give the dataset a name.", {"fields": {"name": ["Required."]}})
    if Dataset.objects.filter(project=project, name=name).exists():
        raise ApplicationError(
            f"This project already has a dataset named “{name}”.",
            {"fields": {"name": ["Already taken in this project."]}},
        )
    dataset = Dataset(
        project=project,
        name=name,
        kind=kind,
        description=description.strip(),
        tokenizer=tokenizer,
        created_by=user,
    )
    dataset.full_clean()
    try:
        with transaction.atomic():
            dataset.save()
    except IntegrityError:
        raise ApplicationError(
            f"This project already has a dataset named “{name}”.",
            {"fields": {"name": ["Already taken in this project."]}},
        ) from None
    return dataset


def dataset_update(
    *, dataset: Dataset, name: str, description: str, tokenizer: str | None = None
) -> Dataset:
    name = name.strip()
    if tokenizer is not None:
        _check_tokenizer(tokenizer)
        dataset.tokenizer = tokenizer
    if not name:
        raise ApplicationError("Give the dataset a name.", {"fields": {"name": ["Required."]}})
    if Dataset.objects.filter(project=dataset.project, name=name).exclude(pk=dataset.pk).exists():
        raise ApplicationError(
            f"This project already has a dataset named “{name}”.",
            {"fields": {"name": ["Already taken in this project."]}},
        )
    dataset.name = name
    dataset.description = description.strip()
    dataset.full_clean()
    dataset.save(update_fields=["name", "description", "tokenizer", "updated_at"])
    return dataset


def dataset_delete(*, dataset: Dataset) -> None:
    """Delete a dataset, its versions and their rows; the cached export files go once the
    deletion has committed (a failed deletion keeps every file)."""
    from apps.datasets.models import DatasetExport
    from apps.datasets.services.exports import export_absolute_path

    if DatasetVersion.objects.filter(dataset=dataset, status=VersionStatus.BUILDING).exists():
        raise ApplicationError("A version of this dataset is still building; wait for it first.")
    paths = [
        export_absolute_path(export)
        for export in DatasetExport.objects.filter(version__dataset=dataset).exclude(path="")
    ]
    try:
        with transaction.atomic():
            dataset.delete()
            transaction.on_commit(lambda: [path.unlink(missing_ok=True) for path in paths])
    except ProtectedError:
        # Training jobs keep the versions they were trained on (their lineage).
        raise ApplicationError(
            "A training job was trained on a version of this dataset; the dataset is kept "
            "for that job's lineage."
        ) from None


def _check_not_empty(project, filters: VersionFilter) -> None:
    """Refuse, before any version exists, a build that would have no row: the filter must
    match at least one approved demonstration of a train task (eval-task ones never enter)."""
    matching = demonstrations_for_dataset(
        project=project,
        capabilities=list(filters.capabilities) or None,
        environment_ids=list(filters.environments) or None,
        min_score=filters.min_score,
        min_agreement=filters.min_agreement,
    )
    train = matching.filter(split="train").exclude(task__split="eval")
    if train.exists():
        return
    total = matching.count()
    if total:
        message = (
            f"Nothing to build: the filter matches {total} approved demonstration"
            f"{pluralize(total)}, all of eval tasks, which never enter a dataset. Approve "
            "train-task demonstrations in the review queue, or widen the filter."
        )
    elif filters.is_default:
        message = (
            "Nothing to build yet: this project has no approved train-task demonstration. "
            "Approve some in the review queue first."
        )
    else:
        message = (
            "Nothing to build: no approved train-task demonstration matches this filter. "
            "Widen the filter, or approve more in the review queue."
        )
    raise ApplicationError(message)


def tokenizer_choices() -> list[tuple[str, str]]:
    """The tokenizers a dataset may pick (settings.DATASET_TOKENIZERS), as form choices."""
    default = settings.DATASET_TOKENIZER_DEFAULT
    first = f"Server default ({default})" if default else "None: estimate (characters / 4)"
    return [("", first), *((name, name) for name in sorted(settings.DATASET_TOKENIZERS))]


def _check_tokenizer(name: str) -> None:
    if name and name not in settings.DATASET_TOKENIZERS:
        message = f"No tokenizer named “{name}” is configured on this server."
        raise ApplicationError(message, {"fields": {"tokenizer": [message]}})


def version_tokenizer(dataset: Dataset) -> str:
    """The tokenizer a new version of ``dataset`` counts with ("" for the estimate), checked
    to load now rather than fail the build later."""
    from apps.datasets.formats.tokens import TokenizerUnavailable, token_counter

    name = dataset.tokenizer or settings.DATASET_TOKENIZER_DEFAULT or ""
    if not name:
        return ""
    _check_tokenizer(name)
    try:
        token_counter(name, settings.DATASET_TOKENIZERS[name])
    except TokenizerUnavailable as exc:
        raise ApplicationError(str(exc), {"fields": {"tokenizer": [str(exc)]}}) from None
    return name


def _check_filter(project, filters: VersionFilter) -> None:
    problems: dict[str, list[str]] = {}
    if filters.capabilities:
        known = set(
            Capability.objects.filter(project=project, slug__in=filters.capabilities).values_list(
                "slug", flat=True
            )
        )
        unknown = sorted(set(filters.capabilities) - known)
        if unknown:
            problems["capabilities"] = [f"Not in this project: {', '.join(unknown)}."]
    if filters.environments:
        known_ids = set(
            Environment.objects.filter(project=project, pk__in=filters.environments).values_list(
                "pk", flat=True
            )
        )
        unknown_ids = sorted(set(filters.environments) - known_ids)
        if unknown_ids:
            problems["environments"] = [
                f"Not in this project: {', '.join(str(pk) for pk in unknown_ids)}."
            ]
    for name in ("min_score", "min_agreement"):
        value = getattr(filters, name)
        if value is not None and not 0 <= value <= 1:
            problems[name] = ["Between 0 and 1."]
    if tuple(filters.splits) != ("train",):
        problems["splits"] = ["Only train-task demonstrations enter a dataset version."]
    if problems:
        first = next(iter(problems.values()))[0]
        raise ApplicationError(f"The filter is not valid: {first}", {"fields": problems})


@transaction.atomic
def dataset_version_create(
    *,
    dataset: Dataset,
    user,
    filters: VersionFilter,
    seed: int = 0,
    validation_fraction: float = 0.1,
    rebuilt_from: DatasetVersion | None = None,
    enqueue: bool = True,
    tokenizer: str | None = None,
    max_tokens: int | None = None,
    long_trajectories: str = LongTrajectories.SPLIT,
) -> DatasetVersion:
    """Number the next version, create its build job and enqueue it once this commits
    (``enqueue=False``: the caller runs ``dataset_version_build_job`` itself). A filter that
    matches no approved train-task demonstration is refused here, so no failed version is
    left behind. Only SFT datasets take these: RL prompt datasets take
    ``prompts.prompt_version_create``, scored-rollout ones ``rollouts.rollout_version_create``."""

    dataset_kind_check(dataset, DatasetKind.SFT)
    _check_filter(dataset.project, filters)
    if not 0 <= validation_fraction <= MAX_VALIDATION_FRACTION:
        raise ApplicationError(
            f"The validation fraction is between 0 and {MAX_VALIDATION_FRACTION}.",
            {"fields": {"validation_fraction": [f"Between 0 and {MAX_VALIDATION_FRACTION}."]}},
        )
    if max_tokens is not None and not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        message = f"The maximum length is between 1 and {MAX_TOKENS_LIMIT:,} tokens."
        raise ApplicationError(message, {"fields": {"max_tokens": [message]}})
    if long_trajectories not in LongTrajectories.values:
        message = (
            f"Choose what happens to longer trajectories: {', '.join(LongTrajectories.values)}."
        )
        raise ApplicationError(message, {"fields": {"long_trajectories": [message]}})
    _check_not_empty(dataset.project, filters)
    tokenizer = version_tokenizer(dataset) if tokenizer is None else tokenizer
    return version_numbered(
        dataset=dataset,
        user=user,
        enqueue=enqueue,
        filters=filters.to_dict(),
        seed=seed,
        validation_fraction=validation_fraction,
        rebuilt_from=rebuilt_from,
        tokenizer=tokenizer,
        max_tokens=max_tokens,
        long_trajectories=long_trajectories,
    )


def version_numbered(
    *, dataset: Dataset, user, enqueue: bool = True, label: str = "", **fields
) -> DatasetVersion:
    """The dataset's next version with its build job, whatever its dataset's kind: numbered
    under a lock on the dataset row (two versions created at once get different numbers), the
    job sent once this commits (``enqueue=False``: the caller runs
    ``dataset_version_build_job``). ``fields`` are the version's own (filters, seed…); the
    caller has checked the dataset's kind. Call inside a transaction."""
    from apps.datasets.tasks import build_dataset_version_task

    Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
    number = (dataset.versions.aggregate(top=Max("number"))["top"] or 0) + 1
    job = job_create(
        project=dataset.project,
        kind=BUILD_JOB_KIND,
        title=f"Build {dataset.name} v{number}{label}",
        started_by=user,
        params={"dataset": dataset.pk, "number": number},
        task=build_dataset_version_task if enqueue else None,
    )
    version = DatasetVersion(dataset=dataset, number=number, job=job, created_by=user, **fields)
    version.full_clean()
    version.save()
    return version


def dataset_version_rebuild(*, version: DatasetVersion, user) -> DatasetVersion:
    """A new version from the same filter, seed and fraction. Over the same approved
    demonstrations it has the same rows and checksum; the page compares the two. A
    scored-rollout version is rebuilt from the same batches and variant, an RL prompt version
    from the same tasks and seeds."""
    if version.dataset.kind == DatasetKind.ROLLOUTS:
        from apps.datasets.services.rollouts import rollout_version_rebuild

        return rollout_version_rebuild(version=version, user=user)
    if version.dataset.kind == DatasetKind.RL_PROMPTS:
        from apps.datasets.services.prompts import PromptFilter, prompt_version_create

        return prompt_version_create(
            dataset=version.dataset,
            user=user,
            filters=PromptFilter.from_dict(version.filters),
            rebuilt_from=version,
        )
    return dataset_version_create(
        dataset=version.dataset,
        user=user,
        filters=VersionFilter.from_dict(version.filters),
        seed=version.seed,
        validation_fraction=version.validation_fraction,
        rebuilt_from=version,
        tokenizer=version.tokenizer,
        max_tokens=version.max_tokens,
        long_trajectories=version.long_trajectories,
    )


def dataset_version_verify_start(*, version: DatasetVersion, user):
    """Start a job that recomputes the checksum from the stored rows (build.py)."""
    from apps.datasets.tasks import verify_dataset_version_task

    if version.status != VersionStatus.READY:
        raise ApplicationError("Only a ready version can be verified.")
    job = job_create(
        project=version.dataset.project,
        kind=VERIFY_JOB_KIND,
        title=f"Verify {version.dataset.name} v{version.number}",
        started_by=user,
        params={"version": version.pk},
        total=version.rows_total,
        task=verify_dataset_version_task,
    )
    DatasetVersion.objects.filter(pk=version.pk).update(verify_job=job)
    version.verify_job = job
    return job
