"""What the environment page tests share: a tab's URL, a response's HTML, an environment's
revision/status/hash, and a grader's form data."""

import json

from django.urls import reverse

from apps.environments.models import Environment, Grader


def tab(environment, name):
    return reverse("environments:tab", args=[environment.pk, name])


def html(response) -> str:
    return response.content.decode()


def snapshot(environment) -> tuple:
    environment = Environment.objects.get(pk=environment.pk)
    return environment.revision, environment.status, environment.spec_hash


def first_grader(environment) -> Grader:
    return Grader.objects.filter(task__environment=environment).order_by(
        "task__position", "position"
    )[0]


def grader_post(grader, **changes) -> dict:
    data = {
        "key": grader.key,
        "description": grader.description,
        "category": grader.category,
        "weight": grader.weight,
        "at_turn": "" if grader.at_turn is None else grader.at_turn,
        "capability": grader.capability,
        "check_spec": json.dumps(grader.check_spec),
    }
    data.update(changes)
    return data
