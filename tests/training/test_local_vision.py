"""The local backend on a version whose demonstrations show images (oracle runs of a receipts
environment): the worker writes the ``trl`` rows and the viewed receipts beside them, and
the entry point trains ``preset:tiny-llava`` 2 steps on the CPU through ``accelerate
launch``: finite losses, a checkpoint, a final model that loads with its processor."""

import math
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the `train` extra
transformers = pytest.importorskip("transformers")

from apps.training.models import TrainedModel  # noqa: E402
from apps.training.services import training_job_create  # noqa: E402
from tests.datasets.conftest import dataset  # noqa: E402,F401
from tests.datasets.test_multimodal_exports import receipts, version  # noqa: E402,F401
from tests.training.conftest import execute_and_succeed  # noqa: E402

pytestmark = pytest.mark.django_db

TWO_STEPS = {
    "max_steps": 2,
    "learning_rate": 0.003,
    "batch_size": 2,
    "gradient_accumulation_steps": 1,
    "max_length": 4096,
    "warmup_ratio": 0.0,
    "lr_scheduler_type": "linear",
    "save_steps": 2,
}


def test_the_tiny_vlm_trains_on_an_image_version(project, author, version, receipts):  # noqa: F811
    _, _, files = receipts
    training_job = training_job_create(
        project=project,
        user=author,
        dataset_version=version,
        backend="local",
        preset="tiny-vlm-cpu",
        hyperparameters=TWO_STEPS,
        enqueue=False,
    )
    assert training_job.base_model == "preset:tiny-llava"

    job = execute_and_succeed(training_job)  # what the gpu-queue task does
    assert job.message == "Trained 2 steps."
    losses = [m.loss for m in training_job.metrics.order_by("step") if m.loss is not None]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    assert [c["step"] for c in training_job.artifacts["checkpoints"]] == [2]
    checkpoint = Path(training_job.artifacts["checkpoints"][0]["path"])
    assert (checkpoint / "trainer_state.json").exists()

    # the receipts the rows show were written beside the data file, byte for byte
    images = Path(training_job.output_dir) / "data" / "images"
    written = {path.stem: path.read_bytes() for path in images.iterdir()}
    assert written and all(files[sha] == data for sha, data in written.items())

    model_row = TrainedModel.objects.get(training_job=training_job)
    model = transformers.LlavaForConditionalGeneration.from_pretrained(model_row.path)
    processor = transformers.AutoProcessor.from_pretrained(model_row.path)
    assert model.config.image_token_id == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
