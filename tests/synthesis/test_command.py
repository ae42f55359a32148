"""`manage.py synthesize` and the demo's synthesis job."""

import io

import pytest
from django.core.management import CommandError, call_command

from apps.core.models import JobStatus
from apps.synthesis.models import SlotStatus, SynthesisJob
from apps.synthesis.services import synthesis_demo_seed
from apps.workspace.demo import DEMO_PROJECT_SLUG, DEMO_SYNTHESIZED

pytestmark = pytest.mark.django_db


def test_synthesize_sync_prints_progress_and_summary(project, catalogue):
    out = io.StringIO()
    call_command(
        "synthesize",
        "--project=acme",
        "--generator=template",
        "--capability=clarify-before-acting",
        "--capability=follow-policy",
        "--count=2",
        "--tasks-per-env=2",
        "--seed=40",
        "--sync",
        stdout=out,
    )
    synthesis = SynthesisJob.objects.get()
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        f"Synthesis job #{synthesis.pk} (job #{synthesis.job_id}): 2 environments, "
        "generator template, seed 40."
    )
    assert lines[1].startswith("  slot 1/2: valid (1 attempt) ")
    assert lines[2].startswith("  slot 2/2: valid (1 attempt) ")
    assert lines[3] == (
        "Job succeeded: 2 valid, 0 invalid, 0 failed, 0 cancelled; 0 repaired, "
        "0 near-duplicates; tokens 0 in / 0 out; cost $0.0000."
    )
    assert synthesis.capability_slugs == ["clarify-before-acting", "follow-policy"]
    assert synthesis.tasks_per_environment == 2
    assert synthesis.horizon == "short"


def test_synthesize_takes_a_horizon(project, catalogue):
    out = io.StringIO()
    call_command(
        "synthesize",
        "--project=acme",
        "--generator=template",
        "--capability=handle-interruptions",
        "--count=1",
        "--tasks-per-env=1",
        "--horizon=long",
        "--seed=3",
        "--sync",
        stdout=out,
    )
    synthesis = SynthesisJob.objects.get()
    assert synthesis.horizon == "long"
    slot = synthesis.slots.get()
    assert slot.status == SlotStatus.VALID
    (task,) = slot.environment.tasks.all()
    assert 5 <= len(task.turns) <= 12
    with pytest.raises(CommandError, match="invalid choice: 'weeks'"):
        call_command(
            "synthesize",
            "--project=acme",
            "--generator=template",
            "--capability=handle-interruptions",
            "--count=1",
            "--horizon=weeks",
        )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--project=nope"], "No project with the slug 'nope'."),
        (
            ["--project=acme", "--capability=unknown-cap"],
            "Unknown capability in acme: unknown-cap.",
        ),
        (["--project=acme", "--generator=llm"], "The LLM generator needs a model endpoint."),
        (["--project=acme", "--endpoint=ghost"], "No model endpoint named 'ghost'."),
        (["--project=acme", "--count=0"], "Ask for between 1 and 500 environments."),
    ],
)
def test_synthesize_refuses_bad_arguments(project, catalogue, args, message):
    defaults = {
        "--generator": "--generator=template",
        "--capability": "--capability=clarify-before-acting",
        "--count": "--count=1",
    }
    for arg in args:
        defaults[arg.split("=")[0]] = arg
    with pytest.raises(CommandError) as excinfo:
        call_command("synthesize", *defaults.values(), "--sync", stdout=io.StringIO())
    assert str(excinfo.value) == message
    assert SynthesisJob.objects.count() == 0


def test_demo_seed_runs_one_small_template_job_once(project, catalogue, author):
    synthesis = synthesis_demo_seed(project=project, user=author)
    assert synthesis.count == 2
    assert synthesis.job.__class__.objects.get(pk=synthesis.job_id).status == JobStatus.SUCCEEDED
    assert list(synthesis.slots.values_list("status", flat=True)) == [SlotStatus.VALID] * 2
    assert synthesis_demo_seed(project=project, user=author) is None
    assert SynthesisJob.objects.count() == 1


def test_seed_demo_includes_the_synthesis_job():
    call_command("seed_demo", stdout=io.StringIO())
    synthesis = SynthesisJob.objects.get(project__slug=DEMO_PROJECT_SLUG)
    assert synthesis.generator == "template"
    assert synthesis.slots.filter(status=SlotStatus.VALID).count() == DEMO_SYNTHESIZED
