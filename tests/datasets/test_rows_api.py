"""The rows endpoint serves every kind's rows (``…/versions/<n>/rows/``): demonstration rows
(sft), prompt rows (rl_prompts) and rollout rows (rollouts), each in its own shape with
``kind`` on every row, paginated, with the filters of the kind (a bad value or a filter of
another kind is 400), 404 for other projects, readable by viewers."""

import pytest

from apps.datasets.formats.rl_prompts import prompt_messages
from apps.datasets.models import DatasetRow, PromptRow, RolloutRow
from apps.runs.models import RolloutGroup, Run
from apps.runs.rollouts import Variant
from tests.datasets.test_rollouts import build as build_rollouts

pytestmark = pytest.mark.django_db


def rows_url(version, **query) -> str:
    params = "&".join(f"{key}={value}" for key, value in query.items())
    base = f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/rows/"
    return base + (f"?{params}" if params else "")


# --------------------------------------------------------------------------- sft


def test_sft_rows_keep_their_shape_and_say_their_kind(api_client_for, viewer, built_version):
    api = api_client_for(viewer)
    body = api.get(rows_url(built_version, page_size=5)).json()
    assert body["count"] == built_version.rows_total == 18
    assert len(body["results"]) == 5 and body["next"].endswith("page=2&page_size=5")
    first = DatasetRow.objects.filter(version=built_version).order_by("split", "position")[0]
    assert body["results"][0] == {
        "kind": "sft",
        "split": first.split,
        "position": first.position,
        "demonstration": first.demonstration_id,
        "demonstration_version": first.demonstration_version_id,
        "demonstration_version_number": first.demonstration_version.number,
        "task_key": first.demonstration.task_key,
        "environment": first.demonstration.environment_name,
        "model": first.demonstration.model_name,
        "tokens": first.tokens,
        "content_sha256": first.content_sha256,
    }
    last = api.get(rows_url(built_version, page_size=5, page=4)).json()
    assert len(last["results"]) == 3 and last["next"] is None


def test_sft_rows_filter_by_split_and_capability(api_client_for, viewer, built_version):
    api = api_client_for(viewer)
    rows = list(
        DatasetRow.objects.filter(version=built_version)
        .select_related("demonstration")
        .order_by("split", "position")
    )
    slugs = sorted({s for r in rows for s in r.demonstration.capability_slugs})
    assert slugs, "the fixture's demonstrations exercise capabilities"
    for slug in slugs:
        body = api.get(rows_url(built_version, capability=slug, page_size=100)).json()
        expected = [(r.split, r.position) for r in rows if slug in r.demonstration.capability_slugs]
        assert [(r["split"], r["position"]) for r in body["results"]] == expected
        assert body["count"] == len(expected) < len(rows)
    slug = next(
        s
        for s in slugs
        if any(r.split == "train" for r in rows if s in r.demonstration.capability_slugs)
    )
    both = api.get(rows_url(built_version, split="train", capability=slug)).json()
    assert {r["split"] for r in both["results"]} == {"train"}
    assert both["count"] == sum(
        r.split == "train" and slug in r.demonstration.capability_slugs for r in rows
    )
    none = api.get(rows_url(built_version, capability="no-such-capability")).json()
    assert (none["count"], none["results"]) == (0, [])


def test_bad_or_foreign_filters_are_400(api_client_for, viewer, built_version):
    api = api_client_for(viewer)
    for query, field, message in (
        ({"split": "test"}, "split", '"test" is not a valid choice.'),
        (
            {"capability": "not a slug"},
            "capability",
            'Enter a valid "slug" consisting of letters, numbers, underscores or hyphens.',
        ),
        ({"group": "1"}, "group", "Not a filter of sft rows (only of rollouts)."),
        ({"passed": "true"}, "passed", "Not a filter of sft rows (only of rollouts)."),
    ):
        response = api.get(rows_url(built_version, **query))
        assert response.status_code == 400, query
        assert response.json() == {
            "message": "The request is not valid.",
            "details": {field: [message]},
        }
    assert api.get(rows_url(built_version, page=99)).status_code == 404


def test_other_projects_and_anonymous_cannot_read_rows(
    api_client_for, outsider, built_version, prompt_version
):
    for version in (built_version, prompt_version):
        assert api_client_for(outsider).get(rows_url(version)).status_code == 404
        assert api_client_for().get(rows_url(version)).status_code == 401
    missing = f"/api/v1/datasets/{built_version.dataset_id}/versions/7/rows/"
    assert api_client_for(outsider).get(missing).status_code == 404


# --------------------------------------------------------------------------- rl_prompts


def test_prompt_rows_have_the_prompt_tools_and_lineage(api_client_for, viewer, prompt_version):
    api = api_client_for(viewer)
    stored = list(PromptRow.objects.filter(version=prompt_version).order_by("position"))
    assert len(stored) == prompt_version.train_rows > 3
    body = api.get(rows_url(prompt_version, page_size=3)).json()
    assert body["count"] == len(stored)
    assert [r["position"] for r in body["results"]] == [0, 1, 2]
    row, entry = body["results"][0], stored[0].entry
    assert row == {
        "kind": "rl_prompts",
        "split": "train",
        "position": 0,
        "environment": entry["environment"],
        "environment_id": stored[0].environment_id,
        "revision": entry["revision"],
        "spec_hash": entry["spec_hash"],
        "task_key": stored[0].task_key,
        "title": entry["title"],
        "seed": stored[0].seed,
        "capabilities": entry["capabilities"],
        "turns": entry["turns"],
        "prompt": prompt_messages(entry),
        "tools": entry["tools"],
        "content_sha256": stored[0].content_sha256,
    }
    assert row["prompt"][-1] == {"role": "user", "content": entry["user_message"]}
    assert row["tools"] and row["environment_id"] is not None
    every = api.get(rows_url(prompt_version, page_size=500)).json()["results"]
    assert {(r["task_key"], r["seed"]) for r in every} == {(r.task_key, r.seed) for r in stored}
    assert {r["seed"] for r in every} == {0, 5}


def test_prompt_rows_filter_by_capability_and_split(api_client_for, viewer, prompt_version):
    api = api_client_for(viewer)
    stored = list(PromptRow.objects.filter(version=prompt_version).order_by("position"))
    slugs = sorted({s for r in stored for s in r.entry["capabilities"]})
    assert slugs
    for slug in slugs:
        body = api.get(rows_url(prompt_version, capability=slug, page_size=500)).json()
        expected = [r.position for r in stored if slug in r.entry["capabilities"]]
        assert [r["position"] for r in body["results"]] == expected
        assert all(slug in r["capabilities"] for r in body["results"])
    # a slug that only prefixes one, or differs in a character LIKE would match, is no match
    prefix = slugs[0][:-1]
    if prefix not in slugs:
        assert api.get(rows_url(prompt_version, capability=prefix)).json()["count"] == 0
    assert api.get(rows_url(prompt_version, split="validation")).json()["count"] == 0
    assert api.get(rows_url(prompt_version, split="train")).json()["count"] == len(stored)
    refused = api.get(rows_url(prompt_version, passed="false"))
    assert refused.status_code == 400
    assert refused.json()["details"] == {
        "passed": ["Not a filter of rl_prompts rows (only of rollouts)."]
    }


# --------------------------------------------------------------------------- rollouts


def test_rollout_rows_have_rewards_advantages_and_the_transcript(
    api_client_for, viewer, outsider, rollout_version
):
    api = api_client_for(viewer)
    group = RolloutGroup.objects.get()
    runs = list(Run.objects.filter(pk__in=group.run_ids).order_by("trial"))
    body = api.get(rows_url(rollout_version, page_size=2)).json()
    assert body["count"] == 3 and body["next"].endswith("page=2&page_size=2")
    first = body["results"][0]
    assert first["turn_rewards"] == pytest.approx([0.16, 0.68])
    assert first.pop("turn_advantages").keys() == {"grpo", "dr_grpo"}
    first.pop("turn_rewards")
    stored = RolloutRow.objects.get(version=rollout_version, position=0)
    v = group.variants
    assert first == {
        "kind": "rollouts",
        "split": "train",
        "position": 0,
        "group": group.pk,
        "batch": group.batch_id,
        "member": 0,
        "run": runs[0].pk,
        "environment": "Clarify and notice",
        "task_key": "clarify",
        "passed": True,
        "reward": 1.0,  # the version's variant: passed / rloo
        "advantage": 0.5,
        "rewards": {name: values[0] for name, values in v["rewards"].items()},
        "advantages": {
            reward: {method: values[0] for method, values in methods.items()}
            for reward, methods in v["advantages"].items()
        },
        "tokens": stored.tokens,
        "content_sha256": stored.content_sha256,
        "transcript": f"http://testserver/api/v1/runs/{runs[0].pk}/",
    }
    assert first["rewards"]["passed"] == 1.0 and set(first["rewards"]) == {
        "score",
        "raw",
        "passed",
        "strict",
    }
    second = api.get(rows_url(rollout_version, page_size=2, page=2)).json()["results"]
    assert [(r["member"], r["passed"], r["reward"], r["advantage"]) for r in second] == [
        (2, False, 0.0, -1.0)
    ]
    # the transcript reference answers with the run's transcript, to the same reader only
    transcript = api.get(first["transcript"])
    assert transcript.status_code == 200 and transcript.json()["transcript"]
    assert api_client_for(outsider).get(first["transcript"]).status_code == 404
    assert api_client_for(outsider).get(rows_url(rollout_version)).status_code == 404


def test_rollout_rows_filter_by_group_passed_and_split(api_client_for, viewer, rollout_version):
    api = api_client_for(viewer)
    group = RolloutGroup.objects.get()

    def members(**query):
        response = api.get(rows_url(rollout_version, **query))
        assert response.status_code == 200, response.json()
        return [r["member"] for r in response.json()["results"]]

    assert members() == [0, 1, 2]
    assert members(passed="true") == [0, 1]
    assert members(passed="false") == [2]
    assert members(group=group.pk) == [0, 1, 2]
    assert members(group=group.pk + 1000) == []
    assert members(group=group.pk, passed="false", split="train") == [2]
    assert members(split="validation") == []
    for query, field in (
        ({"passed": "maybe"}, "passed"),
        ({"group": "x"}, "group"),
        ({"group": "0"}, "group"),
        ({"group": str(2**63)}, "group"),
        ({"capability": "search"}, "capability"),
        ({"split": "eval"}, "split"),
    ):
        response = api.get(rows_url(rollout_version, **query))
        assert response.status_code == 400, query
        assert list(response.json()["details"]) == [field]
    assert api.get(rows_url(rollout_version, capability="search")).json()["details"] == {
        "capability": ["Not a filter of rollouts rows (only of sft, rl_prompts)."]
    }


def test_rollout_rows_follow_the_versions_variant(author, rollout_version):
    """Another variant's version of the same group: the same rows, its own reward."""
    from rest_framework.test import APIClient

    batch = RolloutGroup.objects.get().batch
    other = build_rollouts(rollout_version.dataset, author, batch, reward="score")
    assert Variant.parse(**other.filters["variant"]).reward == "score"
    api = APIClient()
    api.force_authenticate(author)
    rewards = [r["reward"] for r in api.get(rows_url(other)).json()["results"]]
    assert rewards == pytest.approx([0.84, 1.0, 0.52])


# --------------------------------------------------------------------------- the schema


def test_the_schema_describes_every_kinds_rows(db):
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.validation import validate_schema

    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)
    operation = schema["paths"]["/api/v1/datasets/{id}/versions/{number}/rows/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {
        "split",
        "capability",
        "group",
        "passed",
        "page",
        "page_size",
    }
    page = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert page == {"$ref": "#/components/schemas/PaginatedVersionRowOutputList"}
    components = schema["components"]["schemas"]
    item = components["PaginatedVersionRowOutputList"]["properties"]["results"]["items"]
    assert item == {"$ref": "#/components/schemas/VersionRowOutput"}
    assert components["VersionRowOutput"]["discriminator"] == {
        "propertyName": "kind",
        "mapping": {
            "sft": "#/components/schemas/RowOutput",
            "rl_prompts": "#/components/schemas/PromptRowOutput",
            "rollouts": "#/components/schemas/RolloutRowOutput",
        },
    }
    for name in ("RowOutput", "PromptRowOutput", "RolloutRowOutput"):
        assert "kind" in components[name]["required"], name


def test_spectacular_validates_without_warnings(tmp_path):
    """``manage.py spectacular --validate --fail-on-warn`` (as CI runs it) is clean."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "spectacular",
            "--validate",
            "--fail-on-warn",
            "--file",
            str(tmp_path / "schema.yaml"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "VersionRowOutput" in (tmp_path / "schema.yaml").read_text()


def test_a_page_of_rows_takes_the_same_queries_whatever_its_size(
    api_client_for, viewer, built_version, prompt_version, rollout_version
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    api = api_client_for(viewer)
    api.get(rows_url(built_version))  # once-per-process lookups out of the count
    for version in (built_version, prompt_version, rollout_version):
        counts = []
        for size in (1, 3):
            with CaptureQueriesContext(connection) as queries:
                response = api.get(rows_url(version, page_size=size))
            assert len(response.json()["results"]) == size
            counts.append(len(queries))
        assert counts[0] == counts[1], (version.dataset.kind, counts)
