"""The vision path fitted to ``max_length`` (image blocks never cut, rows dropped with a
counted reason), counted lazily as rows are collated, and its chat template chosen and
checked (refused clearly rather than mis-masked). Token counts are checked by hand on the
tiny preset: each image is 16 ``<|image_pad|>`` between ``<|vision_start|>`` and
``<|vision_end|>`` (18 protected tokens)."""

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the `train` extra
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from apps.training.presets import IMAGE_PAD, VISION_TEMPLATE, build_tiny_vlm_preset  # noqa: E402
from apps.training.vision import (  # noqa: E402
    DROP_IMAGES,
    DROP_NO_LABELS,
    VisionCollator,
    load_vision,
)
from apps.training.vision_templates import VisionTemplateError, vision_chat_template  # noqa: E402
from tests.training.test_sft_vision import receipt_png, run_entry_point  # noqa: E402

BLOCK = "<|vision_start|>" + IMAGE_PAD * 16 + "<|vision_end|>"
# Everything before the image, as the template renders it.
BEFORE_IMAGE = (
    "<|im_start|>system\nS.<|im_end|>\n<|im_start|>user\nTotal?<|im_end|>\n"
    "<|im_start|>assistant\nLet me look.<|im_end|>\n<|im_start|>user\n"
)
AFTER_IMAGE = "Here.<|im_end|>\n<|im_start|>assistant\nIt is 8.00.<|im_end|>\n"


def text(value: str) -> list[dict]:
    return [{"type": "text", "text": value}]


def late_image_row(image: Path) -> dict:
    """Two assistant turns; the image comes in the user message between them."""
    return {
        "messages": [
            {"role": "system", "content": text("S.")},
            {"role": "user", "content": text("Total?")},
            {"role": "assistant", "content": text("Let me look.")},
            {"role": "user", "content": [{"type": "image"}, *text("Here.")]},
            {"role": "assistant", "content": text("It is 8.00.")},
        ],
        "images": [str(image)],
    }


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-vlm")
    receipt_png(folder / "a.png")
    row = late_image_row(folder / "a.png")
    base = build_tiny_vlm_preset([row], folder / "base", seed=0)
    processor, model, template = load_vision(str(base), {})
    return processor, model, template, row


def count(processor, value: str) -> int:
    return len(processor.tokenizer(value, add_special_tokens=False)["input_ids"])


def test_hand_counted_lengths(tiny):
    processor, _, template, row = tiny
    before, after = count(processor, BEFORE_IMAGE), count(processor, AFTER_IMAGE)
    assert count(processor, BLOCK) == 18
    full = VisionCollator(processor, template, [row]).encode(row)
    assert len(full["input_ids"]) == before + 18 + after
    assert processor.tokenizer.decode(full["input_ids"]) == BEFORE_IMAGE + BLOCK + AFTER_IMAGE


def test_text_is_cut_after_expansion_and_the_image_block_is_kept_whole(tiny):
    processor, model, template, row = tiny
    before = count(processor, BEFORE_IMAGE)
    # Room for the text before the image and the image: the cut would fall in the image's
    # block (before + 5 tokens); the block is kept whole and the text after it goes.
    collator = VisionCollator(processor, template, [row], max_length=before + 18)
    batch = collator([{"index": 0}])
    ids, labels = batch["input_ids"][0], batch["labels"][0]
    assert len(ids) == before + 18
    assert processor.tokenizer.decode(ids) == BEFORE_IMAGE + BLOCK
    pad = processor.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
    assert int((ids == pad).sum()) == 16 and tuple(batch["pixel_values"].shape) == (1, 3, 32, 32)
    trained = processor.tokenizer.decode([int(t) for t in ids[labels != -100]])
    assert trained == "\nLet me look.<|im_end|>\n"
    assert math.isfinite(float(model(**batch).loss.detach()))  # features match image tokens
    assert collator.counts() == {
        "rows": 1,
        "counted_rows": 1,
        "excluded_tokens": 0,
        "truncated_rows": 1,
        "dropped_rows": 0,
        "dropped": {},
    }


def test_a_cut_inside_the_text_after_the_image_keeps_the_start(tiny):
    processor, _, template, row = tiny
    full = VisionCollator(processor, template, [row]).encode(row)["input_ids"]
    collator = VisionCollator(processor, template, [row], max_length=len(full) - 4)
    ids = collator([{"index": 0}])["input_ids"][0]
    assert ids.tolist() == full[:-4].tolist()
    assert collator.counts()["truncated_rows"] == 1


def test_a_cut_before_the_image_keeps_the_image_and_drops_the_text_around_it(tiny):
    processor, _, template, row = tiny
    # 12 text tokens and the block: "<|im_start|>system\nS.<|im_end|>\n<|im_start|>user\n
    # Total?<|im_end|>\n<|im_start|>assistant\nLet" then the image, "Let …" a label
    kept_text = BEFORE_IMAGE.split(" me look.")[0]
    budget = count(processor, kept_text)
    collator = VisionCollator(processor, template, [row], max_length=budget + 18)
    batch = collator([{"index": 0}])
    assert processor.tokenizer.decode(batch["input_ids"][0]) == kept_text + BLOCK
    assert len(batch["input_ids"][0]) == budget + 18
    assert (
        processor.tokenizer.decode(
            [int(t) for t in batch["input_ids"][0][batch["labels"][0] != -100]]
        )
        == kept_text.split("assistant")[-1]
    )


def test_rows_whose_images_exceed_max_length_or_that_keep_no_label_are_dropped(tiny):
    processor, _, template, row = tiny
    from tests.training.test_sft import ROW

    # 17 < the 18 tokens of the image block: the image row cannot be cut to fit
    collator = VisionCollator(processor, template, [row, ROW], max_length=17)
    with pytest.raises(ValueError, match="Every row of the split is dropped"):
        collator([{"index": 0}, {"index": 1}])
    counts = collator.counts()
    assert counts["dropped"] == {DROP_IMAGES: 1, DROP_NO_LABELS: 1}
    assert (counts["dropped_rows"], counts["truncated_rows"]) == (2, 1)

    # Room for the text rows' start only up to before the first answer: no label left
    short = count(processor, "<|im_start|>system\nS.<|im_end|>\n<|im_start|>user\n") + 18
    collator = VisionCollator(processor, template, [row], max_length=short)
    with pytest.raises(ValueError, match=DROP_NO_LABELS):
        collator([{"index": 0}])
    assert collator.counts()["dropped"] == {DROP_NO_LABELS: 1}


def test_a_dropped_row_leaves_its_batch_and_an_empty_batch_takes_the_next_row(tiny, tmp_path):
    processor, _, template, row = tiny
    receipt_png(tmp_path / "b.png")
    two_images = json.loads(json.dumps(row))
    two_images["messages"][1]["content"] = [{"type": "image"}, *text("Total?")]
    two_images["images"] = [row["images"][0], str(tmp_path / "b.png")]
    # the one-image row keeps "Let me look." as above; the two-image row's budget ends
    # 18 text tokens earlier, before any answer: dropped, no label left
    limit = count(processor, BEFORE_IMAGE) + 18
    rows = [two_images, row, two_images, row]
    collator = VisionCollator(processor, template, rows, max_length=limit, splits=[range(4)])
    assert collator.counted == {}  # nothing is encoded before it is collated
    batch = collator([{"index": 0}, {"index": 1}])
    assert batch["input_ids"].shape == (1, limit) and batch["pixel_values"].shape[0] == 1
    assert set(collator.counted) == {0, 1}
    batch = collator([{"index": 2}])  # alone and dropped: row 3 stands in
    assert batch["input_ids"].shape == (1, limit)
    assert set(collator.counted) == {0, 1, 2, 3}
    assert collator.counts() == {
        "rows": 4,
        "counted_rows": 4,
        "excluded_tokens": 0,
        "truncated_rows": 4,  # every row is over the limit
        "dropped_rows": 2,
        "dropped": {DROP_NO_LABELS: 2},
    }


def test_counted_lazily_equals_the_eager_count(tiny):
    processor, _, template, row = tiny
    from tests.training.test_sft_vision import vision_row

    weighted = vision_row(row["images"][0])  # a weight-0 turn: excluded tokens
    rows = [weighted, row, weighted]
    lazy = VisionCollator(processor, template, rows)
    lazy([{"index": 0}, {"index": 1}])
    assert lazy.counts()["counted_rows"] == 2
    lazy([{"index": 2}])
    lazy([{"index": 0}])  # a second epoch counts nothing twice
    eager = VisionCollator(processor, template, rows)
    span = count(processor, "\nHm.<|im_end|>\n")
    assert eager.excluded_tokens() == 2 * span
    assert (
        lazy.counts()
        == eager.counts()
        == {
            "rows": 3,
            "counted_rows": 3,
            "excluded_tokens": 2 * span,
            "truncated_rows": 0,
            "dropped_rows": 0,
            "dropped": {},
        }
    )


def test_the_entry_point_reports_truncated_and_dropped_rows(tmp_path):
    from apps.training.vision import read_bundle_or_rows

    (tmp_path / "images").mkdir()
    for name, colour in (("a", "white"), ("b", "yellow"), ("c", "blue")):
        receipt_png(tmp_path / "images" / f"{name}.png", colour)
    row = late_image_row(Path("images/a.png"))
    row["images"] = ["images/a.png"]
    two = json.loads(json.dumps(row))
    two["messages"][1]["content"] = [{"type": "image"}, *text("Total?")]
    two["images"] = ["images/a.png", "images/b.png"]
    four = json.loads(json.dumps(two))
    four["messages"][0]["content"] = [{"type": "image"}, {"type": "image"}, *text("S.")]
    four["images"] = ["images/c.png", "images/b.png", "images/a.png", "images/b.png"]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in (row, two, row, four)))
    # the preset the entry point will reuse, to count its tokens here
    base = build_tiny_vlm_preset(read_bundle_or_rows(train), tmp_path / "run" / "base", seed=0)
    processor = transformers.AutoProcessor.from_pretrained(base)
    limit = count(processor, BEFORE_IMAGE) + 18
    assert limit < 4 * 18  # the four-image row's images alone exceed it
    # the two-image row's text budget ends before its first label (the "\n" after "assistant")
    before_answer = "<|im_start|>system\nS.<|im_end|>\n<|im_start|>user\nTotal?<|im_end|>\n"
    assert count(processor, before_answer + "<|im_start|>assistant") >= limit - 2 * 18
    result, reported = run_entry_point(tmp_path, train, "preset:tiny-llava", max_length=limit)
    assert result.returncode == 0, result.stderr[-3000:]
    finished = reported[-1]
    assert finished["status"] == "succeeded"
    # one-image rows: cut after their image (as above); the two-image row: cut before any
    # answer; the four-image row: 72 image tokens > limit
    assert finished["data"] == {
        "rows": 4,
        "counted_rows": 4,
        "excluded_tokens": 0,
        "truncated_rows": 3,
        "dropped_rows": 2,
        "dropped": {DROP_IMAGES: 1, DROP_NO_LABELS: 1},
    }


# --- which chat template a hub VLM trains with -------------------------------------------


def _trl(name: str) -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text()


NO_MARKERS = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content[0].text }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
ONE_SPAN = (
    "{% generation %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content[0].text }}"
    "<|im_end|>\n{% endfor %}{% endgeneration %}"
)
NO_TOOL_CALLS = (
    "{% for m in messages %}{% if m.role == 'assistant' %}<|im_start|>assistant\n"
    "{% generation %}{{ m.content[0].text }}<|im_end|>\n{% endgeneration %}{% else %}"
    "<|im_start|>{{ m.role }}\n{{ m.content[0].text }}<|im_end|>\n{% endif %}{% endfor %}"
)


def with_template(processor, template: str):
    copy = type(processor)(
        image_processor=processor.image_processor,
        tokenizer=processor.tokenizer,
        chat_template=template,
        patch_size=processor.patch_size,
        vision_feature_select_strategy="default",
        image_token=IMAGE_PAD,
        num_additional_image_tokens=1,
    )
    return copy


def test_a_template_with_generation_markers_is_kept(tiny):
    processor, _, template, _ = tiny
    assert vision_chat_template(processor, tools=True) == processor.chat_template == template


def test_qwen2_vl_templates_get_the_chatml_vision_template(tiny):
    processor = with_template(tiny[0], _trl("qwen2_5_vl"))  # Qwen2-VL's and Qwen2.5-VL's
    assert vision_chat_template(processor, tools=True) == VISION_TEMPLATE.read_text()


def test_a_family_trl_knows_gets_trls_training_variant(tiny):
    processor = with_template(tiny[0], _trl("smolvlm"))
    assert vision_chat_template(processor) == _trl("smolvlm_training")


def test_a_template_without_markers_that_nobody_patches_is_refused(tiny):
    # "add_generation_prompt" is not a generation marker
    processor = with_template(tiny[0], NO_MARKERS)
    with pytest.raises(VisionTemplateError, match=r"marks no assistant generations"):
        vision_chat_template(processor, "acme/vlm-7b")


def test_markers_that_do_not_give_one_span_per_assistant_message_are_refused(tiny):
    processor = with_template(tiny[0], ONE_SPAN)
    with pytest.raises(VisionTemplateError, match="gave 1 spans"):
        vision_chat_template(processor, "acme/vlm-7b")


def test_a_template_that_drops_tool_calls_is_refused_for_rows_that_call_tools(tiny):
    processor = with_template(tiny[0], NO_TOOL_CALLS)
    assert vision_chat_template(processor) == NO_TOOL_CALLS  # fine for rows without calls
    with pytest.raises(VisionTemplateError, match="tool calls"):
        vision_chat_template(processor, "acme/vlm-7b", tools=True)
