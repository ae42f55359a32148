import re

import pytest
from playwright.sync_api import expect

from apps.llm.models import LLMCall
from tests.llm_server import LoopbackLLMServer, Reply
from tests.workers import WorkerProcess, purge_queues

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def llm_server():
    with LoopbackLLMServer() as server:
        yield server


@pytest.fixture
def worker(tmp_path):
    purge_queues()
    process = WorkerProcess(concurrency=1, log_path=tmp_path / "worker.log").start()
    yield process
    process.stop()


def test_add_endpoint_test_connection_and_read_the_call(
    login, live_server, author, project, llm_server, worker
):
    llm_server.script(
        Reply.text("pong <script>window.__pwned = 1</script>", usage=(21, 4), model="loop-9b")
    )
    page = login(author)
    page.get_by_role("link", name="Endpoints").click()
    expect(page.get_by_text("No model endpoints yet.")).to_be_visible()
    page.get_by_role("button", name="Add endpoint").click()

    form = page.get_by_test_id("endpoint-form")
    form.locator('[name="name"]').fill("local loop")
    form.locator('[name="base_url"]').fill(llm_server.base_url)
    form.locator('[name="model"]').fill("loop-9b")
    form.locator('[name="max_concurrency"]').fill("2")
    form.get_by_role("button", name="Add endpoint").click()

    expect(page).to_have_url(re.compile(r"/models/\d+/$"))
    expect(page.get_by_role("heading", name="local loop")).to_be_visible()
    expect(page.get_by_text("No LLM calls yet.")).to_be_visible()

    page.get_by_role("button", name="Send a test request").click()
    # A worker sends the request; the job's status partial polls until it is in.
    result = page.get_by_test_id("endpoint-test").get_by_test_id("job-status")
    expect(result).to_have_attribute("data-status", "succeeded", timeout=90_000)
    expect(result).to_contain_text("It answered “pong <script>window.__pwned = 1</script>”")
    expect(result).to_contain_text("model loop-9b")
    expect(result).to_contain_text("21 tokens in, 4 out")
    # The call log below reloads itself and shows the call, escaped.
    call = page.get_by_test_id("llm-call")
    expect(call).to_have_count(1)
    expect(call).to_contain_text("endpoint.test")
    expect(page.get_by_test_id("llm-totals")).to_contain_text("1 ok")
    call.locator("summary").click()
    expect(call.get_by_test_id("llm-response")).to_have_text(
        "pong <script>window.__pwned = 1</script>"
    )
    assert page.evaluate("window.__pwned") is None
    assert LLMCall.objects.get().status == "ok"
