"""An attacker's and a careless user's sweep over every route of the app.

Two projects, each with a member of every role; every route (read from the URL
configuration) has an entry in ``PROBES`` saying who may write through it, so a new route
fails ``test_every_route_has_a_probe`` until someone says how to probe it. The sweep:

- anonymous: a page answers with the sign-in redirect, an API route 401/403; never data;
- too low a role: every write (POST on a page; POST, PUT, PATCH, DELETE on the API) by a
  member below the route's role is refused (403) and changes nothing; the htmx variant
  (``HX-Request``) answers the same;
- hostile values in the id fields of the forms (a number past every id column) are an
  invalid choice, never a server error;
- ``next=`` never leaves the site; pages refuse a POST without the CSRF token.

Another project's ids in paths are covered by tests/test_existence_oracle.py and ids in
bodies and query strings by tests/test_cross_project_ids.py; this module adds the roles,
anonymous callers, htmx, CSRF and the form fields that take ids.
"""

import pytest
from django.urls import reverse

from apps.datasets.models import DatasetKind, DatasetVersion
from apps.datasets.services import dataset_create
from apps.runs.models import RunBatch
from apps.synthesis.models import SynthesisJob

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PAST_EVERY_ID = "99999999999999999999999"  # past 2**63: no id column can hold it


def _dataset(project, admin, kind):
    return dataset_create(project=project, name=f"d-{kind}", user=admin, kind=kind)


# (name, url(project, admin), form with the hostile id, the field that must say so)
ID_FIELD_CASES = [
    (
        "run batch: environments",
        lambda p, a: reverse("runs:batch_create", args=[p.slug]),
        {"policy": "oracle", "role": "eval", "environments": [PAST_EVERY_ID]},
        "environments",
    ),
    (
        "run batch: user simulator endpoint",
        lambda p, a: reverse("runs:batch_create", args=[p.slug]),
        {"policy": "oracle", "role": "eval", "simulator_endpoint": PAST_EVERY_ID},
        "simulator_endpoint",
    ),
    (
        "run batch: judge endpoint",
        lambda p, a: reverse("runs:batch_create", args=[p.slug]),
        {"policy": "oracle", "role": "eval", "judge_endpoint": PAST_EVERY_ID},
        "judge_endpoint",
    ),
    (
        "synthesis: capabilities",
        lambda p, a: reverse("synthesis:create", args=[p.slug]),
        {"count": 1, "capabilities": [PAST_EVERY_ID]},
        "capabilities",
    ),
    (
        "synthesis: endpoint",
        lambda p, a: reverse("synthesis:create", args=[p.slug]),
        {"count": 1, "generator": "llm", "endpoint": PAST_EVERY_ID},
        "endpoint",
    ),
    (
        "SFT version: environments",
        lambda p, a: reverse("datasets:version_create", args=[_dataset(p, a, DatasetKind.SFT).pk]),
        {"seed": 0, "validation_fraction": 0.1, "environments": [PAST_EVERY_ID]},
        "environments",
    ),
    (
        "RL prompt version: environments",
        lambda p, a: reverse(
            "datasets:version_create", args=[_dataset(p, a, DatasetKind.RL_PROMPTS).pk]
        ),
        {"seeds": "0", "environments": [PAST_EVERY_ID]},
        "environments",
    ),
    (
        "scored rollout version: batches",
        lambda p, a: reverse(
            "datasets:rollout_version_create", args=[_dataset(p, a, DatasetKind.ROLLOUTS).pk]
        ),
        {"batches": [PAST_EVERY_ID], "reward": "score", "advantage": "grpo"},
        "batches",
    ),
    (
        "judge setting: endpoint",
        lambda p, a: reverse("llm:judge_setting", args=[p.slug]),
        {"endpoint": PAST_EVERY_ID},
        "endpoint",
    ),
]


def _made():
    return (RunBatch.objects.count(), SynthesisJob.objects.count(), DatasetVersion.objects.count())


@pytest.mark.parametrize("hx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize(
    ("url", "form", "field"),
    [case[1:] for case in ID_FIELD_CASES],
    ids=[case[0] for case in ID_FIELD_CASES],
)
def test_an_id_past_every_column_is_an_invalid_choice(
    client_for, project, admin, url, form, field, hx
):
    target = url(project, admin)
    before = _made()
    response = client_for(admin).post(target, form, **(HTMX if hx else {}))
    assert response.status_code == 200, response.content[:300]
    if hx:  # the form's fragment, saying which choice is wrong
        text = response.content.decode()
        assert "is not a valid value" in text or "Select a valid choice" in text
    else:
        assert field in response.context["form"].errors
    assert _made() == before
