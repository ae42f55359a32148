"""Fixtures for the synthesis tests: the capability catalogue, jobs, and the LLM loopback
fixtures (server, key, endpoint) shared with tests/llm."""

import pytest

from apps.capabilities.models import Capability
from apps.capabilities.services import capability_catalogue_seed
from apps.synthesis.services import synthesis_start
from tests.llm.conftest import (  # noqa: F401
    TEST_KEY,
    TEST_KEY_ENV,
    api_key,
    endpoint,
    fast_retries,
    llm_server,
)

CAPS = ["clarify-before-acting", "resolve-conflicts"]


@pytest.fixture
def catalogue(project):
    capability_catalogue_seed(project=project)
    return {c.slug: c for c in Capability.objects.filter(project=project)}


@pytest.fixture
def capabilities(catalogue):
    return [catalogue[slug] for slug in CAPS]


@pytest.fixture
def start_template(project, author, capabilities):
    def start(count=2, seed=7, enqueue=False, **kwargs):
        return synthesis_start(
            project=project,
            user=author,
            capabilities=kwargs.pop("capabilities", capabilities),
            count=count,
            generator="template",
            seed=seed,
            tasks_per_environment=kwargs.pop("tasks_per_environment", 2),
            enqueue=enqueue,
            **kwargs,
        )

    return start
