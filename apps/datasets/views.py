from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import check_project_role, project_get_for_user
from apps.accounts.models import Role
from apps.core.exceptions import ApplicationError
from apps.core.http import (
    form_add_service_error,
    is_partial_request,
    redirect_after_post,
    render_page,
)
from apps.datasets.access import dataset_get_for_user, version_get_for_user
from apps.datasets.downloads import ExportUnavailable, export_for, export_response
from apps.datasets.formats import FORMATS
from apps.datasets.formats.rl_prompts import RL_PROMPT_FORMATS
from apps.datasets.forms import DatasetForm, PromptVersionForm, RolloutVersionForm, VersionForm
from apps.datasets.models import DatasetKind, ExportFormat, RowSplit
from apps.datasets.selectors import (
    dataset_list,
    version_exports,
    version_list,
    version_row_select,
    version_sample_query,
)
from apps.datasets.services import (
    card_current,
    dataset_create,
    dataset_delete,
    dataset_info,
    dataset_update,
    dataset_version_create,
    dataset_version_rebuild,
    dataset_version_verify_start,
    prompt_version_create,
    rollout_version_create,
)
from apps.datasets.services.datasets import dataset_kind_check

DATASETS_PER_PAGE = 25
VERSIONS_PER_PAGE = 25
ROWS_PER_PAGE = 50


@login_required
@require_GET
def dataset_list_view(request, slug):
    project = project_get_for_user(request.user, slug)
    page = Paginator(dataset_list(project=project), DATASETS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "page": page,
    }
    return render_page(request, "datasets/list.html", context, partial="rows")


@login_required
@require_http_methods(["GET", "POST"])
def dataset_create_view(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.AUTHOR)
    form = DatasetForm(request.POST or None, creating=True)
    if request.method == "POST" and form.is_valid():
        try:
            dataset = dataset_create(project=project, user=request.user, **form.cleaned_data)
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            return redirect_after_post(
                request,
                reverse("datasets:detail", args=[dataset.pk]),
                f"Created “{dataset.name}”. Build its first version from approved demonstrations.",
            )
    context = {
        "project": project,
        "membership": check_project_role(request.user, project),
        "form": form,
    }
    return render_page(request, "datasets/dataset_form.html", context, partial="form")


@login_required
@require_http_methods(["GET", "POST"])
def dataset_edit_view(request, pk):
    dataset = dataset_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    initial = {
        "name": dataset.name,
        "description": dataset.description,
        "tokenizer": dataset.tokenizer,
    }
    form = DatasetForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            dataset_update(dataset=dataset, **form.cleaned_data)
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            return redirect_after_post(
                request, reverse("datasets:detail", args=[dataset.pk]), "Saved the dataset."
            )
    context = {
        "project": dataset.project,
        "membership": check_project_role(request.user, dataset.project),
        "form": form,
        "dataset": dataset,
    }
    return render_page(request, "datasets/dataset_form.html", context, partial="form")


@login_required
@require_http_methods(["GET", "POST"])
def dataset_delete_view(request, pk):
    """GET asks for confirmation; POST deletes (admin only: consumers may pull its exports)."""
    dataset = dataset_get_for_user(request.user, pk, min_role=Role.ADMIN)
    if request.method == "POST":
        try:
            dataset_delete(dataset=dataset)
        except ApplicationError as exc:
            return redirect_after_post(
                request, reverse("datasets:detail", args=[dataset.pk]), exc.message
            )
        return redirect_after_post(
            request,
            reverse("datasets:list", args=[dataset.project.slug]),
            f"Deleted “{dataset.name}” with its versions and export files.",
        )
    context = {
        "project": dataset.project,
        "membership": check_project_role(request.user, dataset.project),
        "dataset": dataset,
        "version_count": dataset.versions.count(),
    }
    return render_page(request, "datasets/dataset_delete.html", context)


@login_required
@require_GET
def dataset_detail_view(request, pk):
    dataset = dataset_get_for_user(request.user, pk)
    page = Paginator(version_list(dataset=dataset), VERSIONS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    context = {
        "project": dataset.project,
        "membership": check_project_role(request.user, dataset.project),
        "dataset": dataset,
        "page": page,
    }
    return render_page(request, "datasets/dataset_detail.html", context, partial="versions")


@login_required
@require_http_methods(["GET", "POST"])
def version_create_view(request, pk):
    """The form of the dataset's kind: demonstrations (SFT), environment tasks (RL prompts)
    or student batches (scored rollouts)."""
    dataset = dataset_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    if dataset.kind == DatasetKind.ROLLOUTS:
        return _rollout_version_form(request, dataset)
    latest = dataset.versions.order_by("-number").first()
    prompts = dataset.kind == DatasetKind.RL_PROMPTS
    initial = {}
    if latest is not None:
        filters = latest.filters
        initial = {
            "capabilities": filters.get("capabilities") or [],
            "environments": filters.get("environments") or [],
        }
        if prompts:
            initial["seeds"] = ", ".join(str(s) for s in filters.get("seeds") or [0])
        else:
            initial.update(
                min_score=filters.get("min_score"),
                min_agreement=filters.get("min_agreement"),
                seed=latest.seed,
                validation_fraction=latest.validation_fraction,
                max_tokens=latest.max_tokens,
                long_trajectories=latest.long_trajectories,
            )
    form_class = PromptVersionForm if prompts else VersionForm
    create = prompt_version_create if prompts else dataset_version_create
    form = form_class(request.POST or None, project=dataset.project, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            version = create(dataset=dataset, user=request.user, **form.service_arguments())
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            return redirect_after_post(
                request,
                reverse("datasets:version_detail", args=[dataset.pk, version.number]),
                f"Building version {version.number}.",
            )
    context = {
        "project": dataset.project,
        "membership": check_project_role(request.user, dataset.project),
        "dataset": dataset,
        "form": form,
        "latest": latest,
    }
    return render_page(request, "datasets/version_form.html", context, partial="form")


@login_required
@require_http_methods(["GET", "POST"])
def rollout_version_create_view(request, pk):
    """A scored-rollout version (offline RL) from student batches' rollout groups; a
    dataset of another kind refuses it (back to its page, saying why)."""
    dataset = dataset_get_for_user(request.user, pk, min_role=Role.AUTHOR)
    try:
        dataset_kind_check(dataset, DatasetKind.ROLLOUTS)
    except ApplicationError as exc:
        return redirect_after_post(request, reverse("datasets:detail", args=[pk]), exc.message)
    return _rollout_version_form(request, dataset)


def _rollout_version_form(request, dataset):
    form = RolloutVersionForm(request.POST or None, project=dataset.project)
    if request.method == "POST" and form.is_valid():
        try:
            version = rollout_version_create(
                dataset=dataset, user=request.user, **form.service_arguments()
            )
        except ApplicationError as exc:
            form_add_service_error(form, exc)
        else:
            return redirect_after_post(
                request,
                reverse("datasets:version_detail", args=[dataset.pk, version.number]),
                f"Building version {version.number} (scored rollouts).",
            )
    context = {
        "project": dataset.project,
        "membership": check_project_role(request.user, dataset.project),
        "dataset": dataset,
        "form": form,
    }
    return render_page(request, "datasets/rollout_version_form.html", context, partial="form")


def _splits(version) -> list[tuple[str, str]]:
    """RL prompt and scored-rollout versions have one split (train); SFT versions train and
    validation."""
    if version.dataset.kind in (DatasetKind.RL_PROMPTS, DatasetKind.ROLLOUTS):
        return [(RowSplit.TRAIN.value, RowSplit.TRAIN.label)]
    return RowSplit.choices


def _export_table(version) -> list[dict]:
    exports = version_exports(version=version)
    table = []
    kind = version.dataset.kind
    if kind == DatasetKind.RL_PROMPTS:
        formats = RL_PROMPT_FORMATS
    else:  # SFT formats, or the scored-rollout one (``"kind": "rollouts"``)
        formats = {f: s for f, s in FORMATS.items() if s.get("kind", DatasetKind.SFT) == kind}
    for fmt, spec in formats.items():
        cells = []
        for split, _label in _splits(version):
            export = exports.get(fmt, {}).get(split)
            cells.append({"split": split, "export": export})
        table.append({"format": fmt, "label": spec["label"], "cells": cells})
    return table


@login_required
@require_GET
def version_detail_view(request, pk, number):
    version = version_get_for_user(request.user, pk, number)
    split = request.GET.get("split", "")
    split = split if split in RowSplit.values else ""
    select = version_row_select(version.dataset.kind)
    rows = Paginator(select(version=version, split=split or None), ROWS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    # The card as current data renders it (its file written again when stale: a renamed
    # dataset, or a version that migration 0008 moved into a new dataset).
    # An htmx request for the rows fragment does without it.
    card, card_text = (None, "") if is_partial_request(request) else card_current(version=version)
    context = {
        "project": version.dataset.project,
        "membership": check_project_role(request.user, version.dataset.project),
        "dataset": version.dataset,
        "version": version,
        "job": version.job,
        "page": rows,
        "split": split,
        "splits": _splits(version),
        "exports": _export_table(version),
        "card": card,
        "card_text": card_text,
        "dataset_info": dataset_info(version),
        "api_export": request.build_absolute_uri(
            reverse("api:dataset_version_export", args=[version.dataset_id, version.number])
        ),
        "api_sample": version_sample_query(version=version),
        "rebuilds": version.rebuilds.order_by("number"),
    }
    return render_page(request, "datasets/version_detail.html", context, partial="rows")


@login_required
@require_GET
def version_progress_view(request, pk, number):
    """The live build status: polls while the job runs; once it ends, the page reloads so
    its figures and exports appear."""
    version = version_get_for_user(request.user, pk, number)
    context = {
        "version": version,
        "dataset": version.dataset,
        "job": version.job,
        "membership": check_project_role(request.user, version.dataset.project),
    }
    response = render(request, "datasets/version_detail.html#progress", context)
    if is_partial_request(request) and not version.job.is_active:
        response["HX-Refresh"] = "true"
    return response


@login_required
@require_POST
def version_verify_view(request, pk, number):
    version = version_get_for_user(request.user, pk, number, min_role=Role.AUTHOR)
    url = reverse("datasets:version_detail", args=[pk, version.number])
    try:
        dataset_version_verify_start(version=version, user=request.user)
    except ApplicationError as exc:
        return redirect_after_post(request, url, exc.message)
    return redirect_after_post(request, url, "Verifying: the checksum is being recomputed.")


@login_required
@require_POST
def version_rebuild_view(request, pk, number):
    source = version_get_for_user(request.user, pk, number, min_role=Role.AUTHOR)
    try:
        version = dataset_version_rebuild(version=source, user=request.user)
    except ApplicationError as exc:
        return redirect_after_post(
            request, reverse("datasets:version_detail", args=[pk, source.number]), exc.message
        )
    return redirect_after_post(
        request,
        reverse("datasets:version_detail", args=[pk, version.number]),
        f"Rebuilding version {source.number} as version {version.number}.",
    )


@login_required
@require_GET
def version_download_view(request, pk, number, fmt, split=""):
    version = version_get_for_user(request.user, pk, number)
    known_split = fmt == ExportFormat.CARD or split in RowSplit.values
    if fmt not in ExportFormat.values or not known_split:
        raise Http404("No such export.")
    try:
        export = export_for(version, fmt, split)
    except ExportUnavailable as exc:
        raise Http404(exc.message) from None
    return export_response(request, version, export)
