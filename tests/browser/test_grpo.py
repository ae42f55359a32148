"""Browser flow of issue 14 item 6: an author launches a GRPO job from the form (method GRPO,
an environment, its eval tasks, reward and advantage), then overlays the reward and pass-rate
curves of two RL jobs on the comparison page, adding the second with a checkbox (htmx)."""

import re

import pytest
from playwright.sync_api import expect

from apps.training.models import TrainingJob
from apps.training.services import training_events_apply
from tests.datasets.conftest import sample_environments  # noqa: F401
from tests.training.conftest import training_settings  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _report(training_job, rewards):
    training_events_apply(
        training_job=training_job,
        events=[
            {"type": "metrics", "step": i + 1, "reward": r, "pass_rate": r / 2}
            for i, r in enumerate(rewards)
        ],
    )


def test_launch_grpo_and_compare_reward_curves(
    login,
    live_server,
    author,
    project,
    sample_environments,  # noqa: F811
    training_settings,  # noqa: F811
):
    acme = sample_environments[0]
    page = login(author)
    page.goto(f"{live_server.url}/p/{project.slug}/training/new/")
    page.locator("#id_method").select_option("grpo")
    page.get_by_label(f"{acme.name} (valid)").check()
    page.locator("#id_task_split").select_option("eval")
    page.locator("#id_preset").select_option("tiny-cpu")
    page.locator("#id_group_size").fill("2")
    page.locator("#id_reward").select_option("passed")
    page.locator("#id_advantage").select_option("dr_grpo")
    page.get_by_test_id("launch").click()
    expect(page).to_have_url(re.compile(r"/training/\d+/$"))
    first = TrainingJob.objects.get()
    assert (first.method, first.hyperparameters["reward"]) == ("grpo", "passed")
    expect(page.get_by_test_id("rl-panel")).to_contain_text("Binary pass")

    # A second configuration, then both jobs' curves side by side.
    page.goto(f"{live_server.url}/p/{project.slug}/training/new/?method=grpo")
    page.get_by_label(f"{acme.name} (valid)").check()
    page.locator("#id_preset").select_option("tiny-cpu")
    page.get_by_test_id("launch").click()
    expect(page).to_have_url(re.compile(r"/training/\d+/$"))
    second = TrainingJob.objects.latest("pk")
    _report(first, [0.0, 0.5, 1.0])
    _report(second, [0.2, 0.2])

    page.goto(f"{live_server.url}/p/{project.slug}/training/compare/rl/?jobs={first.pk}")
    legend = page.locator("#compare-rl .chart-legend")
    expect(legend).to_have_count(2)  # one job, two charts
    expect(legend.first).to_contain_text(f"#{first.pk} passed/dr_grpo G2 T1")
    page.get_by_label(re.compile(rf"#{second.pk} score/grpo G2 T1")).check()  # htmx swap
    expect(legend).to_have_count(4)
    expect(page.get_by_test_id("rl-compare-table")).to_contain_text(f"#{second.pk} score/grpo")
    # The address keeps the choice (newest job first, as the checkboxes are listed).
    expect(page).to_have_url(re.compile(rf"\?jobs={second.pk}&jobs={first.pk}$"))
