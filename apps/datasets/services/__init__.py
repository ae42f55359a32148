"""Writes for datasets. Import from here: ``from apps.datasets.services import …``."""

from apps.datasets.services.build import (
    dataset_version_build,
    dataset_version_build_job,
    dataset_version_verify,
    dataset_version_verify_job,
)
from apps.datasets.services.datasets import (
    BUILD_JOB_KIND,
    VERIFY_JOB_KIND,
    VersionFilter,
    dataset_create,
    dataset_delete,
    dataset_update,
    dataset_version_create,
    dataset_version_rebuild,
    dataset_version_verify_start,
)
from apps.datasets.services.exports import (
    dataset_info,
    download_filename,
    export_absolute_path,
    exports_write,
    is_bundle,
    split_has_images,
)
from apps.datasets.services.prompts import PromptFilter, prompt_version_create
from apps.datasets.services.rendering import (
    card_current,
    card_markdown,
    card_write,
    export_lines,
    export_regenerate_stream,
)
from apps.datasets.services.rollouts import rollout_version_create, rollout_version_rebuild

__all__ = [
    "BUILD_JOB_KIND",
    "VERIFY_JOB_KIND",
    "PromptFilter",
    "VersionFilter",
    "card_current",
    "card_markdown",
    "card_write",
    "dataset_create",
    "dataset_delete",
    "dataset_info",
    "dataset_update",
    "dataset_version_build",
    "dataset_version_build_job",
    "dataset_version_create",
    "dataset_version_rebuild",
    "dataset_version_verify",
    "dataset_version_verify_job",
    "dataset_version_verify_start",
    "download_filename",
    "export_absolute_path",
    "export_lines",
    "export_regenerate_stream",
    "exports_write",
    "is_bundle",
    "prompt_version_create",
    "rollout_version_create",
    "rollout_version_rebuild",
    "split_has_images",
]
