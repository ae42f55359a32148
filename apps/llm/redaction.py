"""Bounded, redacted excerpts of what an endpoint answered, for the call log.

An error body is whatever the server at the base URL chose to send; it is kept for whoever
debugs the endpoint, but cut short and stripped of anything that looks like a credential
(API keys, bearer tokens, ``"password": "…"`` pairs, long random strings).
"""

import json
import re

ERROR_BODY_LIMIT = 1000
TRUNCATION_MARK = "… (truncated)"
REDACTED = "[redacted]"

_PATTERNS = [
    # "api_key": "…", token=…, Authorization: … — keep the name, drop the value.
    re.compile(
        r"""(?ix)
        (?P<name>[\w-]*(?:api[_-]?key|token|secret|password|passwd|authorization|
            credential|session|cookie|access[_-]?key)[\w-]*)
        (?P<sep>\\?["']?\s*[:=]\s*\\?["']?)
        (?P<value>(?:bearer\s+|basic\s+)?[^\s"'\\,;}&]+)
        """
    ),
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),  # JWT
    re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}"),  # long random-looking runs
]


def redact(text: str) -> str:
    """``text`` with credential-looking values replaced by ``[redacted]``."""
    for pattern in _PATTERNS:
        if "value" in pattern.groupindex:
            text = pattern.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a marker saying it was cut."""
    return text if len(text) <= limit else text[:limit] + TRUNCATION_MARK


def body_excerpt(body, limit: int = ERROR_BODY_LIMIT) -> str:
    """A redacted text excerpt of an error body (JSON is written compactly first)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
    # Cut before redacting too, so a huge body costs no regex time; then cut to the limit.
    head = text[: limit * 2]
    excerpt = redact(head)
    if len(excerpt) > limit or len(head) < len(text):
        return excerpt[:limit] + TRUNCATION_MARK
    return excerpt
