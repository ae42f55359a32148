"""The orchestrator, inline: each stage's outputs and lineage, the review policy, resume
after a kill between stages, and a stage's failure recorded with its message."""

import pytest
from django.urls import reverse

from apps.core.models import Job
from apps.curation.models import Demonstration, DemonstrationStatus
from apps.curation.services import demonstration_review
from apps.datasets.models import DatasetVersion, VersionStatus
from apps.environments.models import Environment
from apps.experiments.advance import STEPS, Step, experiment_advance
from apps.experiments.models import ExperimentStatus, Stage, StageStatus
from apps.experiments.services import experiment_create
from apps.llm.models import LLMCall
from apps.runs.models import RunBatch, RunRole
from apps.serving.models import ModelServer
from apps.synthesis.models import SynthesisJob
from apps.training.models import TrainedModel, TrainingJob
from tests.workers import wait_for


def _stage(experiment, name):
    return experiment.stages.get(stage=name)


@pytest.mark.django_db(transaction=True)  # the model servers' threads read committed rows
def test_every_stage_end_to_end(catalogue, author, small, student, client_for, api_client_for):
    """The whole loop, small: outputs and lineage of every stage; the trained models served
    for real (transformers serve on loopback) and stopped at the end; the table's shape."""
    # two tiny models answer: the recipe caps their endpoints at a few tokens a step
    small["evaluation"] = {"k": 2, "max_tokens": 24}
    endpoint, server = student
    small["student_endpoint"] = "student"
    small["grpo"]["hyperparameters"] = {"max_steps": 2}
    experiment = experiment_create(project=catalogue, user=author, recipe=small, enqueue=False)
    experiment = experiment_advance(experiment_id=experiment.pk, inline=True)
    assert (experiment.status, experiment.message) == (ExperimentStatus.SUCCEEDED, "")
    out = {st.stage: st.outputs for st in experiment.stages.all()}
    assert {st.status for st in experiment.stages.all()} == {StageStatus.SUCCEEDED}
    # synthesis: train cells, their held-out seeds, and the held-out family
    assert len(out["synthesis"]["synthesis"]) == 3
    train = out["synthesis"]["train_environments"]
    held_out = out["synthesis"]["held_out_environments"] + out["synthesis"]["family_environments"]
    assert len(train) == 2 and len(held_out) == 2 and not set(train) & set(held_out)
    families = dict(Environment.objects.filter(pk__in=held_out).values_list("pk", "domain"))
    assert len(families) == 2
    # teacher -> demonstrations approved by the recorded rule -> the dataset version
    teacher = RunBatch.objects.get(pk=out["teacher"]["batch"])
    assert teacher.role == RunRole.TEACHER
    assert set(teacher.runs.values_list("environment_id", flat=True)) <= set(train)
    approved = Demonstration.objects.filter(run__batch=teacher, status=DemonstrationStatus.APPROVED)
    assert approved.count() == out["curation"]["approved"] > 0
    assert set(approved.values_list("approved_by_policy", flat=True)) == {
        "policy:approve-strict-passes"
    }
    version = DatasetVersion.objects.get(pk=out["dataset"]["dataset_version"])
    assert version.status == VersionStatus.READY and version.train_rows > 0
    # SFT on that version; GRPO from the SFT checkpoint
    sft = TrainingJob.objects.get(pk=out["sft"]["training_job"])
    assert sft.dataset_version_id == version.pk
    checkpoint = TrainedModel.objects.get(pk=out["sft"]["trained_model"])
    grpo = TrainingJob.objects.get(pk=out["grpo"]["training_job"])
    assert (grpo.method, grpo.base_model) == ("grpo", checkpoint.path)
    assert set(grpo.environments.values_list("pk", flat=True)) == set(train)
    # student batches on every held-out task, k trials: the base through the recipe's
    # endpoint, each trained model through the server the stage before it started
    base = RunBatch.objects.get(pk=out["eval_base"]["batch"])
    assert base.endpoint_id == endpoint.pk
    assert any(r.messages[-1].get("role") == "tool" for r in server.requests if r.messages)
    for stage, serve in (("eval_sft", "serve_sft"), ("eval_grpo", "serve_grpo")):
        batch = RunBatch.objects.get(pk=out[stage]["batch"])
        served = ModelServer.objects.select_related("job").get(pk=out[serve]["model_server"])
        assert served.trained_model_id == out[serve]["trained_model"]
        assert batch.endpoint_name == f"served-{served.pk}"
        assert batch.model == served.served_model
        # stopped once nothing was left to ask it: its worker ends it within a poll
        wait_for(
            lambda served=served: Job.objects.get(pk=served.job_id).status == "cancelled",
            timeout=120,
            interval=0.2,
            message="the model server to stop",
        )
        calls = LLMCall.objects.filter(endpoint_name=batch.endpoint_name)
        assert calls.exists()
        assert {call.request_params.get("max_tokens") for call in calls} == {24}
    assert "base_server" not in out["serve_sft"]  # the recipe named the base's endpoint
    for stage in ("eval_base", "eval_sft", "eval_grpo"):
        batch = RunBatch.objects.get(pk=out[stage]["batch"])
        assert batch.role == RunRole.STUDENT
        assert set(batch.runs.values_list("environment_id", flat=True)) == set(held_out)
        assert batch.job.status == "succeeded"
    # the page and the API show the table: every group, each arm, linked to its batch
    page = client_for(author).get(reverse("experiments:detail", args=[experiment.pk]))
    body = page.content.decode()
    assert 'data-group="all"' in body and 'data-group="held-out family"' in body
    base_url = reverse("runs:batch_detail", args=[out["eval_base"]["batch"]])
    assert f'href="{base_url}"' in body
    results = api_client_for(author).get(f"/api/v1/experiments/{experiment.pk}/results/").json()
    assert results["arms"] == ["base", "sft", "grpo"]
    groups = [row["group"] for row in results["rows"]]
    assert groups[0] == "all" and groups[-1] == "held-out family"
    assert any(g.startswith("capability:") for g in groups)
    assert "horizon:short" in groups
    everything = results["rows"][0]
    assert everything["arms"]["base"]["tasks"] == everything["deltas"]["sft"]["score"]["n"]
    assert len(results["curves"]["sft_loss"]) > 0 and len(results["curves"]["grpo"]) > 0
    csv_text = client_for(author).get(reverse("experiments:results_csv", args=[experiment.pk]))
    assert csv_text.content.decode().startswith("group,arm,tasks,runs,mean_score")


class Killed(BaseException):
    """What a worker's death looks like to the code it was running: nothing catches it."""


def _killing(*args, **kwargs):
    raise Killed


def test_resume_after_a_kill_between_stages_and_within_one(
    catalogue, author, reviewer, small, monkeypatch
):
    small["review"] = {"policy": "human"}
    small["sft"]["hyperparameters"] = {"learning_rate": "fast"}  # refused when SFT starts
    experiment = experiment_create(project=catalogue, user=author, recipe=small, enqueue=False)
    teacher_step = STEPS[Stage.TEACHER]
    # killed as the teacher stage was about to start: synthesis is recorded as done
    monkeypatch.setitem(STEPS, Stage.TEACHER, Step(start=_killing, run=teacher_step.run))
    with pytest.raises(Killed):
        experiment_advance(experiment_id=experiment.pk, inline=True)
    synthesis = _stage(experiment, Stage.SYNTHESIS)
    assert synthesis.status == StageStatus.SUCCEEDED
    assert _stage(experiment, Stage.TEACHER).job_ids == []
    # killed inside the teacher stage, after its batch was created but before it ran
    monkeypatch.setitem(STEPS, Stage.TEACHER, Step(start=teacher_step.start, run=_killing))
    with pytest.raises(Killed):
        experiment_advance(experiment_id=experiment.pk, inline=True)
    assert RunBatch.objects.count() == 1
    # advanced again: nothing redone, the same batch finished, the human queue waits
    monkeypatch.setitem(STEPS, Stage.TEACHER, teacher_step)
    experiment = experiment_advance(experiment_id=experiment.pk, inline=True)
    assert SynthesisJob.objects.count() == 3
    assert _stage(experiment, Stage.SYNTHESIS).outputs == synthesis.outputs
    assert RunBatch.objects.count() == 1
    assert _stage(experiment, Stage.TEACHER).status == StageStatus.SUCCEEDED
    assert experiment.status == ExperimentStatus.WAITING
    assert experiment.message == "Curation: Review the teacher's demonstrations in the queue."
    # people decide; the next advance takes their approvals and goes on
    pending = Demonstration.objects.filter(status=DemonstrationStatus.PENDING)
    for demonstration in pending:
        demonstration_review(demonstration=demonstration, user=reviewer, decision="approved")
    experiment = experiment_advance(experiment_id=experiment.pk, inline=True)
    curation = _stage(experiment, Stage.CURATION)
    assert curation.status == StageStatus.SUCCEEDED
    assert curation.outputs["policy"] == "human"
    assert not Demonstration.objects.exclude(approved_by_policy="").exists()
    assert _stage(experiment, Stage.DATASET).status == StageStatus.SUCCEEDED
    # a stage's refusal fails it with the message, and the experiment says where
    sft = _stage(experiment, Stage.SFT)
    assert (sft.status, sft.message) == (StageStatus.FAILED, "The hyperparameters are not valid.")
    assert experiment.status == ExperimentStatus.FAILED
    assert experiment.message == "SFT: The hyperparameters are not valid."
    assert _stage(experiment, Stage.SERVE_SFT).status == StageStatus.PENDING
