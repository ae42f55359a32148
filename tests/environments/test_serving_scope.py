"""Tokens in paths (``/envs/<slug>/t/<token>/…``) never reach the access log: the mount
moves them into a header (``apps.environments.serving_scope``), defect 8 of issue 24."""

from __future__ import annotations

import logging

import httpx
from hypothesis import given
from hypothesis import strategies as st

from apps.environments.serving_scope import REDACTED, without_path_token
from tests.engine.serving import running

BASE = "/envs/acme"
token_text = st.text(st.characters(codec="ascii", exclude_characters="/"), min_size=1)


@given(token_text, st.sampled_from(["", "/tasks", "/reset", "/ws"]))
def test_a_path_token_becomes_a_bearer_header_and_leaves_the_path(token, route):
    scope = {
        "type": "http",
        "path": f"{BASE}/t/{token}{route}",
        "headers": [(b"authorization", b"Bearer other"), (b"host", b"x")],
    }
    inner = without_path_token(scope, BASE)
    assert inner["path"] == BASE + route and inner["raw_path"] == (BASE + route).encode()
    assert inner["headers"] == [(b"host", b"x"), (b"authorization", f"Bearer {token}".encode())]
    assert scope["path"] == f"{BASE}/t/{REDACTED}{route}"
    assert scope["raw_path"] == scope["path"].encode()


def test_a_path_without_a_token_is_left_alone():
    scope = {"type": "http", "path": f"{BASE}/tasks", "headers": []}
    assert without_path_token(scope, BASE) == scope
    assert scope["path"] == f"{BASE}/tasks"


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_the_access_log_never_holds_a_token(served, project):
    from coworkenv_web.asgi import application

    token = served["member"]
    records = _Records()
    with running(application, log_level="info") as url:
        access = logging.getLogger("uvicorn.access")
        access.addHandler(records)
        try:
            base = f"{url}/envs/{project.slug}"
            assert httpx.get(f"{base}/t/{token}/tasks").status_code == 200
            assert httpx.get(f"{base}/t/cwe_wrong_guess/tasks").status_code == 401
        finally:
            access.removeHandler(records)
    lines = [line for line in records.lines if "/tasks" in line]
    assert len(lines) == 2, records.lines
    assert all(f"/envs/{project.slug}/t/{REDACTED}/tasks" in line for line in lines)
    assert not any(token in line or "cwe_wrong_guess" in line for line in records.lines)
