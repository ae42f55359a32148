"""A vision-language teacher on a multimodal environment: the real ``openai`` client against
the loopback server (tests/llm_server.py). The view tool's image reaches the model as an
``image_url`` part with a ``data:`` URL of the stored file; the transcript keeps only the
attachment reference and the call log only the image's type and size."""

import base64
import json

import pytest

from apps.environments.attachments import attachment_name, attachment_storage
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import_with_files
from apps.llm.models import LLMCall
from apps.runs.models import Executor, Run, RunStatus
from apps.runs.services import TaskSelection, run_batch_create, run_batch_execute_inline
from apps.synthesis.generators.receipts import generate_receipts_environment
from coworkenv_engine.attachments import describe
from tests.llm_server import LoopbackLLMServer, Reply
from tests.runs.test_llm_runs import KEY, KEY_ENV, make_endpoint, run_one

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_retries(settings, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    settings.LLM_BACKOFF_BASE_S = 0.01
    settings.LLM_BACKOFF_MAX_S = 0.02
    settings.LLM_MAX_ATTEMPTS = 2


@pytest.fixture
def server():
    with LoopbackLLMServer(api_key=KEY) as server:
        yield server


@pytest.fixture
def receipts(project, author):
    doc, files = generate_receipts_environment(seed=1, tasks=1, eval_fraction=0)
    environment = environment_import_with_files(project=project, spec=doc, files=files, user=author)
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    environment.refresh_from_db()
    return environment, doc, files


def _script(server, doc):
    calls = doc["tasks"][0]["reference_solution"][0]["calls"]
    viewed, filed = calls[0]["arguments"], calls[1]["arguments"]
    server.script(
        Reply(tool_calls=[{"id": "call_view", "name": "view_receipt", "arguments": viewed}]),
        Reply(tool_calls=[{"id": "call_file", "name": "file_expense_claim", "arguments": filed}]),
        Reply.text(f"Filed the claim for {filed['vendor']}: total {filed['amount']:.2f}."),
    )  # fmt: skip
    return filed


def test_a_vlm_teacher_is_sent_the_receipt_image_and_passes(project, author, server, receipts):
    environment, doc, files = receipts
    _script(server, doc)
    endpoint = make_endpoint(project, server, model="loop-vlm")

    batch = run_one(project, author, environment, endpoint)

    run = Run.objects.get(batch=batch)
    assert (run.status, run.score, run.passed) == (RunStatus.SUCCEEDED, 1.0, True)
    attachment = doc["attachments"][0]
    sha = attachment["sha256"]
    # The second request carries the image after the tool result, as a data: URL of the file.
    second = server.requests[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "user"]
    assert json.loads(second[3]["content"])["image"] == f"sha256:{sha}"
    assert second[4]["content"][0] == {
        "type": "text",
        "text": "receipt-rc-1.png (the result of call_view):",
    }
    image = second[4]["content"][1]
    assert image["type"] == "image_url"
    prefix = "data:image/png;base64,"
    assert image["image_url"]["url"].startswith(prefix)
    assert base64.b64decode(image["image_url"]["url"][len(prefix) :]) == files[sha]
    # The third request still shows it (the whole conversation is resent), in the same place.
    assert server.requests[2].messages[4] == second[4]
    # The stored transcript keeps the reference, not the bytes.
    tool = run.transcript[3]
    assert tool["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"attachment:sha256:{sha}"},
    }
    # The call log keeps the image's type and size, not megabytes of base64.
    logged = LLMCall.objects.filter(purpose="run.agent").order_by("id")[1].request_messages
    encoded = len(base64.b64encode(files[sha]))
    assert logged[4]["content"][1]["image_url"]["url"] == (
        f"data:image/png;base64,… ({encoded} chars)"
    )


def test_an_image_gone_from_storage_is_sent_as_a_note_not_a_broken_part(
    project, author, server, receipts
):
    environment, doc, _ = receipts
    attachment_storage().delete(attachment_name(doc["attachments"][0]["sha256"]))
    _script(server, doc)
    endpoint = make_endpoint(project, server, model="loop-vlm")

    run_one(project, author, environment, endpoint)

    assert server.requests[1].messages[4] == {
        "role": "user",
        "content": [{"type": "text", "text": "[receipt-rc-1.png from call_view: unavailable]"}],
    }


# --- the run page ----------------------------------------------------------------------------


@pytest.fixture
def oracle_run(project, author):
    """An oracle run on a receipts environment whose receipt also refers to a PDF policy."""
    from tests.engine.test_attachments import PDF

    doc, files = generate_receipts_environment(seed=1, tasks=1, eval_fraction=0)
    pdf = describe(PDF, name="expense-policy.pdf")
    doc["attachments"].append(pdf.to_dict())
    doc["services"]["expenses"]["receipts"][0]["policy"] = pdf.ref
    environment = environment_import_with_files(
        project=project, spec=doc, files={**files, pdf.sha256: PDF}, user=author
    )
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(environment.pk,)),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    return Run.objects.get(batch=batch), doc, pdf


def test_the_run_page_shows_the_viewed_image_as_a_thumbnail_and_the_pdf_as_a_link(
    client_for, viewer, oracle_run
):
    run, doc, pdf = oracle_run
    image = doc["attachments"][0]
    base = f"/environments/{run.environment_id}/attachments"
    response = client_for(viewer).get(f"/runs/{run.pk}/")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.count('data-testid="thumbnail"') == 1
    assert (
        f'<img class="thumb" src="{base}/{image["sha256"]}/" alt="receipt-rc-1.png" '
        'loading="lazy" data-testid="thumbnail">'
    ) in body
    assert (
        f'<a class="small" href="{base}/{pdf.sha256}/" data-testid="document-link">'
        "expense-policy.pdf</a>"
    ) in body
    partial = client_for(viewer).get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert partial.content.decode().count('data-testid="thumbnail"') == 1


def test_an_image_the_environment_no_longer_lists_is_named_not_linked(
    client_for, author, oracle_run
):
    run, _, _ = oracle_run
    Environment.objects.filter(pk=run.environment_id).update(attachments=[])
    body = client_for(author).get(f"/runs/{run.pk}/").content.decode()
    assert 'data-testid="thumbnail"' not in body
    assert body.count('data-testid="image-gone"') == 1
