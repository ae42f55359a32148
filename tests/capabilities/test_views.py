import pytest
from django.urls import reverse

from apps.capabilities.models import Capability
from apps.capabilities.services import capability_archive
from apps.environments.services import environment_import
from tests.capabilities.conftest import set_validation
from tests.capabilities.test_services import CATALOGUE_SLUGS
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db

BOOK, CLARIFY, NOTICE = "book-q3-review", "budget-figure-clarify", "notice-moved-dentist"


@pytest.fixture
def policy(catalogue):
    return catalogue["follow-policy"]


@pytest.fixture
def tagged_environment(project, author, catalogue, make_spec):
    spec = make_spec(
        {BOOK: ["follow-policy", "resolve-conflicts"], CLARIFY: ["follow-policy"], NOTICE: []},
        splits={CLARIFY: "eval"},
    )
    environment = environment_import(project=project, spec=spec, user=author)
    return set_validation(environment, status="valid", sensitivities={BOOK: 1.0, CLARIFY: 0.5})


def _snapshot(project):
    return sorted(
        Capability.objects.filter(project=project).values_list(
            "slug", "name", "group", "description", "guidance", "examples", "archived_at"
        )
    )


FORM = {
    "name": "Plan business travel",
    "slug": "",
    "group": "Travel",
    "description": "Book trips within policy.",
    "guidance": "Seed two fares.\nGrade the cheaper one.",
    "examples": "Book me to Lisbon\n\n  Find a hotel near the office  \n",
}


# --- anonymous, wrong method ---------------------------------------------------------------


def test_anonymous_is_sent_to_login(client, project, policy):
    for method, url in [
        ("get", reverse("capabilities:list", args=[project.slug])),
        ("get", reverse("capabilities:coverage", args=[project.slug])),
        ("get", reverse("capabilities:create", args=[project.slug])),
        ("post", reverse("capabilities:create", args=[project.slug])),
        ("post", reverse("capabilities:seed", args=[project.slug])),
        ("get", reverse("capabilities:detail", args=[policy.pk])),
        ("get", reverse("capabilities:edit", args=[policy.pk])),
        ("post", reverse("capabilities:edit", args=[policy.pk])),
        ("post", reverse("capabilities:archive", args=[policy.pk])),
        ("post", reverse("capabilities:restore", args=[policy.pk])),
    ]:
        response = getattr(client, method)(url, FORM if method == "post" else None)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("accounts:login")), url
    assert Capability.objects.get(pk=policy.pk).archived_at is None
    assert not Capability.objects.filter(slug="plan-business-travel").exists()


def test_wrong_methods(client_for, author, project, policy):
    client = client_for(author)
    for method, url in [
        ("post", reverse("capabilities:list", args=[project.slug])),
        ("post", reverse("capabilities:coverage", args=[project.slug])),
        ("post", reverse("capabilities:detail", args=[policy.pk])),
        ("get", reverse("capabilities:seed", args=[project.slug])),
        ("get", reverse("capabilities:archive", args=[policy.pk])),
        ("get", reverse("capabilities:restore", args=[policy.pk])),
        ("put", reverse("capabilities:edit", args=[policy.pk])),
        ("delete", reverse("capabilities:create", args=[project.slug])),
    ]:
        assert getattr(client, method)(url).status_code == 405, (method, url)


def test_outsider_gets_404_everywhere(client_for, outsider, project, policy):
    before = _snapshot(project)
    client = client_for(outsider)
    for method, url in [
        ("get", reverse("capabilities:list", args=[project.slug])),
        ("get", reverse("capabilities:coverage", args=[project.slug])),
        ("get", reverse("capabilities:create", args=[project.slug])),
        ("post", reverse("capabilities:create", args=[project.slug])),
        ("post", reverse("capabilities:seed", args=[project.slug])),
        ("get", reverse("capabilities:detail", args=[policy.pk])),
        ("get", reverse("capabilities:edit", args=[policy.pk])),
        ("post", reverse("capabilities:edit", args=[policy.pk])),
        ("post", reverse("capabilities:archive", args=[policy.pk])),
        ("post", reverse("capabilities:restore", args=[policy.pk])),
    ]:
        response = getattr(client, method)(url, FORM if method == "post" else None)
        assert response.status_code == 404, (method, url)
    assert _snapshot(project) == before


def test_missing_capability_is_404(client_for, author):
    assert client_for(author).get(reverse("capabilities:detail", args=[999999])).status_code == 404


def test_viewer_cannot_write(client_for, viewer, project, policy):
    before = _snapshot(project)
    client = client_for(viewer)
    for method, url in [
        ("get", reverse("capabilities:create", args=[project.slug])),
        ("post", reverse("capabilities:create", args=[project.slug])),
        ("post", reverse("capabilities:seed", args=[project.slug])),
        ("get", reverse("capabilities:edit", args=[policy.pk])),
        ("post", reverse("capabilities:edit", args=[policy.pk])),
        ("post", reverse("capabilities:archive", args=[policy.pk])),
    ]:
        response = getattr(client, method)(url, FORM if method == "post" else None)
        assert response.status_code == 403, (method, url)
    capability_archive(capability=policy)
    before = _snapshot(project)
    response = client.post(reverse("capabilities:restore", args=[policy.pk]))
    assert response.status_code == 403
    assert _snapshot(project) == before


# --- list ----------------------------------------------------------------------------------


def test_list_groups_capabilities_with_counts(client_for, viewer, project, tagged_environment):
    response = client_for(viewer).get(reverse("capabilities:list", args=[project.slug]))
    assert response.status_code == 200
    page = response.context["page"]
    assert len(page.object_list) == len(CATALOGUE_SLUGS)
    rows = {c.slug: c for c in page.object_list}
    assert (rows["follow-policy"].task_count, rows["follow-policy"].valid_task_count) == (2, 2)
    html = response.content.decode()
    for group in ["Coordination", "Judgement", "Long horizon", "Policy and safety"]:
        assert f"<h2>{group} " in html
    assert reverse("capabilities:detail", args=[rows["follow-policy"].pk]) in html
    # A viewer gets no write controls.
    assert "New capability" not in html
    assert reverse("capabilities:coverage", args=[project.slug]) in html


def test_list_search_and_group_filter(client_for, viewer, project, catalogue):
    client = client_for(viewer)
    url = reverse("capabilities:list", args=[project.slug])
    page = client.get(url, {"q": "look-alike"}).context["page"]
    assert [c.slug for c in page.object_list] == ["disambiguate-contacts"]
    page = client.get(url, {"group": "Long horizon"}).context["page"]
    assert [c.slug for c in page.object_list] == [
        "handle-interruptions",
        "multi-day-follow-up",
        "notice-silent-changes",
    ]
    response = client.get(url, {"q": "no such thing"})
    assert b"No capability matches." in response.content
    assert b"Add the standard catalogue" not in response.content


def test_list_htmx_returns_the_rows_only(client_for, viewer, project, catalogue):
    url = reverse("capabilities:list", args=[project.slug])
    response = client_for(viewer).get(url, {"q": "privacy"}, **HTMX_HEADERS)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="capability-rows">')
    assert "<html" not in html
    assert "Respect privacy policies" in html
    assert "Respect approval policies" not in html


def test_list_hides_archived_unless_asked(client_for, viewer, project, policy):
    capability_archive(capability=policy)
    client = client_for(viewer)
    url = reverse("capabilities:list", args=[project.slug])
    slugs = [c.slug for c in client.get(url).context["page"].object_list]
    assert "follow-policy" not in slugs
    assert len(slugs) == len(CATALOGUE_SLUGS) - 1
    archived = client.get(url, {"archived": "1"}).context["page"].object_list
    assert [c.slug for c in archived] == ["follow-policy"]


def test_empty_project_offers_the_catalogue(client_for, author, viewer, project):
    url = reverse("capabilities:list", args=[project.slug])
    response = client_for(author).get(url)
    assert response.context["offer_catalogue"] is True
    assert b"Add the standard catalogue" in response.content
    assert f"{len(CATALOGUE_SLUGS)} workflow requirements".encode() in response.content
    response = client_for(viewer).get(url)
    assert b"Add the standard catalogue" not in response.content
    assert b"An author of this project can add it." in response.content


def test_only_archived_capabilities_does_not_offer_the_catalogue(client_for, author, project):
    capability = Capability.objects.create(project=project, slug="x", name="X")
    capability_archive(capability=capability)
    response = client_for(author).get(reverse("capabilities:list", args=[project.slug]))
    assert response.context["offer_catalogue"] is False
    assert b"Every capability is archived." in response.content


def test_seed_adds_the_catalogue(client_for, author, project):
    response = client_for(author).post(reverse("capabilities:seed", args=[project.slug]))
    assert response.status_code == 302
    assert response["Location"] == reverse("capabilities:list", args=[project.slug])
    assert Capability.objects.filter(project=project).count() == len(CATALOGUE_SLUGS)
    page = client_for(author).get(response["Location"])
    assert f"Added {len(CATALOGUE_SLUGS)} capabilities".encode() in page.content


def test_seed_again_says_nothing_is_missing(client_for, author, project, catalogue):
    response = client_for(author).post(
        reverse("capabilities:seed", args=[project.slug]), follow=True
    )
    assert b"already has every capability of the standard catalogue" in response.content
    assert Capability.objects.filter(project=project).count() == len(CATALOGUE_SLUGS)


def test_seed_htmx_redirects_the_client(client_for, author, project):
    response = client_for(author).post(
        reverse("capabilities:seed", args=[project.slug]), **HTMX_HEADERS
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("capabilities:list", args=[project.slug])


def test_list_query_count_is_flat(
    client_for, viewer, project, catalogue, django_assert_max_num_queries
):
    client = client_for(viewer)
    url = reverse("capabilities:list", args=[project.slug])
    client.get(url)
    with django_assert_max_num_queries(8):
        client.get(url)
    for i in range(40):
        Capability.objects.create(project=project, slug=f"extra-{i}", name=f"Extra {i}", group="X")
    with django_assert_max_num_queries(8):
        assert len(client.get(url).context["page"].object_list) == len(CATALOGUE_SLUGS) + 40


# --- detail --------------------------------------------------------------------------------


def test_detail_shows_everything(client_for, viewer, policy, tagged_environment):
    response = client_for(viewer).get(reverse("capabilities:detail", args=[policy.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Respect approval policies" in html
    assert "follow-policy" in html
    assert "Policy and safety" in html
    assert "Apply the organisation&#x27;s rules" in html  # description, escaped
    assert "tempt a violation" in html  # guidance
    assert "“Approve the 12,000 EUR purchase order from marketing, it&#x27;s urgent.”" in html
    tasks = list(response.context["page"].object_list)
    assert [(t.key, t.split, t.environment.status) for t in tasks] == [
        (BOOK, "train", "valid"),
        (CLARIFY, "eval", "valid"),
    ]
    assert reverse("environments:detail", args=[tagged_environment.pk]) in html
    environments_url = reverse("environments:list", args=[policy.project.slug])
    assert f"{environments_url}?capability=follow-policy" in html
    assert "Edit" not in html.split("<main")[1].split("Description")[0]


def test_detail_for_author_has_actions(client_for, author, policy):
    html = client_for(author).get(reverse("capabilities:detail", args=[policy.pk])).content
    assert reverse("capabilities:edit", args=[policy.pk]).encode() in html
    assert reverse("capabilities:archive", args=[policy.pk]).encode() in html
    assert b"No task exercises it yet." in html


def test_detail_htmx_returns_the_task_table(client_for, viewer, policy, tagged_environment):
    response = client_for(viewer).get(
        reverse("capabilities:detail", args=[policy.pk]), **HTMX_HEADERS
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="panel" id="capability-tasks">')
    assert "<html" not in html
    assert BOOK in html


def test_detail_escapes_user_text(client_for, author, project):
    capability = Capability.objects.create(
        project=project,
        slug="xss",
        name="<script>alert(1)</script>",
        description="<b>bold</b>",
        examples=["<img src=x onerror=alert(1)>"],
    )
    html = client_for(author).get(reverse("capabilities:detail", args=[capability.pk])).content
    assert b"<script>alert(1)</script>" not in html
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert b"<b>bold</b>" not in html
    assert b"<img src=x" not in html


# --- create / edit -------------------------------------------------------------------------


def test_create_form_and_success(client_for, author, project, catalogue):
    client = client_for(author)
    url = reverse("capabilities:create", args=[project.slug])
    page = client.get(url)
    assert page.status_code == 200
    assert b'<option value="Coordination">' in page.content  # group suggestions
    response = client.post(url, FORM)
    capability = Capability.objects.get(project=project, slug="plan-business-travel")
    assert response.status_code == 302
    assert response["Location"] == reverse("capabilities:detail", args=[capability.pk])
    assert (capability.name, capability.group, capability.created_by) == (
        "Plan business travel",
        "Travel",
        author,
    )
    assert capability.examples == ["Book me to Lisbon", "Find a hotel near the office"]
    assert capability.guidance == "Seed two fares.\nGrade the cheaper one."


def test_create_with_a_taken_slug_shows_the_error(client_for, author, project, catalogue):
    before = _snapshot(project)
    response = client_for(author).post(
        reverse("capabilities:create", args=[project.slug]), {**FORM, "slug": "follow-policy"}
    )
    assert response.status_code == 200
    assert response.context["form"].errors == {
        "slug": [
            "The slug “follow-policy” is already used by “Respect approval policies” in this "
            "project."
        ]
    }
    assert "already used by “Respect approval policies”" in response.content.decode()
    assert _snapshot(project) == before


def test_create_invalid_htmx_rerenders_the_form(client_for, author, project):
    response = client_for(author).post(
        reverse("capabilities:create", args=[project.slug]),
        {**FORM, "name": "", "slug": "Not a slug!"},
        **HTMX_HEADERS,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith("<form")
    assert "<html" not in html
    assert "This field is required." in html
    assert "Enter a valid “slug”" in html
    assert not Capability.objects.filter(project=project).exists()


def test_create_htmx_success_redirects_the_client(client_for, author, project):
    response = client_for(author).post(
        reverse("capabilities:create", args=[project.slug]), FORM, **HTMX_HEADERS
    )
    capability = Capability.objects.get(project=project, slug="plan-business-travel")
    assert response["HX-Redirect"] == reverse("capabilities:detail", args=[capability.pk])


def test_edit_form_is_prefilled(client_for, author, policy):
    response = client_for(author).get(reverse("capabilities:edit", args=[policy.pk]))
    assert response.status_code == 200
    form = response.context["form"]
    assert form.initial["slug"] == "follow-policy"
    assert form.initial["examples"] == "\n".join(policy.examples)


def test_edit_saves(client_for, author, policy):
    response = client_for(author).post(
        reverse("capabilities:edit", args=[policy.pk]), {**FORM, "slug": ""}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("capabilities:detail", args=[policy.pk])
    policy.refresh_from_db()
    # A blank slug keeps the current one.
    assert (policy.slug, policy.name, policy.group) == (
        "follow-policy",
        "Plan business travel",
        "Travel",
    )
    assert policy.examples == ["Book me to Lisbon", "Find a hotel near the office"]


def test_edit_locks_the_slug_of_a_used_capability(
    client_for, author, project, policy, tagged_environment
):
    client = client_for(author)
    url = reverse("capabilities:edit", args=[policy.pk])
    page = client.get(url)
    assert page.context["form"].fields["slug"].disabled is True
    assert "Locked: 2 tasks use this capability" in page.content.decode()
    # A posted slug is ignored; the other changes are saved.
    response = client.post(url, {**FORM, "slug": "approvals"})
    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.slug, policy.name) == ("follow-policy", "Plan business travel")
    assert policy.task_links.count() == 2


def test_edit_htmx_invalid_rerenders_the_form(client_for, author, policy):
    response = client_for(author).post(
        reverse("capabilities:edit", args=[policy.pk]), {**FORM, "name": ""}, **HTMX_HEADERS
    )
    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith("<form")
    assert 'hx-post="{}"'.format(reverse("capabilities:edit", args=[policy.pk])) in (
        response.content.decode()
    )
    policy.refresh_from_db()
    assert policy.name == "Respect approval policies"


# --- archive / restore ---------------------------------------------------------------------


def test_archive_and_restore(client_for, author, project, policy, tagged_environment):
    client = client_for(author)
    response = client.post(reverse("capabilities:archive", args=[policy.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("capabilities:detail", args=[policy.pk])
    policy.refresh_from_db()
    assert policy.is_archived
    assert policy.task_links.count() == 3 - 1  # the tasks keep their links
    detail = client.get(reverse("capabilities:detail", args=[policy.pk]))
    assert b"Archived" in detail.content
    assert reverse("capabilities:restore", args=[policy.pk]).encode() in detail.content
    listed = client.get(reverse("capabilities:list", args=[project.slug])).context["page"]
    assert policy.pk not in [c.pk for c in listed.object_list]

    response = client.post(reverse("capabilities:restore", args=[policy.pk]), **HTMX_HEADERS)
    assert response["HX-Redirect"] == reverse("capabilities:detail", args=[policy.pk])
    policy.refresh_from_db()
    assert not policy.is_archived


# --- coverage ------------------------------------------------------------------------------


def test_coverage_page(client_for, viewer, project, tagged_environment):
    response = client_for(viewer).get(reverse("capabilities:coverage", args=[project.slug]))
    assert response.status_code == 200
    coverage = response.context["coverage"]
    rows = {row.capability.slug: row for row in coverage.rows}
    policy = rows["follow-policy"]
    assert (policy.tasks, policy.valid, policy.sensitivity, policy.train, policy.eval) == (
        2,
        2,
        0.75,
        1,
        1,
    )
    assert (coverage.untagged.tasks, coverage.untagged.sensitivity) == (1, None)
    html = response.content.decode()
    assert '<tr class="thin" data-slug="follow-policy">' in html  # sensitivity below 1
    assert "0.75" in html
    assert '<tr class="" data-slug="resolve-conflicts">' not in html  # no eval task: thin
    assert '<tr class="thin" data-slug="resolve-conflicts">' in html
    assert "No capability" in html
    assert f'data-testid="thin-count">{coverage.thin_count}<' in html
    assert 'data-testid="synthesize-for"' not in html  # viewers start no synthesis


def test_a_thin_capability_links_to_a_prefilled_synthesis(
    client_for, author, project, other_project, tagged_environment
):
    client = client_for(author)
    html = client.get(reverse("capabilities:coverage", args=[project.slug])).content.decode()
    row = html.split('data-slug="resolve-conflicts">')[1].split("</tr>")[0]
    link = f"{reverse('synthesis:create', args=[project.slug])}?capability=resolve-conflicts"
    assert f'href="{link}" data-testid="synthesize-for"' in row
    form = client.get(link).context["form"]
    chosen = Capability.objects.get(project=project, slug="resolve-conflicts")
    assert form.initial["capabilities"] == [chosen.pk]
    # a slug of another project (or none at all) preselects nothing
    Capability.objects.create(project=other_project, slug="theirs", name="Theirs")
    other = client.get(reverse("synthesis:create", args=[project.slug]), {"capability": "theirs"})
    assert other.context["form"].initial.get("capabilities") == []


def test_coverage_page_shows_the_horizon_distribution(
    client_for, viewer, project, tagged_environment
):
    """The acme-ops sample by hand: book-q3-review 1 turn, 5 calls, 1 day;
    budget-figure-clarify 2 turns, 2 calls, 1 day; notice-moved-dentist 2 turns, 4 calls,
    its second turn on 4 March after a 2 March clock start: 3 days."""
    response = client_for(viewer).get(reverse("capabilities:coverage", args=[project.slug]))
    horizon = response.context["coverage"].horizon
    assert horizon.tasks == 3
    assert [(b["label"], b["count"]) for b in horizon.turns] == [
        ("1 turn", 1),
        ("2 turns", 2),
        ("3-4 turns", 0),
        ("5-8 turns", 0),
        ("9+ turns", 0),
    ]
    assert [(b["label"], b["count"]) for b in horizon.calls if b["count"]] == [
        ("0-4 calls", 2),
        ("5-9 calls", 1),
    ]
    assert [(b["label"], b["count"]) for b in horizon.days if b["count"]] == [
        ("1 day", 2),
        ("3-5 days", 1),
    ]
    assert horizon.median == {"turns": 2, "calls": 4, "days": 1}
    assert horizon.maximum == {"turns": 2, "calls": 5, "days": 3}
    html = response.content.decode()
    assert 'data-testid="horizon-distribution"' in html
    for key in ("turns", "calls", "days"):
        assert f'data-testid="horizon-{key}"' in html
    assert "median 2, max 2" in html and "median 4, max 5" in html
    assert html.count('data-testid="bar-chart"') == 3
    # The htmx partial (sorting the matrix) keeps the distribution.
    partial = client_for(viewer).get(
        reverse("capabilities:coverage", args=[project.slug]), {"sort": "-eval"}, **HTMX_HEADERS
    )
    assert 'data-testid="horizon-distribution"' in partial.content.decode()


def test_coverage_sort_links_toggle(client_for, viewer, project, catalogue):
    client = client_for(viewer)
    url = reverse("capabilities:coverage", args=[project.slug])
    columns = {c["key"]: c for c in client.get(url).context["columns"]}
    assert columns["name"]["sort"] == "-name" and columns["name"]["aria_sort"] == "ascending"
    assert columns["tasks"]["sort"] == "-tasks" and columns["tasks"]["aria_sort"] == "none"
    columns = {c["key"]: c for c in client.get(url, {"sort": "-tasks"}).context["columns"]}
    assert columns["tasks"]["sort"] == "tasks"
    assert columns["tasks"]["aria_sort"] == "descending"
    assert columns["name"]["sort"] == "name"


def test_coverage_htmx_returns_the_matrix(client_for, viewer, project, tagged_environment):
    response = client_for(viewer).get(
        reverse("capabilities:coverage", args=[project.slug]), {"sort": "-eval"}, **HTMX_HEADERS
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="coverage-matrix">')
    assert "<html" not in html
    # Most eval tasks first: follow-policy has the only one.
    first_row = html.split("<tbody>")[1].split("</tr>")[0]
    assert 'data-slug="follow-policy"' in first_row


def test_coverage_empty_project(client_for, viewer, project):
    response = client_for(viewer).get(reverse("capabilities:coverage", args=[project.slug]))
    assert b"Nothing to cover yet." in response.content
    assert b'data-testid="horizon-distribution"' not in response.content


def test_coverage_query_count_is_flat(
    client_for, viewer, project, author, catalogue, make_spec, django_assert_max_num_queries
):
    client = client_for(viewer)
    url = reverse("capabilities:coverage", args=[project.slug])
    tags = {BOOK: ["follow-policy"], CLARIFY: ["resolve-conflicts"], NOTICE: []}
    environment_import(project=project, spec=make_spec(tags), user=author)
    client.get(url)
    with django_assert_max_num_queries(9):
        client.get(url)
    for _ in range(6):
        environment = environment_import(project=project, spec=make_spec(tags), user=author)
        set_validation(environment, status="valid", sensitivities={BOOK: 1.0})
    with django_assert_max_num_queries(9):
        assert client.get(url).context["coverage"].total_tasks == 21


# --- navigation and dashboard --------------------------------------------------------------


def test_nav_and_dashboard_link_to_capabilities_and_coverage(client_for, viewer, project):
    html = client_for(viewer).get(reverse("workspace:dashboard", args=[project.slug]))
    html = html.content.decode()
    list_url = reverse("capabilities:list", args=[project.slug])
    coverage_url = reverse("capabilities:coverage", args=[project.slug])
    nav = html.split('aria-label="Project"')[1].split("</nav>")[0]
    assert (
        nav.index(list_url)
        < nav.index(reverse("environments:list", args=[project.slug]))
        < nav.index(coverage_url)
    )
    assert f'<a class="stat" href="{list_url}" data-testid="stat-capabilities">' in html
    assert f'<a class="stat" href="{coverage_url}" data-testid="stat-tasks">' in html


def test_nav_marks_the_current_page(client_for, viewer, project, policy):
    client = client_for(viewer)
    list_url = reverse("capabilities:list", args=[project.slug])
    html = client.get(reverse("capabilities:detail", args=[policy.pk])).content.decode()
    assert f'<a href="{list_url}" aria-current="page">Capabilities</a>' in html
    coverage_url = reverse("capabilities:coverage", args=[project.slug])
    html = client.get(coverage_url).content.decode()
    assert f'<a href="{coverage_url}" aria-current="page">Coverage</a>' in html
