"""A scripted OpenAI-compatible server on loopback, for tests and benchmarks.

It speaks enough of the OpenAI API for the real ``openai`` client: ``POST
/v1/chat/completions`` (non-streaming) and ``GET /v1/models``; and, for fine-tuning, ``POST
/v1/files`` (multipart), ``POST /v1/fine_tuning/jobs``, ``GET /v1/fine_tuning/jobs/{id}``,
``GET /v1/fine_tuning/jobs/{id}/events`` and ``POST /v1/fine_tuning/jobs/{id}/cancel`` (see
``FineTuning``: each retrieve moves a job one step through validating_files → queued →
running (one metrics event per step) → succeeded, or failed as configured). What chat
completions answer is scripted:

    with LoopbackLLMServer() as server:
        server.script(
            Reply.error(429, "slow down", headers={"Retry-After": "1"}),
            Reply.text("hello", usage=(12, 3)),
        )
        ... point a ModelEndpoint at server.base_url ...
        assert len(server.requests) == 2

Replies are taken from the script queue in order; when it is empty, ``responder`` (a
callable ``RecordedRequest -> Reply``) answers if set, else a 500 saying the script ran out
(counted in ``unexpected``). Every request is recorded (headers, parsed body, arrival time)
and the number of requests in flight is tracked (``max_in_flight``). ``latency`` adds a
fixed delay to every answer; ``capacity`` caps concurrent requests, either queueing the
extra ones (``over_capacity="queue"``, like vLLM) or refusing them with 429
(``"reject"``, like a hosted API).

No Django here: benches and other test folders import it freely.
"""

from __future__ import annotations

import collections
import email.parser
import email.policy
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer."""

    content: str | None = None
    tool_calls: list[dict] | None = None  # [{"name", "arguments": dict | str, "id"?}]
    finish_reason: str | None = None  # default: "tool_calls" with tool calls, else "stop"
    usage: tuple[int, int] | None = None  # (prompt_tokens, completion_tokens); default estimated
    model: str | None = None  # default: the model the request named
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | str | dict | list | None = None  # sent as is instead of a chat completion
    delay: float = 0.0  # seconds to wait before answering
    hang: bool = False  # never answer; the connection is closed when the server stops
    no_usage: bool = False  # omit "usage" from the completion

    # --- builders --------------------------------------------------------------------

    @classmethod
    def text(cls, content: str, **kwargs) -> Reply:
        return cls(content=content, **kwargs)

    @classmethod
    def json(cls, value: Any, **kwargs) -> Reply:
        return cls(content=json.dumps(value), **kwargs)

    @classmethod
    def tool_call(cls, name: str, arguments: dict | str | None = None, **kwargs) -> Reply:
        return cls(tool_calls=[{"name": name, "arguments": arguments or {}}], **kwargs)

    @classmethod
    def tools(cls, *calls: tuple[str, dict | str], content: str | None = None, **kwargs) -> Reply:
        return cls(
            content=content,
            tool_calls=[{"name": name, "arguments": args} for name, args in calls],
            **kwargs,
        )

    @classmethod
    def error(
        cls, status: int, message: str = "error", *, headers: dict | None = None, **kwargs
    ) -> Reply:
        """An OpenAI-style error body: {"error": {"message", "type", "code"}}."""
        body = {"error": {"message": message, "type": "loopback_error", "code": status}}
        return cls(status=status, body=body, headers=headers or {}, **kwargs)

    @classmethod
    def rate_limited(cls, retry_after: float | None = 1, *, ms: bool = False, **kwargs) -> Reply:
        headers = {}
        if retry_after is not None:
            if ms:
                headers["retry-after-ms"] = str(round(retry_after * 1000))
            else:
                headers["Retry-After"] = f"{retry_after:g}"
        return cls.error(429, "Rate limit reached.", headers=headers, **kwargs)

    @classmethod
    def truncated_json(cls, value: Any, keep: float = 0.6, **kwargs) -> Reply:
        """The first part of a JSON document, as when a model hits max_tokens."""
        text = json.dumps(value)
        kwargs.setdefault("finish_reason", "length")
        return cls(content=text[: max(1, int(len(text) * keep))], **kwargs)

    @classmethod
    def garbage(cls, **kwargs) -> Reply:
        """A 200 whose body is not JSON at all (a misbehaving proxy)."""
        return cls(body=b"<html><body>502 Bad Gateway</body></html>", **kwargs)

    @classmethod
    def hanging(cls) -> Reply:
        return cls(hang=True)


JUDGE_PHRASE = re.compile(r'"([^"]+)"')


def judge_verdict(request: RecordedRequest) -> dict | None:
    """A deterministic judge: the verdict for a judge prompt (a user message holding a JSON
    object with a ``rubric``), or None for any other request.

    The rubric's double-quoted phrases are what it asks for; each counts as met when it
    appears (case-insensitively) in the final reply, the audit log or the changed records.
    The score is the share met (1.0 for a rubric without quoted phrases), and the reasoning
    names what was found and what is missing.
    """
    for message in reversed(request.messages):
        if message.get("role") != "user" or not isinstance(message.get("content"), str):
            continue
        try:
            prompt = json.loads(message["content"])
        except ValueError:
            return None
        if not isinstance(prompt, dict) or "rubric" not in prompt:
            return None
        haystack = json.dumps(
            [prompt.get("final_reply"), prompt.get("audit_log"), prompt.get("changes")],
            ensure_ascii=False,
        ).lower()
        phrases = JUDGE_PHRASE.findall(str(prompt["rubric"]))
        found = [p for p in phrases if p.lower() in haystack]
        missing = [p for p in phrases if p.lower() not in haystack]
        score = len(found) / len(phrases) if phrases else 1.0
        reasoning = (
            f"Found: {', '.join(found) or 'nothing'}. Missing: {', '.join(missing) or 'nothing'}."
        )
        return {"score": score, "reasoning": reasoning}
    return None


def judge_responder(fallback: Callable[[RecordedRequest], Reply] | None = None):
    """A ``responder`` answering judge prompts with ``judge_verdict`` (as JSON text), and
    anything else with ``fallback`` (default: a 500 saying it was not a judge prompt)."""

    def respond(request: RecordedRequest) -> Reply:
        verdict = judge_verdict(request)
        if verdict is not None:
            return Reply.json(verdict)
        if fallback is not None:
            return fallback(request)
        return Reply.error(500, "The loopback judge only answers judge prompts.")

    return respond


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, or None
    raw: bytes
    received_at: float  # time.monotonic()

    @property
    def messages(self) -> list[dict]:
        return (self.body or {}).get("messages", []) if isinstance(self.body, dict) else []


class FineTuning:
    """The files and fine-tuning jobs of a loopback server (thread-safe through its lock).

    ``steps``: metrics events a job reports while running (one per retrieve);
    ``fail_with``: a message to fail every job with instead of succeeding. Uploaded files
    keep their bytes (``files[id]["content"]``) so tests can compare them with exports.
    """

    def __init__(self, *, steps: int = 3, fail_with: str | None = None):
        self.steps = steps
        self.fail_with = fail_with
        self.files: dict[str, dict] = {}
        self.jobs: dict[str, dict] = {}
        self.events: dict[str, list[dict]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def upload(self, filename: str, purpose: str, content: bytes) -> dict:
        with self._lock:
            file_id = f"file-loopback-{next(self._ids)}"
            self.files[file_id] = {
                "id": file_id,
                "object": "file",
                "bytes": len(content),
                "created_at": int(time.time()),
                "filename": filename,
                "purpose": purpose,
                "status": "processed",
                "content": content,
            }
            return {k: v for k, v in self.files[file_id].items() if k != "content"}

    def create(self, body: dict) -> tuple[int, dict]:
        with self._lock:
            for key in ("training_file", "validation_file"):
                if body.get(key) and body[key] not in self.files:
                    return 400, {"error": {"message": f"No such file: {body[key]}", "param": key}}
            if not body.get("model") or not body.get("training_file"):
                return 400, {"error": {"message": "model and training_file are required."}}
            job_id = f"ftjob-loopback-{next(self._ids)}"
            hp = ((body.get("method") or {}).get("supervised") or {}).get("hyperparameters", {})
            self.jobs[job_id] = {
                "id": job_id,
                "object": "fine_tuning.job",
                "created_at": int(time.time()),
                "model": body["model"],
                "training_file": body["training_file"],
                "validation_file": body.get("validation_file"),
                "hyperparameters": hp,
                "method": body.get("method"),
                "seed": body.get("seed", 0),
                "suffix": body.get("suffix"),
                "metadata": body.get("metadata"),
                "status": "validating_files",
                "fine_tuned_model": None,
                "finished_at": None,
                "error": None,
                "result_files": [],
                "trained_tokens": None,
                "organization_id": "org-loopback",
                "_step": 0,
                "_cancel": False,
            }
            self.events[job_id] = []
            self._event(job_id, f"Created fine-tuning job: {job_id}")
            return 200, self._public(job_id)

    def retrieve(self, job_id: str) -> tuple[int, dict]:
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None:
                return 404, {"error": {"message": f"No such job: {job_id}"}}
            self._advance(job)
            return 200, self._public(job_id)

    def cancel(self, job_id: str) -> tuple[int, dict]:
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None:
                return 404, {"error": {"message": f"No such job: {job_id}"}}
            if job["status"] in ("succeeded", "failed", "cancelled"):
                return 400, {"error": {"message": f"Job is already {job['status']}."}}
            job["_cancel"] = True
            return 200, self._public(job_id)

    def list_events(self, job_id: str) -> tuple[int, dict]:
        with self._lock:
            if job_id not in self.jobs:
                return 404, {"error": {"message": f"No such job: {job_id}"}}
            return 200, {"object": "list", "data": self.events[job_id][::-1], "has_more": False}

    # --- internals (lock held) -------------------------------------------------------------

    def _public(self, job_id: str) -> dict:
        return {k: v for k, v in self.jobs[job_id].items() if not k.startswith("_")}

    def _event(self, job_id: str, message: str, *, kind: str = "message", data=None) -> None:
        self.events[job_id].append(
            {
                "id": f"ftevent-loopback-{next(self._ids)}",
                "object": "fine_tuning.job.event",
                "created_at": int(time.time()),
                "level": "info",
                "message": message,
                "type": kind,
                "data": data or {},
            }
        )

    def _advance(self, job: dict) -> None:
        job_id, status = job["id"], job["status"]
        if status in ("succeeded", "failed", "cancelled"):
            return
        if job["_cancel"]:
            job["status"], job["finished_at"] = "cancelled", int(time.time())
            self._event(job_id, "Fine-tuning job cancelled.")
        elif status == "validating_files":
            job["status"] = "queued"
            self._event(job_id, "Validating training file: done.")
        elif status == "queued":
            job["status"] = "running"
            self._event(job_id, "Fine-tuning job started.")
        elif job["_step"] < self.steps:
            job["_step"] += 1
            step = job["_step"]
            self._event(
                job_id,
                f"Step {step}/{self.steps}: training loss={2.0 / step:.4f}",
                kind="metrics",
                data={"step": step, "train_loss": 2.0 / step, "valid_loss": 2.5 / step},
            )
        elif self.fail_with:
            job["status"], job["finished_at"] = "failed", int(time.time())
            job["error"] = {"code": "invalid_training_file", "message": self.fail_with}
            self._event(job_id, f"Fine-tuning job failed: {self.fail_with}")
        else:
            job["status"], job["finished_at"] = "succeeded", int(time.time())
            job["fine_tuned_model"] = f"ft:{job['model']}:loopback:{job['suffix']}:{job_id[-4:]}"
            job["trained_tokens"] = 1234
            self._event(job_id, "The job has successfully completed.")


FINE_TUNING_JOB = re.compile(r"^/v1/fine_tuning/jobs/([^/?]+)(/events|/cancel)?/?(\?.*)?$")


class LoopbackLLMServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        capacity: int | None = None,
        over_capacity: str = "queue",
        responder: Callable[[RecordedRequest], Reply] | None = None,
        api_key: str | None = None,
        models: tuple[str, ...] = ("loopback-model",),
        hang_limit: float = 60.0,
        fine_tuning: FineTuning | None = None,
    ):
        if over_capacity not in ("queue", "reject"):
            raise ValueError("over_capacity is 'queue' or 'reject'")
        self.host = host
        self.port = port
        self.latency = latency
        self.capacity = capacity
        self.over_capacity = over_capacity
        self.responder = responder
        self.api_key = api_key  # when set, other bearer tokens get 401
        self.models = models
        self.hang_limit = hang_limit
        self.fine_tuning = fine_tuning or FineTuning()
        self.requests: list[RecordedRequest] = []
        self.unexpected = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.rejected = 0
        self._queue: collections.deque[Reply] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._capacity = threading.Semaphore(capacity) if capacity else None
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle --------------------------------------------------------------------

    def start(self) -> LoopbackLLMServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _Listener((self.host, self.port), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> LoopbackLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # --- scripting -----------------------------------------------------------------------

    def script(self, *replies: Reply) -> LoopbackLLMServer:
        with self._lock:
            self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._queue)

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.unexpected = self.max_in_flight = self.rejected = 0

    # --- serving (called from handler threads) ------------------------------------------

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        with self._lock:
            self.unexpected += 1
        return Reply.error(500, "The loopback server's script ran out of replies.")

    def _completion(self, request: RecordedRequest, reply: Reply) -> dict:
        body = request.body if isinstance(request.body, dict) else {}
        tool_calls = []
        for n, call in enumerate(reply.tool_calls or []):
            arguments = call.get("arguments", {})
            tool_calls.append(
                {
                    "id": call.get("id") or f"call_{next(self._ids)}_{n}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        finish = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
        if reply.usage is not None:
            prompt_tokens, completion_tokens = reply.usage
        else:
            prompt_tokens = 1 + len(json.dumps(body.get("messages", []))) // 4
            completion_tokens = 1 + len(json.dumps(message)) // 4
        completion = {
            "id": f"chatcmpl-loopback-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or self.models[0],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if not reply.no_usage:
            completion["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        return completion


class _Listener(ThreadingHTTPServer):
    # A listen backlog as deep as production servers keep (uvicorn 2048, the kernel's
    # somaxconn caps it): socketserver's default is 5, so 64 clients connecting at once had
    # SYNs dropped and waited for the kernel's 1 s retransmit — a whole second added to a
    # few requests that no real endpoint adds.
    request_queue_size = 2048


class _Handler(BaseHTTPRequestHandler):
    owner: LoopbackLLMServer
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as every production server sets (uvicorn, vLLM): the headers and the body
    # go out in two writes, and with Nagle on the body waited for the client's delayed ACK
    # (~40 ms a request on Linux loopback, whatever ``latency`` said).
    disable_nagle_algorithm = True

    def log_message(self, format, *args):
        pass

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            raw=raw,
            received_at=time.monotonic(),
        )
        with self.owner._lock:
            self.owner.requests.append(request)
        return request

    def _send(self, status: int, body, headers: dict | None = None) -> None:
        if isinstance(body, dict | list):
            payload = json.dumps(body).encode()
            content_type = "application/json"
        elif isinstance(body, str):
            payload = body.encode()
            content_type = "text/plain; charset=utf-8"
        else:
            payload = body or b""
            content_type = "text/html; charset=utf-8"
        self.send_response(status)
        names = {name.lower() for name in (headers or {})}
        if "content-type" not in names:
            self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _authorized(self, request: RecordedRequest) -> bool:
        if self.owner.api_key is None:
            return True
        if request.headers.get("authorization") == f"Bearer {self.owner.api_key}":
            return True
        self._send(
            401,
            {
                "error": {
                    "message": "Incorrect API key provided.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        )
        return False

    def do_GET(self):
        request = self._record()
        if not self._authorized(request):
            return
        if request.path.rstrip("/").endswith("/models"):
            data = [
                {"id": name, "object": "model", "created": 0, "owned_by": "loopback"}
                for name in self.owner.models
            ]
            self._send(200, {"object": "list", "data": data})
        elif match := FINE_TUNING_JOB.match(request.path):
            job_id, tail = match.group(1), match.group(2)
            if tail == "/events":
                self._send(*self.owner.fine_tuning.list_events(job_id))
            elif tail is None:
                self._send(*self.owner.fine_tuning.retrieve(job_id))
            else:
                self._send(405, {"error": {"message": "Use POST."}})
        else:
            self._send(404, {"error": {"message": f"No route {request.path}"}})

    def _fine_tuning_post(self, request: RecordedRequest) -> None:
        tuning = self.owner.fine_tuning
        path = request.path.split("?")[0].rstrip("/")
        if path == "/v1/files":
            content_type = request.headers.get("content-type", "")
            message = email.parser.BytesParser(policy=email.policy.default).parsebytes(
                f"Content-Type: {content_type}\r\n\r\n".encode() + request.raw
            )
            fields, upload = {}, None
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                if part.get_filename() is not None:
                    upload = (part.get_filename(), part.get_payload(decode=True))
                else:
                    fields[name] = part.get_content().strip()
            if upload is None:
                self._send(400, {"error": {"message": "No file in the upload."}})
                return
            self._send(200, tuning.upload(upload[0], fields.get("purpose", ""), upload[1]))
        elif path == "/v1/fine_tuning/jobs":
            self._send(*tuning.create(request.body if isinstance(request.body, dict) else {}))
        elif (match := FINE_TUNING_JOB.match(path)) and match.group(2) == "/cancel":
            self._send(*tuning.cancel(match.group(1)))
        else:
            self._send(404, {"error": {"message": f"No route {request.path}"}})

    def do_POST(self):
        owner = self.owner
        request = self._record()
        if request.path.startswith(("/v1/files", "/v1/fine_tuning/")):
            if self._authorized(request):
                self._fine_tuning_post(request)
            return
        if not request.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"No route {request.path}"}})
            return
        with owner._lock:
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        self._acquired = False
        self._finished = False
        try:
            if owner._capacity is not None:
                if owner.over_capacity == "reject":
                    self._acquired = owner._capacity.acquire(blocking=False)
                    if not self._acquired:
                        with owner._lock:
                            owner.rejected += 1
                        self._finish()
                        self._send(
                            429,
                            {"error": {"message": "Over capacity.", "type": "rate_limit"}},
                            {"Retry-After": "0"},
                        )
                        return
                else:
                    self._acquired = owner._capacity.acquire()
            if owner.api_key is not None and not self._key_ok(request):
                self._finish()
                self._authorized(request)
                return
            reply = owner._next_reply(request)
            if reply.hang:
                owner._stopping.wait(owner.hang_limit)
                self.close_connection = True
                return
            wait = owner.latency + reply.delay
            if wait and owner._stopping.wait(wait):
                self.close_connection = True
                return
            if reply.body is not None or reply.status != 200:
                status, payload = reply.status, reply.body
            else:
                status, payload = 200, owner._completion(request, reply)
            # Leave the in-flight count before answering: once the client has the answer it
            # may start its next request, which must not be counted alongside this one.
            self._finish()
            self._send(status, payload, reply.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self._finish()

    def _key_ok(self, request: RecordedRequest) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.owner.api_key}"

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._acquired:
            self.owner._capacity.release()
        with self.owner._lock:
            self.owner.in_flight -= 1
