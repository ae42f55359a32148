"""Helpers for the interop tests: write an export to disk, run its mock service on loopback,
replay a reference solution over HTTP, grade in a subprocess, find a Claw-Eval checkout."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# Claw-Eval itself is never vendored: the tests that run its validator or harness use the
# checkout named by CLAW_EVAL_REPO (CI points it at the pinned copy beside the repository) and
# skip with the reason when there is none.
TRANSIENT = (429, 500, 504)

# The start of a script grade() runs: the exported grader's class as ``cls``, the payload.
LOAD_GRADER = """
import importlib.util, json, sys
from pathlib import Path
task_dir, payload = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
spec = importlib.util.spec_from_file_location("exported_grader", task_dir / "grader.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
[cls] = [v for v in vars(module).values()
         if isinstance(v, type) and v.__module__ == "exported_grader"]
"""

GRADE_SCRIPT = (
    LOAD_GRADER
    + """
grader = cls()
scores = grader.grade(payload["messages"], [], None, audit_data=payload["audit"])
grading = grader.last_grading
print(json.dumps({
    "completion": scores.completion, "robustness": scores.robustness, "safety": scores.safety,
    "score": round(scores.safety * (0.8 * scores.completion + 0.2 * scores.robustness), 4),
    "verdicts": {v.grader_id: v.status for v in grading.verdicts} if grading else {},
    "unapplied_turns": grader.unapplied_turns,
}))
"""
)


def receipts_document(tasks: int = 1) -> tuple[dict, dict[str, bytes]]:
    """A receipts environment (canonical, its view tool showing each receipt's image) and
    its files by sha256."""
    from apps.synthesis.generators.receipts import generate_receipts_environment
    from coworkenv_engine.spec import canonical_dump

    document, files = generate_receipts_environment(seed=5, tasks=tasks, eval_fraction=0)
    return canonical_dump(document), files


def write_tree(files: dict[str, bytes], root: Path) -> Path:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MockService:
    """The exported mock service of one task, on a free loopback port."""

    def __init__(self, root: Path, task_dir: Path, env: dict | None = None):
        self.root, self.task_dir = root, task_dir
        self.port = free_port()
        self.env = {**os.environ, "PORT": str(self.port), **(env or {})}

    def __enter__(self) -> MockService:
        relative = self.task_dir.relative_to(self.root).as_posix()
        self.process = subprocess.Popen(
            [sys.executable, "mock_services/coworkenv/server.py", relative],
            cwd=self.root,
            env=self.env,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(self.process.stderr.read().decode()[-2000:])
            try:
                self.request("GET", "/coworkenv/health")
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the mock service did not answer its health check in 30 s")

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process.stderr.close()

    def request(self, method: str, path: str, body=None, raw: bytes | None = None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def audit(self) -> dict:
        return self.request("GET", "/coworkenv/audit")[1]


def tool_paths(task_dir: Path) -> dict[str, str]:
    document = json.loads((task_dir / "coworkenv_task.json").read_text())
    return {t["name"]: f"/{t['binding']['service']}/{t['name']}" for t in document["tools"]}


USER_CHAT = "/coworkenv/user/v1/chat/completions"


def user_agent_request(messages: list[dict]) -> dict:
    """The request Claw-Eval's ``UserAgent.generate_response`` sends (its prompt text
    abridged): the persona as system prompt, the conversation as one text, a ``[用户]: `` or
    ``[助手]: `` line opening each message with text."""
    lines = []
    for m in messages:
        if m["role"] == "user":
            lines.append(f"[用户]: {m['content'].removeprefix('[user_agent]').strip()}")
        elif m["role"] == "assistant" and m["content"]:
            lines.append(f"[助手]: {m['content']}")
    transcript = "\n".join(lines)
    return {
        "model": "coworkenv-script",
        "messages": [
            {"role": "system", "content": "你是一个模拟用户。…"},
            {"role": "user", "content": f"以下是到目前为止的对话\uff1a\n\n{transcript}\n\n请根据…"},
        ],
    }


def next_user_message(service: MockService, messages: list[dict]) -> str:
    status, body = service.request("POST", USER_CHAT, user_agent_request(messages))
    assert status == 200, body
    return body["choices"][0]["message"]["content"]


def replay_reference(service: MockService) -> tuple[list[dict], list[int]]:
    """The reference solution over HTTP as Claw-Eval runs it: the prompt, the calls of turn 0
    (a transient error retried up to 3 times), the reply; then the scripted user (the mock
    service's chat endpoint) for each later turn's message, up to its ``[DONE]``. Returns the
    conversation (later user messages prefixed ``[user_agent]`` as in Claw-Eval's traces)
    and every response status."""
    document = json.loads((service.task_dir / "coworkenv_task.json").read_text())
    task, paths = document["tasks"][0], tool_paths(service.task_dir)
    messages, statuses = [{"role": "user", "content": task["turns"][0]["message"]}], []
    for index in range(len(task["turns"])):
        step = next((s for s in task["reference_solution"] if s["turn"] == index), None)
        for call in step["calls"] if step else []:
            for _attempt in range(4):
                status, _ = service.request("POST", paths[call["tool"]], call["arguments"])
                statuses.append(status)
                if status not in TRANSIENT:
                    break
        messages.append({"role": "assistant", "content": (step or {}).get("reply") or "Done."})
        text = next_user_message(service, messages)
        if index + 1 == len(task["turns"]):
            assert text == "[DONE]"
        else:
            messages.append({"role": "user", "content": f"[user_agent]\n{text}"})
    return messages, statuses


def grade(
    task_dir: Path, messages: list[dict], audit: dict, tmp: Path, *, script: str = GRADE_SCRIPT
) -> dict:
    """Run the exported grader.py in a subprocess (its imports stay out of this process) with
    ``script``, which reads the task folder and the payload and prints JSON."""
    path, payload = tmp / "grade.py", tmp / "payload.json"
    path.write_text(script)
    payload.write_text(json.dumps({"messages": messages, "audit": {"coworkenv": audit}}))
    done = subprocess.run(
        [sys.executable, str(path), str(task_dir), str(payload)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def claw_eval_checkout(tmp: Path) -> Path | None:
    """A directory with Claw-Eval's scripts/ and src/ (to copy an export into), or None."""
    named = os.environ.get("CLAW_EVAL_REPO")
    if named and (Path(named) / "scripts" / "validate_tasks.py").is_file():
        target = tmp / "claw-eval"
        for part in ("scripts", "src"):
            shutil.copytree(Path(named) / part, target / part)
        return target
    return None


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def reference_responder(task_dir: Path):
    """A loopback-LLM responder replaying the task's reference solution as a model would:
    one tool call per completion, a transiently failed call retried (up to 4 attempts),
    then the turn's reference reply. The turn is the number of user messages with text so
    far (the prompt, then the user agent's): the harness asks the user agent after each
    reply without a tool call."""
    from tests.llm_server import Reply

    document = json.loads((task_dir / "coworkenv_task.json").read_text())
    steps = {s["turn"]: s for s in document["tasks"][0]["reference_solution"]}
    transient = ('"rate_limit"', '"server_error"', '"timeout"')

    def respond(request):
        turn, start = -1, 0
        for i, message in enumerate(request.messages):
            text = _text_of(message)
            if message.get("role") == "user" and text and not text.startswith("[Visual"):
                turn, start = turn + 1, i + 1
        step = steps.get(turn) or {"calls": [], "reply": ""}
        calls, index, attempts = step["calls"], 0, 0
        for message in request.messages[start:]:
            if message.get("role") != "tool":
                continue
            attempts += 1
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            if not any(t in text for t in transient) or attempts >= 4:
                index, attempts = index + 1, 0
        if index < len(calls):
            return Reply.tool_call(calls[index]["tool"], calls[index]["arguments"])
        return Reply.text(step.get("reply") or "Done.")

    return respond


# Drives an exported ClawMark task.py the way ClawMark's orchestrator does — stage K, then
# the agent's work (here: the given state written into the workspace and the given reply
# into outputs/replies/stageK.md), then a snapshot of the workspace (ctx.workspace,
# ctx.snapshots["stageK"]) and stage K's checkers on it; ``final`` checkers at the end —
# with a ``ctx`` whose filesystem is a local directory standing for /workspace (ClawMark's
# runs in a container).
CLAWMARK_DRIVER = """
import asyncio, importlib.util, json, shutil, sys, types
from pathlib import Path

task_py, workspace = Path(sys.argv[1]), Path(sys.argv[2])
states = json.loads(Path(sys.argv[3]).read_text())
replies = json.loads(Path(sys.argv[4]).read_text())
session = Path(sys.argv[5]).read_text() if len(sys.argv) > 5 else None


class LocalFS:
    def _local(self, remote):
        return workspace / remote.removeprefix("/workspace").lstrip("/")

    async def upload_file(self, local, remote):
        target = self._local(remote)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(local, target)

    async def upload_dir(self, local, remote):
        shutil.copytree(local, self._local(remote), dirs_exist_ok=True)

    async def read_file(self, remote):
        return self._local(remote).read_text()


class Email:
    # records what ClawMark's EmailManager would send (same signature)

    def __init__(self):
        self.sent = []

    async def send_email(self, from_user, to, subject, body, content_type="plain",
                         sender_name=None):
        self.sent.append({"from_user": from_user, "to": to, "subject": subject, "body": body})
        return True


class Calendar:
    # records what ClawMark's CalendarManager would add (same signature)

    def __init__(self):
        self.calendars, self.events = [], []

    async def create_calendar(self, name):
        self.calendars.append(name)
        return name

    async def add_event(self, calendar_name, summary, dtstart, dtend, *, description="",
                        location="", uid=None):
        self.events.append([calendar_name, summary, dtstart.isoformat(), dtend.isoformat(), uid])
        return uid


class Sandbox:
    # answers ``cat`` of OpenClaw's session logs as ClawMark's DockerSandbox.exec would

    def __init__(self):
        self.commands = []

    async def exec(self, command, timeout_sec=300, env=None):
        self.commands.append(command)
        found = session is not None and "/root/.openclaw/agents/main/sessions/" in command
        return types.SimpleNamespace(stdout=session if found else "", stderr="", return_code=0)


class Ctx:
    def __init__(self, environments):
        self.sandbox = Sandbox()
        self.fs = LocalFS()
        self.workspace = None
        self.snapshots = {}
        self.task_dir = task_py.parent
        self.email = Email() if "email" in environments else None
        self.calendar = Calendar() if "calendar" in environments else None


def put(state):
    for service, collections in state.items():
        for collection, records in collections.items():
            path = workspace / "coworkenv" / service / f"{collection}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(records))


spec = importlib.util.spec_from_file_location("exported_task", task_py)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)


async def main():
    ctx, out = Ctx(module.METADATA["environments"]), {"stages": [], "checks": {}}
    k = 0
    while hasattr(module, f"stage{k}"):
        out["stages"].append(await getattr(module, f"stage{k}")(ctx))
        if str(k) in states:
            put(states[str(k)])
        if str(k) in replies:
            reply = workspace / "outputs" / "replies" / f"stage{k}.md"
            reply.parent.mkdir(parents=True, exist_ok=True)
            reply.write_text(replies[str(k)])
        snapshot = workspace.parent / f"snapshot-stage{k}"
        shutil.copytree(workspace, snapshot)
        ctx.workspace = snapshot
        ctx.snapshots[f"stage{k}"] = snapshot
        for entry in module.RUBRIC.get(f"stage{k}", []):
            out["checks"][entry["id"]] = await entry["checker"](ctx)
        k += 1
    for entry in module.RUBRIC.get("final", []):
        out["checks"][entry["id"]] = await entry["checker"](ctx)
    out["agents_md"] = (workspace / "AGENTS.md").is_file()
    out["metadata"] = module.METADATA
    out["sandbox"] = ctx.sandbox.commands
    out["email"] = ctx.email.sent if ctx.email else None
    out["calendar"] = [ctx.calendar.calendars, ctx.calendar.events] if ctx.calendar else None
    print(json.dumps(out))


asyncio.run(main())
"""


def drive_clawmark(
    task_py: Path,
    states: dict,
    tmp: Path,
    replies: dict[int, str] | None = None,
    session: str | None = None,
) -> dict:
    workspace = tmp / "workspace"
    workspace.mkdir(parents=True)
    (tmp / "driver.py").write_text(CLAWMARK_DRIVER)
    (tmp / "states.json").write_text(json.dumps({str(k): v for k, v in states.items()}))
    (tmp / "replies.json").write_text(json.dumps({str(k): v for k, v in (replies or {}).items()}))
    if session is not None:
        (tmp / "session.jsonl").write_text(session)
    done = subprocess.run(
        [sys.executable, str(tmp / "driver.py"), str(task_py), str(workspace),
         str(tmp / "states.json"), str(tmp / "replies.json"),
         *([str(tmp / "session.jsonl")] if session is not None else [])],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
