"""API plumbing shared by every app: one JSON parser, one error shape and one pagination."""

import codecs
import functools
import json

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, parsers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from apps.core.exceptions import ApplicationError
from apps.core.safeinput import UnsafeInput, json_loads


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is larger than the server accepts."
    default_code = "body_too_large"


class UnsafeBody(exceptions.ParseError):
    """The body is JSON, but holds text the database cannot store or nests too deeply."""

    def __init__(self, error: UnsafeInput):
        super().__init__(error.message)
        self.pointer = error.pointer


class JSONParser(parsers.JSONParser):
    """The one parser of API bodies (set globally in settings): JSON only, at most
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, no NaN/Infinity, no text PostgreSQL cannot store,
    no nesting deeper than ``apps.core.safeinput.MAX_JSON_DEPTH`` — each a 4xx in the error
    shape, never a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(raw) > limit:
            raise BodyTooLarge()
        try:
            text = codecs.decode(raw, encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise exceptions.ParseError(f"The body is not {encoding} text: {exc}.") from None
        try:
            return json_loads(text)
        except UnsafeInput as exc:
            raise UnsafeBody(exc) from None
        except json.JSONDecodeError as exc:
            raise exceptions.ParseError(
                f"The body is not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}."
            ) from None
        except ValueError as exc:
            raise exceptions.ParseError(f"The body is not valid JSON: {exc}.") from None


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
    if isinstance(exc, UnsafeBody):
        return Response(
            {"message": str(exc.detail), "details": {"pointer": exc.pointer}},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, RequestDataTooBig):
        exc = BodyTooLarge()
    elif isinstance(exc, DjangoValidationError):
        # A model's full_clean() refusing a value a serializer let through: still the
        # caller's fault, so a 400 naming the fields, never a 500.
        exc = exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    # Imported here: rest_framework.views reads DEFAULT_PARSER_CLASSES (this module's
    # JSONParser) when it is first imported, so importing it at the top is a circle whenever
    # this module is the first to load DRF's views (a Celery worker's start-up checks).
    from rest_framework.views import exception_handler as drf_exception_handler

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


# --- the OpenAPI schema (drf-spectacular hooks, set in settings) -----------------------------

ERROR_COMPONENT = {
    "type": "object",
    "description": "Every API error: a message a person can act on, and structured details "
    "(bad fields and their errors, the JSON pointer of bad input, a spec's problems).",
    "properties": {
        "message": {"type": "string"},
        "details": {"description": "Structured details; ``{}`` when there are none."},
    },
    "required": ["message", "details"],
}
_ERRORS = {
    "400": "Bad input, or a rule of the domain refused it.",
    "401": "Not authenticated: log in, or send ``Authorization: Bearer <token>``.",
    "403": "Your role in the project is too low.",
    "404": "No such object in your projects.",
    "429": "Too many requests: wait as ``Retry-After`` says.",
}
_BODY_ERRORS = {
    "413": "The request body is larger than the server accepts.",
    "415": "The body is not ``application/json``.",
}


def legacy_paths_hook(endpoints, **kwargs):
    """Every documented path ends with a slash; the slash-less spellings of a few actions
    (``environments/import``, ``…/export``…) still answer but are left out of the schema."""
    return [endpoint for endpoint in endpoints if endpoint[0].endswith("/")]


def error_responses_hook(result, generator, request, public):
    """Every operation declares its 4xx answers, each in the one error shape."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorOutput", ERROR_COMPONENT)
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOutput"}}}
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method == "parameters":
                continue
            responses = operation.setdefault("responses", {})
            declared = dict(_ERRORS, **(_BODY_ERRORS if "requestBody" in operation else {}))
            for code, description in declared.items():
                responses.setdefault(code, {"description": description})
            for code, response in responses.items():
                if code.startswith("4") and not response.get("content"):
                    response["content"] = error
    return result
