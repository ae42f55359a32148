"""A size limit on what an ASGI application reads: HTTP request bodies and WebSocket
messages (pure ASGI, no framework).

``BodyLimit(app, max_bytes)``: an HTTP request whose ``Content-Length`` says more than
``max_bytes`` gets 413 ``{"detail": "…", "code": "BODY_TOO_LARGE", "max_bytes": n}`` before
``app`` sees it; one that sends more than it said (or streams without a length) gets the
same 413 as soon as it passes the limit, and ``app`` sees the client disconnect (what it
read so far is dropped; it answers nothing more). A WebSocket message over the limit closes
the connection with code 1009 (message too big); ``app`` sees the disconnect. Nothing is
buffered here: the limit costs a length check per received chunk.
"""

from __future__ import annotations

import json
from typing import Any

TOO_BIG_WS = 1009


def too_large(max_bytes: int) -> dict[str, Any]:
    return {
        "detail": f"the request body is larger than {max_bytes} bytes",
        "code": "BODY_TOO_LARGE",
        "max_bytes": max_bytes,
    }


async def send_too_large(send, max_bytes: int) -> None:
    body = json.dumps(too_large(max_bytes)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def declared_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyLimit:
    def __init__(self, app, max_bytes: int):
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, not {max_bytes!r}")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def http(self, scope, receive, send) -> None:
        length = declared_length(scope)
        if length is not None and length > self.max_bytes:
            await send_too_large(send, self.max_bytes)
            return
        state = {"read": 0, "started": False, "refused": False}

        async def limited_receive():
            if state["refused"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > self.max_bytes:
                    state["refused"] = True
                    if not state["started"]:
                        await send_too_large(send, self.max_bytes)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message):
            if state["refused"]:
                return  # the 413 was the answer
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self.app(scope, limited_receive, guarded_send)

    async def websocket(self, scope, receive, send) -> None:
        closed = {"by_us": False}
        limit = self.max_bytes

        async def limited_receive():
            if closed["by_us"]:
                return {"type": "websocket.disconnect", "code": TOO_BIG_WS}
            message = await receive()
            if message["type"] == "websocket.receive" and _size(message, limit) > limit:
                closed["by_us"] = True
                await send({"type": "websocket.close", "code": TOO_BIG_WS})
                return {"type": "websocket.disconnect", "code": TOO_BIG_WS}
            return message

        async def guarded_send(message):
            if not closed["by_us"]:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)


def _size(message, limit: int) -> int:
    data = message.get("bytes")
    if data is not None:
        return len(data)
    text = message.get("text") or ""
    if len(text) * 4 <= limit:  # no UTF-8 text of this length can be over the limit
        return 0
    return len(text.encode())
