import copy

import pytest

from apps.capabilities.services import capability_catalogue_seed
from apps.experiments.forms import EXAMPLE_RECIPE
from tests.llm_server import LoopbackLLMServer, Reply
from tests.runs.test_llm_runs import KEY, KEY_ENV, make_endpoint


@pytest.fixture
def catalogue(project, admin):
    capability_catalogue_seed(project=project, user=admin)
    return project


@pytest.fixture
def recipe():
    """The form's example recipe (a fresh copy each time)."""
    return copy.deepcopy(EXAMPLE_RECIPE)


@pytest.fixture
def small(recipe):
    """One family, two environments of three tasks, two SFT steps."""
    recipe["generator"].update(families=["meeting-coordination"], count=2, tasks_per_environment=3)
    recipe["held_out"] = {"seeds": 1, "family": "support-desk"}
    recipe["sft"]["hyperparameters"] = {"max_steps": 2, "max_length": 4096, "save_steps": 2}
    return recipe


def student_replies(request):
    """A student that calls the first tool it is offered once per turn, then answers."""
    last = request.messages[-1] if request.messages else {}
    tools = (request.body or {}).get("tools") or []
    if last.get("role") == "tool" or not tools:
        return Reply.text("Done.")
    return Reply.tool_call(tools[0]["function"]["name"], {})


@pytest.fixture
def student(catalogue, monkeypatch, settings):
    monkeypatch.setenv(KEY_ENV, KEY)
    settings.LLM_MAX_ATTEMPTS = 1
    with LoopbackLLMServer(api_key=KEY, responder=student_replies) as server:
        yield make_endpoint(catalogue, server, name="student", model="loop-student"), server
