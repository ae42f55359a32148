"""The environment server's token gate (``apps.environments.serving_gate``), on an injected
clock: per-client failure limits, renewal before a remembered token lapses, a database that
cannot answer."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import OperationalError
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.environments.serving_gate import TokenGate, token_prefix
from coworkenv_engine.server import Unavailable


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _run(coroutine):
    """The coroutine on a loop of its own thread (after the browser tests, Playwright's loop
    runs in the main thread and ``asyncio.run`` there refuses)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _gate(valid: set[str], down: list[bool] | None = None, **options):
    asked: list[str] = []

    async def check(raw: str) -> bool:
        asked.append(raw)
        if down and down[0]:
            raise OperationalError("connection refused")
        return raw in valid

    clock = _Clock()
    return TokenGate(check, clock=clock, **options), asked, clock


def test_a_valid_token_is_looked_up_once_per_ttl_and_a_revoked_one_stops_within_it():
    valid = {"good"}
    gate, asked, clock = _gate(valid, ttl=30.0)
    assert _run(gate("good", "a")) is True
    assert _run(gate("good", "a")) is True
    assert asked == ["good"]  # the second step cost no query
    valid.clear()  # revoked
    clock.now += 31.0
    assert _run(gate("good", "a")) is False
    assert asked == ["good", "good"]


def test_an_active_token_is_renewed_before_it_lapses():
    """Used every 10 s for five minutes, a 30 s cache entry never lapses: each renewal (in
    the second half of its time) happens while it still works, one check per 20 s."""
    gate, asked, clock = _gate({"good"}, ttl=30.0)
    for _ in range(30):
        assert _run(gate("good", "trainer")) is True
        clock.now += 10.0
    assert 14 <= len(asked) <= 16


def test_a_renewal_finds_a_revoked_token():
    valid = {"good"}
    gate, asked, clock = _gate(valid, ttl=30.0)
    assert _run(gate("good")) is True
    valid.clear()
    clock.now += 10.0
    assert _run(gate("good")) is True  # first half: not asked
    clock.now += 6.0
    assert _run(gate("good")) is False  # the renewal asked, and it is revoked
    assert asked == ["good", "good"]


def test_a_flood_from_one_client_never_refuses_another_clients_valid_token():
    """30 no-token requests a minute (and more) from one address: another address's valid,
    never-seen token still opens; the flooding client is refused without lookups."""
    gate, asked, clock = _gate({"cwe_abc_secret"}, failures_per_minute=30)
    for _ in range(100):
        assert _run(gate("", "10.0.0.66")) is False
        clock.now += 0.5
    assert asked.count("") == 30
    assert _run(gate("cwe_abc_secret", "10.0.0.7")) is True
    assert _run(gate("cwe_zzz_wrong", "10.0.0.8")) is False
    assert asked[-1] == "cwe_zzz_wrong"  # another client's first failure: looked up
    clock.now += 61.0
    assert _run(gate("", "10.0.0.66")) is False
    assert asked[-1] == ""  # its minute is over: looked up again


def test_guesses_at_one_prefix_are_refused_from_every_client_but_a_known_token_opens():
    gate, asked, _clock = _gate({"cwe_abc_secret"}, failures_per_minute=3)
    assert _run(gate("cwe_abc_secret", "owner")) is True
    for i in range(3):
        assert _run(gate(f"cwe_abc_guess{i}", f"bot{i}")) is False
    assert _run(gate("cwe_abc_guess9", "bot9")) is False
    assert "cwe_abc_guess9" not in asked  # the prefix is past its limit
    assert _run(gate("cwe_abc_secret", "owner")) is True  # remembered: never refused


def test_a_database_that_cannot_answer_is_no_failure_of_the_token():
    down = [True]
    gate, _asked, clock = _gate({"good"}, down=down, failures_per_minute=1)
    with pytest.raises(Unavailable):
        _run(gate("good", "a"))
    down[0] = False
    assert _run(gate("good", "a")) is True  # nothing was counted against it
    down[0] = True
    clock.now += 20.0
    assert _run(gate("good", "a")) is True  # a renewal that cannot ask keeps the token
    clock.now += 11.0
    with pytest.raises(Unavailable):
        _run(gate("good", "a"))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["", "x", "cwe_p_q"])),
        max_size=80,
    )
)
def test_the_valid_client_is_never_refused_whatever_the_others_send(floods):
    gate, _asked, clock = _gate({"cwe_ok_token"}, failures_per_minute=5)

    async def scenario() -> list[bool]:
        seen = []
        for client, raw in floods:
            await gate(raw, client)
            clock.now += 1.0
            seen.append(await gate("cwe_ok_token", "trainer"))
        return seen

    assert all(_run(scenario()))


@given(st.text(min_size=1).filter(lambda t: "_" not in t), st.text())
def test_a_token_prefix_is_the_middle_part_of_an_api_token(prefix, secret):
    assert token_prefix(f"cwe_{prefix}_{secret}") == prefix
    assert token_prefix(prefix) is None


def test_a_flood_without_tokens_through_the_mount_leaves_other_clients_tokens_working(
    served, project
):
    """Through a real uvicorn: 40 requests without a token from 127.0.0.2 (past the limit of
    30 a minute), then a valid token never seen before, from 127.0.0.1, opens the HTTP
    routes and the /ws handshake; the flooding address's own valid token opens too."""
    import httpx
    from websockets.sync.client import connect

    from coworkenv_web.asgi import application
    from tests.engine.serving import running

    from .test_serving import REFUSED

    with running(application) as url:
        tasks = f"{url}/envs/{project.slug}/tasks"
        flooder = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with flooder:
            for _ in range(40):
                refused = flooder.get(tasks)
                assert (refused.status_code, refused.json()) == (401, REFUSED)
            bearer = {"Authorization": f"Bearer {served['member']}"}
            assert httpx.get(tasks, headers=bearer).status_code == 200
            ws_url = url.replace("http://", "ws://") + f"/envs/{project.slug}/ws"
            with connect(ws_url, additional_headers=bearer) as ws:
                ws.send('{"type": "state"}')
                assert '"state"' in ws.recv(timeout=30)
            assert flooder.get(tasks, headers=bearer).status_code == 200  # remembered
