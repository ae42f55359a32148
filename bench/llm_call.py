"""LLM call micro-benchmark: the CPU one ``llm_chat`` costs its caller's thread.

    python bench/llm_call.py [--calls 300] [--repeat 3] [--tree PATH]

One thread calls ``llm_chat`` in a loop against the loopback OpenAI-compatible server
(latency 0), with a run step's request (system prompt, user turn, an assistant tool call and
its result, two tools) and a ``CallLogBuffer`` as a run passes it, flushed every three calls
as a run of ``bench/runs.py`` does at its end; the flush (one bulk write) is timed apart and
given per call. ``time.thread_time`` counts this thread only: the
server's threads are not in the figure. Prints best-of-``repeat`` µs per call, and the last
line is the same as JSON.

``--tree`` runs the same loop with another checkout's code (e.g. ``git worktree add
/tmp/before <commit>``): before and after in one sitting, each in a fresh process.

Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = str(Path(__file__).resolve())
ROOT = Path(SCRIPT).parents[1]
CALLS_PER_RUN = 3  # bench/runs.py's task: a buffer of three rows, flushed at the run's end


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", default="", help="Another checkout to measure, in turn.")
    return parser.parse_args()


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "list_events",
            "description": "List calendar events.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                },
                "required": ["to", "subject", "body"],
            },
        },
    },
]
MESSAGES = [
    {"role": "system", "content": "You are the assistant of me@acme.test."},
    {"role": "user", "content": "Check my Thursday, then tell Dana (dana@acme.test) 16:00 works."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "list_events", "arguments": "{}"},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": json.dumps([{"id": "e1", "title": "Dentist", "start": "2026-03-05T15:00:00Z"}]),
    },
]


def measure(calls: int, repeat: int) -> dict:
    """In this process: set up a throw-away database and server, then time the loop."""
    tmp = Path(tempfile.mkdtemp(prefix="coworkenv-bench-llm-"))
    os.environ.update(
        COWORKENV_VAR_DIR=str(tmp),
        DJANGO_SETTINGS_MODULE="coworkenv_web.settings",
        DATABASE_URL=f"sqlite://{tmp / 'bench.sqlite3'}",
        DEBUG="false",
        BENCH_LLM_API_KEY="sk-bench",
        LLM_ALLOWED_NETWORKS="127.0.0.0/8",
        LLM_KEY_HOSTS="any",
    )
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.llm.call_log import CallLogBuffer
    from apps.llm.client import llm_chat
    from apps.llm.models import LLMCall
    from apps.llm.services import endpoint_create
    from apps.workspace.services import project_start
    from tests.llm_server import LoopbackLLMServer, Reply

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    project = project_start(name="Bench", slug="bench", description="", creator=user)
    server = LoopbackLLMServer(
        responder=lambda request: Reply.tool_call(
            "send_email", {"to": "dana@acme.test", "subject": "Q3", "body": "16:00 works."}
        )
    ).start()
    try:
        endpoint = endpoint_create(
            project=project,
            name="teacher",
            base_url=server.base_url,
            model="bench-teacher",
            api_key_env="BENCH_LLM_API_KEY",
            request_timeout_s=30,
            max_concurrency=4,
        )

        def one(buffer):
            return llm_chat(
                endpoint=endpoint,
                messages=MESSAGES,
                purpose="run.teacher",
                tools=TOOLS,
                call_log=buffer,
            )

        one(None)  # warm: the client, its connection, the imports
        best_call = best_flush = float("inf")
        for _ in range(repeat):
            call_cpu = flush_cpu = 0.0
            for _ in range(calls // CALLS_PER_RUN):
                buffer = CallLogBuffer(flush_every_s=3600)
                started = time.thread_time()
                for _ in range(CALLS_PER_RUN):
                    result = one(buffer)
                call_cpu += time.thread_time() - started
                started = time.thread_time()
                buffer.flush()  # as a run does at its end
                flush_cpu += time.thread_time() - started
            assert result.tool_calls[0]["name"] == "send_email"
            done = calls // CALLS_PER_RUN * CALLS_PER_RUN
            best_call = min(best_call, call_cpu / done)
            best_flush = min(best_flush, flush_cpu / done)
        logged = LLMCall.objects.count()
    finally:
        server.stop()
    return {
        "call_us": best_call * 1e6,
        "flush_us": best_flush * 1e6,
        "calls": calls,
        "repeat": repeat,
        "logged": logged,
    }


def main() -> None:
    args = arguments()
    if args.tree:
        tree = Path(args.tree).resolve()
        runs = [("tree", tree), ("this", ROOT)]
    else:
        runs = [("this", ROOT)]
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench.engine import answer_in_tree

    answers = {}
    for label, tree in runs:
        answers[label] = answer_in_tree(
            tree, [sys.executable, SCRIPT, "--inner", str(tree), str(args.calls), str(args.repeat)]
        )
        a = answers[label]
        print(
            f"{label:5} {tree!s:40} llm_chat {a['call_us']:7.0f} µs CPU a call "
            f"+ call log flush {a['flush_us']:5.0f} µs a call "
            f"(best of {a['repeat']} x {a['calls']} calls; this thread only)"
        )
    if "tree" in answers:
        before, after = answers["tree"], answers["this"]
        total_before = before["call_us"] + before["flush_us"]
        total_after = after["call_us"] + after["flush_us"]
        print(f"after / before: {total_after / total_before:.2f} (call + flush)")
    print(json.dumps(answers))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--inner":
        tree = Path(sys.argv[2])
        sys.path[:0] = [str(tree), str(tree / "engine")]
        print(json.dumps(measure(int(sys.argv[3]), int(sys.argv[4]))))
    else:
        main()
