"""Filters that show spec data readably on the environment pages.

Everything here returns plain strings or data for the template to escape, except
``binding_value``, which escapes its input itself (``format_html``) before marking
``$param`` placeholders.
"""

import json

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from apps.environments.pointers import pointer_page, pointer_target
from coworkenv_engine.judging import context_words, declared_context

register = template.Library()

CELL_CHARS = 80


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def compact_json(value) -> str:
    """A table cell: strings as they are, anything else as compact JSON, cut at 80 chars."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


@register.filter
def is_placeholder(value) -> bool:
    """A binding value that takes an argument (``$param``) or the clock (``$now``)."""
    return isinstance(value, str) and value.startswith("$") and not value.startswith("$$")


@register.filter
def binding_value(value):
    """A binding value as HTML: ``$param`` placeholders marked, everything else escaped."""
    if is_placeholder(value):
        return format_html('<mark class="param">{}</mark>', value)
    if isinstance(value, dict):
        return format_html(
            "{{{}}}",
            format_html_join(", ", "{}: {}", ((k, binding_value(v)) for k, v in value.items())),
        )
    if isinstance(value, list):
        return format_html(
            "[{}]", format_html_join(", ", "{}", ((binding_value(v),) for v in value))
        )
    if isinstance(value, str):
        return format_html("{}", json.dumps(value[1:] if value.startswith("$$") else value))
    return format_html("{}", json.dumps(value))


@register.filter
def parameter_rows(parameters) -> list[dict]:
    """A tool's JSON Schema parameters as rows: name, type, required, description, enum."""
    if not isinstance(parameters, dict):
        return []
    required = set(parameters.get("required") or [])
    rows = []
    for name, schema in (parameters.get("properties") or {}).items():
        schema = schema if isinstance(schema, dict) else {}
        kind = schema.get("type", "any")
        if isinstance(kind, list):
            kind = " | ".join(map(str, kind))
        if kind == "array" and isinstance(schema.get("items"), dict):
            kind = f"array of {schema['items'].get('type', 'any')}"
        rows.append(
            {
                "name": name,
                "type": kind,
                "required": name in required,
                "description": schema.get("description", ""),
                "enum": schema.get("enum"),
                "default": json.dumps(schema["default"]) if "default" in schema else "",
                "format": schema.get("format", ""),
            }
        )
    return rows


def _literal(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def check_lines(check, depth: int = 0) -> list[dict]:
    """A check as indented lines of plain text, e.g. ``state: length(email.sent) >= 1``."""
    if not isinstance(check, dict):
        return [{"depth": depth, "text": _literal(check)}]
    for combinator in ("all", "any"):
        if combinator in check and isinstance(check[combinator], list):
            head = {"depth": depth, "text": f"{combinator} of:"}
            return [head] + [line for c in check[combinator] for line in check_lines(c, depth + 1)]
    if "not" in check:
        return [{"depth": depth, "text": "not:"}, *check_lines(check["not"], depth + 1)]
    return [{"depth": depth, "text": _leaf_text(check)}]


def _leaf_text(check: dict) -> str:
    kind = check.get("kind")
    if kind == "state":
        return _state_text(check)
    if kind == "tool_call":
        return _tool_call_text(check)
    if kind == "response":
        return _response_text(check)
    if kind == "judge":
        text = f"judge ({check.get('scope', 'final')}, threshold {check.get('threshold', 0.5)}"
        return text + _judge_shown(check) + "): " + str(check.get("rubric", ""))
    return _literal(check)


def _judge_shown(check: dict) -> str:
    """What a judge with a declared context is shown (nothing said for the default)."""
    declared = declared_context(check.get("context"))
    if declared is None:
        return ""
    return "; shown " + ", ".join(context_words(declared))


def _state_text(check: dict) -> str:
    text = f"state: {check.get('query', '')} {check.get('op', '')}"
    if "value" in check:
        text += f" {_literal(check['value'])}"
    for bound in ("min", "max"):
        if bound in check:
            text += f" {bound} {check[bound]}"
    if check.get("ignore_case"):
        text += " (ignoring case)"
    return text


TOOL_CALL_LIMITS = (
    ("min", "at least"),
    ("max", "at most"),
    ("before", "before"),
    ("after", "after"),
    ("during_turn", "during turn"),
)


def _tool_call_text(check: dict) -> str:
    called = "called" if check.get("called", True) else "not called"
    text = f"tool_call: {check.get('tool', '?')} {called}"
    matchers = []
    for name, matcher in (check.get("arguments") or {}).items():
        if isinstance(matcher, dict) and "op" in matcher:
            matchers.append(f"{name} {matcher['op']} {_literal(matcher.get('value'))}")
        else:
            matchers.append(f"{name} == {_literal(matcher)}")
    if matchers:
        text += " with " + ", ".join(matchers)
    extras = [
        f"{word} {check[key]}" for key, word in TOOL_CALL_LIMITS if check.get(key) is not None
    ]
    if check.get("succeeded") is False:
        extras.append("counting failed attempts")
    if extras:
        text += " (" + ", ".join(extras) + ")"
    return text


def _response_text(check: dict) -> str:
    scope = check.get("scope", "final")
    if scope == "turn":
        scope = f"turn {check.get('turn')}"
    parts = [
        f"{key} {_literal(check[key])}"
        for key in ("contains", "matches", "mentions")
        if key in check
    ]
    mode = f" ({check['mode']})" if check.get("mode") else ""
    return f"response ({scope} message): {' and '.join(parts)}{mode}"


register.filter("check_lines", check_lines)


@register.simple_tag
def pointer_url(environment, pointer) -> str:
    """The detail-page address that shows what a JSON pointer names."""
    tab, anchor = pointer_target(pointer)
    url = reverse("environments:tab", args=[environment.pk, tab])
    page = pointer_page(pointer) if tab == "services" else None
    if page:
        url += f"?{page[0]}={page[1]}"
    return url + (f"#{anchor}" if anchor else "")


@register.filter
def percent(value) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "—"
    return f"{round(value * 100)}%"


@register.filter
def score(value) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "—"
    return f"{value:.2f}"


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None
