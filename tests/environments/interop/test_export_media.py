"""Exports of a receipts environment ship its images: the Claw-Eval task's
``fixtures/media`` and its mock service's view-tool answers (Claw-Eval's ``frames``), the
ClawMark task's ``assets/attachments`` and AGENTS.md; the bytes come from attachment
storage, and a record pointing at a file that is not stored stops the export, named."""

import base64
import hashlib
import json

import pytest
from django.urls import reverse

from apps.environments.attachments import attachment_name, attachment_storage
from apps.environments.interop import claw_eval, clawmark
from apps.environments.interop.media import MediaProblem
from apps.environments.models import Environment
from apps.environments.services import environment_import_with_files
from apps.environments.services.interop import benchmark_export_files
from coworkenv_engine.policies import OraclePolicy
from coworkenv_engine.runner import run_task
from coworkenv_engine.scoring import replies_by_turn
from coworkenv_engine.spec import load_spec
from tests.environments.interop.support import (
    MockService,
    drive_clawmark,
    grade,
    receipts_document,
    replay_reference,
    write_tree,
)

API = "/api/v1"


def _receipts(document: dict) -> dict[str, str]:
    """receipt id -> the sha256 its image field refers to."""
    return {r["id"]: r["image"][7:] for r in document["services"]["expenses"]["receipts"]}


def test_claw_eval_export_ships_each_viewable_image_and_the_view_answer_carries_it(tmp_path):
    document, files = receipts_document()
    exported = claw_eval.export_files(document, resolve=files.get)
    key = document["tasks"][0]["key"]
    task_dir = tmp_path / "tasks" / claw_eval.task_id_for(document, key)
    media = {
        p.rsplit("/", 1)[1]: data
        for p, data in exported.items()
        if p.startswith(f"tasks/{task_dir.name}/fixtures/media/")
    }
    by_sha = {hashlib.sha256(data).hexdigest(): name for name, data in media.items()}
    assert set(by_sha) == set(_receipts(document).values())
    assert all(media[name] == files[sha] for sha, name in by_sha.items())
    write_tree(exported, tmp_path)
    with MockService(tmp_path, task_dir, {"COWORKENV_FAULTS": "0"}) as service:
        for receipt, sha in _receipts(document).items():
            arguments = {"receipt_id": receipt}
            status, body = service.request("POST", "/expenses/view_receipt", arguments)
            assert status == 200, body
            assert body["record"]["id"] == receipt
            [frame] = body["frames"]
            assert frame["mime_type"] == "image/png"
            assert base64.b64decode(frame["image_b64"]) == files[sha]
        status, body = service.request("POST", "/expenses/view_receipt", {"receipt_id": "rc-99"})
        assert status == 404 and body["error"]["code"] == "not_found"
        service.request("POST", "/coworkenv/reset", {})
        messages, statuses = replay_reference(service)
        audit = service.audit()
    assert all(s == 200 for s in statuses)
    assert grade(task_dir, messages, audit, tmp_path)["score"] == 1.0


def test_a_missing_media_file_is_a_not_found_answer(tmp_path):
    document, files = receipts_document()
    write_tree(claw_eval.export_files(document, resolve=files.get), tmp_path)
    task_dir = tmp_path / "tasks" / claw_eval.task_id_for(document, document["tasks"][0]["key"])
    for path in (task_dir / "fixtures" / "media").iterdir():
        path.unlink()
    with MockService(tmp_path, task_dir, {"COWORKENV_FAULTS": "0"}) as service:
        status, body = service.request("POST", "/expenses/view_receipt", {"receipt_id": "rc-1"})
    assert status == 404
    assert "receipt-rc-1.png" in body["error"]["message"]


@pytest.mark.parametrize("builder", [claw_eval, clawmark], ids=["claw-eval", "clawmark"])
def test_a_record_pointing_at_an_unstored_file_names_the_record(builder):
    document, files = receipts_document()
    missing = _receipts(document)["rc-2"]
    with pytest.raises(MediaProblem) as raised:
        builder.export_files(document, resolve=lambda sha: None if sha == missing else files[sha])
    message = raised.value.message
    assert "expenses.receipts record 'rc-2' field 'image'" in message
    assert "no stored file has the hash" in message
    # bytes that are not the listed file are refused the same way
    with pytest.raises(MediaProblem, match=r"'rc-1' field 'image'.*hash to"):
        builder.export_files(document, resolve=lambda sha: b"\x89PNG\r\n\x1a\nnot it")


def test_a_hash_the_document_does_not_list_names_the_record():
    document, files = receipts_document()
    document["services"]["expenses"]["receipts"][0]["image"] = "sha256:" + "ab" * 32
    with pytest.raises(MediaProblem, match=r"record 'rc-1' field 'image'.*do not list"):
        claw_eval.export_files(document, resolve=files.get)


def test_clawmark_export_ships_the_images_as_assets_and_maps_them(tmp_path):
    document, files = receipts_document()
    exported = clawmark.export_files(document, resolve=files.get)
    task_dir = f"tasks/{clawmark.domain_of(document)}/task1"
    shipped = {
        p.rsplit("/", 1)[1]: data
        for p, data in exported.items()
        if p.startswith(f"{task_dir}/assets/attachments/")
    }
    assert sorted(hashlib.sha256(d).hexdigest() for d in shipped.values()) == sorted(
        _receipts(document).values()
    )
    agents = exported[f"{task_dir}/assets/AGENTS.md"].decode()
    for name, data in shipped.items():
        sha = hashlib.sha256(data).hexdigest()
        assert f"`sha256:{sha}`: `/workspace/attachments/{name}` (image/png)" in agents
    write_tree(exported, tmp_path / "export")
    key = document["tasks"][0]["key"]
    result = run_task(load_spec(document), key, OraclePolicy(), faults=False)
    states = {**result.turn_snapshots, len(document["tasks"][0]["turns"]) - 1: result.final_state}
    replies = dict(replies_by_turn(result.transcript))
    out = drive_clawmark(tmp_path / "export" / task_dir / "task.py", states, tmp_path, replies)
    assert out["checks"] and all(out["checks"].values()), out["checks"]
    uploaded = tmp_path / "workspace" / "attachments"
    assert {p.name: p.read_bytes() for p in uploaded.iterdir()} == shipped


@pytest.mark.django_db
def test_exports_read_attachment_storage_and_refuse_an_unstored_file(
    project, author, client_for, api_client_for
):
    document, files = receipts_document()
    environment = environment_import_with_files(
        project=project, spec=document, files=files, user=author
    )
    media = [p for p in benchmark_export_files(environment, "claw-eval") if "/fixtures/media/" in p]
    assert len(media) == len(files) * len(document["tasks"])
    sha = _receipts(document)["rc-3"]
    attachment_storage().delete(attachment_name(sha))
    url = reverse("environments:export_claw_eval", args=[environment.pk])
    response = client_for(author).get(url, follow=True)
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == reverse("environments:detail", args=[environment.pk])
    assert "Claw-Eval export: Task" in page and "record &#x27;rc-3&#x27; field" in page
    for kind in ("claw-eval", "clawmark"):
        answer = api_client_for(author).get(f"{API}/environments/{environment.pk}/export/{kind}/")
        assert answer.status_code == 400
        assert "expenses.receipts record 'rc-3' field 'image'" in json.dumps(answer.json())
    assert Environment.objects.filter(pk=environment.pk).exists()
