"""Sticky routing for real: nginx, on the configuration ``coworkenv-env nginx-conf`` writes,
in front of ``serve --workers 2``. Whole HTTP episodes run through it reach the worker
that opened them at every request (nginx's log names the upstream of each), a request
sent straight to the other worker is refused, and WebSocket sessions run through it."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from coworkenv_engine.workers import nginx_conf

from .serving import free_ports, serving_workers
from .test_server import CASES, scripted, unwire

NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
)
pytestmark = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (.ci/run installs it)"
)


@contextlib.contextmanager
def nginx_in_front(urls: list[str], tmp: Path) -> Iterator[tuple[str, Path]]:
    """nginx in the foreground on ``nginx_conf`` for the workers at ``urls``, every path it
    writes under ``tmp``; yields its URL and its access log (a line per request: the
    upstream's address, the path, the X-Episode-Id header and the episode_id parameter)."""
    listen = free_ports(1)
    ports = [int(url.rsplit(":", 1)[1]) for url in urls]
    log = tmp / "access.log"
    temp = {name: tmp / name for name in ("client", "proxy", "fastcgi", "uwsgi", "scgi")}
    (tmp / "routing.conf").write_text(nginx_conf(ports, listen=listen))
    (tmp / "nginx.conf").write_text(
        f"pid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'};\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        "    log_format routed '$upstream_addr $uri $http_x_episode_id $arg_episode_id';\n"
        f"    access_log {log} routed;\n"
        f"    client_body_temp_path {temp['client']};\n"
        f"    proxy_temp_path {temp['proxy']};\n"
        f"    fastcgi_temp_path {temp['fastcgi']};\n"
        f"    uwsgi_temp_path {temp['uwsgi']};\n"
        f"    scgi_temp_path {temp['scgi']};\n"
        f"    include {tmp / 'routing.conf'};\n"
        "}\n"
    )
    proc = subprocess.Popen(
        [NGINX, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-g", "daemon off;"]
    )
    url = f"http://127.0.0.1:{listen}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/health", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp / "error.log").read_text()) from None
                time.sleep(0.1)
        yield url, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    with contextlib.ExitStack() as stack:
        urls, _ = stack.enter_context(serving_workers(2))
        url, log = stack.enter_context(nginx_in_front(urls, tmp_path_factory.mktemp("nginx")))
        yield url, urls, log


def test_every_request_of_an_http_episode_reaches_the_worker_that_opened_it(routed):
    url, workers, log = routed
    opened: dict[str, str] = {}
    with httpx.Client(base_url=url) as http:
        for env, key in CASES:  # every sample task; resets go round robin
            actions, expected = scripted(env, key, "oracle", 0)
            first = http.post("/reset", json={"environment": env, "task_key": key})
            episode_id = first.json()["observation"]["episode_id"]
            opened[episode_id] = episode_id[:3]
            assert unwire(first.json()) == expected[0]
            by_id = {"X-Episode-Id": episode_id}
            for action, obs in zip(actions, expected[1:], strict=True):
                step = http.post("/step", json={"action": action}, headers=by_id)
                assert step.status_code == 200, step.text
                assert unwire(step.json()) == obs
            state = http.get("/state", params={"episode_id": episode_id})
            assert state.json()["done"] is True
            assert http.post("/close", headers=by_id).json()["closed"] is True
    assert set(opened.values()) == {"w0-", "w1-"}
    port_of = {f"w{k}-": url.rsplit(":", 1)[1] for k, url in enumerate(workers)}
    reached: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        upstream, _, header, param = line.split()
        episode_id = header if header != "-" else param
        if episode_id != "-":
            reached.setdefault(episode_id, set()).add(upstream.rsplit(":", 1)[1])
    assert reached == {episode_id: {port_of[worker]} for episode_id, worker in opened.items()}


def test_a_request_sent_straight_to_the_other_worker_is_refused(routed):
    url, workers, _ = routed
    episode_id = httpx.post(f"{url}/reset", json={}).json()["observation"]["episode_id"]
    other = workers[1 - int(episode_id[1])]
    step = {"episode_id": episode_id, "action": {"reply": "Done."}}
    refused = httpx.post(f"{other}/step", json=step)
    assert refused.status_code == 421 and refused.json()["code"] == "MISDIRECTED"
    state = httpx.get(f"{url}/state", headers={"X-Episode-Id": episode_id}).json()
    assert state["step_count"] == 0
    assert httpx.post(f"{url}/close", headers={"X-Episode-Id": episode_id}).status_code == 200


def test_websocket_sessions_run_through_the_proxy_on_their_connection(routed):
    url, _, _ = routed
    env, key = CASES[0]
    actions, expected = scripted(env, key, "oracle", 0)
    seen = set()
    for _ in range(2):
        with connect(url.replace("http", "ws") + "/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {"environment": env, "task_key": key}}))
            seen.add(json.loads(ws.recv())["data"]["observation"]["episode_id"][:3])
            for action, obs in zip(actions, expected[1:], strict=True):
                ws.send(json.dumps({"type": "step", "data": action}))
                assert unwire(json.loads(ws.recv())["data"]) == obs
    assert seen == {"w0-", "w1-"}
