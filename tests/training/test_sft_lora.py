"""The entry point alone (no Django, no worker): LoRA through peft on the tiny preset; the
final folder is an adapter that loads onto its base and generates."""

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the `train` extra
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from tests.training.conftest import run_sft_entry_point  # noqa: E402
from tests.training.test_sft import ROW  # noqa: E402


def test_lora_adapter_trains_and_loads(tmp_path):
    rows = [ROW] * 8
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result, reported = run_sft_entry_point(
        tmp_path,
        "preset:tiny-qwen2",
        train,
        {
            "max_steps": 6,
            "batch_size": 2,
            "gradient_accumulation_steps": 1,
            "learning_rate": 0.01,
            "max_length": 512,
            "save_steps": 6,
            "lora": True,
            "lora_r": 4,
            "lora_alpha": 8,
        },
    )
    finished = reported[-1]
    assert result.returncode == 0, result.stderr[-3000:]
    assert finished["type"] == "finished" and finished["status"] == "succeeded"
    assert finished["artifacts"]["kind"] == "adapter"
    assert [e["step"] for e in reported if e["type"] == "metrics" and "loss" in e] == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]
    final = Path(finished["artifacts"]["final"])
    adapter = json.loads((final / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"], adapter["peft_type"]) == (4, 8, "LORA")
    base = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "base")
    model = peft.PeftModel.from_pretrained(base, final)
    tokenizer = transformers.AutoTokenizer.from_pretrained(final)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Is the Q3 review booked?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    generated = model.generate(**prompt, max_new_tokens=4, do_sample=False)
    assert generated.shape[1] > prompt["input_ids"].shape[1]
