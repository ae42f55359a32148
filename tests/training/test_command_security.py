"""Commands are the operator's (issue 24, item 1): no author or admin of any project makes a
worker run anything outside the operator's templates, a job runs as an argument vector
without a shell, with only the environment its template declares, and no secret of the
server (SECRET_KEY, DATABASE_URL, the broker URL, an API key) reaches a log, a message or
an artifact; a command job's log is read from the operator's role up."""

import json
import sys

import pytest
from rest_framework.test import APIClient

from apps.core.exceptions import ApplicationError
from apps.core.models import JobStatus
from apps.training.command_templates import command_templates
from apps.training.models import TrainingJob
from apps.training.services import training_events_apply, training_job_create
from apps.training.services.reports import callback_secret_new
from tests.conftest import HTMX_HEADERS

SECRETS = {
    "SECRET_KEY": "django-insecure-k3y-0f-th3-s3rv3r-that-n0b0dy-sees",
    "DATABASE_URL": "postgres://cw:db-pa55word-xyz@db.internal:5432/coworkenv",
    "CELERY_BROKER_URL": "redis://:br0ker-pa55@redis.internal:6379/0",
    "OPENAI_API_KEY": "sk-live-0123456789abcdefghijklmnop",
}
# A stand-in for the scheduler: prints its argv (one JSON list) and its whole environment.
REPORTER = """#!{python}
import json, os, sys
print(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ)}}))
print("Submitted batch job 77")
"""


@pytest.fixture
def server_secrets(monkeypatch, settings):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    settings.SECRET_KEY = SECRETS["SECRET_KEY"]
    settings.CELERY_BROKER_URL = SECRETS["CELERY_BROKER_URL"]
    return SECRETS


@pytest.fixture
def reporter(tmp_path):
    path = tmp_path / "submit"
    path.write_text(REPORTER.format(python=sys.executable))
    path.chmod(0o755)
    return path


def _launch(project, user, version, template="cluster", parameters=None, **extra):
    return training_job_create(
        project=project,
        user=user,
        dataset_version=version,
        backend="command",
        base_model="Qwen/Qwen2.5-0.5B-Instruct",
        command_template=template,
        command_parameters=parameters,
        enqueue=False,
        **extra,
    )


def _submit(training_job):
    from apps.training.services import training_job_execute

    training_job_execute(training_job.job_id)
    training_job.refresh_from_db()
    training_job.job.refresh_from_db()
    return training_job


def _printed(training_job) -> dict:
    """What the stand-in printed, read back from the (redacted) log tail."""
    line = next(line for line in training_job.log_tail.splitlines() if line.startswith("{"))
    return json.loads(line)


CLUSTER = {
    "kind": "slurm",
    "argv": ["{program}", "--job-name=cw-{job_id}", "--account", "{account}", "{script}"],
    "parameters": {
        "account": {"type": "string", "pattern": "[a-z0-9_; ]{1,40}", "required": True},
        "script": {"type": "choice", "choices": ["train.sbatch", "eval.sbatch"]},
        "gpus": {"type": "integer", "min": 1, "max": 8},
    },
    "env": {"SLURM_CONF": "/etc/slurm/slurm.conf", "CW_JOB": "{job_id}"},
    "pass_env": ["CLUSTER_REGION"],
}


@pytest.fixture
def cluster(operator_templates, reporter):
    operator_templates({"cluster": {**CLUSTER, "argv": [str(reporter), *CLUSTER["argv"][1:]]}})


def test_a_parameter_is_one_argument_and_the_environment_only_what_is_declared(
    project, author, training_version, cluster, server_secrets, monkeypatch
):
    monkeypatch.setenv("CLUSTER_REGION", "eu-west")
    monkeypatch.setenv("UNDECLARED", "worker-only")
    job = _submit(
        _launch(project, author, training_version, parameters={"account": "ml; printenv"})
    )
    assert job.job.status == JobStatus.RUNNING, job.job.message
    printed = _printed(job)
    # no shell: "; printenv" is part of the one argument; the blank choice adds no element
    assert printed["argv"] == [f"--job-name=cw-{job.pk}", "--account", "ml; printenv"]
    env = printed["env"]
    assert set(env) == {
        "PATH",
        "LANG",
        "SLURM_CONF",
        "CW_JOB",
        "CLUSTER_REGION",
        "COWORKENV_CALLBACK_URL",
        "COWORKENV_CALLBACK_SECRET",
        "COWORKENV_CONFIG",
        "COWORKENV_CONFIG_URL",
        "COWORKENV_TRAIN_BUNDLE_URL",
        "COWORKENV_EVAL_BUNDLE_URL",
    }
    assert (env["CW_JOB"], env["CLUSTER_REGION"]) == (str(job.pk), "eu-west")
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert env["COWORKENV_CALLBACK_SECRET"] == "***"  # the job's own secret, redacted in the log
    assert job.job.message == "Submitted as 77; waiting for its reports."


def test_no_server_secret_reaches_a_log_a_message_or_an_artifact(
    project, admin, training_version, operator_templates, server_secrets, tmp_path
):
    """An admin's best try: the operator's template runs a program that prints the server's
    secrets (say a scheduler echoing its environment); the job's name and the trainer's
    reports carry them too. None of it is stored or shown."""
    leak = tmp_path / "leak"
    values = " ".join(SECRETS.values())
    leak.write_text(f"#!/bin/sh\necho '{values}'\necho '{values}' >&2\nexit 3\n")
    leak.chmod(0o755)
    operator_templates({"leak": {"argv": [str(leak)]}})
    failed = _submit(_launch(project, admin, training_version, "leak"))
    assert failed.job.status == JobStatus.FAILED
    assert failed.job.message == "The command exited with status 3; its output is in the job's log."

    reported = _launch(project, admin, training_version, "leak")
    secret = callback_secret_new(reported)
    answer = APIClient().post(
        f"/api/v1/training-jobs/{reported.pk}/callback/",
        {
            "events": [
                {"type": "log", "line": f"env: {values}"},
                {"type": "started", "data_sha256": {"train": SECRETS["OPENAI_API_KEY"]}},
                {"type": "checkpoint", "step": 1, "path": SECRETS["DATABASE_URL"]},
                {
                    "type": "finished",
                    "status": "failed",
                    "message": f"boom {SECRETS['SECRET_KEY']}",
                    "artifacts": {"final": SECRETS["CELERY_BROKER_URL"]},
                },
            ]
        },
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert answer.status_code == 200
    for training_job in TrainingJob.objects.select_related("job"):
        stored = json.dumps(
            [
                training_job.log_tail,
                training_job.job.message,
                training_job.command,
                training_job.external_id,
                training_job.artifacts,
            ]
        )
        for name, value in SECRETS.items():
            assert value not in stored, name
        assert "db-pa55word-xyz" not in stored and "br0ker-pa55" not in stored
    assert "***" in failed.log_tail
    reported.job.refresh_from_db()
    assert reported.job.message == "boom ***"


def test_the_api_and_page_show_no_secret_of_rows_written_before(
    project, admin, training_version, cluster, server_secrets, api_client_for, client_for
):
    job = _launch(project, admin, training_version, parameters={"account": "ml"})
    TrainingJob.objects.filter(pk=job.pk).update(
        log_tail=f"old {SECRETS['SECRET_KEY']}", artifacts={"x": SECRETS["OPENAI_API_KEY"]}
    )
    api = api_client_for(admin)
    detail = api.get(f"/api/v1/training-jobs/{job.pk}/").json()
    assert detail["log_tail"] == "old ***"
    artifacts = api.get(f"/api/v1/training-jobs/{job.pk}/artifacts/").json()
    assert artifacts["artifacts"] == {"x": "***"}
    page = client_for(admin).get(f"/training/{job.pk}/").content.decode()
    assert SECRETS["SECRET_KEY"] not in page and SECRETS["OPENAI_API_KEY"] not in page


@pytest.mark.parametrize(
    ("template", "parameters", "field"),
    [
        ("nope", {}, "command_template"),
        ("", {}, "command_template"),
        ("cluster", {}, "command_parameters.account"),  # required
        ("cluster", {"account": "ML"}, "command_parameters.account"),  # pattern
        ("cluster", {"account": "-wrap=printenv"}, "command_parameters.account"),  # an option
        ("cluster", {"account": "a", "script": "mine.sh"}, "command_parameters.script"),
        ("cluster", {"account": "a", "gpus": 9}, "command_parameters.gpus"),
        ("cluster", {"account": "a", "gpus": "two"}, "command_parameters.gpus"),
        ("cluster", {"account": "a", "argv": ["sh"]}, "command_parameters"),  # undeclared
        ("cluster", ["account"], "command_parameters"),
    ],
)
def test_a_launch_outside_the_operators_templates_is_refused(
    project, admin, training_version, cluster, template, parameters, field
):
    with pytest.raises(ApplicationError) as raised:
        _launch(project, admin, training_version, template, parameters)
    assert field in raised.value.extra["fields"], raised.value.extra
    assert not TrainingJob.objects.exists()


def test_a_job_name_cannot_smuggle_an_option(
    project, author, training_version, operator_templates, reporter
):
    operator_templates({"named": {"argv": [str(reporter), "{name}"]}})
    job = _submit(_launch(project, author, training_version, "named", name="--wrap=printenv"))
    assert job.job.status == JobStatus.FAILED
    assert job.job.message == "The value of {name} may not start with “-”."


def test_a_template_the_operator_withdrew_does_not_run(
    project, author, training_version, cluster, operator_templates, reporter
):
    job = _launch(project, author, training_version, parameters={"account": "ml"})
    operator_templates({"other": {"argv": [str(reporter)]}})
    job = _submit(job)
    assert job.job.status == JobStatus.FAILED
    assert "no longer offers the command template “cluster”" in job.job.message
    assert job.command == ""


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"argv": "sbatch {config_path}"}, "a non-empty list of strings"),
        ({"argv": ["{name}"]}, "the program (first element) is written out"),
        ({"argv": ["sbatch", "{HOME}"]}, "unknown placeholder {HOME}"),
        (
            {"argv": ["sbatch", "--a={x}"], "parameters": {"x": {"type": "string"}}},
            "a parameter is a whole element",
        ),
        ({"argv": ["sbatch"], "pass_env": ["SECRET_KEY"]}, "may not hand the server's secret"),
        ({"argv": ["sbatch"], "pass_env": ["DATABASE_URL"]}, "may not hand the server's secret"),
        ({"argv": ["sbatch"], "pass_env": ["OPENAI_API_KEY"]}, "may not hand the server's secret"),
        ({"argv": ["sbatch"], "env": {"X": "{callback_secret}"}}, "only job placeholders"),
        ({"argv": ["sbatch"], "env": {"COWORKENV_CALLBACK_URL": "x"}}, "is set by the server"),
        ({"argv": ["sbatch"], "pass_env": ["PATH"]}, "is set by the server"),
        ({"argv": ["sbatch"], "shell": True}, "unknown keys shell"),
        ({"argv": ["sbatch"], "parameters": {"x": {"type": "shell"}}}, "type is one of"),
    ],
)
def test_the_operators_file_is_checked_whole(operator_templates, spec, error):
    from apps.training.command_templates import TemplateFileError

    operator_templates({"bad": spec})
    with pytest.raises(TemplateFileError, match="The operator's command templates") as raised:
        command_templates()
    assert error in raised.value.message


def test_yaml_templates_are_read(operator_templates, settings, tmp_path):
    path = tmp_path / "templates.yaml"
    path.write_text("templates:\n  k8s:\n    kind: kubernetes\n    argv: [kubectl, apply]\n")
    settings.TRAINING_COMMAND_TEMPLATES_FILE = str(path)
    assert command_templates()["k8s"].argv == ("kubectl", "apply")


def test_the_templates_page_is_read_only(
    client_for, admin, viewer, outsider, cluster, operator_templates
):
    url = "/p/acme/training/templates/"
    assert client_for(admin).post(url, {"name": "x", "template": "printenv"}).status_code == 405
    assert client_for(outsider).get(url).status_code == 404
    page = client_for(viewer).get(url).content.decode()
    assert "<code>cluster</code>" in page and "train.sbatch | eval.sbatch" in page
    assert "/etc/slurm" not in page  # the operator's command line and environment stay private
    fragment = client_for(viewer).get(url, **HTMX_HEADERS).content.decode()
    assert fragment.lstrip().startswith('<section class="panel" data-testid="templates"')
    operator_templates({"broken": {"argv": []}})
    broken = client_for(viewer).get(url).content.decode()
    assert 'data-testid="templates-error"' in broken


def test_the_templates_api_lists_names_and_parameters_only(api_client_for, viewer, cluster):
    listed = api_client_for(viewer).get("/api/v1/training-command-templates/").json()["results"]
    assert [t["name"] for t in listed] == ["cluster"]
    assert set(listed[0]["parameters"]) == {"account", "script", "gpus"}
    assert "argv" not in listed[0] and "env" not in listed[0]
    assert APIClient().get("/api/v1/training-command-templates/").status_code in (401, 403)


def test_the_launch_form_takes_the_parameters(client_for, author, training_version, cluster):
    from tests.training.test_views import _launch_data

    data = {**_launch_data(training_version, backend="command"), "command_template": "cluster"}
    bad = client_for(author).post("/p/acme/training/new/", {**data, "param_account": "UPPER"})
    assert "account: Does not match the pattern" in bad.content.decode()
    assert not TrainingJob.objects.exists()
    ok = client_for(author).post("/p/acme/training/new/", {**data, "param_account": "ml"})
    assert ok.status_code == 302
    job = TrainingJob.objects.get()
    assert (job.command_template, job.command_parameters) == ("cluster", {"account": "ml"})


@pytest.mark.parametrize(("role", "readable"), [("viewer", False), ("reviewer", True)])
def test_a_command_jobs_log_is_read_from_the_operators_role(
    project, admin, training_version, cluster, api_client_for, client_for, request, role, readable
):
    member = request.getfixturevalue(role)
    job = _launch(project, admin, training_version, parameters={"account": "ml"})
    training_events_apply(training_job=job, events=[{"type": "log", "line": "node-17 ready"}])
    detail = api_client_for(member).get(f"/api/v1/training-jobs/{job.pk}/").json()
    assert (detail["log_tail"] is not None) is readable
    page = client_for(member).get(f"/training/{job.pk}/").content.decode()
    assert ("node-17 ready" in page) is readable
    assert ('data-testid="log-hidden"' in page) is not readable


def test_the_log_role_is_the_operators_setting(
    project, admin, viewer, training_version, cluster, api_client_for, settings
):
    settings.TRAINING_COMMAND_LOG_ROLE = "viewer"
    job = _launch(project, admin, training_version, parameters={"account": "ml"})
    assert api_client_for(viewer).get(f"/api/v1/training-jobs/{job.pk}/").json()["log_tail"] == ""
