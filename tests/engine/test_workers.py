"""Several server processes (``workers.py``): a worker's episode ids carry its prefix, an HTTP
request for another worker's id is refused unlooked-at (421), its own unknown ids stay 404,
and the id may come in the query string or the ``X-Episode-Id`` header a proxy routes on."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from coworkenv_engine.cli import EXIT_USAGE, main
from coworkenv_engine.server import create_app
from coworkenv_engine.workers import misdirected, nginx_conf, prefix

from .helpers import SAMPLES
from .serving import running, serving_workers, worker_pids
from .test_server import SPECS

TASK = SPECS[0].tasks[0].key


@pytest.fixture(scope="module")
def worker_one():
    app = create_app(SPECS[:1], worker_id=1, max_sessions=8)
    with running(app) as url:
        yield url, app.state.store


def _open(url: str) -> str:
    reply = httpx.post(f"{url}/reset", json={"task_key": TASK})
    assert reply.status_code == 200
    return reply.json()["observation"]["episode_id"]


def _slots(store) -> dict:
    return {key: (slot.last_used, slot.session.step_count) for key, slot in store.slots.items()}


def test_a_workers_episode_ids_carry_its_prefix(worker_one):
    url, _ = worker_one
    episode_id = _open(url)
    assert episode_id.startswith("w1-") and len(episode_id) == 3 + 32
    with connect(url.replace("http", "ws") + "/ws") as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task_key": TASK}}))
        assert json.loads(ws.recv())["data"]["observation"]["episode_id"].startswith("w1-")
    assert httpx.post(f"{url}/close", json={"episode_id": episode_id}).status_code == 200


def test_another_workers_id_is_misdirected_and_nothing_is_touched(worker_one):
    url, store = worker_one
    mine = _open(url)
    before = _slots(store)
    theirs = "w0-" + mine.removeprefix("w1-")  # the same random part, another worker's prefix
    step = {"episode_id": theirs, "action": {"reply": "Done."}}
    answers = [
        httpx.post(f"{url}/step", json=step),
        httpx.get(f"{url}/state", params={"episode_id": theirs}),
        httpx.post(f"{url}/close", json={"episode_id": theirs}),
        httpx.post(f"{url}/reset", json={"task_key": TASK, "episode_id": theirs}),
        httpx.get(f"{url}/state", headers={"X-Episode-Id": "w12-x"}),
    ]
    assert [a.status_code for a in answers] == [421] * 5
    assert {a.json()["code"] for a in answers} == {"MISDIRECTED"}
    assert "belongs to worker w0, not to this one (w1)" in answers[0].json()["detail"]
    assert "worker w12" in answers[4].json()["detail"]
    assert _slots(store) == before
    assert httpx.post(f"{url}/close", json={"episode_id": mine}).status_code == 200


def test_an_unknown_id_of_its_own_prefix_or_none_is_not_found(worker_one):
    url, _ = worker_one
    for unknown in ("w1-" + "0" * 32, "0" * 32, "w-1", "worker0-x"):
        answer = httpx.get(f"{url}/state", params={"episode_id": unknown})
        assert (answer.status_code, answer.json()["code"]) == (404, "NOT_FOUND")


def test_the_id_may_come_in_the_query_or_a_header_and_copies_must_agree(worker_one):
    url, _ = worker_one
    episode_id = _open(url)
    action = {"action": {"tool_calls": [{"name": "list_events", "arguments": {}}]}}
    by_header = httpx.post(f"{url}/step", json=action, headers={"X-Episode-Id": episode_id})
    by_query = httpx.post(f"{url}/step", json=action, params={"episode_id": episode_id})
    both = httpx.post(
        f"{url}/step",
        json={**action, "episode_id": episode_id},
        params={"episode_id": episode_id},
        headers={"X-Episode-Id": episode_id},
    )
    assert [r.status_code for r in (by_header, by_query, both)] == [200, 200, 200]
    state = httpx.get(f"{url}/state", headers={"X-Episode-Id": episode_id}).json()
    assert state["step_count"] == 3
    differ = httpx.post(
        f"{url}/step", json={**action, "episode_id": episode_id}, headers={"X-Episode-Id": "w1-x"}
    )
    assert differ.status_code == 422
    assert httpx.get(f"{url}/state", headers={"X-Episode-Id": episode_id}).json()["step_count"] == 3
    closed = httpx.post(f"{url}/close", headers={"X-Episode-Id": episode_id})
    assert closed.json() == {"episode_id": episode_id, "closed": True}


def test_a_single_server_knows_no_worker_and_looks_every_id_up():
    assert misdirected("w3-abc", None) is None
    assert misdirected("w3-abc", 3) is None
    assert "w3" in misdirected("w3-abc", 0)
    assert prefix(7) == "w7-"


def test_the_nginx_conf_routes_each_prefix_to_its_worker():
    conf = nginx_conf([9000, 9001, 9002], listen=8080)
    assert "~^w2- coworkenv_w2;" in conf
    assert "upstream coworkenv_w2 {\n    server 127.0.0.1:9002;" in conf
    assert "listen 8080;" in conf and "proxy_pass http://$coworkenv_upstream;" in conf


def test_serve_workers_starts_each_worker_on_its_port_and_stops_them_together():
    with serving_workers(2) as (urls, proc):
        assert [_open(url)[:3] for url in urls] == ["w0-", "w1-"]
        pids = worker_pids(proc.pid)
        assert len(pids) == 2
    assert proc.returncode == 0
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def test_nginx_conf_prints_the_routing_and_workers_excludes_a_worker_id(capsys):
    out = io.StringIO()
    assert main(["nginx-conf", "--workers", "2", "--port", "9000", "--listen", "81"], out) == 0
    assert out.getvalue() == nginx_conf([9000, 9001], listen=81)
    sample = str(SAMPLES[0])
    assert main(["serve", sample, "--workers", "2", "--worker-id", "1"]) == EXIT_USAGE
    assert "not both" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", sample, "--workers", "0"])
