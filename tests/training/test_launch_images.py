"""The launch form and a version whose rows show images (issue 27, item 3): the tiny text
preset cannot train on it, so the form defaults to the vision one and refuses the text one
before anything is launched."""

import pytest

pytest.importorskip("trl")  # the image version's fixtures need the `train` extra

from apps.datasets.services import VersionFilter, dataset_create
from apps.training.forms import IMAGES_NEED_VISION
from apps.training.models import TrainingJob
from tests.conftest import HTMX_HEADERS
from tests.datasets.conftest import (  # noqa: F401
    approved_demonstrations,
    build_version,
    dataset,
    sample_environments,
)
from tests.datasets.test_multimodal_exports import receipts, version  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def text_version(project, author, sample_environments, approved_demonstrations, version):  # noqa: F811
    """A version of the text-only sample environments, beside the image ``version``."""
    text = dataset_create(project=project, name="Text only", user=author)
    only = VersionFilter(environments=tuple(e.pk for e in sample_environments))
    return build_version(text, author, filters=only, validation_fraction=0.3)


def _launch(chosen, **extra):
    return {"dataset_version": str(chosen.pk), "backend": "local", "max_steps": "2", **extra}


def test_the_form_marks_image_versions_and_defaults_to_the_vision_preset(
    client_for,
    author,
    version,  # noqa: F811
    text_version,
):
    client = client_for(author)
    html = client.get(f"/p/acme/training/new/?version={version.pk}").content.decode()
    assert f'<option value="{version.pk}" selected data-images="true">' in html
    assert f'<option value="{text_version.pk}">' in html
    assert '<option value="tiny-vlm-cpu" selected>' in html
    assert 'data-testid="preset-refused" hidden' in html  # shown by the script, if needed
    html = client.get(f"/p/acme/training/new/?version={text_version.pk}").content.decode()
    assert '<option value="tiny-cpu" selected>' in html


@pytest.mark.parametrize("headers", [{}, HTMX_HEADERS])
def test_the_text_preset_on_images_is_refused_before_launch(
    client_for,
    author,
    version,  # noqa: F811
    headers,
):
    page = client_for(author).post(
        "/p/acme/training/new/", _launch(version, preset="tiny-cpu"), **headers
    )
    assert page.status_code == 200
    html = page.content.decode()
    preset = html[html.index('name="preset"') : html.index('name="base_model"')]
    errors = preset[preset.index('class="errorlist') :]  # the hidden script note aside
    assert IMAGES_NEED_VISION.replace("'", "&#x27;") in errors[: errors.index("</ul>")]
    assert not TrainingJob.objects.exists()


def test_the_vision_preset_or_a_text_version_launches(
    client_for,
    author,
    version,  # noqa: F811
    text_version,
):
    client = client_for(author)
    for chosen, preset in ((version, "tiny-vlm-cpu"), (text_version, "tiny-cpu")):
        response = client.post("/p/acme/training/new/", _launch(chosen, preset=preset))
        assert response.status_code == 302, response.content.decode()[:2000]
    assert TrainingJob.objects.count() == 2


def test_another_projects_version_is_not_offered(client_for, outsider, version):  # noqa: F811
    page = client_for(outsider).get("/p/acme/training/new/")
    assert page.status_code == 404
