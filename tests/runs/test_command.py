import pytest
from django.core.management import CommandError, call_command

from apps.runs.models import Run, RunBatch

pytestmark = pytest.mark.django_db


def test_run_batch_sync_prints_progress_and_the_table(project, sample_environments, capsys):
    env = sample_environments[0]
    tasks = env.tasks.count()
    call_command(
        "run_batch",
        "--project=acme",
        "--policy=oracle",
        "--trials=2",
        "--role=teacher",
        f"--environment={env.pk}",
        "--sync",
    )
    out = capsys.readouterr().out
    batch = RunBatch.objects.get()
    assert (batch.role, batch.trials, batch.executor) == ("teacher", 2, "inline")
    assert Run.objects.filter(batch=batch, passed=True).count() == 2 * tasks
    lines = out.splitlines()
    assert lines[0] == (
        f"Batch #{batch.pk} “oracle · {tasks} tasks, k=2”: {tasks} tasks x 2 trials = "
        f"{2 * tasks} runs (In process)."
    )
    assert f"  {2 * tasks}/{2 * tasks} trials finished" in lines
    assert f"Succeeded: {2 * tasks} of {2 * tasks} trials graded, {2 * tasks} passed." in lines
    assert "pass@k    100.0%  100.0%" in lines
    assert "pass^k    100.0%  100.0%" in lines


def test_run_batch_errors(project, sample_environments):
    with pytest.raises(CommandError, match="No project “nope”"):
        call_command("run_batch", "--project=nope", "--policy=oracle")
    with pytest.raises(CommandError, match="No endpoint “gpt” in acme"):
        call_command("run_batch", "--project=acme", "--policy=gpt")
    with pytest.raises(CommandError, match="No task matches this selection"):
        call_command("run_batch", "--project=acme", "--policy=oracle", "--capability=nope")
    assert RunBatch.objects.count() == 0
