"""The environment's detail page: its tabs, the live validation parts, a collection's records
as JSON and one record's page. The edit forms (``editing.py``) share ``tab_url`` and
``page_context`` from here."""

import json

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.accounts.access import check_project_role
from apps.accounts.models import Role
from apps.core.http import render_page
from apps.core.safeinput import is_id
from apps.environments.access import (
    environment_get_for_user,
    record_get_for_user,
)
from apps.environments.models import Environment, EnvironmentStatus, ValidationReport
from apps.environments.pointers import (
    RECORDS_PER_PAGE,
    TABS,
    collection_anchor,
    page_param,
    record_anchor,
)
from apps.environments.selectors import (
    collection_records,
    environment_active_validation_job,
    environment_collections,
    environment_failed_validation_job,
    environment_part_counts,
    environment_task_records,
    environment_tasks,
    environment_validation_reports,
)
from apps.environments.specs import environment_spec
from coworkenv_engine.problems import SpecError

DETAIL = "environments/detail.html"


TASK_RECORDS_SHOWN = 50


def tab_url(environment, tab: str, anchor: str = "") -> str:
    url = reverse("environments:tab", args=[environment.pk, tab])
    return f"{url}#{anchor}" if anchor else url


def page_context(request, environment: Environment, **extra) -> dict:
    membership = check_project_role(request.user, environment.project)
    can_author = membership.has_role(Role.AUTHOR)
    return {
        "project": environment.project,
        "membership": membership,
        "environment": environment,
        "can_author": can_author,
        "can_edit": can_author and environment.is_editable,
        "can_review": membership.has_role(Role.REVIEWER),
        "validation_state": _validation_state(environment),
        **extra,
    }


def _validation_state(environment: Environment) -> str:
    """ "never" (not validated), "outdated" (edited since), "running" (a validation is under
    way: no banner asks for one), or "" (the verdict is current)."""
    if environment.status != EnvironmentStatus.DRAFT:
        return ""
    report = environment.latest_validation
    if report is None:
        state = "never" if environment.revision == 1 else "outdated"
    else:
        state = "outdated" if report.revision != environment.revision else ""
    if state and environment_active_validation_job(environment=environment) is not None:
        return "running"
    return state


@login_required
@require_GET
def environment_detail(request, pk, tab: str = "overview"):
    if tab not in TABS:
        raise Http404("No such tab.")
    environment = environment_get_for_user(request.user, pk)
    context = page_context(request, environment, tab=tab, tabs=TABS)
    context.update(TAB_CONTEXT[tab](request, environment))
    context["tab_template"] = f"environments/detail_{tab}.html"
    return render_page(request, DETAIL, context, partial="tabs")


def _overview(request, environment: Environment) -> dict:
    report = environment.latest_validation
    return {
        "counts": environment_part_counts(environment=environment),
        "report": report,
        "job": environment_active_validation_job(environment=environment),
        "duplicated_from": (
            Environment.objects.filter(
                pk=environment.duplicated_from_id, project_id=environment.project_id
            ).first()
            if environment.duplicated_from_id
            else None
        ),
        "duplicates": list(
            environment.duplicates.filter(project_id=environment.project_id).only("pk", "name")[:20]
        ),
        "synthesis": (environment.metadata or {}).get("synthesis"),
    }


class _KnownCount:
    """A queryset whose length is already known (saves the paginator a COUNT query)."""

    def __init__(self, queryset, count: int):
        self.queryset, self._count = queryset, count

    def count(self) -> int:
        return self._count

    def __getitem__(self, item):
        return self.queryset[item]


def _table(records, *, offset: int, anchor) -> dict:
    columns: list[str] = ["id"]
    for record in records:
        columns.extend(k for k in record.data if k not in columns)
    rows = [
        {
            "record": record,
            "index": offset + i,
            "anchor": anchor(offset + i),
            "cells": [record.data.get(column) for column in columns],
        }
        for i, record in enumerate(records)
    ]
    return {"columns": columns, "rows": rows}


def _services(request, environment: Environment) -> dict:
    collections = []
    for info in environment_collections(environment=environment):
        service, collection = info["service"], info["collection"]
        param = page_param(service, collection)
        records = collection_records(
            environment=environment, service=service, collection=collection
        )
        page = Paginator(_KnownCount(records, info["count"]), RECORDS_PER_PAGE).get_page(
            request.GET.get(param)
        )
        offset = (page.number - 1) * RECORDS_PER_PAGE

        def anchor(i, s=service, c=collection):
            return record_anchor(s, c, i)

        collections.append(
            {
                **info,
                "anchor": collection_anchor(service, collection),
                "page": page,
                "page_param": param,
                **_table(list(page.object_list), offset=offset, anchor=anchor),
            }
        )

    task_groups: dict = {}
    for record in environment_task_records(environment=environment):
        task = record.task
        group = task_groups.setdefault(task.pk, {"task": task, "collections": {}})
        group["collections"].setdefault((record.service, record.collection), []).append(record)
    tasks = []
    positions = dict(environment.tasks.values_list("pk", "position"))
    ordered = sorted(positions, key=lambda pk: (positions[pk], pk))
    task_index = {pk: i for i, pk in enumerate(ordered)}
    for pk, group in task_groups.items():
        i = task_index[pk]
        tables = []
        for (service, collection), records in group["collections"].items():

            def anchor(n, s=service, c=collection, t=i):
                return record_anchor(s, c, n, t)

            tables.append(
                {
                    "service": service,
                    "collection": collection,
                    "count": len(records),
                    "anchor": collection_anchor(service, collection, i),
                    "hidden": max(0, len(records) - TASK_RECORDS_SHOWN),
                    **_table(records[:TASK_RECORDS_SHOWN], offset=0, anchor=anchor),
                }
            )
        tasks.append({"task": group["task"], "index": i, "tables": tables})
    tasks.sort(key=lambda t: t["index"])
    return {"collections": collections, "task_records": tasks}


def _tools(request, environment: Environment) -> dict:
    return {"tools": list(environment.tools.order_by("position", "id"))}


def _tasks(request, environment: Environment) -> dict:
    return {"tasks": list(environment_tasks(environment=environment))}


def _validation(request, environment: Environment) -> dict:
    reports = list(environment_validation_reports(environment=environment)[:50])
    chosen = request.GET.get("report")
    report = None
    if chosen and is_id(chosen):
        report = ValidationReport.objects.filter(environment=environment, pk=chosen).first()
    if report is None:
        report = environment.latest_validation
    return {
        "reports": reports,
        "report": report,
        "report_problems": report.problems if report else [],
        "job": environment_active_validation_job(environment=environment),
        "failed_job": environment_failed_validation_job(environment=environment),
    }


def _spec(request, environment: Environment) -> dict:
    try:
        document, problems = environment_spec(environment), []
    except SpecError as exc:
        document, problems = None, [p.to_dict() for p in exc.problems]
    return {
        "spec_text": json.dumps(document, indent=2, ensure_ascii=False) if document else "",
        "spec_problems": problems,
    }


TAB_CONTEXT = {
    "overview": _overview,
    "services": _services,
    "tools": _tools,
    "tasks": _tasks,
    "validation": _validation,
    # the runs app reads the runs (environments may not import it): the tab loads its fragment
    "runs": lambda request, environment: {},
    "spec": _spec,
}


@login_required
@require_GET
def validation_status(request, pk):
    """The live validation fragment of the overview: polls while a job runs, then the result."""
    environment = environment_get_for_user(request.user, pk)
    context = page_context(
        request,
        environment,
        job=environment_active_validation_job(environment=environment),
        report=environment.latest_validation,
    )
    return render_page(request, "environments/detail_overview.html", context, partial="live")


@login_required
@require_GET
def validation_report_live(request, pk):
    """The live report of the validation tab: polls while a validation job runs, then shows
    the new report with its problems (so Validate leads straight to them)."""
    environment = environment_get_for_user(request.user, pk)
    context = page_context(request, environment, **_validation(request, environment))
    return render_page(request, "environments/detail_validation.html", context, partial="report")


@login_required
@require_GET
def collection_json(request, pk, service, collection):
    """A whole collection as pretty JSON (the environment's, or one task's with ?task=)."""
    environment = environment_get_for_user(request.user, pk)
    if collection not in environment.collections.get(service, []):
        raise Http404("No such collection.")
    task = None
    if request.GET.get("task"):
        task = (
            environment.tasks.filter(pk=request.GET["task"]).first()
            if is_id(request.GET["task"])
            else None
        )
        if task is None:
            raise Http404("No such task.")
    records = collection_records(
        environment=environment, service=service, collection=collection, task=task
    )
    data = [record.data for record in records]
    context = page_context(
        request,
        environment,
        service=service,
        collection=collection,
        task=task,
        count=len(data),
        text=json.dumps(data, indent=2, ensure_ascii=False),
    )
    return render_page(request, "environments/collection_json.html", context)


@login_required
@require_GET
def record_detail(request, pk):
    record = record_get_for_user(request.user, pk)
    environment = record.environment
    return render_page(
        request,
        "environments/record_detail.html",
        page_context(request, environment, record=record, back=record_back(record)),
    )


def record_back(record) -> str:
    """The services tab, at the record's collection (its index may shift as records change)."""
    task_index = None
    if record.task_id:
        task_index = list(
            record.environment.tasks.order_by("position", "id").values_list("pk", flat=True)
        ).index(record.task_id)
    return tab_url(
        record.environment,
        "services",
        collection_anchor(record.service, record.collection, task_index),
    )
