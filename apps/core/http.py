"""Small helpers shared by the server-rendered views."""

from django.contrib import messages
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django_htmx.http import HttpResponseClientRedirect


def is_partial_request(request) -> bool:
    """An htmx request that wants a fragment (boosted navigation wants the whole page)."""
    return bool(getattr(request, "htmx", False)) and not request.htmx.boosted


def render_page(request, template: str, context: dict, *, partial: str | None = None, status=200):
    """Render the whole page, or only ``partial`` of it for an htmx request."""
    if partial and is_partial_request(request):
        template = f"{template}#{partial}"
    return render(request, template, context, status=status)


def redirect_after_post(request, url: str, message: str | None = None):
    if message:
        messages.success(request, message)
    if is_partial_request(request):
        return HttpResponseClientRedirect(url)
    return HttpResponseRedirect(url)


def form_add_service_error(form, exc) -> None:
    """Show an ApplicationError on a form: ``extra["fields"]`` beside their fields (or on top
    for fields the form lacks), otherwise the message on top."""
    fields = exc.extra.get("fields") or {}
    for name, errors in fields.items():
        for error in errors:
            form.add_error(name if name in form.fields else None, error)
    if not fields:
        form.add_error(None, exc.message)


def refresh_when_ended(request, response, job, live_id: str):
    """Ask a page whose live part (``live_id``) polls a job that has just ended to reload,
    so what only the finished page shows (results, links on, no Cancel) appears without a
    manual reload. Only that part's own poll asks; other htmx requests are answered as is."""
    if is_partial_request(request) and request.htmx.trigger == live_id and not job.is_active:
        response["HX-Refresh"] = "true"
    return response
