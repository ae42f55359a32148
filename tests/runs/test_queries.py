"""The database work of a run is pinned: a lane (``run_execute(..., lane=...)``) playing a
batch's runs one after another makes a fixed number of queries per run, whatever the number
of model calls in it, and no query per step. A change that adds a query to every run or to
every step makes this fail; lower the numbers when a query goes away.

Counted with Django's ``CaptureQueriesContext`` on the real path (the real client against
the loopback model server, the call log buffer, the endpoint's limit on the database, its
queries counted apart), steady state only: two batches of different lengths are played and
the difference is divided, so the batch's first run (job marked running, the spec loaded)
and its last (the job finished) cancel out."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.llm.models import LLMCall
from apps.llm.services import endpoint_create
from apps.runs.models import PolicyKind, Run, RunRole, RunStatus
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    claims,
    run_batch_create,
    run_execute,
)
from tests.llm_server import LoopbackLLMServer, Reply
from tests.runs.conftest import import_valid
from tests.runs.test_llm_runs import clarify_spec

pytestmark = pytest.mark.django_db(transaction=True)

KEY_ENV = "COWORKENV_TEST_QUERIES_API_KEY"
KEY = "sk-loopback-queries"

# Queries per run of a lane, in steady state: the next run found, claimed (the core's
# conditional UPDATE) and read back with its job's state (one SELECT; its batch, endpoints
# and task come from the worker's cache, read again at most once a second), the call log
# (one bulk INSERT) and the outcome (one UPDATE). Before this was pinned: 12 (a full reload
# of the run and of its batch, the job read twice, the next run found, then marked sent,
# then claimed and loaded); then 4 (the claimed run loaded with its batch, job, endpoints
# and task in one SELECT); then 3 (the take one hand-written UPDATE … RETURNING). BEGIN and
# COMMIT are not counted.
QUERIES_PER_RUN = 5
QUERIES_PER_STEP = 0
# The endpoint's limit on the database backend (PostgreSQL without Redis): free slots read,
# one taken, given back. Redis and the lock files of the local mode cost no query.
SLOT_QUERIES_PER_CALL = 3


def steps_responder(tool_steps: int):
    """Every turn: ``tool_steps`` tool calls one after another, then a reply."""

    def respond(request):
        since_user = 0
        for message in reversed(request.messages):
            if message.get("role") == "user":
                break
            since_user += message.get("role") == "tool"
        if since_user < tool_steps:
            return Reply.tool_call("list_events", {})
        return Reply.text("Done.")

    return respond


@pytest.fixture
def lane(settings, monkeypatch, project, author):
    """Play a fresh batch of ``trials`` runs in one lane here; returns the queries made and
    the batch's runs."""
    monkeypatch.setenv(KEY_ENV, KEY)
    settings.LLM_SLOT_BACKEND = "database"
    settings.RUN_TIMINGS_FILE = ""
    # the worker's cache of batches and tasks is read again once a second: not while counting
    monkeypatch.setattr(claims, "MAX_AGE_S", 3600.0)
    environment = import_valid(project, author, clarify_spec())
    servers = []

    def play(trials: int, tool_steps: int, checkpoint_every_s: int = 5):
        settings.RUN_CHECKPOINT_EVERY_S = checkpoint_every_s
        server = LoopbackLLMServer(api_key=KEY, responder=steps_responder(tool_steps)).start()
        servers.append(server)
        endpoint = endpoint_create(
            project=project,
            created_by=author,
            name=f"queries-{len(servers)}",
            base_url=server.base_url,
            model="loop",
            api_key_env=KEY_ENV,
            request_timeout_s=10,
            max_concurrency=1,
        )
        batch = run_batch_create(
            project=project,
            user=author,
            policy_kind=PolicyKind.ENDPOINT,
            endpoint=endpoint,
            role=RunRole.EVAL,
            selection=TaskSelection(environments=(environment.pk,)),
            settings=BatchSettings(trials=trials, concurrency=1, faults=False),
        )
        runs = Run.objects.filter(batch=batch)
        first = runs.order_by("id").values_list("pk", flat=True)[0]
        with CaptureQueriesContext(connection) as captured:
            run_execute(run_id=first, lane=lambda: True)
        # transaction control is not counted: SQLite's and psycopg's connections log it
        # differently (BEGIN IMMEDIATE and COMMIT; BEGIN only), and inside the test's own
        # transaction a run's closing transaction is a savepoint
        control = {"BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"}
        queries = [
            q["sql"]
            for q in captured.captured_queries
            if q["sql"] not in control and "SAVEPOINT" not in q["sql"]
        ]
        slots = [sql for sql in queries if '"llm_endpointslot"' in sql]
        assert sorted(runs.values_list("trial", "status")) == [
            (trial, RunStatus.SUCCEEDED) for trial in range(trials)
        ]
        calls = LLMCall.objects.filter(job_id=batch.job_id).count()
        return len(queries) - len(slots), len(slots), calls

    yield play
    for server in servers:
        server.stop()


def test_a_lane_makes_a_fixed_number_of_queries_per_run_and_none_per_step(lane):
    lane(trials=1, tool_steps=0)  # the environment's spec loaded into this process's cache
    short, _, short_calls = lane(trials=3, tool_steps=0)
    long, long_slots, long_calls = lane(trials=7, tool_steps=0)
    # Two turns, one reply each: two model calls per run, every one of them logged.
    assert (short_calls, long_calls) == (3 * 2, 7 * 2)
    per_run = (long - short) / 4
    assert per_run <= QUERIES_PER_RUN, f"{per_run} queries per run (pinned: {QUERIES_PER_RUN})"

    # The same runs with three tool steps before every reply: four times the model calls,
    # the same queries (and the endpoint's limit its fixed price per call).
    stepped, stepped_slots, stepped_calls = lane(trials=7, tool_steps=3)
    assert stepped_calls == 7 * 2 * 4
    per_step = (stepped - long) / (stepped_calls - long_calls)
    assert per_step <= QUERIES_PER_STEP, f"{per_step} queries per step (pinned: 0)"
    for slots, calls in ((long_slots, long_calls), (stepped_slots, stepped_calls)):
        assert slots == SLOT_QUERIES_PER_CALL * calls


def test_turn_checkpoints_write_once_per_turn_not_per_step(lane):
    """With every turn's end checkpointed, a run of two turns writes once more (its first
    turn; the last is stored with the outcome), however many steps the turns take."""
    lane(trials=1, tool_steps=0)
    short, _, _ = lane(trials=3, tool_steps=0, checkpoint_every_s=0)
    long, _, long_calls = lane(trials=7, tool_steps=0, checkpoint_every_s=0)
    unchecked_short, _, _ = lane(trials=3, tool_steps=0)
    unchecked_long, _, _ = lane(trials=7, tool_steps=0)
    assert (long - short) / 4 == (unchecked_long - unchecked_short) / 4 + 1
    stepped, _, stepped_calls = lane(trials=7, tool_steps=3, checkpoint_every_s=0)
    assert (stepped - long) / (stepped_calls - long_calls) <= QUERIES_PER_STEP
    run = Run.objects.filter(status=RunStatus.SUCCEEDED).order_by("-id").first()
    assert [m["role"] for m in run.transcript][:3] == ["system", "user", "assistant"]
