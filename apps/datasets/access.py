"""One access helper per entity: other projects' datasets are 404, too-low roles 403."""

from django.http import Http404

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.safeinput import is_id
from apps.datasets.models import Dataset, DatasetVersion


def dataset_get_for_user(user, pk, min_role: str = Role.VIEWER) -> Dataset:
    dataset = (
        Dataset.objects.select_related("project", "created_by").filter(pk=pk).first()
        if is_id(pk)
        else None
    )
    if dataset is None:
        raise Http404("No such dataset.")
    check_project_role(user, dataset.project, min_role, missing="No such dataset.")
    return dataset


def version_get_for_user(user, dataset_pk, number, min_role: str = Role.VIEWER) -> DatasetVersion:
    """A version by its dataset and number (as the URLs name it)."""
    version = (
        DatasetVersion.objects.select_related(
            "dataset__project", "job", "verify_job", "created_by", "rebuilt_from"
        )
        .filter(dataset_id=dataset_pk, number=number)
        .first()
        if is_id(dataset_pk) and is_id(number)
        else None
    )
    if version is None:
        raise Http404("No such dataset version.")
    check_project_role(user, version.dataset.project, min_role, missing="No such dataset version.")
    return version
