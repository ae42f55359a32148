"""Screens the text of every request before a view sees it (see ``apps.core.safeinput``).

Query strings and form posts (field names and values, names of uploaded files) that hold
text the database cannot store are refused with a 400 here, once, rather than in each list
filter and form: a ``?q=%00`` must never reach a ``WHERE`` clause. JSON bodies are screened
by the API's parser (``apps.core.api.JSONParser``) and spec files by the import service.
"""

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.shortcuts import render
from django.views import defaults as django_defaults

from apps.core.safeinput import query_fault

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_api_request(request) -> bool:
    return request.path.startswith("/api/")


def bad_request(request, message: str, details: dict, *, status: int = 400):
    """A refusal in the API's one error shape, or as a page for a person."""
    if is_api_request(request):
        return JsonResponse({"message": message, "details": details}, status=status)
    return render(request, "core/bad_request.html", {"message": message}, status=status)


class InputScreeningMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = self._screen(request)
        return refusal if refusal is not None else self.get_response(request)

    def _screen(self, request):
        found = query_fault(request.GET.items())
        if found:
            what, fault = found
            return bad_request(
                request, f"{what} in the address {fault}.", {"query": [f"{what} {fault}."]}
            )
        # API bodies are JSON, screened by the API's parser (which refuses forms with a 415).
        if (
            is_api_request(request)
            or request.method != "POST"
            or not request.content_type.startswith(_FORM_TYPES)
        ):
            return None
        try:
            pairs = list(request.POST.items())
            pairs.extend(("file name", upload.name or "") for upload in request.FILES.values())
        except RequestDataTooBig:
            return render(
                request,
                "core/bad_request.html",
                {"message": "The request body is larger than the server accepts."},
                status=413,
            )
        found = query_fault(pairs)
        if found:
            what, fault = found
            return bad_request(request, f"{what} {fault}.", {"form": [f"{what} {fault}."]})
        return None


# Django's own error pages (an unknown URL, a refused request, a crash) answer in the API's
# error shape under /api/, and as Django's pages elsewhere. Wired in coworkenv_web/urls.py.


def bad_request_view(request, exception=None):
    if is_api_request(request):
        message = "The request is not valid."
        if isinstance(exception, RequestDataTooBig):
            return bad_request(
                request, "The request body is larger than the server accepts.", {}, status=413
            )
        return bad_request(request, message, {})
    return django_defaults.bad_request(request, exception)


def not_found_view(request, exception=None):
    if is_api_request(request):
        return bad_request(request, "Not found.", {}, status=404)
    return django_defaults.page_not_found(request, exception)


def server_error_view(request):
    if is_api_request(request):
        return bad_request(request, "The server failed; the error is logged.", {}, status=500)
    return django_defaults.server_error(request)
