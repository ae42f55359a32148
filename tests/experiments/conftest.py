import copy

import pytest

from apps.capabilities.services import capability_catalogue_seed
from apps.experiments.forms import EXAMPLE_RECIPE


@pytest.fixture
def catalogue(project, admin):
    capability_catalogue_seed(project=project, user=admin)
    return project


@pytest.fixture
def recipe():
    """The form's example recipe (a fresh copy each time)."""
    return copy.deepcopy(EXAMPLE_RECIPE)
