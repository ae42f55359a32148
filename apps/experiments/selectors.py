"""Reads of experiments."""

from django.urls import reverse

from apps.experiments.models import Experiment, ExperimentStage


def experiment_list(*, project):
    return Experiment.objects.filter(project=project).select_related("created_by")


def experiment_stages(*, experiment: Experiment) -> list[ExperimentStage]:
    return list(ExperimentStage.objects.filter(experiment=experiment).order_by("position"))


# What a stage's outputs name, and the page of each (the URL takes the id).
OUTPUT_PAGES = {
    "synthesis": ("synthesis:detail", "synthesis job"),
    "batch": ("runs:batch_detail", "run batch"),
    "dataset": ("datasets:detail", "dataset"),
    "training_job": ("training:detail", "training job"),
    "endpoint": ("llm:endpoint_detail", "endpoint"),
}


def stage_links(stage: ExperimentStage) -> list[dict]:
    """Links to what a stage made, in the order of ``OUTPUT_PAGES``."""
    links = []
    for kind, (url_name, label) in OUTPUT_PAGES.items():
        value = stage.outputs.get(kind)
        for pk in value if isinstance(value, list) else [value] if value else []:
            links.append({"url": reverse(url_name, args=[pk]), "label": f"{label} #{pk}"})
    return links
