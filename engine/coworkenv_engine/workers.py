"""Several environment server processes on one machine, and the sticky routing in front.

A server's sessions live in the memory of the process that opened them. To use more than
one core, ``coworkenv-env serve --workers N --port P`` starts N server processes (``run``
here): worker K listens on port P+K and the episode ids it chooses begin with ``wK-``.
A WebSocket session stays on its connection, so a trainer may spread its WebSockets over
the workers' ports (or any proxy's round robin). An HTTP episode is a series of requests
naming its ``episode_id``; each must reach the worker that opened it. A worker that is
asked about an id of another worker's prefix answers 421 (``MISDIRECTED``, naming that
worker, read from the id alone: it holds nothing of another worker's sessions); an unknown
id of its own prefix is 404 as on a single server.

``nginx_conf`` writes the sticky routing: nginx reads the id from the query string
(``?episode_id=``) or the ``X-Episode-Id`` header (the server reads both, as well as the
body's ``episode_id``, and refuses a request whose copies differ) and sends the request to
the worker of its prefix; a request without one (a new episode's reset, ``/tasks``, a
WebSocket) goes round robin. ``/mcp`` goes to worker 0: an MCP session's id is chosen by
the MCP SDK and carries no worker prefix.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

_PREFIX = re.compile(r"w(\d+)-")


def prefix(worker: int) -> str:
    """The start of the episode ids worker ``worker`` chooses."""
    return f"w{worker}-"


def misdirected(episode_id: str, worker: int | None) -> str | None:
    """Why ``worker`` does not answer for ``episode_id`` (another worker's prefix), or None
    (its own, or a server without a worker id: the id is then looked up as any other)."""
    found = _PREFIX.match(episode_id)
    if worker is None or found is None or int(found.group(1)) == worker:
        return None
    return (
        f"episode {episode_id!r} belongs to worker w{found.group(1)}, not to this one "
        f"(w{worker}): send its requests to that worker (behind a proxy, put the id in the "
        "X-Episode-Id header or the episode_id query parameter)"
    )


def run(
    commands: Sequence[Sequence[str]], *, env: Mapping[str, str] | None = None, poll: float = 0.2
) -> int:
    """Start one process per command (in ``env``) and wait. SIGINT or SIGTERM is passed on
    to them all (a stop asked for: 0); when one ends by itself the others are stopped and
    its exit status returned (128 + N for a death by signal N)."""
    procs = [subprocess.Popen(list(command), env=env) for command in commands]
    asked: list[int] = []

    def stop(signum: int, frame: object = None) -> None:
        asked.append(signum)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not asked and all(proc.poll() is None for proc in procs):
            time.sleep(poll)
        alone = [proc.returncode for proc in procs if not asked and proc.poll() is not None]
        stop(signal.SIGTERM)
        for proc in procs:
            proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    code = next((code for code in alone if code), 0)
    return 128 - code if code < 0 else code


def nginx_conf(ports: Sequence[int], *, listen: int, host: str = "127.0.0.1") -> str:
    """An nginx ``http {}`` block's content (a ``conf.d`` file) that listens on ``listen``
    and routes to the workers on ``host``'s ``ports`` (worker K on ``ports[K]``)."""
    upstreams = "".join(
        f"upstream coworkenv_w{k} {{\n    server {host}:{port};\n    keepalive 32;\n}}\n"
        for k, port in enumerate(ports)
    )
    every = "".join(f"    server {host}:{port};\n" for port in ports)
    routes = "".join(f"    ~^w{k}- coworkenv_w{k};\n" for k in range(len(ports)))
    return f"""\
# CoworkEnv environment server: sticky routing of HTTP episodes by their id's worker prefix
# (written by `coworkenv-env nginx-conf`; see coworkenv_engine/workers.py).
map "$arg_episode_id$http_x_episode_id" $coworkenv_upstream {{
    default coworkenv_workers;
{routes}}}
map $http_upgrade $coworkenv_connection {{
    default upgrade;
    "" "";
}}
{upstreams}upstream coworkenv_workers {{
{every}    keepalive 32;
}}
server {{
    listen {listen};
    client_max_body_size 4m;
    proxy_http_version 1.1;
    proxy_set_header Host $host;
    proxy_set_header Upgrade $http_upgrade;
    proxy_set_header Connection $coworkenv_connection;
    proxy_read_timeout 3600s;
    proxy_send_timeout 3600s;
    location / {{
        proxy_pass http://$coworkenv_upstream;
    }}
    location ~ /mcp$ {{
        proxy_buffering off;
        proxy_pass http://coworkenv_w0;
    }}
}}
"""
