"""Vision-language SFT in the entry point: rows in TRL's vision form (an ``images`` column,
``{"type": "image"}`` placeholders) train ``preset:tiny-llava`` (built from configs, no
download) with per-turn weights honoured as on the text path; a TRL bundle zip is read as
exported; the text preset refuses image rows."""

import json
import math
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the `train` extra
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from PIL import Image  # noqa: E402

from apps.training.presets import IMAGE_PAD, build_tiny_vlm_preset  # noqa: E402
from apps.training.vision import (  # noqa: E402
    VisionCollator,
    load_vision,
    read_bundle_or_rows,
)
from tests.training.conftest import run_sft_entry_point  # noqa: E402

IMAGE_TOKENS = 16  # (32 / 8) ** 2 patches, the CLS token dropped


def receipt_png(path: Path, colour="white") -> None:
    image = Image.new("RGB", (120, 60), colour)
    image.putpixel((5, 5), (0, 0, 0))
    image.save(path, format="PNG")


def vision_row(image_name: str) -> dict:
    """What the trl export writes for a demonstration whose view tool showed an image."""
    return {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "You file expenses."}]},
            {"role": "user", "content": [{"type": "text", "text": "File receipt rc-1."}]},
            {
                "role": "assistant",
                "content": [],
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "view_receipt", "arguments": {"receipt_id": "rc-1"}},
                    }
                ],
                "weight": 1,
            },
            {
                "role": "tool",
                "name": "view_receipt",
                "tool_call_id": "call_1",
                "content": [{"type": "text", "text": '{"id": "rc-1"}'}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Image returned by call_1:"},
                    {"type": "image"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Hm."}], "weight": 0},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Filed: Blue Fern Cafe, total 8.00."}],
                "weight": 1,
            },
        ],
        "tools": json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "view_receipt",
                        "description": "Show a receipt's image.",
                        "parameters": {
                            "type": "object",
                            "properties": {"receipt_id": {"type": "string"}},
                        },
                    },
                }
            ]
        ),
        "images": [image_name],
    }


@pytest.fixture
def data(tmp_path):
    (tmp_path / "images").mkdir()
    receipt_png(tmp_path / "images" / "a.png")
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps(vision_row("images/a.png")) + "\n")
    return train


def test_the_collator_expands_images_and_masks_like_the_text_path(data, tmp_path):
    rows = read_bundle_or_rows(data)
    assert rows[0]["images"] == [str((tmp_path / "images" / "a.png").resolve())]
    base = build_tiny_vlm_preset(rows, tmp_path / "base", seed=0)
    processor, model, template = load_vision(str(base), {})
    collator = VisionCollator(processor, template, rows)
    batch = collator([{"index": 0}])
    ids, labels = batch["input_ids"][0], batch["labels"][0]
    pad = processor.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    assert int((ids == pad).sum()) == IMAGE_TOKENS
    assert tuple(batch["pixel_values"].shape) == (1, 3, 32, 32)
    assert bool((labels[ids == pad] == -100).all())  # image tokens are never labels
    decode = processor.tokenizer.decode
    trained = decode([int(t) for t, label in zip(ids, labels, strict=True) if label != -100])
    assert "view_receipt" in trained and "Filed: Blue Fern Cafe, total 8.00." in trained
    assert "Hm." not in trained  # the weight-0 turn is masked out
    assert "File receipt rc-1." not in trained
    # the span of the weight-0 turn: what follows "<|im_start|>assistant", through its end,
    # counted as the row was collated
    span = len(processor.tokenizer("\nHm.<|im_end|>\n")["input_ids"])
    assert collator.counts()["excluded_tokens"] == span
    assert collator.excluded_tokens() == span
    loss = model(**batch).loss
    assert math.isfinite(float(loss.detach()))


def test_a_placeholder_without_its_image_is_refused(data, tmp_path):
    rows = read_bundle_or_rows(data)
    rows[0]["images"] = []
    base = build_tiny_vlm_preset(rows, tmp_path / "base", seed=0)
    processor, _, template = load_vision(str(base), {})
    with pytest.raises(ValueError, match="more image placeholders than images"):
        VisionCollator(processor, template, rows)([{"index": 0}])


def test_a_trl_bundle_zip_is_read_as_exported(tmp_path):
    bundle = tmp_path / "trl-train.zip"
    row = vision_row("ignored")
    row["file_names"] = ["images/abc.png"]
    del row["images"]
    receipt_png(tmp_path / "abc.png")
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("metadata.jsonl", json.dumps(row) + "\n")
        archive.write(tmp_path / "abc.png", "images/abc.png")
    rows = read_bundle_or_rows(bundle)
    assert list(rows[0]) == ["messages", "tools", "images"]
    assert Path(rows[0]["images"][0]).read_bytes() == (tmp_path / "abc.png").read_bytes()


def run_entry_point(tmp_path, train: Path, base_model: str, steps: int = 2, max_length: int = 1024):
    hyperparameters = {
        "max_steps": steps,
        "batch_size": 2,
        "gradient_accumulation_steps": 1,
        "learning_rate": 0.01,
        "max_length": max_length,
        "save_steps": steps,
    }
    return run_sft_entry_point(tmp_path, base_model, train, hyperparameters)


def test_two_steps_of_the_tiny_vlm_on_cpu_write_a_checkpoint(tmp_path):
    (tmp_path / "images").mkdir()
    receipt_png(tmp_path / "images" / "a.png")
    receipt_png(tmp_path / "images" / "b.png", colour="yellow")
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(vision_row(f"images/{n}.png")) + "\n" for n in "abab"))
    result, reported = run_entry_point(tmp_path, train, "preset:tiny-llava")
    assert result.returncode == 0, result.stderr[-3000:]
    started = next(e for e in reported if e["type"] == "started")
    assert started["train_rows"] == 4
    losses = [e["loss"] for e in reported if e["type"] == "metrics" and "loss" in e]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint-2"
    assert (checkpoint / "trainer_state.json").exists()
    assert [e["path"] for e in reported if e["type"] == "checkpoint"] == [str(checkpoint)]
    finished = reported[-1]
    assert (finished["type"], finished["status"]) == ("finished", "succeeded")
    final = Path(finished["artifacts"]["final"])
    model = transformers.LlavaForConditionalGeneration.from_pretrained(final)
    processor = transformers.AutoProcessor.from_pretrained(final)
    assert model.config.image_token_id == processor.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    weight_zero_span = len(processor.tokenizer("\nHm.<|im_end|>\n")["input_ids"])
    # counted as the rows were collated, not by a pass before training: the same numbers
    assert started["excluded_tokens"] is None
    assert finished["data"] == {
        "rows": 4,
        "counted_rows": 4,
        "excluded_tokens": 4 * weight_zero_span,
        "truncated_rows": 0,
        "dropped_rows": 0,
        "dropped": {},
    }
    logged = [e["line"] for e in reported if e["type"] == "log"]
    assert (
        f"data: 4 of 4 rows encoded; {4 * weight_zero_span} tokens of weight-0 turns"
        in (logged[-1])
    )


def test_the_text_preset_refuses_image_rows(data, tmp_path):
    result, reported = run_entry_point(tmp_path, data, "preset:tiny-qwen2")
    assert result.returncode == 1
    assert reported[-1]["status"] == "failed"
    assert "preset:tiny-qwen2 is a text model" in reported[-1]["message"]
    assert "preset:tiny-llava" in reported[-1]["message"]


def test_a_validation_split_of_images_does_not_fail_a_text_launch(data, tmp_path):
    """The version's validation rows all show images, its training rows none: the text
    model trains, evaluates on no image row, and the log says what to change."""
    from tests.training.test_sft import ROW

    train = tmp_path / "text-train.jsonl"
    train.write_text(json.dumps(ROW) + "\n" + json.dumps(ROW) + "\n")
    hyperparameters = {
        "max_steps": 1,
        "batch_size": 2,
        "gradient_accumulation_steps": 1,
        "learning_rate": 0.01,
        "max_length": 512,
        "save_steps": 1,
    }
    result, reported = run_sft_entry_point(
        tmp_path, "preset:tiny-qwen2", train, hyperparameters, eval_file=data
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (reported[-1]["type"], reported[-1]["status"]) == ("finished", "succeeded")
    logged = [e["line"] for e in reported if e["type"] == "log"]
    assert any(
        line.startswith("1 of 1 validation rows show images and no training row does")
        and "rebuild the version with text rows in validation" in line
        for line in logged
    ), logged


def test_text_rows_go_through_the_vision_collator_without_pixels(tmp_path):
    from tests.training.test_sft import ROW

    base = build_tiny_vlm_preset([ROW], tmp_path / "base", seed=0)
    processor, model, template = load_vision(str(base), {})
    collator = VisionCollator(processor, template, [ROW, ROW])
    batch = collator([{"index": 0}, {"index": 1}])
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    trained = processor.tokenizer.decode([int(t) for t in batch["labels"][0] if t != -100])
    assert "Booked for Thursday at 15:00." in trained
    assert "Not yet, shall I book it now?" not in trained  # weight 0
    assert math.isfinite(float(model(**batch).loss.detach()))
