"""The training form and a version whose rows show images (issue 27, item 3): choosing it
swaps the tiny text preset for the vision one and says why; going back to the text preset
is refused on the form before launch, and by the server if launched anyway."""

import pytest
from playwright.sync_api import expect

pytest.importorskip("trl")  # the image version's fixtures need the `train` extra

from apps.training.models import TrainingJob
from tests.datasets.conftest import (  # noqa: F401
    approved_demonstrations,
    dataset,
    sample_environments,
)
from tests.datasets.test_multimodal_exports import receipts, version  # noqa: F401
from tests.training.test_launch_images import text_version  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_preset_follows_the_version_and_an_impossible_pair_is_refused(
    login,
    live_server,
    author,
    project,
    version,  # noqa: F811
    text_version,  # noqa: F811
):
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/training/new/")
    preset, chosen = page.locator("#id_preset"), page.locator("#id_dataset_version")
    refused, why = page.get_by_test_id("preset-refused"), page.get_by_test_id("preset-images")
    expect(preset).to_have_value("tiny-cpu")

    chosen.select_option(str(version.pk))
    expect(preset).to_have_value("tiny-vlm-cpu")
    expect(why).to_be_visible()
    expect(refused).to_be_hidden()

    preset.select_option("tiny-cpu")
    expect(refused).to_be_visible()  # said before launching, not after
    expect(refused).to_contain_text("trains a text model built from a config")
    page.get_by_test_id("launch").click()
    expect(page.locator("#launch-form .errorlist")).to_contain_text(
        "trains a text model built from a config"
    )
    assert not TrainingJob.objects.exists()

    page.locator("#id_dataset_version").select_option(str(text_version.pk))
    expect(page.locator("#id_preset")).to_have_value("tiny-cpu")
    expect(page.get_by_test_id("preset-refused")).to_be_hidden()
    page.locator("#id_dataset_version").select_option(str(version.pk))
    expect(page.locator("#id_preset")).to_have_value("tiny-vlm-cpu")
