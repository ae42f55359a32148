"""``coworkenv_engine.body_limit.BodyLimit`` in front of the engine's server, through a real
uvicorn: bodies and WebSocket messages over the limit are refused before the app reads them
whole (defect 7 of issue 24)."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from coworkenv_engine.body_limit import BodyLimit, too_large
from coworkenv_engine.server import create_app

from .serving import running
from .test_server import SPECS

LIMIT = 2000


@pytest.fixture(scope="module")
def url():
    with running(BodyLimit(create_app(SPECS[:1]), LIMIT)) as served:
        yield served


def test_a_body_within_the_limit_is_served(url):
    reset = httpx.post(f"{url}/reset", json={"task_key": SPECS[0].tasks[0].key})
    assert reset.status_code == 200


def test_a_declared_body_over_the_limit_is_413(url):
    response = httpx.post(f"{url}/reset", content=b"{" + b" " * LIMIT + b"}")
    assert (response.status_code, response.json()) == (413, too_large(LIMIT))


def test_a_streamed_body_over_the_limit_is_413_once_it_passes_it(url):
    def chunks():
        yield b'{"seed": 1, "pad": "'
        for _ in range(50):
            yield b"x" * 100
        yield b'"}'

    response = httpx.post(f"{url}/reset", content=chunks())
    assert (response.status_code, response.json()) == (413, too_large(LIMIT))


def test_a_websocket_message_over_the_limit_closes_with_1009(url):
    with connect(url.replace("http://", "ws://") + "/ws") as ws:
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(timeout=30))["type"] == "state"
        ws.send(json.dumps({"type": "reset", "data": {"pad": "x" * LIMIT}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
    assert closed.value.rcvd.code == 1009


def test_the_limit_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        BodyLimit(create_app(SPECS[:1]), 0)
