"""The commands each engine is started with, and the launcher's two changes to
``transformers serve`` (malformed calls as text, Hermes parsing for ChatML models)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import transformers
from transformers.cli.serving import utils

from apps.serving import transformers_server
from apps.serving.models import Engine, ModelServer
from apps.serving.process import choose_engine, served_model, server_command
from tests.workers import ROOT, wait_for


def _server(**fields) -> ModelServer:
    values = {"model_path": "Qwen/Qwen2.5-0.5B-Instruct", "host": "127.0.0.1", "port": 8123}
    server = ModelServer(pk=7, project_id=3, **{"tool_call_parser": "hermes", **values, **fields})
    server.served_model = served_model(server)
    return server


def test_vllm_commands_full_and_adapter():
    vllm = str(Path(sys.executable).with_name("vllm"))
    assert server_command(_server(engine=Engine.VLLM)) == [
        vllm, "serve", "Qwen/Qwen2.5-0.5B-Instruct", "--served-model-name", "served-7",
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--host", "127.0.0.1", "--port", "8123",
    ]  # fmt: skip
    adapter = _server(engine=Engine.VLLM, adapter_path="/models/a", tool_call_parser="mistral")
    assert server_command(adapter)[2:7] == [
        "Qwen/Qwen2.5-0.5B-Instruct", "--enable-lora", "--lora-modules", "served-7=/models/a",
        "--enable-auto-tool-choice",
    ]  # fmt: skip
    assert adapter.served_model == "served-7"


def test_transformers_commands(settings, tmp_path):
    settings.SERVING_DEVICE = "cpu"
    settings.SERVING_ROOT = tmp_path
    full = _server(engine=Engine.TRANSFORMERS)
    assert server_command(full)[1:] == [
        "-m", "apps.serving.transformers_server", "Qwen/Qwen2.5-0.5B-Instruct",
        "--tool-call-parser", "hermes",
        "--host", "127.0.0.1", "--port", "8123", "--device", "cpu", "--log-level", "info",
    ]  # fmt: skip
    assert full.served_model == "Qwen/Qwen2.5-0.5B-Instruct"  # a pinned server's only name
    assert "--tool-call-parser" not in server_command(_server(tool_call_parser="llama3_json"))
    adapter = _server(engine=Engine.TRANSFORMERS, adapter_path="/models/a")
    merged = str(tmp_path / "3" / "7-merged")
    assert adapter.served_model == merged
    assert server_command(adapter)[3:8] == [
        "--adapter", "/models/a", "--merge-into", merged, "--tool-call-parser",
    ]  # fmt: skip


def test_the_engine_is_vllm_only_where_it_is_installed(settings):
    settings.SERVING_ENGINE = "auto"
    assert choose_engine() == Engine.TRANSFORMERS  # this machine has no vllm
    settings.SERVING_ENGINE = "vllm"
    assert choose_engine() == Engine.VLLM


def test_launcher_arguments():
    split = transformers_server.split_arguments
    assert split(["m", "--tool-call-parser", "hermes", "--port", "1"]) == (
        {"hermes": True, "adapter": None, "merge_into": None},
        ["m", "--port", "1"],
    )
    assert split(["--adapter", "/a", "--merge-into", "/m", "--port", "1"]) == (
        {"hermes": False, "adapter": "/a", "merge_into": "/m"},
        ["--port", "1"],
    )
    with pytest.raises(SystemExit, match="only hermes"):
        split(["m", "--tool-call-parser", "pythonic"])
    with pytest.raises(SystemExit, match="go together"):
        split(["--adapter", "/a"])


class _Tokenizer:
    def __init__(self, chat_template):
        self.chat_template = chat_template


def _config(model_type):
    config = transformers.PretrainedConfig()
    config.model_type = model_type
    return config


def test_hermes_parsing_only_for_chatml_tool_call_templates():
    with_hermes = transformers_server._with_hermes(
        utils.get_response_template, utils._RESPONSE_TEMPLATE_FALLBACKS
    )
    qwen = utils._RESPONSE_TEMPLATE_FALLBACKS[next(iter(utils._RESPONSE_TEMPLATE_FALLBACKS))]
    hermes_tokenizer = _Tokenizer("{{ '<tool_call>' }}")
    assert with_hermes(hermes_tokenizer, _config("llama")) is qwen
    assert with_hermes(_Tokenizer("{{ '[TOOL_CALLS]' }}"), _config("mistral")) is None
    gemma = with_hermes(hermes_tokenizer, _config("gemma4"))
    assert gemma is not qwen and gemma["start_anchor"][0] == "<|turn>model\n"


def test_a_parse_error_gives_the_reply_back_as_text():
    def refuses(*args, **kwargs):
        raise ValueError("json parser could not parse region as JSON.")

    tolerant = transformers_server._tolerant(refuses)
    assert tolerant(None, None, [1], input_ids=[2], cleaned_content="<tool_call>x") == (
        "<tool_call>x",
        None,
        None,
    )


def test_a_server_dies_with_the_worker_that_started_it(tmp_path):
    """``kill -9`` of the worker: its server gets the death signal (nothing is left to
    answer, and the sweep marks the job stopped)."""
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, django; django.setup(); from pathlib import Path; "
            "from apps.serving.process import launch; "
            f"child = launch(['sleep', '600'], Path({str(tmp_path / 'log')!r})); "
            "print(child.pid, flush=True); time.sleep(600)",
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        stdout=subprocess.PIPE,
        text=True,
    )
    child = int(worker.stdout.readline())
    assert _alive(child)
    worker.kill()
    worker.wait(timeout=30)
    wait_for(lambda: not _alive(child), timeout=30, message="the server to die")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
