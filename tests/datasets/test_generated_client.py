"""A client generated from the schema works against a live server (issue 10).

``openapi-python-client`` generates a Python package from ``/api/v1/schema/`` into a temporary
folder, the test imports it and, through it, lists dataset versions (a paginated list),
creates a version, downloads an export and meets an error — against pytest-django's live
server, with a real API token. Here, beside the dataset fixtures that build a real version.
The rows endpoint's items are a union on ``kind``: the client parses each kind's rows into
its own class (``RowOutput``, ``PromptRowOutput``, ``RolloutRowOutput``) and sends filters.
"""

import hashlib
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

from apps.accounts.services import api_token_create
from apps.datasets.models import DatasetKind, DatasetVersion, PromptRow
from apps.datasets.services import PromptFilter, dataset_version_build_job, prompt_version_create
from apps.datasets.services.datasets import dataset_create
from apps.runs.models import RolloutGroup
from tests.datasets.test_rollouts import build as build_rollouts
from tests.llm_server import LoopbackLLMServer
from tests.runs.test_groups import KEY, make_student_group

PACKAGE = "coworkenv_client"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The generated package, imported (``sys.modules`` is left as it was afterwards)."""
    out = tmp_path_factory.mktemp("client")
    schema = SchemaGenerator().get_schema(request=None, public=True)
    (out / "schema.json").write_bytes(OpenApiJsonRenderer().render(schema))
    bin_dir = Path(sys.executable).parent
    result = subprocess.run(
        [
            str(bin_dir / "openapi-python-client"),
            "generate",
            "--path",
            str(out / "schema.json"),
            "--meta",
            "none",
            "--output-path",
            str(out / PACKAGE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(out))
    try:
        yield lambda name: importlib.import_module(f"{PACKAGE}.{name}")
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def test_every_generated_module_imports(generated):
    api = Path(generated("api").__file__).parent
    modules = sorted(p for p in api.glob("*/*.py") if p.name != "__init__.py")
    assert len(modules) > 80
    for path in modules:
        generated(f"api.{path.parent.name}.{path.stem}")


def test_the_generated_client_against_a_live_server(
    transactional_db, live_server, generated, built_version, author
):
    client_module = generated("client")
    versions_list = generated("api.datasets.dataset_versions_list")
    versions_create = generated("api.datasets.dataset_versions_create")
    export = generated("api.datasets.dataset_versions_export")
    models = generated("models")
    secret = api_token_create(user=author, name="generated client")[1]
    client = client_module.AuthenticatedClient(base_url=live_server.url, token=secret)
    dataset = built_version.dataset

    page = versions_list.sync(id=dataset.pk, client=client)
    assert (page.count, [v.number for v in page.results]) == (1, [1])
    assert page.results[0].checksum == built_version.checksum

    created = versions_create.sync(
        id=dataset.pk,
        client=client,
        body=models.VersionInputRequest(seed=7, validation_fraction=0.2),
    )
    assert (created.version.number, created.version.seed) == (2, 7)
    assert created.job.id == DatasetVersion.objects.get(number=2).job_id

    response = export.sync_detailed(
        id=dataset.pk,
        number=1,
        client=client,
        format_=models.DatasetVersionsExportFormat.TRL,
        split=models.DatasetVersionsExportSplit.TRAIN,
    )
    stored = built_version.exports.get(format="trl", split="train")
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() == stored.sha256

    refused = versions_create.sync(
        id=dataset.pk, client=client, body=models.VersionInputRequest(seed=2**31)
    )
    assert isinstance(refused, models.ErrorOutput)
    assert refused.message == "The request is not valid."
    assert refused.details == {"seed": ["Ensure this value is less than or equal to 2147483647."]}
    assert DatasetVersion.objects.count() == 2


def test_the_generated_client_reads_every_kinds_rows(
    transactional_db,
    live_server,
    generated,
    built_version,
    author,
    viewer,
    project,
    sample_environments,
    monkeypatch,
    settings,
):
    client_module = generated("client")
    rows = generated("api.datasets.dataset_versions_rows")
    models = generated("models")
    secret = api_token_create(user=viewer, name="generated client")[1]
    client = client_module.AuthenticatedClient(base_url=live_server.url, token=secret)

    page = rows.sync(
        id=built_version.dataset_id,
        number=1,
        client=client,
        split=models.DatasetVersionsRowsSplit.VALIDATION,
        page_size=4,
    )
    assert page.count == built_version.validation_rows
    assert all(isinstance(row, models.RowOutput) for row in page.results)
    assert [(r.kind, r.split, r.position) for r in page.results] == [
        (models.DatasetKindEnum.SFT, "validation", n) for n in range(4)
    ]

    prompts = dataset_create(project=project, name="RL", user=author, kind=DatasetKind.RL_PROMPTS)
    version = prompt_version_create(
        dataset=prompts, user=author, filters=PromptFilter(), enqueue=False
    )
    dataset_version_build_job(version.job_id)
    first = PromptRow.objects.filter(version=version).order_by("position").first()
    page = rows.sync(id=prompts.pk, number=1, client=client, page_size=2)
    assert page.count == PromptRow.objects.filter(version=version).count()
    row = page.results[0]
    assert isinstance(row, models.PromptRowOutput)
    assert (row.kind, row.task_key, row.seed) == (
        models.DatasetKindEnum.RL_PROMPTS,
        first.task_key,
        first.seed,
    )
    assert row.prompt[-1].content == first.entry["user_message"]
    assert row.tools[0].to_dict() == first.entry["tools"][0]

    monkeypatch.setenv("COWORKENV_TEST_RUNS_API_KEY", KEY)
    settings.LLM_MAX_ATTEMPTS = 1
    with LoopbackLLMServer(api_key=KEY) as server:
        batch = make_student_group(project, author, server)
    rollouts = dataset_create(project=project, name="RO", user=author, kind=DatasetKind.ROLLOUTS)
    build_rollouts(rollouts, author, batch, reward="passed", advantage="rloo")
    group = RolloutGroup.objects.get()
    page = rows.sync(id=rollouts.pk, number=1, client=client, group=group.pk, passed=False)
    assert page.count == 1
    row = page.results[0]
    assert isinstance(row, models.RolloutRowOutput)
    assert (row.kind, row.group, row.member, row.passed, row.reward, row.advantage) == (
        models.DatasetKindEnum.ROLLOUTS,
        group.pk,
        2,
        False,
        0.0,
        -1.0,
    )
    assert row.rewards.to_dict() == {k: v[2] for k, v in group.variants["rewards"].items()}
    assert row.transcript.endswith(f"/api/v1/runs/{group.run_ids[2]}/")

    refused = rows.sync(id=rollouts.pk, number=1, client=client, capability="search")
    assert isinstance(refused, models.ErrorOutput)
    assert refused.details == {
        "capability": ["Not a filter of rollouts rows (only of sft, rl_prompts)."]
    }
