"""Where API keys may go by default: anywhere on a laptop (DEBUG=true), nowhere on a server
(DEBUG=false) until the operator lists origins in LLM_KEY_HOSTS ("any" opts out on purpose).
Each case imports the real settings in a fresh process with its own environment."""

import json
import os
import subprocess
import sys

import pytest

from apps.llm.models import api_key_host_refusal

PRINT = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps(settings.LLM_KEY_HOSTS))"
)
SERVER = {"DEBUG": "false", "SECRET_KEY": "k" * 60, "ALLOWED_HOSTS": "team.example"}


def _key_hosts(tmp_path, **variables):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LLM_KEY_HOSTS", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="coworkenv_web.settings",
        COWORKENV_VAR_DIR=str(tmp_path),
        **variables,
    )
    result = subprocess.run([sys.executable, "-c", PRINT], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, None),
        (SERVER, {}),
        ({**SERVER, "LLM_KEY_HOSTS": "any"}, None),
        (
            {**SERVER, "LLM_KEY_HOSTS": "OPENAI_API_KEY=api.openai.com"},
            {"OPENAI_API_KEY": ["https://api.openai.com:443"]},
        ),
        (
            {"LLM_KEY_HOSTS": "VLLM_API_KEY=http://gpu1.lan:8000"},
            {"VLLM_API_KEY": ["http://gpu1.lan:8000"]},
        ),
    ],
    ids=["laptop", "server", "server-any", "server-listed", "laptop-listed"],
)
def test_default_key_hosts(tmp_path, variables, expected):
    assert _key_hosts(tmp_path, **variables) == expected


def test_a_server_without_key_hosts_sends_no_key(settings):
    settings.LLM_KEY_HOSTS = {}
    refusal = api_key_host_refusal("OPENAI_API_KEY", "https://api.openai.com/v1")
    assert refusal == (
        "This server sends no API key to model endpoints until its operator lists, in "
        "LLM_KEY_HOSTS, where each may go (e.g. OPENAI_API_KEY=https://api.example.com)."
    )
    assert api_key_host_refusal("", "https://api.openai.com/v1") is None  # keyless endpoint
    settings.LLM_KEY_HOSTS = None
    assert api_key_host_refusal("OPENAI_API_KEY", "https://attacker.example.net/v1") is None
