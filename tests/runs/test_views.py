"""Pages: list, create, batch detail (+ live progress), cancel, run detail, compare,
evaluation, leaderboard — success, wrong method, anonymous, outsider, viewer, htmx."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from apps.core.leases import stale_after
from apps.core.models import Job
from apps.runs.models import Executor, Run, RunBatch, RunStatus
from apps.runs.services import (
    BatchSettings,
    TaskSelection,
    run_batch_create,
    run_batch_execute_inline,
    run_execute,
)
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_batch(project, author, sample_environments):
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(sample_environments[0].pk,)),
        settings=BatchSettings(trials=2),
        executor=Executor.INLINE,
    )
    return run_batch_execute_inline(batch=batch)


@pytest.fixture
def pending_batch(project, author, sample_environments):
    return run_batch_create(
        project=project, user=author, settings=BatchSettings(trials=1), executor=Executor.INLINE
    )


def a_run_with_calls(batch):
    return Run.objects.filter(batch=batch, tool_calls__gt=0).order_by("id").first()


def page_urls(batch, run):
    other = Run.objects.filter(batch=batch, task_ref=run.task_ref).exclude(pk=run.pk).first()
    return [
        reverse("runs:batch_list", args=["acme"]),
        reverse("runs:batch_detail", args=[batch.pk]),
        reverse("runs:batch_progress", args=[batch.pk]),
        reverse("runs:detail", args=[run.pk]),
        reverse("runs:compare") + f"?a={run.pk}&b={other.pk}",
        reverse("runs:evaluation", args=["acme"]),
        reverse("runs:leaderboard", args=["acme"]),
    ]


def test_every_page_reads_for_a_viewer(client_for, viewer, finished_batch):
    run = a_run_with_calls(finished_batch)
    client = client_for(viewer)
    for url in page_urls(finished_batch, run):
        response = client.get(url)
        assert response.status_code == 200, url


def test_pages_refuse_anonymous_and_outsiders(client, client_for, outsider, finished_batch):
    run = a_run_with_calls(finished_batch)
    urls = page_urls(finished_batch, run)
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/login/"), url
    outsider_client = client_for(outsider)
    for url in urls:
        assert outsider_client.get(url).status_code == 404, url


def test_pages_refuse_post(client_for, viewer, finished_batch):
    run = a_run_with_calls(finished_batch)
    client = client_for(viewer)
    for url in page_urls(finished_batch, run):
        assert client.post(url).status_code == 405, url


def test_batch_list_shows_batches_and_htmx_rows(client_for, viewer, finished_batch):
    client = client_for(viewer)
    page = client.get(reverse("runs:batch_list", args=["acme"])).content.decode()
    assert finished_batch.name in page
    assert "New run batch" not in page  # viewers cannot start one
    rows = client.get(reverse("runs:batch_list", args=["acme"]), **HTMX_HEADERS)
    body = rows.content.decode()
    assert body.lstrip().startswith('<div id="batch-rows">')
    assert f"/runs/batches/{finished_batch.pk}/" in body


def test_empty_batch_list(client_for, author, project):
    page = client_for(author).get(reverse("runs:batch_list", args=["acme"])).content.decode()
    assert "No run batches yet." in page and "Start a batch" in page


def test_the_batch_form_says_how_to_run_a_model(client_for, author, project):
    """With only the oracle to choose, the policy's help says where models come from; the
    empty endpoint choices read "—" as elsewhere."""
    from apps.llm.models import ModelEndpoint

    url = reverse("runs:batch_create", args=["acme"])
    for headers in ({}, HTMX_HEADERS):
        page = client_for(author).get(url, **headers).content.decode()
        assert "To run a model, add a model endpoint to the project (Endpoints)." in page
        assert '<option value="" selected>—</option>' in page
        assert "---------" not in page
    ModelEndpoint.objects.create(
        project=project, name="local", base_url="http://127.0.0.1:9/v1", model="m"
    )
    page = client_for(author).get(url).content.decode()
    assert "To run a model" not in page and "local · m" in page


def test_create_a_batch_from_the_form(client_for, author, project, sample_environments):
    env = sample_environments[0]
    response = client_for(author).post(
        reverse("runs:batch_create", args=["acme"]),
        {
            "name": "Oracle on ops",
            "policy": "oracle",
            "role": "teacher",
            "environments": [env.pk],
            "statuses": ["valid", "approved"],
            "trials": 2,
            "concurrency": 2,
            "max_tool_calls": 30,
            "max_rounds_per_turn": 10,
            "max_attempts": 2,
            "seed": 7,
            "faults": "on",
            "user_side": "scripted",
        },
    )
    batch = RunBatch.objects.get()
    assert response.status_code == 302
    assert response.url == f"/runs/batches/{batch.pk}/"
    assert (batch.name, batch.role, batch.trials, batch.seed, batch.max_attempts) == (
        "Oracle on ops",
        "teacher",
        2,
        7,
        2,
    )
    assert batch.task_ids == list(env.tasks.order_by("position", "id").values_list("pk", flat=True))
    assert batch.created_by == author
    assert Run.objects.filter(batch=batch).count() == 2 * len(batch.task_ids)


def test_create_form_htmx_errors_render_in_place(client_for, author, project, sample_environments):
    response = client_for(author).post(
        reverse("runs:batch_create", args=["acme"]),
        {
            "policy": "oracle",
            "role": "eval",
            "statuses": ["draft"],
            "trials": 1,
            "concurrency": 1,
            "max_tool_calls": 5,
            "max_rounds_per_turn": 5,
            "max_attempts": 1,
            "seed": 0,
            "user_side": "scripted",
        },
        **HTMX_HEADERS,
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith("<form")
    assert "No task matches this selection" in body
    assert RunBatch.objects.count() == 0 and Job.objects.count() == 0


def test_create_needs_the_author_role(client_for, viewer, project, sample_environments):
    client = client_for(viewer)
    assert client.get(reverse("runs:batch_create", args=["acme"])).status_code == 403
    response = client.post(reverse("runs:batch_create", args=["acme"]), {"policy": "oracle"})
    assert response.status_code == 403
    assert RunBatch.objects.count() == 0


def test_create_refuses_outsiders_and_anonymous(client, client_for, outsider, project):
    url = reverse("runs:batch_create", args=["acme"])
    assert client_for(outsider).post(url, {"policy": "oracle"}).status_code == 404
    client.logout()
    response = client.post(url, {"policy": "oracle"})
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert RunBatch.objects.count() == 0


def test_cancel(client_for, author, viewer, pending_batch):
    url = reverse("runs:batch_cancel", args=[pending_batch.pk])
    assert client_for(viewer).post(url).status_code == 403
    assert Run.objects.filter(batch=pending_batch, status=RunStatus.PENDING).count() > 0
    client = client_for(author)
    assert client.get(url).status_code == 405
    response = client.post(url, **HTMX_HEADERS)
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/runs/batches/{pending_batch.pk}/"
    assert not Run.objects.filter(batch=pending_batch, status=RunStatus.PENDING).exists()
    assert Job.objects.get(pk=pending_batch.job_id).status == "cancelled"


def test_cancel_refuses_outsiders(client_for, outsider, pending_batch):
    url = reverse("runs:batch_cancel", args=[pending_batch.pk])
    assert client_for(outsider).post(url).status_code == 404
    assert Job.objects.get(pk=pending_batch.job_id).status == "pending"


def test_resume_hands_an_inline_batch_to_the_workers(
    client_for, author, viewer, pending_batch, django_capture_on_commit_callbacks
):
    url = reverse("runs:batch_resume", args=[pending_batch.pk])
    assert client_for(viewer).post(url).status_code == 403
    pending_batch.refresh_from_db()
    assert pending_batch.executor == Executor.INLINE
    client = client_for(author)
    assert client.get(url).status_code == 405
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(url, **HTMX_HEADERS)
    assert response["HX-Redirect"] == f"/runs/batches/{pending_batch.pk}/"
    pending_batch.refresh_from_db()
    assert pending_batch.executor == Executor.CELERY
    assert len(callbacks) >= 1  # runs queued after commit


def test_resume_refuses_outsiders_and_finished_batches(
    client_for, outsider, author, pending_batch, finished_batch
):
    url = reverse("runs:batch_resume", args=[pending_batch.pk])
    assert client_for(outsider).post(url).status_code == 404
    pending_batch.refresh_from_db()
    assert pending_batch.executor == Executor.INLINE
    response = client_for(author).post(
        reverse("runs:batch_resume", args=[finished_batch.pk]), follow=True
    )
    assert "This batch has already succeeded." in response.content.decode()


def test_progress_partial_polls_while_running_and_reloads_at_the_end(
    client_for, viewer, pending_batch, finished_batch
):
    client = client_for(viewer)
    live = client.get(reverse("runs:batch_progress", args=[pending_batch.pk]), **HTMX_HEADERS)
    assert 'hx-trigger="every 2s"' in live.content.decode()
    assert "HX-Refresh" not in live
    done = client.get(reverse("runs:batch_progress", args=[finished_batch.pk]), **HTMX_HEADERS)
    assert 'hx-trigger="every 2s"' not in done.content.decode()
    assert done["HX-Refresh"] == "true"


def progress_html(client, batch) -> str:
    response = client.get(reverse("runs:batch_progress", args=[batch.pk]), **HTMX_HEADERS)
    assert response.status_code == 200
    return response.content.decode()


def test_progress_counts_come_from_one_source(client_for, viewer, pending_batch):
    """Header and badges read the same query: after one run finishes the page says 1 of N
    done and 1 succeeded, whatever the job row's own counter says."""
    client = client_for(viewer)
    slots = pending_batch.slot_count
    body = progress_html(client, pending_batch)
    assert f'data-testid="batch-done">0/{slots} trials done<' in body
    assert f'data-status="pending">{slots} pending<' in body
    first = Run.objects.filter(batch=pending_batch).order_by("id").first()
    run_execute(run_id=first.pk)
    Job.objects.filter(pk=pending_batch.job_id).update(progress_done=0)  # a lagging counter
    body = progress_html(client, pending_batch)
    assert f'data-testid="batch-done">1/{slots} trials done<' in body
    assert 'data-status="succeeded">1 succeeded<' in body
    assert f'data-status="pending">{slots - 1} pending<' in body


def test_progress_shows_only_the_actions_that_apply(client_for, author, viewer, pending_batch):
    client = client_for(author)
    running = progress_html(client, pending_batch)
    assert 'data-testid="cancel-batch"' in running
    assert 'data-testid="resume-batch"' not in running
    assert 'data-testid="batch-stalled"' not in running
    # Nothing has moved for longer than a run may stay silent: Resume is offered.
    Job.objects.filter(pk=pending_batch.job_id).update(
        created_at=timezone.now() - stale_after() - timedelta(minutes=1)
    )
    stalled = progress_html(client, pending_batch)
    assert 'data-testid="resume-batch"' in stalled and 'data-testid="cancel-batch"' in stalled
    assert "Nothing has moved for a while" in stalled
    assert 'data-testid="resume-batch"' not in progress_html(client_for(viewer), pending_batch)
    assert 'data-testid="cancel-batch"' not in progress_html(client_for(viewer), pending_batch)
    Job.objects.filter(pk=pending_batch.job_id).update(cancel_requested=True)
    stopping = progress_html(client, pending_batch)
    assert "Stopping…" in stopping
    assert 'data-testid="resume-batch"' not in stopping
    assert 'data-testid="cancel-batch"' not in stopping


def test_run_rows_refresh_while_the_batch_runs(client_for, viewer, pending_batch, finished_batch):
    client = client_for(viewer)
    url = reverse("runs:batch_detail", args=[pending_batch.pk])
    rows = client.get(url + "?status=pending", **HTMX_HEADERS).content.decode()
    assert rows.lstrip().startswith(
        f'<div id="run-rows" hx-get="{url}?status=pending" hx-trigger="every 2s"'
    )
    first = Run.objects.filter(batch=pending_batch).order_by("id").first()
    run_execute(run_id=first.pk)
    rows = client.get(url, **HTMX_HEADERS).content.decode()
    assert rows.count('<span class="badge badge-succeeded">Succeeded</span>') == 1
    done = reverse("runs:batch_detail", args=[finished_batch.pk])
    finished_rows = client.get(done, **HTMX_HEADERS).content.decode()
    assert finished_rows.lstrip().startswith('<div id="run-rows">')


def test_batch_detail_shows_metrics_and_filters_runs(client_for, viewer, finished_batch):
    client = client_for(viewer)
    url = reverse("runs:batch_detail", args=[finished_batch.pk])
    page = client.get(url).content.decode()
    assert 'data-testid="avg-score">1.00<' in page
    assert 'data-testid="pass-rate">100%<' in page
    assert (
        page.count('data-testid="bar-chart"') == 1 and page.count('data-testid="line-chart"') == 1
    )
    assert "No grader failed." in page
    # By horizon: the sample tasks are 1-2 turns; tables for turns and for days.
    turns = page.split('data-testid="by-turns"')[1].split("</table>")[0]
    assert '<td class="key">1 turn</td>' in turns and '<td class="key">2 turns</td>' in turns
    assert 'data-testid="by-days"' in page
    rows = client.get(url + "?status=errored", **HTMX_HEADERS).content.decode()
    assert rows.lstrip().startswith('<div id="run-rows">')
    assert "No runs match." in rows


def test_run_detail_timeline_diff_and_verdicts(client_for, viewer, finished_batch):
    run = a_run_with_calls(finished_batch)
    page = client_for(viewer).get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert page.count('data-testid="tool-call"') == run.tool_calls
    assert page.count('data-testid="verdict"') == len(run.verdicts)
    first_grader = run.verdicts[0]["grader_id"]
    assert f'data-grader="{first_grader}" data-status="passed"' in page
    assert f"/environments/{run.environment_id}/tasks/#task-" in page  # grader links
    changing = [e for e in run.audit_log if e["diff"]]
    assert page.count('data-testid="diff"') == sum(len(e["diff"]) for e in changing)


def test_run_detail_htmx_variant_is_the_timeline(client_for, viewer, finished_batch):
    run = a_run_with_calls(finished_batch)
    response = client_for(viewer).get(
        reverse("runs:detail", args=[run.pk]) + "?only=failures", **HTMX_HEADERS
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<ol class="timeline only-failures"')
    assert "<html" not in body


def test_compare_options_tell_the_runs_apart(
    client_for, viewer, author, project, finished_batch, sample_environments
):
    """Not "oracle · oracle …" over and over: id, batch, policy, trial, score and outcome."""
    again = run_batch_execute_inline(
        batch=run_batch_create(
            project=project,
            user=author,
            selection=TaskSelection(environments=(sample_environments[0].pk,)),
            settings=BatchSettings(trials=1),
            executor=Executor.INLINE,
        )
    )
    run = Run.objects.filter(batch=finished_batch, trial=0).order_by("id").first()
    same = Run.objects.get(batch=finished_batch, task_key=run.task_key, trial=1)
    other = Run.objects.get(batch=again, task_key=run.task_key)
    page = client_for(viewer).get(reverse("runs:detail", args=[run.pk])).content.decode()
    form = page.split('aria-label="Compare with">')[1].split("</select>")[0]
    options = re.findall(r"<option [^>]*>([^<]*)</option>", form)
    assert len(options) == len(set(options)) == 2
    assert options == [
        f"#{other.pk} · batch #{again.pk} · oracle · trial 0 · 1.00 passed",
        f"#{same.pk} · this batch · oracle · trial 1 · 1.00 passed",
    ]
    assert f'title="{again.name}"' in form


def test_model_output_is_escaped(client_for, viewer, finished_batch):
    run = a_run_with_calls(finished_batch)
    evil = '<script>document.title="pwned"</script><b>bold</b>'
    run.transcript = [
        *run.transcript,
        {"role": "assistant", "content": evil},
    ]
    run.verdicts = [{**run.verdicts[0], "evidence": {"note": evil}}]
    run.save()
    page = client_for(viewer).get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "<script>document.title" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;&lt;b&gt;bold" in page


def test_compare_needs_two_runs_of_the_project(client_for, viewer, outsider, finished_batch):
    run = a_run_with_calls(finished_batch)
    assert client_for(viewer).get(reverse("runs:compare")).status_code == 404
    assert client_for(viewer).get(reverse("runs:compare") + f"?a={run.pk}&b=x").status_code == 404
    page = client_for(viewer).get(reverse("runs:compare") + f"?a={run.pk}&b={run.pk}")
    assert page.status_code == 200
    assert page.content.decode().count('data-testid="compare-') == 2


def test_evaluation_and_leaderboard(client_for, viewer, finished_batch):
    client = client_for(viewer)
    evaluation = client.get(
        reverse("runs:evaluation", args=["acme"]) + f"?batch={finished_batch.pk}"
    )
    page = evaluation.content.decode()
    assert page.count('data-testid="model-row"') == 1 and "oracle" in page
    # capability scores, score by turns, score by days: one chart each
    assert page.count('data-testid="bar-chart"') == 3
    assert 'data-testid="horizon-charts"' in page
    assert page.count('data-testid="by-turns"') == 1 and page.count('data-testid="by-days"') == 1
    assert page.count('data-testid="line-chart"') == 2  # pass@k and pass^k per model
    assert 'data-testid="capability-matrix"' not in page  # no second table of the same
    board = client.get(reverse("runs:leaderboard", args=["acme"])).content.decode()
    assert board.count('data-testid="leaderboard-row"') == 1
    name = finished_batch.runs.first().environment_name
    assert f'<h2 data-testid="board-name">{name}</h2>' in board
    assert f"/runs/batches/{finished_batch.pk}/" in board


def test_a_leaderboard_of_one_trial_names_pass_at_1_once(
    client_for, viewer, project, author, sample_environments
):
    batch = run_batch_create(
        project=project,
        user=author,
        selection=TaskSelection(environments=(sample_environments[0].pk,)),
        settings=BatchSettings(trials=1),
        executor=Executor.INLINE,
    )
    run_batch_execute_inline(batch=batch)
    board = client_for(viewer).get(reverse("runs:leaderboard", args=["acme"])).content.decode()
    header = board.split("<thead>")[1].split("</thead>")[0]
    assert header.count("pass@1") == 1 and "pass^1" in header
    row = board.split('data-testid="leaderboard-row">')[1].split("</tr>")[0]
    assert row.count("<td") == header.count("<th")


def test_evaluation_empty_state(client_for, viewer, project):
    page = client_for(viewer).get(reverse("runs:evaluation", args=["acme"])).content.decode()
    assert "Nothing to evaluate yet." in page


def test_dashboard_counts_runs(client_for, viewer, finished_batch):
    page = client_for(viewer).get("/p/acme/").content.decode()
    runs = Run.objects.count()
    assert runs == 2 * len(finished_batch.task_ids)
    assert (
        f'<a class="stat" href="/p/acme/runs/" data-testid="stat-runs">'
        f'<div class="value">{runs}</div><div class="label">Runs</div></a>'
    ) in page


def test_evaluation_and_leaderboard_queries_do_not_grow_with_batches(
    client_for, viewer, project, author, sample_environments, finished_batch
):
    client = client_for(viewer)
    urls = [
        reverse("runs:evaluation", args=["acme"]),
        reverse("runs:leaderboard", args=["acme"]),
    ]

    def counts():
        result = []
        for url in urls:
            with CaptureQueriesContext(connection) as queries:
                assert client.get(url).status_code == 200
            result.append(len(queries))
        return result

    one = counts()
    for _ in range(3):
        run_batch_execute_inline(
            batch=run_batch_create(
                project=project,
                user=author,
                selection=TaskSelection(environments=(sample_environments[0].pk,)),
                executor=Executor.INLINE,
            )
        )
    assert counts() == one


# --- the environment page's Runs tab (a fragment under the runs app's URLs) -----------------


def test_environment_runs_fragment_lists_newest_first_and_filters(
    client_for, viewer, finished_batch, sample_environments
):
    env = sample_environments[0]
    client = client_for(viewer)
    url = reverse("runs:environment_runs", args=[env.pk])
    body = client.get(url, **HTMX_HEADERS).content.decode()
    assert body.lstrip().startswith('<div id="environment-runs"')
    ids = [
        int(i)
        for i in re.findall(
            r'<tr data-testid="environment-run-row">\s*<td><a href="/runs/(\d+)/"', body
        )
    ]
    expected = list(
        Run.objects.filter(environment=env).order_by("-id").values_list("pk", flat=True)
    )
    assert ids == expected and len(ids) > 1
    assert f"#{finished_batch.pk} · {finished_batch.name}" in body
    assert '<option value="oracle"' in body  # the policy filter offers what ran
    # filters: status, policy, batch
    assert "No runs match." in client.get(url + "?status=errored", **HTMX_HEADERS).content.decode()
    assert "No runs match." in client.get(url + "?policy=nobody", **HTMX_HEADERS).content.decode()
    same = client.get(url + f"?batch={finished_batch.pk}&policy=oracle", **HTMX_HEADERS)
    assert same.content.decode().count('data-testid="environment-run-row"') == len(expected)
    # another environment of the project: none of these runs
    other = client.get(
        reverse("runs:environment_runs", args=[sample_environments[1].pk]), **HTMX_HEADERS
    ).content.decode()
    assert 'data-testid="environment-run-row"' not in other and "No runs yet" in other


def test_environment_runs_tab_loads_the_fragment_and_direct_visits_go_to_the_tab(
    client_for, viewer, finished_batch, sample_environments
):
    env = sample_environments[0]
    client = client_for(viewer)
    tab = reverse("environments:tab", args=[env.pk, "runs"])
    fragment = reverse("runs:environment_runs", args=[env.pk])
    page = client.get(tab + "?status=succeeded").content.decode()
    assert 'data-tab="runs"' in page
    assert f'hx-get="{fragment}?status=succeeded" hx-trigger="load"' in page
    response = client.get(fragment + "?status=succeeded")
    assert response.status_code == 302 and response["Location"] == tab + "?status=succeeded"


def test_environment_runs_empty_state_links_to_a_preselected_batch_form(
    client_for, author, viewer, project, sample_environments
):
    env = sample_environments[0]
    url = reverse("runs:environment_runs", args=[env.pk])
    body = client_for(author).get(url, **HTMX_HEADERS).content.decode()
    new = reverse("runs:batch_create", args=[project.slug]) + f"?environment={env.pk}"
    assert "No runs yet" in body and f'href="{new}"' in body
    assert 'name="status"' not in body  # no filters over nothing
    assert "New run batch" not in client_for(viewer).get(url, **HTMX_HEADERS).content.decode()
    form = client_for(author).get(new).content.decode()
    assert re.search(rf'<option value="{env.pk}" selected>', form)
    other = sample_environments[1].pk
    assert not re.search(rf'<option value="{other}" selected>', form)
    assert (
        client_for(author)
        .get(reverse("runs:batch_create", args=[project.slug]) + "?environment=x")
        .status_code
        == 200
    )


def test_environment_runs_refuses_outsiders_anonymous_and_post(
    client, client_for, outsider, viewer, sample_environments
):
    url = reverse("runs:environment_runs", args=[sample_environments[0].pk])
    response = client.get(url)
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert client_for(outsider).get(url, **HTMX_HEADERS).status_code == 404
    assert client_for(outsider).get(url).status_code == 404
    assert client_for(viewer).post(url, **HTMX_HEADERS).status_code == 405
    missing = reverse("runs:environment_runs", args=[999999])
    assert client_for(viewer).get(missing, **HTMX_HEADERS).status_code == 404


def test_a_finished_teacher_batch_points_to_the_review_queue(client_for, viewer, project, author):
    from tests.curation.conftest import import_valid, spec_document, teacher_batch_run

    batch = teacher_batch_run(project, author, import_valid(project, author, spec_document()))
    client = client_for(viewer)
    page = client.get(reverse("runs:batch_detail", args=[batch.pk])).content.decode()
    next_step = page.split('data-testid="teacher-next">')[1].split("</p>")[0]
    assert reverse("curation:queue", args=[project.slug]) in next_step
    # the live fragment says the same once the batch has ended
    fragment = client.get(reverse("runs:batch_progress", args=[batch.pk]), HTTP_HX_REQUEST="true")
    assert 'data-testid="teacher-next"' in fragment.content.decode()


def test_a_finished_evaluation_batch_has_no_review_pointer(client_for, viewer, finished_batch):
    page = client_for(viewer).get(reverse("runs:batch_detail", args=[finished_batch.pk]))
    assert 'data-testid="teacher-next"' not in page.content.decode()


def test_metrics_pages_name_capabilities_with_the_slug_on_hover(
    client_for, viewer, project, finished_batch
):
    from apps.capabilities.models import Capability

    slug = finished_batch.runs.exclude(capabilities=[]).first().capabilities[0]
    capability = Capability.objects.get(project=project, slug=slug)
    Capability.objects.filter(pk=capability.pk).update(name="Route <around> conflicts")
    client = client_for(viewer)
    for url in (
        reverse("runs:batch_detail", args=[finished_batch.pk]),
        reverse("runs:evaluation", args=["acme"]) + f"?batch={finished_batch.pk}",
    ):
        page = client.get(url).content.decode()
        assert f'<td title="{slug}">Route &lt;around&gt; conflicts</td>' in page, url
