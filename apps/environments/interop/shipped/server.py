"""The generic CoworkEnv mock service for Claw-Eval (standard library HTTP server).

    python mock_services/coworkenv/server.py tasks/<task_id>

Serves every tool of the task as ``POST /<service>/<tool>`` (the JSON body is the tool's
arguments, the JSON response its result; errors answer with status >= 400 and
``{"error": {"code", "message"}}``), executed by CoworkEnv's engine over the records in
``tasks/<task_id>/fixtures``. Claw-Eval conventions: the port comes from ``PORT`` (default
9200), ``GET /coworkenv/audit`` returns ``calls`` (endpoint, request_body, response_body,
timestamp) plus the engine's ``audit_log``, the current ``state`` and ``turn_states`` (the
server-side evidence the grader reads), ``POST /coworkenv/reset`` reloads the fixtures,
``/coworkenv/health`` answers health probes. A view tool (one that shows a record's image)
answers ``{"record", "frames": [{"index", "name", "mime_type", "image_b64"}],
"text_summary"}``, its images read from ``tasks/<task_id>/fixtures/media``.

Multi-turn tasks: the service is also the task's scripted user, an OpenAI-compatible chat
endpoint at ``/coworkenv/user/v1`` (``POST .../chat/completions``). Point Claw-Eval's
``user_agent_model.base_url`` at it: the harness asks its user agent for the next message
each time the assistant answers without a tool call, which is exactly where a CoworkEnv turn
ends, so each request ends the current turn (its state is kept for ``at_turn`` checks),
applies the next turn's exogenous updates (silent ones unannounced, loud ones as
``[notice]`` lines) and answers with that turn's message; after the last turn it answers
``[DONE]``. A retried request (its transcript holds no newer user message than the last
answer) gets the same answer again without advancing. ``POST /coworkenv/advance`` does the
same for harnesses that script turns themselves.

Environment variables: ``PORT``; ``COWORKENV_FAULTS=0`` turns off the environment's
injected faults (on by default, as the environment declares them); ``COWORKENV_SEED``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from coworkenv_runtime import http_status, load_task, media_resolver, view_answer

from coworkenv_engine.simulator import Episode

MAX_BODY = 1_000_000
PREFIX = "/coworkenv/"
USER_CHAT = PREFIX + "user/v1/chat/completions"
DONE = "[DONE]"
# Claw-Eval's user agent sends the conversation as one text, a line "[用户]: …" opening each
# user message (the first is the task's prompt; tool results carry no text and are absent).
USER_LINE = "[用户]: "
MEDIA_CAPTION = "[Visual content from tool results"


def user_messages_seen(body) -> int | None:
    """How many user messages the transcript in a user-agent request holds (None when it
    is not Claw-Eval's format: then every request advances)."""
    texts = []
    for message in (body or {}).get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p.get("text", "") for p in content if isinstance(p, dict)]
    lines = [line for text in texts for line in text.splitlines()]
    seen = [line for line in lines if line.startswith(USER_LINE)]
    seen = [line for line in seen if not line[len(USER_LINE) :].startswith(MEDIA_CAPTION)]
    return len(seen) or None


class Service:
    """One episode of the task, recreated on reset; every request holds the lock."""

    def __init__(self, task_dir: Path):
        self.task_dir = task_dir
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        spec, key = load_task(self.task_dir)
        faults = os.environ.get("COWORKENV_FAULTS", "1") != "0"
        seed = int(os.environ.get("COWORKENV_SEED", "0"))
        self.episode = Episode(spec, key, seed, faults=faults)
        self.media = media_resolver(self.task_dir)
        self.routes = {f"/{t.binding.service}/{t.name}": t.name for t in spec.tools}
        self.calls: list[dict] = []
        self.turn_states: dict[int, dict] = {}
        self.last_user_text = ""
        self.episode.advance_turn()

    def advance(self) -> dict:
        current = self.episode.turn_index
        self.turn_states[current] = self.episode.state_snapshot()
        turn = self.episode.advance_turn()
        if turn is None:
            self.last_user_text = DONE
            return {"status": "done", "turn": current}
        self.last_user_text = turn.text
        return {"status": "advanced", "turn": turn.index, "message": turn.text}

    def user_reply(self, body) -> dict:
        """The scripted user's next message, as an OpenAI chat completion."""
        seen = user_messages_seen(body)
        if seen is not None and seen <= self.episode.turn_index and self.last_user_text:
            text = self.last_user_text  # a retry of the request already answered
        else:
            self.advance()
            text = self.last_user_text
        return {
            "id": f"coworkenv-user-{self.episode.turn_index}",
            "object": "chat.completion",
            "created": int(datetime.now(UTC).timestamp()),
            "model": (body or {}).get("model") or "coworkenv-script",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def audit(self) -> dict:
        state = self.episode.state_snapshot()
        turn_states = {str(k): v for k, v in self.turn_states.items()}
        turn_states[str(self.episode.turn_index)] = state
        return {
            "calls": self.calls,
            "audit_log": [e.to_dict() for e in self.episode.audit_log],
            "exogenous_log": json.loads(json.dumps(self.episode.exogenous_log, default=str)),
            "state": state,
            "turn": self.episode.turn_index,
            "turn_states": turn_states,
        }

    def post(self, path: str, body) -> tuple[int, object] | None:
        """The (status, body) a POST to ``path`` gets, None when no route has it."""
        if path == PREFIX + "health":
            return 200, {"status": "ok"}
        if path == PREFIX + "reset":
            self.reset()
            return 200, {"status": "reset"}
        if path == PREFIX + "advance":
            return 200, self.advance()
        if path == USER_CHAT:
            return 200, self.user_reply(body)
        if path == PREFIX + "audit":
            return 200, self.audit()
        if path in self.routes:
            return self.call(path, body)
        return None

    def call(self, path: str, arguments) -> tuple[int, object]:
        result = self.episode.call(self.routes[path], arguments)
        if result.ok and result.images:
            status, body = view_answer(result.content, result.images, self.media)
        elif result.ok:
            status, body = 200, result.content
        else:
            status = http_status(result.error_code)
            body = {"error": {"code": result.error_code, "message": result.error_message}}
        self.calls.append(
            {
                "endpoint": path,
                "request_body": arguments,
                "response_body": body,
                "status": status,
                "timestamp": datetime.now(UTC).isoformat(),
            }
        )
        return status, body


def make_handler(service: Service):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the harness's output clean
            pass

        def _send(self, status: int, body) -> None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise ValueError(f"the request body is over {MAX_BODY} bytes")
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw.decode("utf-8")) if raw.strip() else {}

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            with service.lock:
                if path == PREFIX + "health":
                    return self._send(200, {"status": "ok"})
                if path == PREFIX + "audit":
                    return self._send(200, service.audit())
            self._send(404, {"error": {"code": "not_found", "message": f"no route {path}"}})

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                body = self._body()
            except (ValueError, UnicodeDecodeError) as exc:
                return self._send(400, {"error": {"code": "bad_request", "message": str(exc)}})
            with service.lock:
                reply = service.post(path, body)
                if reply is not None:
                    return self._send(*reply)
            self._send(404, {"error": {"code": "unknown_tool", "message": f"no tool at {path}"}})

    return Handler


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: server.py tasks/<task_id>", file=sys.stderr)
        return 2
    service = Service(Path(argv[1]))
    port = int(os.environ.get("PORT", "9200"))
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(service))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
