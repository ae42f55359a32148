"""``ModelStatements`` writes exactly what the ORM writes: the same rows, column by column as
the database holds them (JSON text, datetimes, decimals, UUIDs), for ``bulk_create`` and
``filter(...).update(...)``; and reads rows back as the ORM does."""

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apps.core.models import Job
from apps.core.statements import statements_for
from apps.llm.client import CallLogBuffer, _CallLog
from apps.llm.models import LLMCall, LLMCallStatus, ModelEndpoint

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 12, 1, 23, 30, 12, 345678, tzinfo=UTC)


@pytest.fixture
def endpoint(project):
    return ModelEndpoint.objects.create(
        project=project,
        name="ünïcode “endpoint”",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        price_input_per_million=Decimal("1.5"),
        price_output_per_million=Decimal("2.25"),
    )


@pytest.fixture
def frozen(monkeypatch):
    """Every ``timezone.now()`` (``auto_now_add`` included) answers NOW."""
    monkeypatch.setattr(timezone, "now", lambda: NOW)


def call_rows(endpoint, job, count: int) -> list[LLMCall]:
    """Rows as ``_CallLog`` makes them: a conversation that grows, answers, a cost."""
    log = _CallLog(
        endpoint=endpoint,
        job=job,
        purpose="agent",
        messages=[
            {"role": "system", "content": "Tu es « utile » — 日本語 \u2028 ok"},
            {"role": "user", "content": [{"type": "text", "text": 'a\\b"c'}]},
        ],
        params={"model": "m", "temperature": 0.7, "tools": ["x"], "response_format": None},
        buffer=CallLogBuffer(flush_every_s=3600),
    )
    log.group = uuid.UUID(int=42)  # (each log draws its own)
    rows = []
    for attempt in range(1, count + 1):
        rows.append(
            log.write(
                attempt=attempt,
                status=LLMCallStatus.OK,
                response={
                    "id": f"c{attempt}",
                    "content": "réponse\n" * attempt,
                    "tool_calls": [{"id": "t", "name": "f", "arguments": '{"a": 1.5}'}],
                    "finish_reason": None,
                },
                tokens_in=10 * attempt,
                tokens_out=3,
                latency_ms=attempt,
                cost=endpoint.cost_of(10 * attempt, 3),
            )
        )
    return rows


def stored(ids) -> list[tuple]:
    """The rows as the database holds them (no converters), without their ids."""
    table = connection.ops.quote_name(LLMCall._meta.db_table)
    columns = [f.column for f in LLMCall._meta.concrete_fields if not f.primary_key]
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quoted} FROM {table} WHERE id IN ({', '.join(['%s'] * len(ids))}) "
            "ORDER BY id",
            list(ids),
        )
        return cursor.fetchall()


@pytest.mark.parametrize("count", [1, 3, 120])  # 120: more than one SQLite batch
def test_insert_writes_the_rows_bulk_create_writes(project, endpoint, frozen, count):
    job = Job.objects.create(project=project, kind="runs")
    expected = call_rows(endpoint, job, count)
    written = call_rows(endpoint, job, count)
    with transaction.atomic():
        LLMCall.objects.bulk_create(expected)
    with transaction.atomic():
        statements_for(LLMCall).insert(written)

    assert all(row.pk is not None and not row._state.adding for row in written)
    assert [row._state.db for row in written] == ["default"] * count
    assert [row.created_at for row in written] == [row.created_at for row in expected]
    assert stored([row.pk for row in written]) == stored([row.pk for row in expected])
    # the instances say what the rows say, as after bulk_create
    for row in written:
        assert LLMCall.objects.get(pk=row.pk).request_messages == row.request_messages


def test_the_call_log_buffer_writes_what_bulk_create_wrote(project, endpoint, frozen):
    expected = call_rows(endpoint, None, 4)
    buffer = CallLogBuffer(flush_every_s=3600)
    for row in call_rows(endpoint, None, 4):
        buffer.add(row)
    written = list(buffer.rows)
    with transaction.atomic():
        LLMCall.objects.bulk_create(expected)
    buffer.flush()
    assert buffer.rows == []
    assert stored([row.pk for row in written]) == stored([row.pk for row in expected])


def test_insert_refuses_a_row_with_a_primary_key_and_an_unsaved_relation(project, endpoint):
    rows = call_rows(endpoint, None, 1)
    rows[0].pk = 12345
    with pytest.raises(ValueError), transaction.atomic():
        statements_for(LLMCall).insert(rows)
    rows = call_rows(endpoint, Job(project=project, kind="runs"), 1)  # job not saved
    with pytest.raises(ValueError), transaction.atomic():
        statements_for(LLMCall).insert(rows)
    assert LLMCall.objects.count() == 0


def test_update_writes_what_the_orm_update_writes(project, endpoint, frozen):
    job = Job.objects.create(project=project, kind="runs")
    rows = call_rows(endpoint, None, 1) + call_rows(endpoint, None, 1)
    with transaction.atomic():
        LLMCall.objects.bulk_create(rows)
    orm_row, written_row = rows
    values = {
        "status": LLMCallStatus.ERROR,
        "error": "refusé — “quoted”",
        "response": {"error_body": {"nested": [1, None, "ü"]}},
        "http_status": None,
        "cost": Decimal("0.000123"),
        "created_at": datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        "group": uuid.UUID(int=7),
        "job": job,
    }
    where = {"status": LLMCallStatus.OK, "purpose": "agent"}
    assert LLMCall.objects.filter(pk=orm_row.pk, **where).update(**values) == 1
    assert statements_for(LLMCall).update({"pk": written_row.pk, **where}, values) == 1
    assert stored([written_row.pk]) == stored([orm_row.pk])
    # a condition that no longer holds: nothing written
    assert statements_for(LLMCall).update({"pk": written_row.pk, **where}, {"error": "x"}) == 0
    assert LLMCall.objects.get(pk=written_row.pk).error == values["error"]


def test_update_refuses_expressions_and_a_comparison_with_none(endpoint):
    from django.db.models import F

    with pytest.raises(TypeError):
        statements_for(LLMCall).update({"pk": 1}, {"tokens_in": F("tokens_in") + 1})
    with pytest.raises(ValueError):
        statements_for(LLMCall).update({"pk": 1, "job": None}, {"tokens_in": 1})


def test_instance_reads_a_row_as_the_orm_does(endpoint, frozen):
    rows = call_rows(endpoint, None, 1)
    with transaction.atomic():
        statements_for(LLMCall).insert(rows)
    statements = statements_for(LLMCall)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {statements.columns()} FROM {statements.table} WHERE id = %s", [rows[0].pk]
        )
        read = statements.instance(list(cursor.fetchone()))
    expected = LLMCall.objects.get(pk=rows[0].pk)
    for field in LLMCall._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(expected, field.attname), field.name
    assert not read._state.adding and read._state.db == "default"
