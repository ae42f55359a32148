"""The review page of a demonstration on a multimodal environment shows what the teacher
saw: the viewed receipt as a thumbnail served from the environment's attachment view."""

import pytest
from django.urls import reverse

from apps.curation.models import Demonstration
from apps.curation.services import demonstration_claim
from apps.environments.models import Environment, EnvironmentStatus
from apps.environments.services import environment_import_with_files
from apps.synthesis.generators.receipts import generate_receipts_environment
from tests.conftest import HTMX_HEADERS
from tests.curation.conftest import teacher_batch_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def receipt_demo(project, author):
    doc, files = generate_receipts_environment(seed=5, tasks=1, eval_fraction=0)
    environment = environment_import_with_files(project=project, spec=doc, files=files, user=author)
    Environment.objects.filter(pk=environment.pk).update(status=EnvironmentStatus.VALID)
    environment.refresh_from_db()
    batch = teacher_batch_run(project, author, environment)
    return Demonstration.objects.get(run__batch=batch), doc


def test_the_review_page_shows_the_viewed_receipt_as_a_thumbnail(
    client_for, reviewer, receipt_demo
):
    demo, doc = receipt_demo
    demonstration_claim(demonstration=demo, user=reviewer)
    url = reverse("curation:review", args=[demo.project.slug, demo.pk])
    sha = doc["attachments"][0]["sha256"]
    src = reverse("environments:attachment", args=[demo.environment_id, sha])

    body = client_for(reviewer).get(url).content.decode()

    assert body.count('data-testid="thumbnail"') == 1
    assert f'src="{src}" alt="receipt-rc-1.png"' in body
    partial = client_for(reviewer).get(url, **HTMX_HEADERS).content.decode()
    assert f'src="{src}"' in partial
    image = client_for(reviewer).get(src)
    assert (image.status_code, image["Content-Type"]) == (200, "image/png")
