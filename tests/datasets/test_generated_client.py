"""A client generated from the schema works against a live server (issue 10).

``openapi-python-client`` generates a Python package from ``/api/v1/schema/`` into a temporary
folder, the test imports it and, through it, lists dataset versions (a paginated list),
creates a version, downloads an export and meets an error — against pytest-django's live
server, with a real API token. Here, beside the dataset fixtures that build a real version.
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
from apps.datasets.models import DatasetVersion

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
