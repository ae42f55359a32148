"""Fixtures for the dataset tests: sample environments and approved demonstrations whose
transcripts are real engine runs (the oracle through ``runner.run_task``)."""

import json
from functools import lru_cache
from pathlib import Path

import pytest

from apps.capabilities.models import Capability
from apps.curation.models import Demonstration, DemonstrationStatus, DemonstrationVersion
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import
from coworkenv_engine import policies, runner

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.json"))


@lru_cache(maxsize=64)
def _oracle_run(path: str, task_key: str, seed: int) -> tuple[str, str, float]:
    doc = json.loads(Path(path).read_text())
    result = runner.run_task(doc, task_key, policies.OraclePolicy(), seed=seed, faults=False)
    return json.dumps(result.transcript), json.dumps(result.tools), result.grading.score


def oracle_transcript(environment: Environment, task_key: str, seed: int = 0):
    """(transcript, tools, score) of the oracle on a sample environment's task."""
    path = next(p for p in SAMPLES if json.loads(p.read_text())["name"] == environment.name)
    transcript, tools, score = _oracle_run(str(path), task_key, seed)
    return json.loads(transcript), json.loads(tools), score


def make_demonstration(
    environment: Environment,
    task_key: str,
    *,
    status: str = DemonstrationStatus.APPROVED,
    transcript: list | None = None,
    tools: list | None = None,
    score: float | None = None,
    model_name: str = "oracle",
    capabilities: list[str] | None = None,
    split: str | None = None,
    agreement: float | None = None,
) -> Demonstration:
    task = environment.tasks.get(key=task_key)
    if transcript is None:
        transcript, default_tools, default_score = oracle_transcript(environment, task_key)
        tools = default_tools if tools is None else tools
        score = default_score if score is None else score
    demonstration = Demonstration.objects.create(
        project=environment.project,
        run_ref=0,
        task=task,
        environment=environment,
        task_key=task_key,
        task_title=task.title,
        environment_name=environment.name,
        split=split or task.split,
        capability_slugs=capabilities
        if capabilities is not None
        else list(task.capabilities.values_list("slug", flat=True)),
        model_name=model_name,
        policy="oracle",
        score=score if score is not None else 1.0,
        status=status,
        agreement=agreement,
    )
    version = DemonstrationVersion.objects.create(
        demonstration=demonstration,
        number=1,
        transcript=transcript,
        tools=tools or [],
        score=score if score is not None else 1.0,
        passed=True,
        strict=True,
        environment_revision=environment.revision,
        spec_hash=environment.spec_hash,
    )
    demonstration.current_version = version
    demonstration.save(update_fields=["current_version"])
    demonstration.capabilities.set(
        Capability.objects.filter(
            project=environment.project, slug__in=demonstration.capability_slugs
        )
    )
    return demonstration


@pytest.fixture
def sample_environments(project, author) -> list[Environment]:
    environments = []
    for path in SAMPLES:
        env = environment_import(project=project, spec=json.loads(path.read_text()), user=author)
        Environment.objects.filter(pk=env.pk).update(status=EnvironmentStatus.VALID)
        env.refresh_from_db()
        environments.append(env)
    return environments


def variant(transcript: list, take: int) -> list:
    """The transcript with its final reply worded differently (a different teacher sample):
    not a duplicate of the original."""
    copy = json.loads(json.dumps(transcript))
    if take:
        copy[-1]["content"] = f"{copy[-1]['content']} (take {take})"
    return copy


TAKES = 3


@pytest.fixture
def approved_demonstrations(sample_environments) -> list[Demonstration]:
    """Approved oracle demonstrations: three differently worded takes of every train task
    (6 tasks in 3 environments: 18 rows) and one of every eval task (3)."""
    made = []
    for env in sample_environments:
        for task in env.tasks.order_by("position"):
            transcript, tools, score = oracle_transcript(env, task.key)
            for take in range(TAKES if task.split == "train" else 1):
                made.append(
                    make_demonstration(
                        env,
                        task.key,
                        transcript=variant(transcript, take),
                        tools=tools,
                        score=score,
                    )
                )
    return made


def build_version(dataset, user, **kwargs):
    """Create a version and run its build job in this process."""
    from apps.datasets.services import (
        VersionFilter,
        dataset_version_build_job,
        dataset_version_create,
    )

    version = dataset_version_create(
        dataset=dataset,
        user=user,
        filters=kwargs.pop("filters", VersionFilter()),
        seed=kwargs.pop("seed", 0),
        validation_fraction=kwargs.pop("validation_fraction", 0.3),
        **kwargs,
    )
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    return version


@pytest.fixture
def dataset(project, author):
    from apps.datasets.services import dataset_create

    return dataset_create(project=project, name="Coworker SFT", user=author)


@pytest.fixture
def built_version(dataset, author, approved_demonstrations):
    return build_version(dataset, author)


@pytest.fixture
def prompt_version(project, author, sample_environments):
    """A built RL prompt version of the sample environments' train tasks, seeds 0 and 5."""
    from apps.datasets.models import DatasetKind
    from apps.datasets.services import (
        PromptFilter,
        dataset_create,
        dataset_version_build_job,
        prompt_version_create,
    )

    dataset = dataset_create(
        project=project, name="Coworker RL", user=author, kind=DatasetKind.RL_PROMPTS
    )
    version = prompt_version_create(
        dataset=dataset, user=author, filters=PromptFilter(seeds=(0, 5)), enqueue=False
    )
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    return version


@pytest.fixture
def rollout_version(project, author, monkeypatch, settings):
    """A built scored-rollout version (reward passed, advantage rloo) of one student group
    of G=3 (``tests.runs.test_groups.make_student_group``: passed 1, 1, 0)."""
    from apps.datasets.models import DatasetKind
    from apps.datasets.services import (
        dataset_create,
        dataset_version_build_job,
        rollout_version_create,
    )
    from apps.runs.rollouts import Variant
    from tests.llm_server import LoopbackLLMServer
    from tests.runs.test_groups import KEY, make_student_group

    monkeypatch.setenv("COWORKENV_TEST_RUNS_API_KEY", KEY)
    settings.LLM_MAX_ATTEMPTS = 1
    with LoopbackLLMServer(api_key=KEY) as server:
        batch = make_student_group(project, author, server)
    dataset = dataset_create(
        project=project, name="Rollouts", user=author, kind=DatasetKind.ROLLOUTS
    )
    version = rollout_version_create(
        dataset=dataset,
        user=author,
        batches=[batch.pk],
        variant=Variant.parse(reward="passed", advantage="rloo"),
        enqueue=False,
    )
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    return version
