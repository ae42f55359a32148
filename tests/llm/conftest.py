import pytest

from apps.llm.services import endpoint_create
from tests.llm_server import LoopbackLLMServer

TEST_KEY_ENV = "COWORKENV_TEST_LLM_API_KEY"
TEST_KEY = "sk-loopback-test"


@pytest.fixture
def llm_server():
    """A scripted OpenAI-compatible server on 127.0.0.1 that requires ``TEST_KEY``."""
    with LoopbackLLMServer(api_key=TEST_KEY) as server:
        yield server


@pytest.fixture(autouse=True)
def fast_retries(settings):
    """Backoff in milliseconds, so retry tests take no longer than the headers they honour."""
    settings.LLM_BACKOFF_BASE_S = 0.01
    settings.LLM_BACKOFF_MAX_S = 0.05
    settings.LLM_MAX_ATTEMPTS = 3
    settings.LLM_MAX_TOTAL_WAIT_S = 10
    settings.LLM_RETRY_AFTER_CAP_S = 5
    settings.LLM_SLOT_WAIT_S = 10


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    return TEST_KEY


@pytest.fixture
def endpoint(project, author, llm_server, api_key):
    return endpoint_create(
        project=project,
        created_by=author,
        name="loopback",
        base_url=llm_server.base_url,
        model="loop-large",
        api_key_env=TEST_KEY_ENV,
        temperature=0.2,
        max_tokens=256,
        request_timeout_s=0.5,
        max_concurrency=2,
        price_input_per_million="2.50",
        price_output_per_million="10",
    )


@pytest.fixture
def job(project, author):
    from apps.core.services import job_create

    return job_create(
        project=project, kind="synthesis", title="Synthesize things", started_by=author
    )
