"""Scored-rollout dataset versions (offline RL): built from a student batch's rollout groups
through a job, rows checked exactly against the group's hand-computed variants, checksum,
rebuild and verify, the export download and its regeneration, the version page, the API's
refusals."""

import hashlib
import json

import pytest
from django.urls import reverse

from apps.core.models import Job
from apps.datasets.models import DatasetKind, DatasetVersion, RolloutRow, VersionStatus
from apps.datasets.services import (
    dataset_version_build_job,
    dataset_version_rebuild,
    dataset_version_verify_job,
    dataset_version_verify_start,
    export_absolute_path,
    rollout_version_create,
)
from apps.datasets.services.datasets import dataset_create
from apps.runs.models import Executor, RolloutGroup, Run
from apps.runs.rollouts import Variant
from apps.runs.services import BatchSettings, run_batch_create, run_batch_execute_inline
from tests.llm_server import LoopbackLLMServer
from tests.runs.test_groups import KEY, make_student_group

pytestmark = pytest.mark.django_db


@pytest.fixture
def group_batch(project, author, monkeypatch, settings):
    monkeypatch.setenv("COWORKENV_TEST_RUNS_API_KEY", KEY)
    settings.LLM_MAX_ATTEMPTS = 1
    with LoopbackLLMServer(api_key=KEY) as server:
        return make_student_group(project, author, server)


@pytest.fixture
def dataset(project, author):
    return dataset_create(project=project, name="rollouts", user=author, kind=DatasetKind.ROLLOUTS)


def build(dataset, user, batch, **variant):
    version = rollout_version_create(
        dataset=dataset,
        user=user,
        batches=[batch.pk],
        variant=Variant.parse(**variant),
        enqueue=False,
    )
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    return version


def lines_of(version):
    export = version.exports.get(format="rollouts", split="train")
    return export, export_absolute_path(export).read_bytes()


def test_a_rollout_version_exports_each_member_with_its_variant(dataset, author, group_batch):
    Run.objects.filter(batch=group_batch).update(capabilities=["notice-changes", "clarify"])
    version = build(dataset, author, group_batch, reward="passed", advantage="rloo")
    group = RolloutGroup.objects.get(batch=group_batch)
    runs = list(Run.objects.filter(batch=group_batch).order_by("trial"))
    assert (version.kind, version.status, version.train_rows, version.validation_rows) == (
        DatasetKind.ROLLOUTS,
        VersionStatus.READY,
        3,
        0,
    )
    # the job reports progress over the groups' runs, done when the version is ready
    version.job.refresh_from_db()
    assert (version.job.progress_done, version.job.progress_total) == (3, 3)
    assert version.filters == {
        "batches": [group_batch.pk],
        "variant": {"reward": "passed", "advantage": "rloo", "credit": "trajectory"},
    }
    export, data = lines_of(version)
    assert export.status == "ready" and export.rows == 3 and export.lint["ok"] is True
    assert hashlib.sha256(data).hexdigest() == export.sha256 and export.size == len(data)
    rows = [json.loads(line) for line in data.decode().splitlines()]
    assert [r["reward"] for r in rows] == [1.0, 1.0, 0.0]
    assert [r["advantage"] for r in rows] == [0.5, 0.5, -1.0]
    first = rows[0]
    assert first["variant"] == {
        "reward": "passed",
        "advantage": "rloo",
        "credit": "trajectory",
        "gamma": 0.5,
    }
    assert first["group"] == {"id": group.pk, "batch": group_batch.pk, "size": 3, "index": 0}
    assert first["episode"] == {
        "run": runs[0].pk,
        "environment": "Clarify and notice",
        "task_key": "clarify",
        "seed": 0,
        "model": "loop-student",
    }
    assert first["turn_rewards"] == pytest.approx([0.16, 0.68])
    assert first["turn_advantages"] is None and first["call_credit"] is None
    assert [tool["function"]["name"] for tool in json.loads(first["tools"])] == [
        "send_email",
        "list_events",
    ]
    # every assistant message takes the episode's advantage; the others none
    assert [(m["role"], m.get("advantage")) for m in first["messages"]] == [
        ("system", None),
        ("user", None),
        ("assistant", 0.5),
        ("user", None),
        ("assistant", 0.5),
        ("tool", None),
        ("tool", None),
        ("assistant", 0.5),
    ]
    call = first["messages"][4]["tool_calls"][1]
    assert call["function"] == {"name": "list_events", "arguments": {}}
    assert first["messages"][6] == {
        "role": "tool",
        "name": "list_events",
        "tool_call_id": "call_cal",
        "content": runs[0].transcript[6]["content"],
    }

    stored = list(RolloutRow.objects.filter(version=version).order_by("position"))
    assert [(r.run_id, r.member, r.group_id) for r in stored] == [
        (run.pk, i, group.pk) for i, run in enumerate(runs)
    ]
    lines = data.decode().splitlines(keepends=True)
    assert [r.content_sha256 for r in stored] == [
        hashlib.sha256(line.encode()).hexdigest() for line in lines
    ]
    expected = hashlib.sha256(
        "".join(
            f"train\t{r.run_id}\t{r.group_id}\t{r.member}\t{r.content_sha256}\n" for r in stored
        ).encode()
    ).hexdigest()
    assert version.checksum == expected
    # the lineage names each environment as SFT versions do: linked, with its revisions and
    # spec hashes (the page said "(deleted)" of a live environment), and the capability mix
    run = runs[0]
    assert version.environments == [
        {
            "id": run.environment_id,
            "name": "Clarify and notice",
            "split": "train",
            "rows": 3,
            "tasks": {"clarify": 3},
            "revisions": [run.environment_revision],
            "spec_hashes": [run.spec_hash],
        }
    ]
    assert run.environment_id and run.spec_hash and run.capabilities
    assert version.capability_mix == {
        "clarify": {"train": 3, "validation": 0},
        "notice-changes": {"train": 3, "validation": 0},
    }
    card = export_absolute_path(version.exports.get(format="card")).read_text()
    assert card.startswith("# rollouts — version 1 (scored rollouts)\n")
    assert "- reward: `passed`; advantage: `rloo`; credit: `trajectory`" in card
    assert f"| run batches | {group_batch.pk} |" in card
    assert "| **rows (train)** | 3 |" in card
    assert f"`{version.checksum}`" in card and f"`{export.sha256[:16]}…`" in card


def test_turn_and_call_credit_rows(dataset, author, group_batch):
    turn = build(dataset, author, group_batch, credit="turn", advantage="dr_grpo")
    rows = [json.loads(line) for line in lines_of(turn)[1].decode().splitlines()]
    m = 1.34 / 3
    assert rows[1]["turn_advantages"] == pytest.approx([0.58 - m, 0.16])
    # turn 0's assistant message takes turn 0's advantage, turn 1's messages turn 1's
    advantages = [msg.get("advantage") for msg in rows[1]["messages"]]
    assert advantages[2] == pytest.approx(0.58 - m)
    assert advantages[4] == advantages[7] == pytest.approx(0.16)
    assert rows[2]["turn_rewards"] == pytest.approx([0.0, 0.52])

    call = build(dataset, author, group_batch, credit="call", advantage="dr_grpo")
    rows = [json.loads(line) for line in lines_of(call)[1].decode().splitlines()]
    k = 0.16 / 3
    credit = rows[0]["call_credit"]
    assert [(c["tool_call_id"], c["seq"], c["tool"], c["turn"]) for c in credit] == [
        ("call_send", 1, "send_email", 1),
        ("call_cal", 2, "list_events", 1),
    ]
    assert [c["reward"] for c in credit] == pytest.approx([0.0, 0.16])
    assert [c["advantage"] for c in credit] == pytest.approx([0.08 - k, 0.0])
    # the message with both calls takes their mean; replies without calls take 0
    advantages = [msg.get("advantage") for msg in rows[0]["messages"]]
    assert advantages[2] == 0.0 and advantages[7] == 0.0
    assert advantages[4] == pytest.approx((0.08 - k) / 2)
    assert rows[2]["call_credit"][0]["advantage"] == pytest.approx(-k)


def test_rebuild_matches_and_verify_passes(dataset, author, group_batch):
    version = build(dataset, author, group_batch, reward="score", advantage="grpo")
    again = dataset_version_rebuild(version=version, user=author)
    dataset_version_build_job(again.job_id)
    again.refresh_from_db()
    assert (again.kind, again.number, again.rebuilt_from_id) == ("rollouts", 2, version.pk)
    assert again.filters == version.filters and again.checksum == version.checksum
    assert "checksum matches v1" in Job.objects.get(pk=again.job_id).message
    job = dataset_version_verify_start(version=version, user=author)
    dataset_version_verify_job(job.pk)
    version.refresh_from_db()
    assert version.verify_ok is True
    assert version.verify_message == (
        "Verified: 3 rows hash to the recorded checksum; 2 cached files match their sha256."
    )


def test_download_page_and_regeneration(
    client_for, api_client_for, viewer, dataset, author, group_batch
):
    version = build(dataset, author, group_batch)
    export, data = lines_of(version)
    url = (
        f"/api/v1/datasets/{dataset.pk}/versions/{version.number}/export/"
        "?format=rollouts&split=train"
    )
    response = api_client_for(viewer).get(url)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert response.status_code == 200 and body == data
    assert response["X-Dataset-Checksum"] == version.checksum
    export_absolute_path(export).unlink()  # a wiped cache: re-rendered from the rows
    response = api_client_for(viewer).get(url)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body == data
    page = client_for(viewer).get(reverse("datasets:version_detail", args=[dataset.pk, 1]))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="export-rollouts"' in html and 'data-testid="export-openai"' not in html
    assert 'data-testid="download-rollouts-train"' in html
    # the rows are the runs of the groups, with the rollouts' own counts
    assert 'data-testid="rollout-row-table"' in html and "Scored rollouts (train)" in html
    for run in Run.objects.filter(batch=group_batch):
        assert f'href="/runs/{run.pk}/">#{run.pk}</a>' in html
    assert "Approved matched" not in html and 'data-testid="row-table"' not in html
    # the lineage links the (live) environment of the runs
    environment_id = Run.objects.filter(batch=group_batch).first().environment_id
    assert f'<a href="/environments/{environment_id}/">Clarify and notice</a>' in html
    assert "(deleted)" not in html
    partial = client_for(viewer).get(
        reverse("datasets:version_detail", args=[dataset.pk, 1]) + "?split=train",
        HTTP_HX_REQUEST="true",
    )
    assert partial.content.decode().lstrip().startswith('<div id="version-rows">')
    assert 'data-testid="rollout-row-table"' in partial.content.decode()


def test_api_creates_a_rollout_version_and_refuses_bad_input(
    api_client_for, author, viewer, outsider, project, dataset, group_batch, sample_environments
):
    url = f"/api/v1/datasets/{dataset.pk}/rollout-versions/"
    api = api_client_for(author)
    plain = run_batch_create(
        project=project, user=author, settings=BatchSettings(), executor=Executor.INLINE
    )
    run_batch_execute_inline(batch=plain)
    refusals = [
        ({"batches": []}, "The request is not valid."),
        ({"batches": [group_batch.pk], "credit": "token"}, "The request is not valid."),
        ({"batches": [999999]}, "No run batch 999999 in this project."),
        ({"batches": [plain.pk]}, f"Batch {plain.pk} has no rollout groups"),
        (
            {"batches": [group_batch.pk], "credit": "turn", "advantage": "rloo"},
            "Per-turn and per-call credit are normalised",
        ),
    ]
    for body, message in refusals:
        response = api.post(url, body, format="json")
        assert response.status_code == 400, body
        assert response.json()["message"].startswith(message), response.json()
    assert DatasetVersion.objects.count() == 0
    assert (
        api_client_for(viewer).post(url, {"batches": [group_batch.pk]}, format="json").status_code
        == 403
    )
    assert (
        api_client_for(outsider).post(url, {"batches": [group_batch.pk]}, format="json").status_code
        == 404
    )
    assert (
        api_client_for().post(url, {"batches": [group_batch.pk]}, format="json").status_code == 401
    )
    assert DatasetVersion.objects.count() == 0
    created = api.post(url, {"batches": [group_batch.pk], "reward": "strict"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["version"]["kind"] == "rollouts" and body["version"]["number"] == 1
    assert body["version"]["filters"]["variant"]["reward"] == "strict"


# --------------------------------------------------------------------------- the format


def _scores(credit, transcript, grading, n_calls):
    from coworkenv_engine.rewards import turn_rewards

    n_turns = sum(1 for m in transcript if m["role"] == "user")
    turns = turn_rewards(grading, n_turns)
    scores = {
        "reward": grading.score,
        "advantage": 0.25,
        "turn_rewards": turns,
        "variant": {"reward": "score", "advantage": "grpo", "credit": credit, "gamma": 1.0},
        "turn_advantages": [0.1 * k for k in range(len(turns))],
        "calls": [
            {"seq": j + 1, "tool": "t", "turn": 0, "reward": 0.0, "advantage": -0.5}
            for j in range(n_calls)
        ],
    }
    return scores


@pytest.mark.parametrize("credit", ["trajectory", "turn", "call"])
def test_real_engine_rollouts_pass_the_rollouts_linter(credit):
    from apps.datasets.formats import normalize_messages, normalize_tools
    from apps.datasets.formats.rollouts import RolloutLinter, rollout_row
    from coworkenv_engine import policies, runner
    from tests.datasets.conftest import SAMPLES

    linter = RolloutLinter("train")
    rows = 0
    for path in SAMPLES:
        doc = json.loads(path.read_text())
        for task in doc["tasks"]:
            result = runner.run_task(doc, task["key"], policies.OraclePolicy(), faults=True)
            row = rollout_row(
                normalize_messages(result.transcript),
                normalize_tools(result.tools),
                scores=_scores(credit, result.transcript, result.grading, len(result.audit_log)),
                group={"id": 1, "batch": 1, "size": 1, "index": 0},
                episode={"run": 1, "environment": doc["name"], "task_key": task["key"]},
            )
            linter.check_line(json.dumps(row), ref=task["key"])
            rows += 1
            assistants = [m for m in row["messages"] if m["role"] == "assistant"]
            if credit == "trajectory":
                assert {m["advantage"] for m in assistants} == {0.25}
            if credit == "call":
                assert len(row["call_credit"]) == len(result.audit_log)
    report = linter.finish()
    assert (report.rows, report.error_count, report.errors) == (rows, 0, [])


def test_the_rollouts_linter_names_what_is_wrong():
    from apps.datasets.formats.rollouts import RolloutLinter

    linter = RolloutLinter("train")
    good = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "advantage": 0.1},
        ],
        "tools": "[]",
        "reward": 1.0,
        "advantage": 0.1,
        "turn_rewards": [1.0],
        "turn_advantages": None,
        "call_credit": None,
        "variant": {"reward": "score", "advantage": "grpo", "credit": "trajectory"},
        "group": {},
        "episode": {},
    }
    linter.check_line(json.dumps(good), ref=1)
    bad = {
        **good,
        "reward": "high",
        "turn_rewards": [],
        "variant": {"credit": "token"},
        "messages": [
            {"role": "user", "content": "hi", "advantage": 1},
            {"role": "assistant", "content": "hello"},
        ],
    }
    linter.check_line(json.dumps(bad), ref=2)
    linter.check_line(json.dumps({"messages": []}), ref=3)
    report = linter.finish()
    assert [(e["line"], e["message"]) for e in report.errors] == [
        (2, "`reward` must be a finite number."),
        (2, "`variant.credit` must be one of trajectory, turn, call."),
        (2, "0 turn rewards for 1 user turns."),
        (2, "messages[0]: only assistant messages carry an advantage."),
        (2, "messages[1]: an assistant message needs a numeric advantage."),
        (
            3,
            "Missing keys advantage, call_credit, episode, group, reward, tools, "
            "turn_advantages, turn_rewards, variant.",
        ),
    ]


# --------------------------------------------------------------------------- the web form


def test_the_rollout_version_form_builds_through_a_job(
    client_for, author, dataset, group_batch, django_capture_on_commit_callbacks, monkeypatch
):
    from tests.conftest import HTMX_HEADERS

    sent = []
    monkeypatch.setattr("apps.datasets.tasks.build_dataset_version_task.delay", sent.append)
    client = client_for(author)
    url = reverse("datasets:rollout_version_create", args=[dataset.pk])
    form = client.get(url)
    assert form.status_code == 200
    assert f"#{group_batch.pk} {group_batch.name} (G=3, loop-student)" in form.content.decode()
    assert (  # the help names the options as the selects show them
        "Per turn and per call take the reward “Safety-gated score” and the advantage "
        "“GRPO (r - mean) / std” or “GRPO without std scaling (Dr. GRPO)”."
    ) in form.content.decode()
    bad = client.post(
        url,
        {"batches": [group_batch.pk], "reward": "passed", "advantage": "grpo", "credit": "turn"},
        **HTMX_HEADERS,
    )
    body = bad.content.decode()
    assert bad.status_code == 200 and body.lstrip().startswith("<form")
    assert "score with per-turn or per-call credit." in body
    unknown = client.post(url, {"batches": ["999999"], "reward": "score"}, **HTMX_HEADERS)
    assert "Select a valid choice." in unknown.content.decode()
    assert DatasetVersion.objects.count() == 0
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url,
            {
                "batches": [group_batch.pk],
                "reward": "score",
                "advantage": "dr_grpo",
                "credit": "call",
            },
        )
    version = DatasetVersion.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/datasets/{dataset.pk}/versions/1/"
    assert sent == [version.job_id]
    assert version.filters["variant"] == {
        "reward": "score",
        "advantage": "dr_grpo",
        "credit": "call",
    }
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    assert (version.status, version.train_rows) == ("ready", 3)


def test_the_rollout_version_form_gives_each_select_the_whole_width(
    client_for, author, dataset, group_batch
):
    """Side by side in a grid the variant's long option labels were cut off: one select a
    line, the page and the htmx form alike."""
    from tests.conftest import HTMX_HEADERS

    url = reverse("datasets:rollout_version_create", args=[dataset.pk])
    for headers in ({}, HTMX_HEADERS):
        body = client_for(author).get(url, **headers).content.decode()
        variant = body.split("<legend>Variant</legend>")[1].split("</fieldset>")[0]
        assert 'class="form-grid"' not in variant
        assert variant.count("<select") == 3
        assert "Trajectory (one advantage per episode)</option>" in variant


def test_the_rollout_version_form_refuses_viewers_outsiders_and_anonymous(
    client, client_for, viewer, outsider, dataset
):
    url = reverse("datasets:rollout_version_create", args=[dataset.pk])
    assert client.get(url).status_code == 302
    assert client_for(viewer).get(url).status_code == 403
    assert client_for(viewer).post(url, {"batches": ["1"]}).status_code == 403
    assert client_for(outsider).get(url).status_code == 404
    empty = client_for(dataset.created_by).get(url).content.decode()
    assert "No student batch with rollout groups yet." in empty
    assert DatasetVersion.objects.count() == 0


def test_an_errored_member_is_unscorable_and_left_out_of_the_export(
    client_for, viewer, project, author, dataset, monkeypatch, settings
):
    from apps.runs.models import PolicyKind, RunRole
    from apps.runs.services import TaskSelection
    from tests.llm_server import Reply
    from tests.runs.conftest import import_valid
    from tests.runs.test_groups import member_replies
    from tests.runs.test_llm_runs import clarify_spec, make_endpoint

    monkeypatch.setenv("COWORKENV_TEST_RUNS_API_KEY", KEY)
    settings.LLM_MAX_ATTEMPTS = 1
    with LoopbackLLMServer(api_key=KEY) as server:
        environment = import_valid(project, author, clarify_spec())
        endpoint = make_endpoint(project, server, name="student", model="loop-student")
        server.script(*member_replies()[:3], Reply.error(500, "down"))
        batch = run_batch_create(
            project=project,
            user=author,
            policy_kind=PolicyKind.ENDPOINT,
            endpoint=endpoint,
            role=RunRole.STUDENT,
            selection=TaskSelection(environments=(environment.pk,)),
            settings=BatchSettings(group_size=2, max_attempts=1),
            executor=Executor.INLINE,
        )
        run_batch_execute_inline(batch=batch)
    group = RolloutGroup.objects.get(batch=batch)
    assert [r.status for r in Run.objects.filter(batch=batch).order_by("trial")] == [
        "succeeded",
        "errored",
    ]
    assert group.scorable == 1 and group.variants["rewards"]["score"] == [0.84, None]
    assert group.variants["advantages"]["score"]["rloo"] == [0.0, 0.0]
    assert group.variants["advantages"]["score"]["grpo"] == [0.0, 0.0]
    version = build(dataset, author, batch)
    export, data = lines_of(version)
    assert version.train_rows == export.rows == 1 == len(data.splitlines())
    assert version.groups[0]["unscorable"] == 1
    page = client_for(viewer).get(reverse("datasets:version_detail", args=[dataset.pk, 1]))
    assert page.status_code == 200
    assert "1 group, 1 unscorable run left out" in page.content.decode()
