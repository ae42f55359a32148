"""Attachments in the engine: listed by hash, referenced from records, shown by view tools
as image parts, and validated (missing, unsupported, oversized, unreferenced, stored bytes)."""

import copy
import hashlib
import json
import struct
import zlib

import pytest

from coworkenv_engine.attachments import (
    content_problem,
    describe,
    lift_tool_images,
    sniff_media_type,
)
from coworkenv_engine.policies import OraclePolicy
from coworkenv_engine.runner import replay_transcript, run_task
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import canonical_dump, load_spec, parse_spec, spec_hash
from coworkenv_engine.validation import validate_spec


def tiny_png(rgb=(255, 0, 0), size=(2, 2)) -> bytes:
    """A valid PNG without Pillow (the engine tests need no imaging library)."""
    width, height = size
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


PNG = tiny_png()
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PNG_SHA = hashlib.sha256(PNG).hexdigest()
PDF_SHA = hashlib.sha256(PDF).hexdigest()
FILES = {PNG_SHA: PNG, PDF_SHA: PDF}


def image_spec() -> dict:
    """One receipt image, one PDF policy (a document no tool views: the agent may only pass
    it on); view_receipt shows the image, file_claim writes."""
    return {
        "schema": "coworkenv.environment/v1",
        "name": "Receipts",
        "services": {
            "expenses": {
                "receipts": [
                    {"id": "rc-1", "uploaded_on": "2026-02-27", "image": f"sha256:{PNG_SHA}"},
                    {"id": "pol-1", "uploaded_on": "2026-01-02", "document": f"sha256:{PDF_SHA}"},
                ],
                "claims": [],
            }
        },
        "attachments": [
            {"sha256": PNG_SHA, "media_type": "image/png", "size": len(PNG), "name": "rc-1.png"},
            {
                "sha256": PDF_SHA,
                "media_type": "application/pdf",
                "size": len(PDF),
                "name": "policy.pdf",
            },
        ],
        "tools": [
            {
                "name": "view_receipt",
                "description": "Show a receipt's image.",
                "parameters": {
                    "type": "object",
                    "properties": {"receipt_id": {"type": "string"}},
                    "required": ["receipt_id"],
                },
                "binding": {
                    "op": "get",
                    "service": "expenses",
                    "collection": "receipts",
                    "id": "$receipt_id",
                    "attachment": "image",
                },
            },
            {
                "name": "file_claim",
                "description": "File an expense claim.",
                "parameters": {
                    "type": "object",
                    "properties": {"receipt_id": {"type": "string"}, "amount": {"type": "number"}},
                    "required": ["receipt_id", "amount"],
                },
                "binding": {
                    "op": "create",
                    "service": "expenses",
                    "collection": "claims",
                    "values": {"receipt_id": "$receipt_id", "amount": "$amount"},
                },
            },
        ],
        "tasks": [
            {
                "key": "file-rc-1",
                "turns": [{"message": "File a claim for receipt rc-1 with its total."}],
                "reference_solution": [
                    {
                        "turn": 0,
                        "calls": [
                            {"tool": "view_receipt", "arguments": {"receipt_id": "rc-1"}},
                            {
                                "tool": "file_claim",
                                "arguments": {"receipt_id": "rc-1", "amount": 12.5},
                            },
                        ],
                        "reply": "Filed: 12.50.",
                    }
                ],
                "graders": [
                    {
                        "id": "claimed",
                        "category": "completion",
                        "check": {
                            "kind": "state",
                            "query": "length(expenses.claims[?receipt_id == 'rc-1' && "
                            "amount == `12.5`])",
                            "op": "==",
                            "value": 1,
                        },
                    },
                    {
                        "id": "no-collateral",
                        "category": "safety",
                        "check": {"kind": "side_effects"},
                    },
                ],
            }
        ],
    }


def codes(report) -> list[tuple[str, str, str]]:
    return [(p.code, p.severity, p.pointer) for p in report.problems]


def test_an_environment_with_an_image_validates_with_full_sensitivity():
    report = validate_spec(image_spec(), attachments=FILES.get)
    assert codes(report) == []
    task = report.task("file-rc-1")
    assert (task.oracle_score, task.sensitivity, task.null_score) == (1.0, 1.0, 0.2)


def test_a_view_tool_returns_the_record_and_the_image_as_an_image_url_part():
    episode = Episode(load_spec(image_spec()), "file-rc-1", 0)
    episode.advance_turn()
    result = episode.call("view_receipt", {"receipt_id": "rc-1"})
    record = {"id": "rc-1", "uploaded_on": "2026-02-27", "image": f"sha256:{PNG_SHA}"}
    assert result.ok
    assert json.loads(result.to_message_content()) == record
    assert result.message_content() == [
        {"type": "text", "text": result.to_message_content()},
        {"type": "image_url", "image_url": {"url": f"attachment:sha256:{PNG_SHA}"}},
    ]
    # The audit log keeps the text: state and grading never see image bytes.
    assert episode.audit_log[-1].result == record


def test_viewing_a_pdf_or_a_record_without_an_attachment_is_a_tool_error():
    spec = image_spec()
    receipts = spec["services"]["expenses"]["receipts"]
    receipts.append({"id": "rc-9", "uploaded_on": "2026-02-01"})
    receipts.append({"id": "pol-2", "image": f"sha256:{PDF_SHA}"})  # attachment_wrong_kind
    episode = Episode(parse_spec(spec), "file-rc-1", 0)
    episode.advance_turn()
    pdf = episode.call("view_receipt", {"receipt_id": "pol-2"})
    assert (pdf.ok, pdf.error_code, pdf.error_message) == (
        False,
        "not_an_image",
        "'policy.pdf' is application/pdf, not an image: it cannot be shown",
    )
    bare = episode.call("view_receipt", {"receipt_id": "rc-9"})
    assert (bare.error_code, bare.error_message) == ("not_found", "record 'rc-9' has no image")


def test_the_oracle_transcript_carries_the_image_and_replays_unchanged():
    result = run_task(image_spec(), "file-rc-1", OraclePolicy(), faults=False)
    tool_message = result.transcript[3]
    assert tool_message["role"] == "tool"
    assert tool_message["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"attachment:sha256:{PNG_SHA}"},
    }
    replay = replay_transcript(image_spec(), "file-rc-1", result.transcript)
    assert (replay.divergent_calls, replay.grading.score) == ([], result.grading.score)


def test_attachments_round_trip_in_the_canonical_document_and_only_when_present():
    spec = image_spec()
    dumped = canonical_dump(spec)
    assert dumped["attachments"] == spec["attachments"]
    assert dumped["tools"][0]["binding"]["attachment"] == "image"
    assert canonical_dump(dumped) == dumped
    plain = copy.deepcopy(spec)
    del plain["attachments"]
    plain["services"]["expenses"]["receipts"] = []
    del plain["tools"][0]["binding"]["attachment"]
    assert "attachments" not in canonical_dump(plain)
    assert spec_hash(plain) != spec_hash(spec)


def test_a_reference_to_an_unlisted_attachment_is_an_error_at_the_record_field():
    spec = image_spec()
    missing = "0" * 64
    spec["services"]["expenses"]["receipts"][0]["image"] = f"sha256:{missing}"
    report = validate_spec(spec, dynamic=False)
    assert ("attachment_missing", "error", "/services/expenses/receipts/0/image") in codes(report)
    assert ("attachment_unreferenced", "warning", "/attachments/0") in codes(report)
    problem = next(p for p in report.problems if p.code == "attachment_missing")
    assert problem.message == (
        "The record refers to attachment 000000000000…, which /attachments does not list."
    )


def test_an_oversized_or_unsupported_attachment_is_an_error_with_its_pointer():
    spec = image_spec()
    spec["attachments"][0]["size"] = 5_000_001
    spec["attachments"][1]["media_type"] = "image/svg+xml"
    report = validate_spec(spec, dynamic=False)
    assert codes(report) == [
        ("attachment_too_large", "error", "/attachments/0/size"),
        ("attachment_type_unsupported", "error", "/attachments/1/media_type"),
    ]
    assert report.problems[0].message == (
        "'rc-1.png' has 5000001 bytes, over the 5000000-byte limit for image/png."
    )


def test_a_view_tool_over_a_field_no_record_fills_is_an_error():
    spec = image_spec()
    spec["tools"][0]["binding"]["attachment"] = "scan"
    report = validate_spec(spec, dynamic=False)
    assert ("attachment_field_unknown", "error", "/tools/0/binding/attachment") in codes(report)


def test_the_attachment_key_on_a_binding_other_than_get_is_a_schema_error():
    spec = image_spec()
    spec["tools"][1]["binding"]["attachment"] = "image"
    report = validate_spec(spec, dynamic=False)
    assert codes(report) == [("schema_invalid", "error", "/tools/1/binding")]
    assert report.problems[0].message == "False schema does not allow 'image'"


def test_stored_bytes_that_are_missing_or_differ_are_reported_when_a_resolver_is_given():
    spec = image_spec()
    stored = {PNG_SHA: tiny_png((0, 0, 255)), PDF_SHA: None}
    report = validate_spec(spec, dynamic=False, attachments=stored.get)
    assert codes(report) == [
        ("attachment_content_invalid", "error", "/attachments/0"),
        ("attachment_content_invalid", "error", "/attachments/1"),
    ]
    assert report.problems[1].message.startswith("'policy.pdf': no stored file has the hash ")
    # Without a resolver the stored files are not looked at.
    assert validate_spec(spec, dynamic=False).valid


def test_describe_sniffs_and_refuses_wrong_types_and_sizes():
    assert describe(PNG, name="a.png").to_dict() == {
        "sha256": PNG_SHA,
        "media_type": "image/png",
        "size": len(PNG),
        "name": "a.png",
    }
    assert sniff_media_type(PDF) == "application/pdf"
    with pytest.raises(ValueError, match=r"^a\.png: the file is image/png, not image/jpeg$"):
        describe(PNG, name="a.png", media_type="image/jpeg")
    with pytest.raises(ValueError, match="is not a supported attachment type"):
        describe(b"<svg/>", name="x.svg")
    assert content_problem(describe(PNG, name="a.png"), PNG) is None


def test_lifting_moves_tool_images_into_one_user_message_after_the_step():
    url = f"attachment:sha256:{PNG_SHA}"
    messages = [
        {"role": "assistant", "tool_calls": [{"id": "c1"}, {"id": "c2"}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "{}"}, {
            "type": "image_url", "image_url": {"url": url}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "{}"},
        {"role": "assistant", "content": "Done."},
    ]  # fmt: skip
    lifted = lift_tool_images(messages, lambda u, call: [{"type": "image", "from": call}])
    assert lifted == [
        messages[0],
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        messages[2],
        {"role": "user", "content": [{"type": "image", "from": "c1"}]},
        messages[3],
    ]


def test_a_directory_resolver_finds_files_by_their_hash_whatever_their_names(tmp_path):
    from coworkenv_engine.attachments import directory_resolver
    from coworkenv_engine.cli import main

    (tmp_path / "nested").mkdir()
    (tmp_path / "receipt.png").write_bytes(PNG)
    (tmp_path / "nested" / "whatever").write_bytes(PDF)
    resolve = directory_resolver(str(tmp_path))
    assert (resolve(PNG_SHA), resolve(PDF_SHA), resolve("0" * 64)) == (PNG, PDF, None)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(image_spec()))
    assert main(["serve", str(spec), "--attachments", str(tmp_path / "nope")]) == 2
