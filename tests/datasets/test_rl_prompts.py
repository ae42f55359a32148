"""RL prompt datasets: rows of every format checked exactly, versions built by the real job
(checksummed, rebuilt, verified), files loaded by pyarrow and ``datasets``, the API."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from apps.core.exceptions import ApplicationError
from apps.datasets.formats.rl_prompts import (
    GrpoLinter,
    grpo_row,
    nemo_gym_row,
    prompt_entry,
    verifiers_row,
    verl_row,
)
from apps.datasets.models import DatasetKind, ExportStatus, PromptRow, VersionStatus
from apps.datasets.services import (
    PromptFilter,
    VersionFilter,
    dataset_create,
    dataset_version_build_job,
    dataset_version_create,
    dataset_version_rebuild,
    dataset_version_verify_job,
    dataset_version_verify_start,
    export_absolute_path,
    prompt_version_create,
)
from apps.environments.specs import environment_spec
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.session import EpisodeSession
from coworkenv_engine.trl_env import environment_class

TOOL = {
    "type": "function",
    "function": {
        "name": "send_email",
        "description": "Send an email.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
    },
}
ENTRY = {
    "environment": "Acme Ops",
    "environment_id": 7,
    "revision": 3,
    "spec_hash": "abc123",
    "task_key": "book-q3-review",
    "title": "Book the Q3 review",
    "split": "train",
    "capabilities": ["coordinate-calendar"],
    "seed": 2,
    "turns": 1,
    "system_prompt": "You are a coworker.",
    "user_message": "Book the Q3 review.",
    "tools": [TOOL],
}
MESSAGES = [
    {"role": "system", "content": "You are a coworker."},
    {"role": "user", "content": "Book the Q3 review."},
]


# --------------------------------------------------------------------------- rows


def test_grpo_row():
    assert grpo_row(ENTRY, 5) == {
        "prompt": MESSAGES,
        "environment": "Acme Ops",
        "task_key": "book-q3-review",
        "seed": 2,
        "info": json.dumps(
            {
                "capabilities": ["coordinate-calendar"],
                "environment": "Acme Ops",
                "environment_id": 7,
                "revision": 3,
                "seed": 2,
                "spec_hash": "abc123",
                "split": "train",
                "task_key": "book-q3-review",
                "turns": 1,
            }
        ),
    }


def test_verl_row():
    assert verl_row(ENTRY, 5) == {
        "data_source": "coworkenv",
        "prompt": MESSAGES,
        "ability": "agent",
        "reward_model": {"style": "rule", "ground_truth": "book-q3-review"},
        "extra_info": {
            "split": "train",
            "index": 5,
            "environment": "Acme Ops",
            "task_key": "book-q3-review",
            "seed": 2,
            "revision": 3,
            "spec_hash": "abc123",
            "interaction_kwargs": {
                "name": "coworkenv",
                "environment": "Acme Ops",
                "task_key": "book-q3-review",
                "seed": 2,
            },
            "tools": json.dumps([TOOL]),
        },
        "agent_name": "tool_agent",
    }


def test_nemo_gym_row():
    assert nemo_gym_row(ENTRY, 5) == {
        "id": 5,
        "responses_create_params": {
            "input": MESSAGES,
            "tools": [
                {
                    "type": "function",
                    "name": "send_email",
                    "description": "Send an email.",
                    "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
                }
            ],
        },
        "environment": "Acme Ops",
        "task_key": "book-q3-review",
        "seed": 2,
    }


def test_verifiers_row():
    assert verifiers_row(ENTRY, 5) == {
        "prompt": MESSAGES,
        "answer": "",
        "info": json.dumps(
            {
                "environment": "Acme Ops",
                "revision": 3,
                "seed": 2,
                "spec_hash": "abc123",
                "split": "train",
                "task_key": "book-q3-review",
            }
        ),
        "task": "coworkenv",
        "example_id": 5,
    }


def test_a_prompt_without_system_message_and_the_linter():
    entry = {**ENTRY, "system_prompt": ""}
    assert grpo_row(entry, 0)["prompt"] == [{"role": "user", "content": "Book the Q3 review."}]
    linter = GrpoLinter("train")
    linter.check_line(json.dumps(grpo_row(ENTRY, 0)))
    linter.check_line(json.dumps({**grpo_row(ENTRY, 1), "task_key": "", "seed": -1}), ref="x")
    linter.check_line(json.dumps({**grpo_row(ENTRY, 2), "prompt": [{"role": "assistant"}]}))
    report = linter.finish()
    assert report.rows == 3
    assert [e["message"] for e in report.errors] == [
        "The row does not name its task.",
        "The seed must be an integer ≥ 0.",
        "The prompt must be system/user messages ending with a user one: ['assistant'].",
    ]
    assert [e["line"] for e in report.errors] == [2, 2, 3]


def test_prompt_entry_is_the_reset_observation(example_spec):
    spec = engine_spec.load_spec(example_spec)
    task = spec.tasks[0]
    observation = EpisodeSession(spec, task.key, 4).start()
    entry = prompt_entry(
        observation,
        environment_id=1,
        revision=2,
        spec_hash="h",
        title=task.title,
        split=task.split,
        capabilities=list(task.capabilities),
        turns=len(task.turns),
    )
    assert entry["system_prompt"] == observation["system_prompt"] == task.system_prompt()
    assert entry["user_message"] == observation["user_message"]
    assert task.turns[0].message in entry["user_message"]
    assert entry["tools"] == spec.openai_tools()
    assert (entry["environment"], entry["task_key"], entry["seed"]) == (spec.name, task.key, 4)


@pytest.fixture
def example_spec():
    from tests.datasets.conftest import SAMPLES

    return json.loads(SAMPLES[0].read_text())


# --------------------------------------------------------------------------- versions


@pytest.fixture
def prompts_dataset(project, author):
    return dataset_create(
        project=project, name="Coworker RL", user=author, kind=DatasetKind.RL_PROMPTS
    )


def build(dataset, user, filters=None, rebuilt_from=None):
    if rebuilt_from is not None:
        version = dataset_version_rebuild(version=rebuilt_from, user=user)
    else:
        version = prompt_version_create(
            dataset=dataset, user=user, filters=filters or PromptFilter(), enqueue=False
        )
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    return version


def _train_eval(environments):
    specs = [engine_spec.load_spec(environment_spec(e)) for e in environments]
    train = [(s, t) for s in specs for t in s.tasks if t.split == "train"]
    evals = [(s, t) for s in specs for t in s.tasks if t.split == "eval"]
    return train, evals


def test_version_rows_exports_and_checksum(prompts_dataset, author, sample_environments):
    import pyarrow.parquet as pq
    from datasets import load_dataset

    version = build(prompts_dataset, author, PromptFilter(seeds=(0, 1)))
    assert version.status == VersionStatus.READY, version.job.message
    train, evals = _train_eval(sample_environments)
    assert version.train_rows == 2 * len(train) and version.validation_rows == 0
    assert version.excluded_eval == 2 * len(evals)
    rows = list(PromptRow.objects.filter(version=version).order_by("position"))
    expected_order = [(t.key, seed) for _s, t in train for seed in (0, 1)]
    assert [(r.task_key, r.seed) for r in rows] == expected_order
    assert [e["rows"] for e in version.environments] == [
        2 * sum(1 for s, _ in train if s.name == e.name) for e in sample_environments
    ]
    # the capability mix has every kind's shape (slug -> splits), which the page, the card
    # and the API read: it once came out as {"train": {slug: n}}
    mix = {}
    for _s, t in train:
        for slug in t.capabilities:
            mix[slug] = mix.get(slug, 0) + 2
    assert version.capability_mix == {
        slug: {"train": n, "validation": 0} for slug, n in sorted(mix.items())
    }
    assert version.job.message.startswith(
        f"v1: {version.train_rows} prompt rows ({version.excluded_eval} eval-task rows kept "
        "out); 4 of 4 exports offered"
    )

    exports = {e.format: e for e in version.exports.all()}
    assert sorted(exports) == ["card", "grpo", "nemo_gym", "verifiers", "verl"]
    assert all(e.status == ExportStatus.READY for e in exports.values())
    for fmt, row_of in (
        ("grpo", grpo_row),
        ("nemo_gym", nemo_gym_row),
        ("verifiers", verifiers_row),
    ):
        data = export_absolute_path(exports[fmt]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == exports[fmt].sha256
        lines = [json.loads(line) for line in data.decode().splitlines()]
        assert lines == [row_of(r.entry, r.position) for r in rows]
    # the first row is what the environment server's reset returns for that task and seed
    spec, task = train[0]
    first = EpisodeSession(spec, task.key, 0).start()
    assert json.loads(export_absolute_path(exports["grpo"]).read_text().splitlines()[0]) == {
        "prompt": [
            {"role": "system", "content": first["system_prompt"]},
            {"role": "user", "content": first["user_message"]},
        ],
        "environment": spec.name,
        "task_key": task.key,
        "seed": 0,
        "info": grpo_row(rows[0].entry, 0)["info"],
    }

    grpo = load_dataset(
        "json", data_files=str(export_absolute_path(exports["grpo"])), split="train"
    )
    assert grpo.num_rows == version.train_rows
    assert grpo[0]["prompt"][1]["content"] == first["user_message"]
    assert grpo["task_key"] == [r.task_key for r in rows]

    parquet_path = export_absolute_path(exports["verl"])
    assert parquet_path.suffix == ".parquet"
    table = pq.read_table(parquet_path)
    assert table.column_names == [
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
        "agent_name",
    ]
    assert table.to_pylist() == [verl_row(r.entry, r.position) for r in rows]
    verl = load_dataset("parquet", data_files=str(parquet_path), split="train")
    assert verl[3]["extra_info"]["task_key"] == rows[3].task_key
    assert verl[3]["extra_info"]["interaction_kwargs"]["seed"] == rows[3].seed
    assert json.loads(verl[3]["extra_info"]["tools"]) == rows[3].entry["tools"]

    card = export_absolute_path(exports["card"]).read_text()
    assert f"- Checksum: `{version.checksum}`" in card
    assert "- Seeds: 0, 1" in card

    # the checksum over (split, environment, task, seed, entry hash) in row order
    digest = hashlib.sha256()
    for r in rows:
        digest.update(
            f"train\t{r.environment_id}\t{r.task_key}\t{r.seed}\t{r.content_sha256}\n".encode()
        )
    assert version.checksum == digest.hexdigest()
    again = build(prompts_dataset, author, rebuilt_from=version)
    assert (again.number, again.checksum) == (2, version.checksum)
    assert again.filters == version.filters
    assert "checksum matches v1" in again.job.message


def test_grpo_rows_reset_the_in_process_trl_environment(
    prompts_dataset, author, sample_environments
):
    version = build(
        prompts_dataset, author, PromptFilter(environments=(sample_environments[0].pk,))
    )
    row = grpo_row(PromptRow.objects.filter(version=version).first().entry, 0)
    env_class = environment_class(environment_spec(sample_environments[0]))
    env = env_class()
    columns = {k: v for k, v in row.items() if k != "environment"}  # TRL keeps it back
    assert env.reset(**columns) is None  # the prompt already holds system + user message
    assert env._session.task.key == row["task_key"]
    assert env._session.seed == row["seed"]
    # a row without the prompt still gets it from reset
    text = env_class().reset(task_key=row["task_key"], seed=0)
    assert text == f"{row['prompt'][0]['content']}\n\n{row['prompt'][1]['content']}"


def test_filters_capability_and_environment(prompts_dataset, author, sample_environments):
    train, _ = _train_eval(sample_environments)
    capability = train[0][1].capabilities[0]
    version = build(prompts_dataset, author, PromptFilter(capabilities=(capability,)))
    keys = list(PromptRow.objects.filter(version=version).values_list("task_key", flat=True))
    assert keys == [t.key for _s, t in train if capability in t.capabilities]
    assert version.filters == {
        "kind": "rl_prompts",
        "environments": [],
        "capabilities": [capability],
        "seeds": [0],
        "splits": ["train"],
    }


def test_verify_recomputes_and_catches_a_changed_row(prompts_dataset, author, sample_environments):
    version = build(prompts_dataset, author)
    job = dataset_version_verify_start(version=version, user=author)
    dataset_version_verify_job(job.pk)
    version.refresh_from_db()
    assert version.verify_ok is True
    assert version.verify_message.startswith(
        f"Verified: {version.train_rows} rows hash to the recorded checksum; 5 cached files"
    )
    row = PromptRow.objects.filter(version=version).first()
    PromptRow.objects.filter(pk=row.pk).update(entry={**row.entry, "user_message": "changed"})
    job = dataset_version_verify_start(version=version, user=author)
    dataset_version_verify_job(job.pk)
    version.refresh_from_db()
    assert version.verify_ok is False
    assert f"1 rows changed content (tasks {row.task_key})" in version.verify_message


def test_bad_filters_are_refused_and_leave_nothing(
    prompts_dataset, author, sample_environments, other_project, outsider
):
    from apps.environments.models import Environment, EnvironmentStatus
    from apps.environments.services import environment_import
    from tests.datasets.conftest import SAMPLES

    theirs = environment_import(
        project=other_project, spec=json.loads(SAMPLES[0].read_text()), user=outsider
    )
    cases = [
        (PromptFilter(environments=(theirs.pk,)), f"Not in this project: {theirs.pk}."),
        (PromptFilter(capabilities=("no-such",)), "Not in this project: no-such."),
        (PromptFilter(seeds=()), "Between 1 and 64 seeds."),
        (PromptFilter(seeds=(1, 1)), "Each seed once."),
        (PromptFilter(seeds=(-1,)), "Integers from 0 to 2147483647."),
    ]
    for filters, message in cases:
        with pytest.raises(ApplicationError) as caught:
            prompt_version_create(dataset=prompts_dataset, user=author, filters=filters)
        assert str(caught.value) == f"The filter is not valid: {message}"
    Environment.objects.filter(project=prompts_dataset.project).update(
        status=EnvironmentStatus.DRAFT
    )
    with pytest.raises(ApplicationError, match=r"^Nothing to build: no train task"):
        prompt_version_create(dataset=prompts_dataset, user=author, filters=PromptFilter())
    with pytest.raises(
        ApplicationError, match=r"is a dataset of RL prompts .* \(kind rl_prompts\)"
    ):
        dataset_version_create(dataset=prompts_dataset, user=author, filters=VersionFilter())
    assert prompts_dataset.versions.count() == 0


def test_sft_dataset_refuses_prompt_versions(project, author, sample_environments):
    sft = dataset_create(project=project, name="SFT", user=author)
    with pytest.raises(ApplicationError, match=r"is a dataset of approved demonstrations"):
        prompt_version_create(dataset=sft, user=author, filters=PromptFilter())
    with pytest.raises(ApplicationError, match=r"^kind is one of sft, rl_prompts, rollouts\.$"):
        dataset_create(project=project, name="X", user=author, kind="dpo")


# --------------------------------------------------------------------------- API


@pytest.fixture
def author_api(author):
    _token, secret = api_token_create(user=author, name="trainer")
    return APIClient(HTTP_AUTHORIZATION=f"Bearer {secret}")


def test_api_creates_builds_and_exports(
    author_api, project, sample_environments, django_capture_on_commit_callbacks, settings
):
    import pyarrow.parquet as pq

    created = author_api.post(
        f"/api/v1/projects/{project.pk}/datasets/",
        {"name": "RL prompts", "kind": "rl_prompts"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["kind"] == "rl_prompts"
    pk = created.json()["id"]
    refused = author_api.post(f"/api/v1/datasets/{pk}/versions/", {"min_score": 0.5}, format="json")
    assert refused.status_code == 400
    assert refused.json()["message"].startswith("min_score applies to demonstrations")
    response = author_api.post(f"/api/v1/datasets/{pk}/versions/", {"seeds": [3]}, format="json")
    assert response.status_code == 201, response.json()
    version = response.json()["version"]
    assert version["filters"]["seeds"] == [3]
    dataset_version_build_job(response.json()["job"]["id"])
    url = f"/api/v1/datasets/{pk}/versions/1/export/?format=verl&split=train"
    download = author_api.get(url)
    assert download.status_code == 200
    assert download["Content-Type"] == "application/vnd.apache.parquet"
    assert 'filename="rl-prompts-v1-verl-train.parquet"' in download["Content-Disposition"]
    body = b"".join(download.streaming_content)
    table = pq.read_table(io.BytesIO(body))
    assert {row["extra_info"]["seed"] for row in table.to_pylist()} == {3}
    # a cached file that went away is rendered again from the rows, byte for byte
    from apps.datasets.models import DatasetExport

    export = DatasetExport.objects.get(version__dataset_id=pk, format="verl")
    export_absolute_path(export).unlink()
    again = author_api.get(url)
    assert b"".join(again.streaming_content) == body
    assert export_absolute_path(export).exists()
    sft_only = author_api.get(f"/api/v1/datasets/{pk}/versions/1/export/?format=openai&split=train")
    assert sft_only.status_code == 404


def test_api_outsider_gets_404(api_client_for, outsider, prompts_dataset, author):
    response = api_client_for(outsider).post(
        f"/api/v1/datasets/{prompts_dataset.pk}/versions/", {"seeds": [0]}, format="json"
    )
    assert response.status_code == 404
    assert prompts_dataset.versions.count() == 0


# --------------------------------------------------------------------------- pages


def test_pages_create_build_and_show_an_rl_prompt_version(
    client_for,
    author,
    viewer,
    outsider,
    project,
    sample_environments,
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    from apps.datasets.models import Dataset
    from tests.conftest import HTMX_HEADERS

    sent = []
    monkeypatch.setattr("apps.datasets.tasks.build_dataset_version_task.delay", sent.append)
    client = client_for(author)
    assert 'value="rl_prompts"' in client.get("/p/acme/datasets/new/").content.decode()
    created = client.post("/p/acme/datasets/new/", {"name": "RL", "kind": "rl_prompts"})
    dataset = Dataset.objects.get(name="RL")
    assert created["Location"] == f"/datasets/{dataset.pk}/"
    assert dataset.kind == DatasetKind.RL_PROMPTS
    bad_kind = client.post("/p/acme/datasets/new/", {"name": "Odd", "kind": "dpo"}, **HTMX_HEADERS)
    assert bad_kind.status_code == 200
    assert "Select a valid choice. dpo is not one of the available choices." in (
        bad_kind.content.decode()
    )
    url = f"/datasets/{dataset.pk}/versions/new/"
    form = client.get(url).content.decode()
    assert 'name="seeds"' in form and 'name="min_score"' not in form
    for seeds, message in (
        ("1, x", "Seeds are integers from 0 to 2147483647."),
        ("2, 2", "Each seed once."),
        ("", "This field is required."),
    ):
        bad = client.post(url, {"seeds": seeds}, **HTMX_HEADERS)
        assert bad.status_code == 200
        assert message in bad.content.decode()
    assert dataset.versions.count() == 0
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"seeds": "0, 7"})
    version = dataset.versions.get()
    assert response["Location"] == f"/datasets/{dataset.pk}/versions/1/"
    assert sent == [version.job_id]
    assert version.filters["seeds"] == [0, 7]
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    page = client_for(viewer).get(response["Location"]).content.decode()
    assert 'data-testid="prompt-row-table"' in page
    assert 'data-testid="download-verl-train"' in page
    assert f"/datasets/{dataset.pk}/versions/1/download/grpo/train/" in page
    assert "Prompt rows (task" in page
    mix_table = page.split('data-testid="capability-mix"')[1].split("</table>")[0]
    slug, counts = next(iter(version.capability_mix.items()))
    assert f'<td class="mono small">{slug}</td><td class="num">{counts["train"]}' in mix_table
    assert '<td class="mono small">train</td>' not in mix_table
    assert "Approved matched" not in page
    assert version.checksum in page
    fragment = (
        client_for(viewer)
        .get(response["Location"] + "?split=train", **HTMX_HEADERS)
        .content.decode()
    )
    assert fragment.lstrip().startswith('<div id="version-rows">')
    first = PromptRow.objects.filter(version=version).order_by("position").first()
    assert first.task_key in fragment
    download = client_for(viewer).get(f"/datasets/{dataset.pk}/versions/1/download/verl/train/")
    assert download["Content-Type"] == "application/vnd.apache.parquet"
    assert client_for(outsider).get(response["Location"]).status_code == 404
    assert client_for(outsider).post(url, {"seeds": "1"}).status_code == 404
    assert client_for(viewer).post(url, {"seeds": "1"}).status_code == 403
    assert dataset.versions.count() == 1
    prefilled = client_for(author).get(url).content.decode()  # the one test client
    assert 'value="0, 7"' in prefilled


def test_without_pyarrow_verl_is_refused_and_the_others_offered(
    prompts_dataset, author, sample_environments, monkeypatch
):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # a server without pyarrow
    version = build(prompts_dataset, author)
    exports = {e.format: e for e in version.exports.all()}
    assert exports["verl"].status == ExportStatus.INVALID
    assert exports["verl"].path == "" and exports["verl"].size == 0
    assert exports["verl"].lint["errors"] == [
        {
            "line": None,
            "message": "Parquet needs pyarrow, which this server does not have (pip install "
            "pyarrow, or the train extra).",
        }
    ]
    assert {f for f, e in exports.items() if e.status == ExportStatus.READY} == {
        "grpo",
        "nemo_gym",
        "verifiers",
        "card",
    }
    assert version.status == VersionStatus.READY
    assert version.job.message.endswith(
        "3 of 4 exports offered; not offered: verl (Parquet needs pyarrow, which this server "
        "does not have (pip install pyarrow, or the train extra).)."
    )
