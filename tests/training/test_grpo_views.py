"""GRPO through the pages, the API and manage.py train: launch with environments and the
reward/advantage choice (success, bad input, roles, other projects' environments, htmx),
the job page's reward panel, and the RL comparison page overlaying several jobs' reward and
pass-rate curves named by their configuration."""

import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils.html import escape

from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import
from apps.training.models import ModelKind, TrainingJob
from apps.training.services import (
    trained_model_register,
    training_events_apply,
    training_job_create,
)
from apps.training.services.evaluation import trained_model_evaluate
from tests.conftest import HTMX_HEADERS
from tests.engine.helpers import SAMPLES

GAMMA = "\N{GREEK SMALL LETTER GAMMA}"


def _grpo_data(chosen, **extra):
    return {
        "method": "grpo",
        "backend": "local",
        "preset": "tiny-cpu",
        "environments": [str(e.pk) for e in chosen],
        "task_split": "eval",
        "group_size": "4",
        "batch_size": "4",
        "temperature": "0.7",
        "reward": "passed",
        "advantage": "dr_grpo",
        "max_steps": "3",
        **extra,
    }


def _grpo_api_body(chosen, **extra) -> dict:
    """The API's body for a GRPO job of the tiny CPU preset on the ``chosen`` environments."""
    return {
        "method": "grpo",
        "backend": "local",
        "preset": "tiny-cpu",
        "environments": [e.pk for e in chosen],
        **extra,
    }


def _refused_form(client, chosen, **extra) -> str:
    """The launch form posted over htmx with ``_grpo_data(chosen, **extra)``: the form again
    (200), its body returned for the reasons it gives."""
    response = client.post("/p/acme/training/new/", _grpo_data(chosen, **extra), **HTMX_HEADERS)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith("<form")
    return body


def test_author_launches_grpo_from_the_form(client_for, author, sample_environments):
    client = client_for(author)
    acme, finance, _ = sample_environments
    form = client.get("/p/acme/training/new/?method=grpo").content.decode()
    assert 'data-testid="grpo-fields"' in form
    assert f'value="{acme.pk}"' in form and "Acme Ops - meeting coordination (valid)" in form
    assert '<option value="grpo" selected>' in form
    response = client.post("/p/acme/training/new/", _grpo_data([acme, finance]))
    training_job = TrainingJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/training/{training_job.pk}/"
    assert (training_job.method, training_job.backend, training_job.task_split) == (
        "grpo",
        "local",
        "eval",
    )
    assert training_job.dataset_version is None
    assert sorted(e.pk for e in training_job.environments.all()) == sorted([acme.pk, finance.pk])
    hp = training_job.hyperparameters
    assert (hp["group_size"], hp["batch_size"], hp["temperature"], hp["max_steps"]) == (
        4,
        4,
        0.7,
        3,
    )
    assert (hp["reward"], hp["advantage"], hp["beta"], hp["max_completion_length"]) == (
        "passed",
        "dr_grpo",
        0.04,
        32,  # the tiny-cpu GRPO preset
    )
    assert training_job.total_steps == training_job.job.progress_total == 3
    assert training_job.name == f"tiny-qwen2 GRPO on {finance.name}, {acme.name}"  # by name
    again = client.post("/p/acme/training/new/", _grpo_data([acme]), **HTMX_HEADERS)
    assert again["HX-Redirect"] == f"/training/{TrainingJob.objects.latest('pk').pk}/"


def test_grpo_launch_bad_input_says_why_and_creates_nothing(
    client_for, author, sample_environments
):
    client = client_for(author)
    acme = sample_environments[0]

    def post(**extra):
        return _refused_form(client, [acme], **extra)

    assert "Choose at least one environment to roll out." in post(environments=[])
    assert (
        "Batch size x gradient accumulation (3) must be a multiple of the group size (4)"
        in post(batch_size="3")
    )
    assert "Unknown GRPO hyperparameter: epochs." in post(epochs="2")
    assert "GRPO runs on the local backend" in post(backend="openai")
    assert "Unknown GRPO preset “7b-full”" in post(preset="7b-full")
    assert "Ensure this value is greater than or equal to 2." in post(group_size="1")
    assert "Select a valid choice. nope is not one of the available choices." in post(reward="nope")
    Environment.objects.filter(pk=acme.pk).update(status=EnvironmentStatus.DRAFT)
    assert "Select a valid choice." in post()  # a draft is not offered
    assert not TrainingJob.objects.exists()


def test_grpo_launch_refuses_viewers_outsiders_and_other_projects_environments(
    client_for, viewer, outsider, author, sample_environments, other_project
):
    acme = sample_environments[0]
    assert client_for(viewer).post("/p/acme/training/new/", _grpo_data([acme])).status_code == 403
    assert client_for(outsider).post("/p/acme/training/new/", _grpo_data([acme])).status_code == 404
    theirs = client_for(outsider).post("/p/other/training/new/", _grpo_data([acme]))
    assert theirs.status_code == 200
    assert f"Select a valid choice. {acme.pk} is not one of the available choices." in (
        theirs.content.decode()
    )
    assert not TrainingJob.objects.exists()


def test_grpo_through_the_api(api_client_for, author, viewer, outsider, project, other_project,
                              sample_environments):  # fmt: skip
    acme = sample_environments[0]
    foreign = environment_import(
        project=other_project, spec=json.loads(SAMPLES[1].read_text()), user=outsider
    )
    url = f"/api/v1/projects/{project.pk}/training-jobs/"
    body = _grpo_api_body(
        [acme],
        task_split="",
        hyperparameters={"advantage": "batch", "reward": "strict", "group_size": 2},
    )
    assert api_client_for(viewer).post(url, body, format="json").status_code == 403
    assert api_client_for(outsider).post(url, body, format="json").status_code == 404
    other = api_client_for(author).post(
        url, {**body, "environments": [acme.pk, foreign.pk]}, format="json"
    )
    assert other.status_code == 400
    message = f"No such environment in this project: {foreign.pk}."
    assert other.json() == {"message": message, "details": {"fields": {"environments": [message]}}}
    bad = api_client_for(author).post(
        url, {**body, "hyperparameters": {"advantage": "ppo", "temperature": 9}}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json()["details"]["fields"] == {
        "advantage": ["Choose one of grpo, dr_grpo, batch, rloo."],
        "temperature": ["Must be between 0.01 and 2."],
    }
    assert not TrainingJob.objects.exists()
    created = api_client_for(author).post(url, body, format="json")
    assert created.status_code == 201
    data = created.json()
    assert (data["method"], data["environments"], data["task_split"]) == ("grpo", [acme.pk], "")
    assert (data["dataset"], data["version"]) == (None, None)
    assert data["hyperparameters"]["advantage"] == "batch"
    training_events_apply(
        training_job=TrainingJob.objects.get(),
        events=[{"type": "metrics", "step": 1, "reward": 0.5, "pass_rate": 0.25, "kl": 0.01}],
    )
    detail = api_client_for(viewer).get(f"/api/v1/training-jobs/{data['id']}/").json()
    metric = detail["metrics"][0]
    assert (metric["reward"], metric["pass_rate"], metric["kl"], metric["loss"]) == (
        0.5,
        0.25,
        0.01,
        None,
    )
    assert detail["last_reward"] == 0.5


def test_manage_train_grpo_refuses_and_launches(project, sample_environments, capsys):
    acme = sample_environments[0]
    with pytest.raises(CommandError, match="No environment 999999 in acme"):
        call_command("train", "--project=acme", "--method=grpo", "--environment=999999")
    with pytest.raises(CommandError, match=r"Choose at least one environment to roll out\."):
        call_command("train", "--project=acme", "--method=grpo", "--preset=tiny-cpu")
    with pytest.raises(CommandError, match=r"sft needs --dataset and --version\."):
        call_command("train", "--project=acme")
    assert not TrainingJob.objects.exists()
    # No worker in this test: the job stays pending and the wait gives up at once.
    with pytest.raises(CommandError, match="Training pending"):
        call_command(
            "train",
            "--project=acme",
            "--method=grpo",
            f"--environment={acme.pk}",
            "--split=all",
            "--preset=tiny-cpu",
            "--group-size=2",
            "--reward=passed",
            "--advantage=dr_grpo",
            "--timeout=0.1",
        )
    training_job = TrainingJob.objects.get()
    assert (training_job.task_split, training_job.hyperparameters["advantage"]) == ("", "dr_grpo")
    assert f"Training job #{training_job.pk}" in capsys.readouterr().out


def _rl_job(project, author, environment, **hp):
    return training_job_create(
        project=project,
        user=author,
        method="grpo",
        backend="local",
        environments=[environment],
        preset="tiny-cpu",
        hyperparameters=hp,
        name=f"RL {hp}",
    )


def test_rl_comparison_overlays_reward_and_pass_rate(
    client_for, viewer, outsider, project, author, sample_environments, training_version
):
    acme = sample_environments[0]
    first = _rl_job(project, author, acme)
    second = _rl_job(project, author, acme, reward="passed", advantage="dr_grpo", temperature=0.7)
    sft = training_job_create(
        project=project, user=author, dataset_version=training_version, backend="local",
        preset="tiny-cpu",
    )  # fmt: skip
    for job, rewards in ((first, [0.2, 0.4, 0.6]), (second, [0.0, 0.5])):
        training_events_apply(
            training_job=job,
            events=[
                {
                    "type": "metrics",
                    "step": i + 1,
                    "reward": r,
                    "pass_rate": r / 2,
                    "group_reward_std": 0.1,
                }
                for i, r in enumerate(rewards)
            ],
        )
    url = f"/p/acme/training/compare/rl/?jobs={first.pk}&jobs={second.pk}&jobs={sft.pk}&jobs=x"
    page = client_for(viewer).get(url)
    assert page.status_code == 200
    html = page.content.decode()
    labels = [
        f"#{first.pk} score/grpo G2 T1 trajectory",
        f"#{second.pk} passed/dr_grpo G2 T0.7 trajectory",
    ]
    legends = re.findall(r'<text class="chart-legend"[^>]*>([^<]*)</text>', html)
    # Two charts (reward, pass rate), one line per GRPO job named by its configuration; the
    # SFT job and the junk id are no part of it.
    assert legends == [
        f"{labels[0]} 0.6",
        f"{labels[1]} 0.5",
        f"{labels[0]} 0.3",
        f"{labels[1]} 0.25",
    ]
    assert re.findall(r'data-points="(\d+)"', html) == ["5", "5"]
    assert "Binary pass: 1 if the score reaches the pass threshold, else 0" in html
    assert "Dr. GRPO: r - group mean, no std, constant-length loss" in html
    assert f'<a href="/training/{sft.pk}/">' not in html
    table = html[html.index('data-testid="rl-compare-table"') :]
    assert "0.600" in table and "0.300" in table and "0.100" in table  # last, best pass, std
    fragment = client_for(viewer).get(url, **HTMX_HEADERS).content.decode()
    assert fragment.lstrip().startswith('<section class="panel" id="compare-rl"')
    assert "<html" not in fragment
    empty = client_for(viewer).get("/p/acme/training/compare/rl/").content.decode()
    assert 'data-testid="no-selection"' in empty and f"{labels[1]} · RL" in empty
    assert client_for(outsider).get(url).status_code == 404
    theirs = client_for(outsider).get(url.replace("/p/acme/", "/p/other/")).content.decode()
    assert 'data-testid="no-rl-jobs"' in theirs and labels[0] not in theirs
    assert Client().get(url).status_code == 302
    assert client_for(viewer).post(url).status_code == 405


def test_grpo_job_page_shows_the_reward_panel(client_for, viewer, project, author,
                                              sample_environments):  # fmt: skip
    acme = sample_environments[0]
    job = _rl_job(project, author, acme, reward="strict")
    # before any step the reward panel says so (it used to say "No loss reported yet.")
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        empty = client_for(viewer).get(f"/training/{job.pk}/", **headers).content.decode()
        rl_panel = empty[empty.index('data-testid="rl-panel"') :]
        assert "No reward reported yet." in rl_panel and "No loss reported yet." not in rl_panel
    rl_compare = client_for(viewer).get(f"/p/acme/training/compare/rl/?jobs={job.pk}")
    assert "No reward reported yet." in rl_compare.content.decode()
    training_events_apply(
        training_job=job,
        events=[{"type": "metrics", "step": 1, "reward": 0.0, "pass_rate": 0.0, "kl": 0.002,
                 "completion_length": 31.0, "group_reward_std": 0.0}],
    )  # fmt: skip
    html = client_for(viewer).get(f"/training/{job.pk}/").content.decode()
    assert 'data-testid="rl-panel"' in html
    assert "Reward: Strict only: 1 if every grader passed, else 0" in html
    assert f'href="/environments/{acme.pk}/">{acme.name}</a>' in html
    assert f"/p/acme/training/compare/rl/?jobs={job.pk}" in html
    row = html[html.index('data-testid="rl-metrics-table"') :]
    assert '<td class="num">0.0020</td>' in row and '<td class="num">31</td>' in row
    assert 'data-testid="flat-groups"' in html  # std 0 in every group: no learning signal
    listing = client_for(viewer).get("/p/acme/training/").content.decode()
    assert "<td>grpo</td>" in listing and "0.000" in listing
    training_events_apply(
        training_job=job,
        events=[{"type": "metrics", "step": 2, "reward": 0.5, "group_reward_std": 0.25}],
    )
    assert (
        'data-testid="flat-groups"'
        not in client_for(viewer).get(f"/training/{job.pk}/").content.decode()
    )


def test_a_grpo_model_is_evaluated_on_its_environments_eval_tasks(
    project, author, sample_environments
):
    acme, finance, _ = sample_environments
    training_job = training_job_create(
        project=project,
        user=author,
        method="grpo",
        backend="local",
        environments=[finance, acme],
        preset="tiny-cpu",
    )
    model = trained_model_register(
        training_job=training_job, kind=ModelKind.FULL, path="/models/grpo/final"
    )
    trained_model_evaluate(
        trained_model=model, user=author, base_url="http://127.0.0.1:8001/v1", trials=1
    )
    model.refresh_from_db()
    batch = model.eval_batch
    assert batch.selection["environments"] == sorted([acme.pk, finance.pk])
    assert batch.selection["split"] == "eval"
    assert model.endpoint.model == f"coworkenv-{training_job.pk}"


# --- credit assignment (per turn, per call) ---------------------------------------------------


def test_author_launches_grpo_with_per_turn_credit(client_for, author, sample_environments):
    client = client_for(author)
    acme = sample_environments[0]
    form = client.get("/p/acme/training/new/?method=grpo").content.decode()
    assert '<select name="credit"' in form and 'name="gamma"' in form
    assert (
        "per-turn credit isn't available" not in form and "Credit is trajectory-level" not in form
    )
    data = _grpo_data([acme], reward="score", advantage="grpo", credit="turn", gamma="0.5")
    response = client.post("/p/acme/training/new/", data, **HTMX_HEADERS)
    training_job = TrainingJob.objects.get()
    assert response["HX-Redirect"] == f"/training/{training_job.pk}/"
    hp = training_job.hyperparameters
    assert (hp["credit"], hp["gamma"], hp["reward"], hp["advantage"]) == (
        "turn", 0.5, "score", "grpo",
    )  # fmt: skip
    plain = client.post("/p/acme/training/new/", _grpo_data([acme]))  # blank: trajectory, gamma 1
    assert plain.status_code == 302
    hp = TrainingJob.objects.latest("pk").hyperparameters
    assert (hp["credit"], hp["gamma"]) == ("trajectory", 1.0)


def test_grpo_credit_bad_input_says_why(client_for, author, viewer, sample_environments):
    client = client_for(author)
    acme = sample_environments[0]

    def post(**extra):
        return _refused_form(client, [acme], **extra)

    # _grpo_data asks for the binary-pass reward and Dr. GRPO
    assert "split the safety-gated score: choose the score reward" in post(credit="turn")
    assert "choose grpo or dr_grpo" in post(credit="call", reward="score", advantage="rloo")
    assert "Ensure this value is less than or equal to 1.0." in post(gamma="1.5")
    assert "Select a valid choice. episode is not one of" in post(credit="episode")
    data = _grpo_data([acme], reward="score", credit="turn")
    assert client_for(viewer).post("/p/acme/training/new/", data).status_code == 403
    assert not TrainingJob.objects.exists()


def test_grpo_credit_through_the_api_and_manage(
    api_client_for, author, outsider, project, sample_environments
):
    acme = sample_environments[0]
    url = f"/api/v1/projects/{project.pk}/training-jobs/"
    body = _grpo_api_body(
        [acme], hyperparameters={"credit": "call", "gamma": 0.9, "advantage": "dr_grpo"}
    )
    assert api_client_for(outsider).post(url, body, format="json").status_code == 404
    bad = api_client_for(author).post(
        url, {**body, "hyperparameters": {"credit": "turn", "reward": "strict"}}, format="json"
    )
    assert bad.status_code == 400
    assert list(bad.json()["details"]["fields"]) == ["credit"]
    created = api_client_for(author).post(url, body, format="json")
    assert created.status_code == 201
    hp = created.json()["hyperparameters"]
    assert (hp["credit"], hp["gamma"], hp["advantage"]) == ("call", 0.9, "dr_grpo")
    with pytest.raises(CommandError, match="Training pending"):
        call_command(
            "train", "--project=acme", "--method=grpo", f"--environment={acme.pk}",
            "--preset=tiny-cpu", "--credit=turn", "--gamma=0.8", "--timeout=0.1",
        )  # fmt: skip
    hp = TrainingJob.objects.latest("pk").hyperparameters
    assert (hp["credit"], hp["gamma"]) == ("turn", 0.8)


def test_rl_comparison_and_job_page_name_the_credit(
    client_for, viewer, outsider, project, author, sample_environments
):
    acme = sample_environments[0]
    turn = _rl_job(project, author, acme, credit="turn", gamma=0.5)
    call = _rl_job(project, author, acme, credit="call", advantage="dr_grpo")
    episode = _rl_job(project, author, acme)
    for job in (turn, call, episode):
        training_events_apply(
            training_job=job, events=[{"type": "metrics", "step": 1, "reward": 0.2}]
        )
    url = f"/p/acme/training/compare/rl/?jobs={turn.pk}&jobs={call.pk}&jobs={episode.pk}"
    html = client_for(viewer).get(url).content.decode()
    legends = re.findall(r'<text class="chart-legend"[^>]*>([^<]*)</text>', html)
    assert legends[:3] == [
        f"#{turn.pk} score/grpo G2 T1 turn {GAMMA}0.5 0.2",
        f"#{call.pk} score/dr_grpo G2 T1 call {GAMMA}1 0.2",
        f"#{episode.pk} score/grpo G2 T1 trajectory 0.2",
    ]
    credits = re.findall(r'<td data-testid="rl-credit">([^<]*)</td>', html)
    assert credits == [
        "Per turn: discounted reward-to-go over turn rewards, normalised per turn index, "
        f"{GAMMA} = 0.5",
        f"Per tool call: checks citing the call, discounted reward-to-go over calls, {GAMMA} = 1",
        "Trajectory: the episode&#x27;s advantage on every model token",
    ]
    fragment = client_for(viewer).get(url, **HTMX_HEADERS).content.decode()
    assert "<html" not in fragment and f"#{turn.pk} score/grpo G2 T1 turn {GAMMA}0.5" in fragment
    assert client_for(outsider).get(url).status_code == 404
    page = client_for(viewer).get(f"/training/{turn.pk}/").content.decode()
    assert 'credit: <span data-testid="rl-credit">Per turn: discounted reward-to-go' in page
    assert client_for(outsider).get(f"/training/{turn.pk}/").status_code == 404


def test_grpo_selects_show_short_names_and_explain_them_below(client_for, author):
    """A select cannot wrap: its options are names short enough for the form's columns, the
    whole "name: what it does" is the help under it, on the page and in the htmx form."""
    from apps.training.hyperparameters import ADVANTAGES, CREDITS, REWARD_VARIANTS

    client = client_for(author)
    for headers in ({}, HTMX_HEADERS):
        body = client.get("/p/acme/training/new/", **headers).content.decode()
        for name, labels in (
            ("reward", REWARD_VARIANTS),
            ("advantage", {k: v[0] for k, v in ADVANTAGES.items()}),
            ("credit", CREDITS),
        ):
            select = body.split(f'name="{name}"')[1].split("</select>")[0]
            options = dict(re.findall(r'<option value="([a-z_]+)"[^>]*>([^<]+)</option>', select))
            assert set(options) == set(labels)
            for key, label in labels.items():
                assert options[key] == label.split(":")[0] and len(options[key]) <= 26
                help_text = body.split(f'name="{name}"')[1].split("</label>")[0]
                assert escape(label) in help_text
