"""Trajectories over a version's maximum length: split into rows by turn, or dropped."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from apps.core.exceptions import ApplicationError
from apps.datasets.formats import openai_row
from apps.datasets.formats.long import DROP, SPLIT, LongCounts, fit, row_tokens, turn_rows
from apps.datasets.models import DatasetVersion, ExportStatus
from apps.datasets.services import dataset_version_rebuild
from apps.datasets.services.exports import export_absolute_path
from tests.datasets.conftest import build_version, make_demonstration

SYSTEM = {"role": "system", "content": "You are the assistant."}
U1 = {"role": "user", "content": "Book the review."}
A1 = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "create_event", "arguments": '{"title":"Review"}'},
        }
    ],
    "weight": 1,
}
T1 = {"role": "tool", "tool_call_id": "c1", "content": '{"id":"events-1"}'}
R1 = {"role": "assistant", "content": "Booked.", "weight": 1}
U2 = {"role": "user", "content": "Two days later: remind Ana."}
R2 = {"role": "assistant", "content": "Reminded Ana.", "weight": 1}
U3 = {"role": "user", "content": "Thanks!"}
R3 = {"role": "assistant", "content": "You're welcome.", "weight": 0}  # a reviewer excluded it
U4 = {"role": "user", "content": "Day three: anything changed?"}
R4 = {"role": "assistant", "content": "The review moved to 11:00; I updated it.", "weight": 1}
TRAJECTORY = [SYSTEM, U1, A1, T1, R1, U2, R2, U3, R3, U4, R4]
TOOLS: list = []
CREATE_EVENT = [
    {
        "type": "function",
        "function": {
            "name": "create_event",
            "description": "Create an event.",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
        },
    }
]


def ctx(message: dict) -> dict:
    """An assistant message as history: the same, with weight 0."""
    return {**message, "weight": 0}


# --------------------------------------------------------------------------- pure, by hand


def test_turn_rows_by_hand():
    rows = turn_rows(TRAJECTORY)
    assert rows == [
        # Turn 1: its call, the result and the reply are the targets.
        [SYSTEM, U1, A1, T1, R1],
        # Turn 2: turn 1 as context (weight 0), the reminder as the target.
        [SYSTEM, U1, ctx(A1), T1, ctx(R1), U2, R2],
        # Turn 3 has no trained assistant message: no row.
        # Turn 4: everything before as context, R3 stays excluded.
        [SYSTEM, U1, ctx(A1), T1, ctx(R1), U2, ctx(R2), U3, R3, U4, R4],
    ]
    # The trajectory itself is untouched.
    assert TRAJECTORY[2]["weight"] == 1 and TRAJECTORY[4]["weight"] == 1


def _size(messages: list) -> int:
    return row_tokens(messages, TOOLS, len)  # one "token" per character: easy to check


def test_a_trajectory_that_fits_stays_one_row():
    counts = LongCounts()
    rows = fit(
        TRAJECTORY, TOOLS, max_tokens=_size(TRAJECTORY), policy=SPLIT, count=len, counts=counts
    )
    assert rows == [TRAJECTORY]
    assert (counts.trajectories, counts.over_limit, counts.rows) == (1, 0, 1)
    assert counts.longest == _size(TRAJECTORY)


def test_split_keeps_the_turn_rows_that_fit_and_counts_the_rest():
    first, second, last = turn_rows(TRAJECTORY)
    # The last turn's row holds the whole trajectory (weights aside): as long as it.
    assert _size(first) < _size(second) < _size(last) == _size(TRAJECTORY)
    counts = LongCounts()
    rows = fit(
        TRAJECTORY, TOOLS, max_tokens=_size(second), policy=SPLIT, count=len, counts=counts, ref=7
    )
    assert rows == [first, second]
    assert counts.to_dict() == {
        "trajectories": 1,
        "over_limit": 1,
        "split_rows": 2,
        "dropped_rows": 1,
        "dropped_trajectories": 0,
        "rows": 2,
        "longest": _size(TRAJECTORY),
        "details": [{"ref": 7, "tokens": _size(TRAJECTORY), "rows": 2, "dropped_rows": 1}],
    }


def test_split_with_no_row_that_fits_drops_the_trajectory():
    counts = LongCounts()
    rows = fit(TRAJECTORY, TOOLS, max_tokens=10, policy=SPLIT, count=len, counts=counts)
    assert rows == []
    assert (counts.over_limit, counts.split_rows, counts.dropped_rows) == (1, 0, 3)
    assert (counts.dropped_trajectories, counts.rows) == (1, 0)


def test_drop_leaves_out_a_long_trajectory_whole():
    counts = LongCounts()
    short = [SYSTEM, U1, R1]
    assert fit(short, TOOLS, max_tokens=_size(short), policy=DROP, count=len, counts=counts) == [
        short
    ]
    assert (
        fit(TRAJECTORY, TOOLS, max_tokens=_size(short), policy=DROP, count=len, counts=counts) == []
    )
    assert counts.to_dict()["trajectories"] == 2
    assert (counts.over_limit, counts.split_rows, counts.dropped_trajectories) == (1, 0, 1)
    assert counts.rows == 1


def test_the_stored_size_is_trusted_and_no_limit_means_one_row():
    counts = LongCounts()
    # tokens= (the build's count) decides without recounting; None is no limit.
    assert fit(TRAJECTORY, TOOLS, max_tokens=100, policy=SPLIT, count=len, tokens=50) == [
        TRAJECTORY
    ]
    assert fit(TRAJECTORY, TOOLS, max_tokens=None, policy=SPLIT, count=len, counts=counts) == [
        TRAJECTORY
    ]
    assert counts.over_limit == 0


# --------------------------------------------------------------------------- the build


def _lines(version: DatasetVersion, fmt: str, split: str) -> list[dict]:
    export = version.exports.get(format=fmt, split=split)
    if export.status != ExportStatus.READY:
        return []
    return [json.loads(line) for line in export_absolute_path(export).read_text().splitlines()]


@pytest.mark.django_db
def test_a_version_splits_its_long_trajectories_in_every_format(
    dataset, author, approved_demonstrations, sample_environments, client_for
):
    """One hand-made four-turn trajectory whose last turn is huge, over a limit every other
    row fits under: it becomes its first two turn rows (hand-checked); the third is still
    too long and is dropped."""
    plain = build_version(dataset, author, validation_fraction=0)
    limit = max(plain.rows.values_list("tokens", flat=True))
    env = sample_environments[0]
    task = env.tasks.filter(split="train").order_by("position").first()
    huge = {**R4, "content": "The review moved to 11:00. " + "Details follow. " * 2000}
    long = make_demonstration(
        env, task.key, transcript=[*TRAJECTORY[:-1], huge], tools=CREATE_EVENT
    )
    version = build_version(dataset, author, validation_fraction=0, max_tokens=limit)
    assert (version.max_tokens, version.long_trajectories) == (limit, "split")
    assert version.train_rows == plain.train_rows + 1
    counts = version.long_counts["train"]
    assert {k: v for k, v in counts.items() if k not in ("longest", "details")} == {
        "trajectories": plain.train_rows + 1,
        "over_limit": 1,
        "split_rows": 2,
        "dropped_rows": 1,
        "dropped_trajectories": 0,
        "rows": plain.train_rows + 2,
    }
    assert counts["details"] == [
        {"ref": long.pk, "tokens": counts["longest"], "rows": 2, "dropped_rows": 1}
    ]
    for fmt in ("openai", "trl", "sharegpt"):
        export = version.exports.get(format=fmt, split="train")
        assert export.status == ExportStatus.READY, export.lint["errors"]
        assert export.rows == plain.train_rows + 2
    lines = _lines(version, "openai", "train")
    first = openai_row([SYSTEM, U1, A1, T1, R1], CREATE_EVENT)
    second = openai_row([SYSTEM, U1, ctx(A1), T1, ctx(R1), U2, R2], CREATE_EVENT)
    assert first == {
        "messages": [
            {"role": "system", "content": "You are the assistant."},
            {"role": "user", "content": "Book the review."},
            {"role": "assistant", "tool_calls": A1["tool_calls"], "weight": 1},
            {"role": "tool", "tool_call_id": "c1", "content": '{"id":"events-1"}'},
            {"role": "assistant", "content": "Booked.", "weight": 1},
        ],
        "tools": CREATE_EVENT,
        "parallel_tool_calls": False,
    }
    at = lines.index(first)
    assert lines[at + 1] == second
    assert [m.get("weight") for m in second["messages"]] == [None, None, 0, None, 0, None, 1]
    assert not any("Details follow." in json.dumps(line) for line in lines)
    assert plain.checksum != version.checksum  # one more demonstration
    card = export_absolute_path(version.exports.get(format="card")).read_text()
    assert "## Long trajectories" in card and f"Maximum length {limit:,} tokens" in card
    assert f"| train | {plain.train_rows + 1} | 1 | 2 | 1 | 0 | {plain.train_rows + 2} |" in card
    page = client_for(author).get(f"/datasets/{dataset.pk}/versions/{version.number}/")
    html = page.content.decode()
    assert f'data-testid="max-tokens">{limit:,} tokens<' in html
    assert 'data-testid="long-policy">split by turn<' in html
    table = html.split('data-testid="long-counts"')[1].split("</table>")[0]
    assert '<td class="num">2</td><td class="num">1</td><td class="num">0</td>' in table
    # A rebuild keeps the limit and the policy.
    rebuilt = dataset_version_rebuild(version=version, user=author)
    assert (rebuilt.max_tokens, rebuilt.long_trajectories) == (limit, "split")


@pytest.mark.django_db
def test_a_version_can_drop_its_long_trajectories(dataset, author, approved_demonstrations):
    plain = build_version(dataset, author, validation_fraction=0)
    tokens = sorted(plain.rows.values_list("tokens", flat=True))
    limit = tokens[len(tokens) // 2]
    version = build_version(
        dataset, author, validation_fraction=0, max_tokens=limit, long_trajectories="drop"
    )
    counts = version.long_counts["train"]
    kept = sum(1 for t in tokens if t <= limit)
    assert (counts["over_limit"], counts["dropped_trajectories"]) == (
        len(tokens) - kept,
        len(tokens) - kept,
    )
    assert counts["rows"] == kept == version.exports.get(format="trl", split="train").rows
    card = export_absolute_path(version.exports.get(format="card")).read_text()
    assert "Longer trajectories are **dropped**." in card


@pytest.mark.django_db
def test_without_a_limit_the_longest_is_the_row_tables_max(
    dataset, author, approved_demonstrations, client_for
):
    """The page gave the longest row twice, 5,150 tokens in its table and 20,599 below it:
    the second was counted in characters. Both are the build's token count now."""
    version = build_version(dataset, author, validation_fraction=0)
    longest = max(version.rows.values_list("tokens", flat=True))
    assert version.long_counts["train"]["longest"] == longest
    assert version.token_stats["train"]["max"] == longest
    url = reverse("datasets:version_detail", args=[dataset.pk, version.number])
    page = client_for(author).get(url)
    html = page.content.decode()
    assert f'<td class="num">{longest:,}</td>' in html  # Tokens per row: Max
    assert f"the longest has {longest:,} tokens" in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"max_tokens": 0}, "max_tokens", "The maximum length is between 1 and 10,000,000 tokens."),
        (
            {"long_trajectories": "truncate"},
            "long_trajectories",
            "Choose what happens to longer trajectories: split, drop.",
        ),
    ],
)
def test_bad_limits_are_refused_before_a_version_exists(
    dataset, author, approved_demonstrations, kwargs, field, message
):
    from apps.datasets.services import VersionFilter, dataset_version_create

    with pytest.raises(ApplicationError) as excinfo:
        dataset_version_create(dataset=dataset, user=author, filters=VersionFilter(), **kwargs)
    assert excinfo.value.extra == {"fields": {field: [message]}}
    assert DatasetVersion.objects.count() == 0
