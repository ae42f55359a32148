"""Multimodal demonstrations exported in each format's way: OpenAI ``image_url`` data-URL
parts, a TRL vision bundle that ``datasets`` loads with an ``Image`` feature, and a
LLaMA-Factory ShareGPT bundle with ``<image>`` tokens, an ``images`` list and its
``dataset_info.json``."""

import base64
import hashlib
import io
import json
import zipfile

import pytest

from apps.datasets.services import export_absolute_path
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import_with_files
from apps.synthesis.generators.receipts import generate_receipts_environment
from coworkenv_engine import policies, runner
from tests.datasets.conftest import build_version, make_demonstration, variant

datasets = pytest.importorskip("datasets")  # the `train` extra (with Pillow)
trl_data_utils = pytest.importorskip("trl.data_utils")
prepare_multimodal_messages = trl_data_utils.prepare_multimodal_messages

pytestmark = pytest.mark.django_db
TASKS = 5


@pytest.fixture
def receipts(project, author):
    doc, files = generate_receipts_environment(seed=2, tasks=TASKS, eval_fraction=0)
    environment = environment_import_with_files(project=project, spec=doc, files=files, user=author)
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    environment.refresh_from_db()
    return environment, doc, files


@pytest.fixture
def version(receipts, dataset, author):
    environment, doc, _ = receipts
    for task in doc["tasks"]:
        result = runner.run_task(doc, task["key"], policies.OraclePolicy(), faults=False)
        for take in range(3):
            make_demonstration(
                environment,
                task["key"],
                transcript=variant(result.transcript, take),
                tools=result.tools,
                score=result.grading.score,
            )
    return build_version(dataset, author, validation_fraction=0.2)


def _exports(version):
    return {(e.format, e.split): e for e in version.exports.all()}


def test_every_format_is_offered_and_the_bundles_are_zips(version):
    exports = _exports(version)
    assert {key: e.status for key, e in exports.items()} == {
        ("card", ""): "ready",
        ("openai", "train"): "ready",
        ("openai", "validation"): "empty",  # one environment: one group, all train
        ("sharegpt", "train"): "ready",
        ("sharegpt", "validation"): "empty",
        ("trl", "train"): "ready",
        ("trl", "validation"): "empty",
        ("sharegpt_turns", "train"): "ready",  # text only: JSONL
        ("sharegpt_turns", "validation"): "empty",
        ("trl_parquet", "train"): "ready",
        ("trl_parquet", "validation"): "empty",
        ("trl_turns", "train"): "ready",
        ("trl_turns", "validation"): "empty",
    }
    for (fmt, split), export in exports.items():
        if fmt in ("trl", "sharegpt") and split == "train":
            assert export.path.endswith(f"/{fmt}-{split}.zip")
            data = export_absolute_path(export).read_bytes()
            assert (export.size, export.sha256) == (len(data), hashlib.sha256(data).hexdigest())


def test_openai_rows_carry_the_image_as_a_data_url_after_the_tool_result(version, receipts):
    _, _, files = receipts
    export = _exports(version)[("openai", "train")]
    rows = [json.loads(line) for line in export_absolute_path(export).read_text().splitlines()]
    assert len(rows) == export.rows >= 10
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "user", "assistant", "tool",
                         "assistant"]  # fmt: skip
        assert isinstance(row["messages"][3]["content"], str)  # the record as text
        sha = json.loads(row["messages"][3]["content"])["image"].removeprefix("sha256:")
        caption, image = row["messages"][4]["content"]
        assert caption == {"type": "text", "text": "Image returned by call_1:"}
        url = image["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        assert base64.b64decode(url.split(",", 1)[1]) == files[sha]


def test_the_trl_bundle_loads_with_datasets_as_an_image_feature(version, receipts, tmp_path):
    _, _, files = receipts
    export = _exports(version)[("trl", "train")]
    folder = tmp_path / "trl"
    with zipfile.ZipFile(export_absolute_path(export)) as archive:
        names = sorted(archive.namelist())
        archive.extractall(folder)
    assert names[0] == "images/" + names[0].removeprefix("images/")
    assert names[-1] == "metadata.jsonl"

    loaded = datasets.load_dataset(
        "imagefolder", data_dir=str(folder), split="train", cache_dir=str(tmp_path / "cache")
    )

    assert loaded.num_rows == export.rows
    assert loaded.features["images"] == datasets.List(datasets.Image())
    metadata = [json.loads(line) for line in (folder / "metadata.jsonl").read_text().splitlines()]
    for row, original in zip(loaded, metadata, strict=True):
        assert len(row["images"]) == 1
        picture = row["images"][0]
        sha = original["file_names"][0].removeprefix("images/").removesuffix(".png")
        buffer = io.BytesIO()
        picture.save(buffer, format="PNG")
        assert picture.size[0] == 360 and sha in files
        # every content is a list of parts; the one image placeholder follows the tool result
        user = row["messages"][4]
        assert user["role"] == "user"
        assert [p["type"] for p in user["content"]] == ["text", "image"]
        assert all(isinstance(m["content"], list) for m in row["messages"])
        assert json.loads(row["messages"][3]["content"][0]["text"])["image"] == f"sha256:{sha}"
        # TRL's vision collator fills the placeholder with the loaded picture
        prepared = prepare_multimodal_messages(row["messages"], images=row["images"])
        assert prepared[4]["content"][1]["image"] is picture


def test_the_sharegpt_bundle_has_image_tokens_paths_and_its_dataset_info(version, tmp_path):
    export = _exports(version)[("sharegpt", "train")]
    with zipfile.ZipFile(export_absolute_path(export)) as archive:
        archive.extractall(tmp_path)
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert info == {
        "coworkenv_train": {
            "file_name": "sharegpt-train.jsonl",
            "formatting": "sharegpt",
            "columns": {
                "messages": "conversations",
                "system": "system",
                "tools": "tools",
                "images": "images",
            },
            "tags": {
                "role_tag": "from",
                "content_tag": "value",
                "user_tag": "human",
                "assistant_tag": "gpt",
                "observation_tag": "observation",
                "function_tag": "function_call",
            },
        }
    }
    rows = [
        json.loads(line) for line in (tmp_path / "sharegpt-train.jsonl").read_text().splitlines()
    ]
    assert len(rows) == export.rows >= 1
    for row in rows:
        tags = [t["from"] for t in row["conversations"]]
        assert tags == ["human", "function_call", "observation", "function_call", "observation",
                        "gpt"]  # fmt: skip
        observation = row["conversations"][2]["value"]
        assert observation.endswith("\n<image>")
        assert sum(t["value"].count("<image>") for t in row["conversations"]) == 1
        assert len(row["images"]) == 1 and (tmp_path / row["images"][0]).is_file()


def test_the_download_serves_the_bundle_as_a_zip(version, client_for, author):
    response = client_for(author).get(
        f"/datasets/{version.dataset_id}/versions/{version.number}/download/trl/train/"
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == (
        'attachment; filename="coworker-sft-v1-trl-train.zip"'
    )


def test_the_version_page_names_a_bundle_a_zip(version, client_for, author):
    page = client_for(author).get(f"/datasets/{version.dataset_id}/versions/{version.number}/")
    html = page.content.decode()
    trl = html.split('data-testid="download-trl-train">')[1].split("</td>")[0]
    assert trl.startswith("Download .zip</a>") and 'data-testid="bundle-note"' in trl
    openai = html.split('data-testid="download-openai-train">')[1].split("</a>")[0]
    assert openai == "Download"  # a JSONL file (its images inline as data: URLs)


def test_a_regenerated_openai_file_is_the_one_written_with_its_images(version):
    from apps.datasets.downloads import export_for
    from apps.datasets.services import export_regenerate_stream

    export = export_for(version, "openai", "train")
    path = export_absolute_path(export)
    written = path.read_bytes()
    path.unlink()
    regenerated = b"".join(export_regenerate_stream(export))
    assert regenerated == written
    assert path.read_bytes() == written  # cached again: it hashed to the recorded sha256


def test_text_trainers_on_a_version_with_images_are_refused_with_a_clear_error(
    version, project, author, settings, tmp_path
):
    """The local backend trains a vision-language model on it (tests/training/
    test_local_vision.py), not the text preset; a command trainer is offered the bundle."""
    from apps.core.exceptions import ApplicationError
    from apps.training.services import training_job_create

    with pytest.raises(ApplicationError) as raised:
        training_job_create(
            project=project,
            user=author,
            dataset_version=version,
            backend="local",
            base_model="preset:tiny-qwen2",
            enqueue=False,
        )
    assert raised.value.extra["fields"]["base_model"][0].startswith(
        "This version's demonstrations show images and preset:tiny-qwen2 is a text model"
    )
    templates = tmp_path / "command-templates.json"  # the operator's (docs/commands.md)
    templates.write_text('{"templates": {"slurm": {"argv": ["true"]}}}')
    settings.TRAINING_COMMAND_TEMPLATES_FILE = str(templates)
    with pytest.raises(ApplicationError) as raised:
        training_job_create(
            project=project,
            user=author,
            dataset_version=version,
            backend="command",
            base_model="preset:tiny-qwen2",
            command_template="slurm",
            enqueue=False,
        )
    assert "preset:tiny-qwen2 is a text model" in raised.value.extra["fields"]["base_model"][0]
    # a command trainer of a vision-language model gets the images as a bundle
    # (tests/training/test_command_vision.py)
    assert training_job_create(
        project=project,
        user=author,
        dataset_version=version,
        backend="command",
        base_model="Qwen/Qwen2-VL-2B-Instruct",
        command_template="slurm",
        enqueue=False,
    ).pk


def test_the_api_serves_the_bundle_and_the_openai_file(version, api_client_for, author):
    api = api_client_for(author)
    base = f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/export/"
    bundle = api.get(base, {"format": "sharegpt", "split": "train"})
    assert (bundle.status_code, bundle["Content-Type"]) == (200, "application/zip")
    export = _exports(version)[("sharegpt", "train")]
    assert bundle["ETag"] == f'"{export.sha256}"'
    assert b"".join(bundle.streaming_content) == export_absolute_path(export).read_bytes()
    jsonl = api.get(base, {"format": "openai", "split": "train"})
    assert (jsonl.status_code, jsonl["Content-Type"]) == (200, "application/jsonl; charset=utf-8")
