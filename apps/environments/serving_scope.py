"""What the ``/envs/`` mount hands a project's server: the ASGI scope without the token.

OpenEnv's client cannot send headers, so a token may come as a path prefix
(``/envs/<slug>/t/<token>/…``). ``without_path_token`` moves it into an ``Authorization:
Bearer`` header of the scope the project's server gets, and rewrites the original scope's
path to ``/envs/<slug>/t/REDACTED/…`` in place: the ASGI server's access log (uvicorn logs
the scope it passed on) never holds a token, nor does anything downstream that logs paths.
"""

from __future__ import annotations

from typing import Any

REDACTED = "REDACTED"


def without_path_token(scope: dict[str, Any], base: str) -> dict[str, Any]:
    """The scope for the server mounted at ``base`` (``/envs/<slug>``): a ``/t/<token>``
    prefix after ``base`` becomes a bearer header; ``scope`` itself is redacted."""
    path = scope.get("path", "")
    rest = path[len(base) :]
    if not rest.startswith("/t/"):
        return dict(scope)
    token, slash, tail = rest[len("/t/") :].partition("/")
    redacted = f"{base}/t/{REDACTED}{slash}{tail}"
    scope["path"] = redacted
    scope["raw_path"] = redacted.encode()
    headers = [(k, v) for k, v in scope.get("headers", ()) if k != b"authorization"]
    headers.append((b"authorization", b"Bearer " + token.encode("latin-1", "replace")))
    inner = f"{base}{slash}{tail}"
    return {**scope, "path": inner, "raw_path": inner.encode(), "headers": headers}
