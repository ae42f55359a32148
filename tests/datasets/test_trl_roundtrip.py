"""The `trl` export of a small version loads with `datasets` and renders through a
tool-aware chat template shipped inside TRL (Qwen2.5's), with the tools in the prompt and
every call's arguments intact. No model hub: the tokenizer is a tiny in-memory one."""

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the `train` extra
datasets = pytest.importorskip("datasets")
transformers = pytest.importorskip("transformers")

from apps.datasets.services import export_absolute_path  # noqa: E402


def _tokenizer_with_trl_template(name: str):
    import trl
    from tokenizers import Tokenizer, models, pre_tokenizers

    template = Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja"
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", eos_token="[UNK]"
    )
    fast.chat_template = template.read_text()
    return fast


@pytest.mark.parametrize("split", ["train", "validation"])
def test_trl_export_loads_and_renders_with_tools(built_version, tmp_path, split):
    export = built_version.exports.get(format="trl", split=split)
    path = export_absolute_path(export)
    loaded = datasets.load_dataset(
        "json", data_files=str(path), split="train", cache_dir=str(tmp_path)
    )
    originals = [json.loads(line) for line in path.read_text().splitlines()]
    assert loaded.num_rows == export.rows == len(originals)
    assert loaded.column_names == ["messages", "tools"]
    tokenizer = _tokenizer_with_trl_template("qwen2_5")
    calls_seen = 0
    for row, original in zip(loaded, originals, strict=True):
        assert isinstance(row["tools"], str)  # one string column: no struct merging
        tools = json.loads(row["tools"])
        assert tools == json.loads(original["tools"])
        # Arrow kept every message as written: no null-filled keys from other rows.
        assert row["messages"] == original["messages"]
        rendered = tokenizer.apply_chat_template(row["messages"], tools=tools, tokenize=False)
        assert "<tools>" in rendered
        for tool in tools:
            assert json.dumps(tool, ensure_ascii=False) in rendered
        for message in row["messages"]:
            for call in message.get("tool_calls") or []:
                arguments = call["function"]["arguments"]
                assert isinstance(arguments, dict)
                rendered_call = json.dumps(
                    {"name": call["function"]["name"], "arguments": arguments}, ensure_ascii=False
                )
                assert rendered_call in rendered
                calls_seen += 1
            if message["role"] == "tool":
                assert message["content"] in rendered
        final = row["messages"][-1]["content"]
        assert rendered.rstrip().endswith(final + "<|im_end|>")
    assert calls_seen > export.rows  # every row calls tools, most several times


def test_trl_export_works_with_from_list_too(built_version):
    export = built_version.exports.get(format="trl", split="train")
    rows = [json.loads(line) for line in export_absolute_path(export).read_text().splitlines()]
    dataset = datasets.Dataset.from_list(rows, on_mixed_types="use_json")
    assert dataset[0]["messages"] == rows[0]["messages"]
    assert json.loads(dataset[0]["tools"]) == json.loads(rows[0]["tools"])
