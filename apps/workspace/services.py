"""Starting a project: the account-level row and what every new project is given."""

from django.db import transaction

from apps.accounts.models import Project
from apps.accounts.services import project_create
from apps.capabilities.services import capability_catalogue_seed


@transaction.atomic
def project_start(*, name: str, creator, description: str = "", slug: str = "") -> Project:
    """A new project (its creator as admin) with the standard capability catalogue."""
    project = project_create(name=name, creator=creator, description=description, slug=slug)
    capability_catalogue_seed(project=project, user=creator)
    return project
