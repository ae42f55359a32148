"""The version page and the dataset page show each kind's figures (no SFT-only panels on RL
kinds, no empty table without an empty state), and the card is rendered from current data:
a renamed dataset, or a version migration 0008 moved into a new dataset, never leaves a card
that names the wrong dataset (its file is written again when read)."""

import hashlib
import re

import pytest

from apps.datasets.models import DatasetVersion, ExportFormat
from apps.datasets.services import export_absolute_path
from apps.datasets.services.datasets import dataset_create, dataset_update
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db


def page_of(version) -> str:
    return f"/datasets/{version.dataset_id}/versions/{version.number}/"


def card_api(version) -> str:
    return f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/export/?format=card"


def _text(response) -> str:
    if response.streaming:
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def test_an_rl_prompt_version_page_shows_its_own_panels(client_for, viewer, prompt_version):
    response = client_for(viewer).get(page_of(prompt_version))
    assert response.status_code == 200
    html = response.content.decode()
    mix = {slug: c["train"] for slug, c in prompt_version.capability_mix.items()}
    assert mix, "the sample tasks exercise capabilities"
    table = html[html.index('data-testid="capability-mix"') :]
    table = table[: table.index("</table>")]
    assert '<th>Capability</th><th class="num">Prompt rows</th>' in table
    shown = re.findall(r'<td class="mono small">([^<]+)</td><td class="num">(\d+)</td>', table)
    assert shown == [(slug, str(rows)) for slug, rows in mix.items()]
    assert ">train</td>" not in table  # not the split read as a capability
    for sft_only in ('data-testid="long-trajectories"', 'data-testid="groups"', "Validation</th>"):
        assert sft_only not in html, sft_only
    sample = html[html.index('data-testid="api-sample"') :]
    assert sample.split("</code>")[0].endswith("?format=grpo&amp;split=train")
    assert "No export passed its linter" not in html
    assert "rounded up.." not in html
    assert 'data-testid="prompt-row-table"' in html


def test_a_rollout_version_page_shows_its_own_panels(client_for, viewer, rollout_version):
    html = client_for(viewer).get(page_of(rollout_version)).content.decode()
    for sft_only in (
        'data-testid="long-trajectories"',
        'data-testid="groups"',
        "(deleted)",
        "No rows.",
        "Approved matched",
    ):
        assert sft_only not in html, sft_only
    environments = html[html.index('data-testid="environments"') :].split("</table>")[0]
    environment_id = rollout_version.environments[0]["id"]
    assert (
        f'<td><a href="/environments/{environment_id}/">Clarify and notice</a></td>'
        '<td class="num">3</td>'
    ) in environments
    assert "clarify (3)" in environments
    # the group's task carries no capability tag: the panel says so instead of an empty table
    assert rollout_version.capability_mix == {}
    panel = html[html.index('data-testid="capability-panel"') :].split("</section>")[0]
    assert 'data-testid="no-capabilities"' in panel and "<table" not in panel
    sample = html[html.index('data-testid="api-sample"') :]
    assert sample.split("</code>")[0].endswith("?format=rollouts&amp;split=train")
    assert 'data-testid="rollout-row-table"' in html


def test_an_sft_version_page_keeps_its_panels(client_for, viewer, built_version):
    html = client_for(viewer).get(page_of(built_version)).content.decode()
    for panel in ("capability-mix", "long-trajectories", "groups", "row-table", "validation-rows"):
        assert f'data-testid="{panel}"' in html, panel
    sample = html[html.index('data-testid="api-sample"') :]
    assert sample.split("</code>")[0].endswith("?format=openai&amp;split=train")


def test_empty_token_stats_say_so(client_for, viewer, rollout_version):
    DatasetVersion.objects.filter(pk=rollout_version.pk).update(token_stats={})
    html = client_for(viewer).get(page_of(rollout_version)).content.decode()
    assert 'data-testid="no-token-stats"' in html


def test_the_rows_fragment_of_each_kind(
    client_for, viewer, outsider, built_version, prompt_version, rollout_version
):
    for version, table in (
        (built_version, "row-table"),
        (prompt_version, "prompt-row-table"),
        (rollout_version, "rollout-row-table"),
    ):
        response = client_for(viewer).get(page_of(version) + "?split=train", **HTMX_HEADERS)
        fragment = response.content.decode()
        assert response.status_code == 200
        assert fragment.lstrip().startswith('<div id="version-rows">'), version
        assert f'data-testid="{table}"' in fragment
        assert 'data-testid="card"' not in fragment
        empty = client_for(viewer).get(page_of(version) + "?page=99", **HTMX_HEADERS)
        assert empty.status_code == 200  # the last page
    assert client_for(outsider).get(page_of(rollout_version)).status_code == 404
    outsider_fragment = client_for(outsider).get(page_of(prompt_version), **HTMX_HEADERS)
    assert outsider_fragment.status_code == 404


def test_the_dataset_page_lists_versions_with_their_kinds_columns(
    client_for, viewer, built_version, prompt_version, rollout_version
):
    client = client_for(viewer)
    prompts = client.get(f"/datasets/{prompt_version.dataset_id}/").content.decode()
    assert '<th class="num">Prompt rows</th>' in prompts and "Duplicates</th>" not in prompts
    assert '<td class="mono small">0, 5</td>' in prompts
    rollouts = client.get(f"/datasets/{rollout_version.dataset_id}/", **HTMX_HEADERS)
    fragment = rollouts.content.decode()
    assert fragment.lstrip().startswith('<div id="version-rows">')
    assert 'data-testid="rollout-rows">3</td>' in fragment
    assert "passed · rloo · trajectory" in fragment and "Validation</th>" not in fragment
    sft = client.get(f"/datasets/{built_version.dataset_id}/").content.decode()
    assert "Validation</th>" in sft and "Duplicates</th>" in sft


# --------------------------------------------------------------------------- the card


def test_a_version_moved_into_a_new_dataset_gets_a_card_naming_it(
    client_for, api_client_for, viewer, project, author, rollout_version
):
    """As migration 0008 moves the scored-rollout versions of a mixed dataset: the version
    changes dataset, its exports (and their stored paths) stay."""
    old = rollout_version.dataset
    dataset_update(dataset=old, name="Mixed", description="")
    card = rollout_version.exports.get(format=ExportFormat.CARD)
    old_path = export_absolute_path(card)
    moved_into = dataset_create(
        project=project, name="Mixed (scored rollouts)", user=author, kind=old.kind
    )
    DatasetVersion.objects.filter(pk=rollout_version.pk).update(dataset=moved_into)
    old_card = old_path.read_text()
    assert old_card.startswith("# Rollouts — version 1")  # the stale cached file

    html = client_for(viewer).get(f"/datasets/{moved_into.pk}/versions/1/").content.decode()
    shown = html[html.index('data-testid="card"') :].split("</pre>")[0]
    assert "# Mixed \\(scored rollouts\\) — version 1 (scored rollouts)" in shown
    assert "# Rollouts" not in shown
    assert f"/api/v1/datasets/{moved_into.pk}/versions/1/export/" in shown

    card.refresh_from_db()
    path = export_absolute_path(card)
    assert path != old_path and f"/{moved_into.pk}/v1/card.md" in str(path)
    data = path.read_bytes()
    assert card.sha256 == hashlib.sha256(data).hexdigest() and card.size == len(data)
    assert old_path.read_text() == old_card  # the old folder's file is left alone

    response = api_client_for(viewer).get(card_api(DatasetVersion.objects.get(pk=card.version_id)))
    assert response.status_code == 200
    assert _text(response).encode() == data
    assert response["ETag"] == f'"{card.sha256}"'
    # read again: fresh, not written again
    stamp = path.stat().st_mtime_ns
    client_for(viewer).get(f"/datasets/{moved_into.pk}/versions/1/")
    assert path.stat().st_mtime_ns == stamp


def test_a_card_file_another_version_overwrote_is_written_again(
    api_client_for, viewer, prompt_version
):
    """The old dataset's next version can take a moved version's number, and so its folder:
    its card.md lands on the moved version's stored path. Reading notices and rewrites."""
    card = prompt_version.exports.get(format=ExportFormat.CARD)
    path = export_absolute_path(card)
    assert path.name == "card.md"
    good = path.read_bytes()
    path.write_text("# Someone else — version 1\n")
    response = api_client_for(viewer).get(card_api(prompt_version))
    assert _text(response).encode() == good == path.read_bytes()
    assert response["ETag"] == f'"{hashlib.sha256(good).hexdigest()}"'
    path.unlink()  # a wiped cache as well
    again = api_client_for(viewer).get(card_api(prompt_version))
    assert again.status_code == 200 and _text(again).encode() == good


def test_a_renamed_dataset_renames_its_cards(client_for, api_client_for, viewer, built_version):
    dataset_update(dataset=built_version.dataset, name="Renamed <b>set</b>", description="")
    text = _text(api_client_for(viewer).get(card_api(built_version)))
    assert text.startswith("# Renamed \\<b\\>set\\</b\\> — version 1")
    assert "Coworker SFT" not in text
    html = client_for(viewer).get(page_of(built_version)).content.decode()
    assert "# Renamed \\&lt;b\\&gt;set\\&lt;/b\\&gt; — version 1" in html
