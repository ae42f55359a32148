"""API plumbing shared by every app: one error shape and one pagination."""

import functools

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from apps.core.exceptions import ApplicationError


class ApiDocsPermission(BasePermission):
    """The OpenAPI schema is public in the local mode; on a server (``DEBUG=false``) it needs
    a signed-in user or a token, unless the operator sets ``API_DOCS_PUBLIC=true``."""

    message = "Sign in (or send an API token) to read the API schema."

    def has_permission(self, request, view) -> bool:
        return settings.API_DOCS_PUBLIC or bool(request.user and request.user.is_authenticated)


def api_docs_view(view):
    """The HTML API docs under the same rule; a visitor who is not signed in is sent to the
    sign-in page (and back)."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if not settings.API_DOCS_PUBLIC and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapped


class StandardPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500


# Error replies quote what was sent (DRF's '"…" is not a valid choice.', a spec problem's
# value) but never all of it: a long string is cut with a marker, a long list shortened.
ERROR_TEXT_LIMIT = 500
ERROR_LIST_LIMIT = 100
TRUNCATED = "… (truncated)"


def bounded(value, depth: int = 0):
    """``value`` with every string cut to ``ERROR_TEXT_LIMIT`` characters (plus a marker),
    lists to ``ERROR_LIST_LIMIT`` items, and nesting to 32 levels. Keeps DRF's ErrorDetail
    codes."""
    if isinstance(value, str):
        if len(value) <= ERROR_TEXT_LIMIT:
            return value
        cut = value[:ERROR_TEXT_LIMIT] + TRUNCATED
        code = getattr(value, "code", None)
        return exceptions.ErrorDetail(cut, code) if code is not None else cut
    if depth >= 32:
        return TRUNCATED
    if isinstance(value, dict):
        items = list(value.items())
        out = {bounded(str(k)): bounded(v, depth + 1) for k, v in items[:ERROR_LIST_LIMIT]}
        if len(items) > ERROR_LIST_LIMIT:
            out[TRUNCATED] = f"{len(items) - ERROR_LIST_LIMIT} more"
        return out
    if isinstance(value, list | tuple):
        out = [bounded(item, depth + 1) for item in value[:ERROR_LIST_LIMIT]]
        if len(value) > ERROR_LIST_LIMIT:
            out.append(f"{TRUNCATED} {len(value) - ERROR_LIST_LIMIT} more")
        return out
    return value


def exception_handler(exc, context):
    """Every API error is ``{"message": str, "details": ...}``, bounded (see ``bounded``)."""
    response = _error_response(exc, context)
    if response is not None:
        response.data = bounded(response.data)
    return response


def _error_response(exc, context):
    if isinstance(exc, ApplicationError):
        return Response(
            {"message": exc.message, "details": exc.extra}, status=status.HTTP_400_BAD_REQUEST
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(exc, exceptions.ValidationError):
        response.data = {"message": "The request is not valid.", "details": data}
    elif isinstance(exc, exceptions.Throttled):
        wait = None if exc.wait is None else max(1, round(exc.wait))
        message = "Too many requests." + (f" Try again in {wait} s." if wait else "")
        response.data = {"message": message, "details": {"retry_after_s": wait}}
    elif isinstance(data, dict) and "detail" in data:
        response.data = {"message": str(data["detail"]), "details": {}}
    else:
        response.data = {"message": str(data), "details": {}}
    return response


def paginated_response(request, view, queryset, serializer_class) -> Response:
    """One page of ``queryset`` serialized with ``serializer_class``, in the standard shape."""
    paginator = StandardPagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)
