"""Images in training rows: how each format carries a view tool's images.

A normalized transcript keeps a tool (or user) message's images as ``image_url`` parts with
``attachment:sha256:<hex>`` URLs. ``Media`` turns those into what a format needs, reading
the bytes through a resolver (``sha256 -> bytes | None``; the web app's attachment storage):

- ``openai``: the images move into a ``user`` message right after that step's tool results
  (OpenAI takes images in user messages only), as ``image_url`` parts with ``data:`` URLs;
- ``trl``: the same user message holds ``{"type": "image"}`` placeholders, the row's
  ``images`` column lists the files (``images/<sha256>.<ext>`` beside the data file) in
  placeholder order, and every message's ``content`` is a list of parts (what TRL's
  ``prepare_multimodal_messages`` expects, and one Arrow type for the column);
- ``sharegpt``: the observation's value ends with one ``<image>`` token per image and the
  row's ``images`` lists the files in token order (LLaMA-Factory's multimodal ShareGPT).

An image whose bytes are gone becomes a text note (``[image unavailable]``), never a
broken reference. ``Media.files`` collects the files the rows named, for the bundle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coworkenv_engine.attachments import (
    EXTENSIONS,
    data_url,
    image_urls,
    lift_tool_images,
    message_text,
    sniff_media_type,
    url_sha256,
)

IMAGE_TOKEN = "<image>"
IMAGE_DIR = "images"
UNAVAILABLE = "[image unavailable]"


class Media:
    def __init__(self, resolve: Callable[[str], bytes | None]):
        self.resolve = resolve
        self.files: dict[str, bytes] = {}  # relative path -> bytes, for the bundle
        self._cache: dict[str, tuple[str, bytes] | None] = {}

    def _load(self, url: str) -> tuple[str, bytes] | None:
        sha = url_sha256(url)
        if sha is None:
            return None
        if sha not in self._cache:
            data = self.resolve(sha)
            media_type = sniff_media_type(data) if data is not None else None
            self._cache[sha] = (media_type, data) if media_type else None
        return self._cache[sha]

    def data_url(self, url: str) -> str | None:
        loaded = self._load(url)
        return None if loaded is None else data_url(*loaded)

    def path(self, url: str) -> str | None:
        loaded = self._load(url)
        if loaded is None:
            return None
        media_type, data = loaded
        name = f"{IMAGE_DIR}/{url_sha256(url)}.{EXTENSIONS.get(media_type, 'bin')}"
        self.files[name] = data
        return name


def has_images(messages: list[dict[str, Any]]) -> bool:
    return any(image_urls(m.get("content")) for m in messages)


def text_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with images dropped (an export written without a resolver)."""
    return [
        {**m, "content": message_text(m["content"])} if image_urls(m.get("content")) else m
        for m in messages
    ]


def openai_images(messages: list[dict[str, Any]], media: Media) -> list[dict[str, Any]]:
    def parts(url: str, call_id: str) -> list[dict[str, Any]]:
        found = media.data_url(url)
        if found is None:
            return [{"type": "text", "text": f"{UNAVAILABLE} ({call_id})"}]
        return [
            {"type": "text", "text": f"Image returned by {call_id}:"},
            {"type": "image_url", "image_url": {"url": found}},
        ]

    return lift_tool_images(messages, parts)


def trl_images(
    messages: list[dict[str, Any]], media: Media
) -> tuple[list[dict[str, Any]], list[str]]:
    paths: list[str] = []

    def parts(url: str, call_id: str) -> list[dict[str, Any]]:
        found = media.path(url)
        if found is None:
            return [{"type": "text", "text": f"{UNAVAILABLE} ({call_id})"}]
        paths.append(found)
        return [{"type": "text", "text": f"Image returned by {call_id}:"}, {"type": "image"}]

    return lift_tool_images(messages, parts), paths


def structured(content: Any) -> list[dict[str, Any]]:
    """Content as a list of parts (TRL's multimodal form): text becomes one text part."""
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def sharegpt_images(content: Any, media: Media, images: list[str]) -> str:
    """A message's text with one ``<image>`` token per image it shows (paths appended to
    ``images`` in token order)."""
    text = message_text(content).replace(IMAGE_TOKEN, "<image >")  # only ours count
    for url in image_urls(content):
        found = media.path(url)
        if found is None:
            text += f"\n{UNAVAILABLE}"
        else:
            images.append(found)
            text += f"\n{IMAGE_TOKEN}"
    return text
