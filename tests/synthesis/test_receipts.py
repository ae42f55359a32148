"""The receipts template family: Pillow-drawn receipt images, a valid environment whose
facts are only in the pictures, deterministic per seed."""

import io
import json

from PIL import Image

from apps.synthesis.generators.receipts import generate_receipts_environment
from coworkenv_engine.validation import validate_spec


def test_the_receipts_family_is_valid_at_sensitivity_one_and_keeps_facts_in_the_images():
    doc, files = generate_receipts_environment(seed=7, tasks=3)
    report = validate_spec(doc, attachments=files.get)
    assert report.valid, [p.to_dict() for p in report.errors]
    assert [(t.oracle_score, t.sensitivity) for t in report.tasks] == [(1.0, 1.0)] * 3
    assert [p.code for p in report.problems] == []
    # 5 receipts (3 asked for, 2 distractors), each a PNG listed once and referenced once
    assert len(doc["attachments"]) == 5 == len(files)
    receipts = doc["services"]["expenses"]["receipts"]
    assert [r["image"] for r in receipts] == [f"sha256:{a['sha256']}" for a in doc["attachments"]]
    records_text = json.dumps(doc["services"])
    for task in doc["tasks"]:
        call = task["reference_solution"][0]["calls"][1]["arguments"]
        assert call["vendor"] not in records_text  # only the picture says who was paid
        assert f"{call['amount']:.2f}" not in records_text
    for attachment in doc["attachments"]:
        image = Image.open(io.BytesIO(files[attachment["sha256"]]))
        assert (image.format, image.width) == ("PNG", 360)
        assert attachment["size"] == len(files[attachment["sha256"]])


def test_the_same_seed_gives_the_same_document_and_bytes():
    first = generate_receipts_environment(seed=3, tasks=2)
    second = generate_receipts_environment(seed=3, tasks=2)
    assert first == second
    other, _ = generate_receipts_environment(seed=4, tasks=2)
    assert other["attachments"] != first[0]["attachments"]
