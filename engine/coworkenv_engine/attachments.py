"""Attachments: images and PDFs that records carry, kept outside the document.

The document lists each attachment once, under ``attachments``, by content hash with its
media type, size in bytes and file name::

    "attachments": [{"sha256": "<64 hex>", "media_type": "image/png", "size": 18211,
                     "name": "receipt-r1.png"}]

A record refers to one with a string field ``"sha256:<64 hex>"`` (any field, at any depth).
The bytes live elsewhere (the web app keeps them in Django storage under their hash); the
engine sees only this metadata and, where it needs the bytes (verifying them, sending an
image to a model), asks an injected ``Resolver``: ``sha256 hex -> bytes | None``.

A ``get`` binding with ``"attachment": "<field>"`` is a *view* tool: its result is the
record (as text) plus the attachment that field names, as an OpenAI ``image_url`` content
part whose URL is ``attachment:sha256:<hex>`` (resolved into a ``data:`` URL only when the
conversation is sent to a model or exported). A PDF is not an image: viewing one is a
``not_an_image`` tool error.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

REF_PREFIX = "sha256:"
URL_PREFIX = "attachment:"
REF = re.compile(r"^sha256:([0-9a-f]{64})$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")

#: media type -> the largest attachment of that type, in bytes
SIZE_LIMITS: dict[str, int] = {
    "image/png": 5_000_000,
    "image/jpeg": 5_000_000,
    "image/webp": 5_000_000,
    "image/gif": 5_000_000,
    "application/pdf": 20_000_000,
}
IMAGE_TYPES = frozenset(t for t in SIZE_LIMITS if t.startswith("image/"))
MAX_TOTAL_BYTES = 200_000_000  # all of an environment's attachments together
EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/webp": "webp",
    "image/gif": "gif",
    "application/pdf": "pdf",
}

Resolver = Callable[[str], "bytes | None"]


@dataclass(frozen=True)
class Attachment:
    sha256: str
    media_type: str
    size: int
    name: str

    @property
    def ref(self) -> str:
        return REF_PREFIX + self.sha256

    @property
    def url(self) -> str:
        """What an ``image_url`` part of a transcript carries until it is sent."""
        return attachment_url(self.sha256)

    @property
    def is_image(self) -> bool:
        return self.media_type in IMAGE_TYPES

    def to_dict(self) -> dict[str, Any]:
        return {
            "sha256": self.sha256,
            "media_type": self.media_type,
            "size": self.size,
            "name": self.name,
        }

    @classmethod
    def of(cls, data: dict[str, Any]) -> Attachment:
        return cls(data["sha256"], data["media_type"], int(data["size"]), data["name"])


def attachment_url(sha256: str) -> str:
    return URL_PREFIX + REF_PREFIX + sha256


def url_sha256(url: Any) -> str | None:
    """The hash an ``attachment:sha256:<hex>`` URL names (None for any other URL)."""
    if isinstance(url, str) and url.startswith(URL_PREFIX):
        match = REF.match(url[len(URL_PREFIX) :])
        return match.group(1) if match else None
    return None


def image_part_attachments(content: list, by_sha: dict[str, Attachment]) -> list:
    """The attachment each ``image_url`` part of ``content`` names, in order (``None`` for a
    part that names none of ``by_sha``)."""
    return [
        by_sha.get(url_sha256(part["image_url"]["url"]) or "")
        for part in content
        if part.get("type") == "image_url"
    ]


def show_image_parts(content: list, attachments: list, urls: list) -> list:
    """``content`` as observations show it: the i-th ``image_url`` part (of
    ``image_part_attachments``) points at ``urls[i]``, or becomes a text part saying its
    image is not available when that is ``None``."""
    images = iter(zip(attachments, urls, strict=True))
    shown = []
    for part in content:
        if part.get("type") != "image_url":
            shown.append(part)
            continue
        attachment, url = next(images)
        if url is None:
            name = attachment.name if attachment is not None else "an attachment"
            shown.append({"type": "text", "text": f"[image {name} is not available]"})
        else:
            shown.append({"type": "image_url", "image_url": {"url": url}})
    return shown


def ref_sha256(value: Any) -> str | None:
    """The hash a record value ``sha256:<hex>`` refers to (None for anything else)."""
    if isinstance(value, str) and value.startswith(REF_PREFIX):
        match = REF.match(value)
        return match.group(1) if match else None
    return None


def references(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """``(path, sha256)`` of every attachment reference inside ``value`` (records)."""
    stack = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, str):
            sha = ref_sha256(v)
            if sha is not None:
                yield p, sha
        elif isinstance(v, dict):
            stack.extend((x, (*p, k)) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((x, (*p, i)) for i, x in reversed(list(enumerate(v))))


def image_part(attachment: Attachment) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": attachment.url}}


def image_urls(content: Any) -> list[str]:
    """The ``image_url`` URLs of a message's content (a list of parts; none for text)."""
    if not isinstance(content, list):
        return []
    out = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str):
                out.append(url)
    return out


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)


def sniff_media_type(data: bytes) -> str | None:
    """The media type the bytes' signature shows (the supported types only)."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def content_problem(attachment: Attachment, data: bytes | None) -> str | None:
    """Why ``data`` is not the attachment the document describes (None when it is)."""
    if data is None:
        return f"no stored file has the hash {attachment.sha256[:12]}…"
    digest = hashlib.sha256(data).hexdigest()
    if digest != attachment.sha256:
        return f"the stored bytes hash to {digest[:12]}…, not {attachment.sha256[:12]}…"
    if len(data) != attachment.size:
        return f"the file has {len(data)} bytes, the document says {attachment.size}"
    sniffed = sniff_media_type(data)
    if sniffed != attachment.media_type:
        return f"the file is {sniffed or 'of an unknown type'}, the document says " + (
            attachment.media_type
        )
    return None


def describe(data: bytes, *, name: str, media_type: str | None = None) -> Attachment:
    """The metadata of ``data`` (its type sniffed unless given); raises ValueError when the
    type is not supported or the file is over its size limit."""
    sniffed = sniff_media_type(data)
    media_type = media_type or sniffed
    if media_type not in SIZE_LIMITS:
        raise ValueError(
            f"{name}: {media_type or 'unknown type'} is not a supported attachment type "
            f"(supported: {', '.join(SIZE_LIMITS)})"
        )
    if sniffed != media_type:
        raise ValueError(f"{name}: the file is {sniffed or 'of an unknown type'}, not {media_type}")
    if len(data) > SIZE_LIMITS[media_type]:
        raise ValueError(
            f"{name}: {len(data)} bytes is over the {SIZE_LIMITS[media_type]}-byte limit "
            f"for {media_type}"
        )
    return Attachment(hashlib.sha256(data).hexdigest(), media_type, len(data), name)


def directory_resolver(root: str) -> Resolver:
    """A ``Resolver`` over the files under ``root`` (any names, any depth), each found by the
    sha256 of its bytes: where a standalone server or trainer keeps an environment's images
    (the app's storage layout ``<2 hex>/<sha256>`` works as is). Hashed once, read on use."""
    import os

    paths: dict[str, str] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                paths[hashlib.sha256(handle.read()).hexdigest()] = path

    def resolve(sha256: str) -> bytes | None:
        path = paths.get(sha256)
        if path is None:
            return None
        with open(path, "rb") as handle:
            return handle.read()

    return resolve


def message_text(content: Any) -> str:
    """A message's text: the string itself, or the joined ``text`` parts of a part list
    (a view tool's result: its record as JSON, then the images)."""
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return "" if content is None else str(content)


def lift_tool_images(
    messages: list[dict[str, Any]],
    image_part_for: Callable[[str, str], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """The messages with every tool result's images moved into a ``user`` message placed
    right after the results of that assistant step (tool messages keep their text).

    Chat Completions and OpenAI fine-tuning take images in user messages only, and many VLM
    chat templates too. ``image_part_for(url, call_id)`` returns the parts that stand for
    one image (e.g. a caption and an ``image_url`` part with a ``data:`` URL, or TRL's
    ``{"type": "image"}``); a user message whose images are all dropped is left out.
    """
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            out.append({"role": "user", "content": list(pending)})
            pending.clear()

    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool":
            urls = image_urls(content)
            if urls:
                out.append({**message, "content": message_text(content)})
                call_id = str(message.get("tool_call_id") or "a tool call")
                for url in urls:
                    pending.extend(image_part_for(url, call_id))
                continue
            out.append(message)
            continue
        flush()
        out.append(message)
    flush()
    return out
