"""Attachment files in Django storage (``STORAGES["attachments"]``), addressed by sha256.

A file lives at ``<sha[:2]>/<sha>`` in that storage: local files under ``ATTACHMENTS_ROOT``
by default, an S3-compatible bucket with ``ATTACHMENTS_STORAGE=s3`` (django-storages).
The same bytes are stored once whatever the number of environments, projects or revisions
that list them; what a user may read is decided by the environment that lists the hash
(``environment_attachment``), never by knowing a hash.
"""

from __future__ import annotations

from functools import lru_cache

from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.urls import reverse

from coworkenv_engine.attachments import SHA256, Attachment, data_url


def attachment_storage():
    return storages["attachments"]


def attachment_name(sha256: str) -> str:
    if not SHA256.match(sha256 or ""):
        raise ValueError(f"not a sha256: {sha256!r}")
    return f"{sha256[:2]}/{sha256}"


def attachment_url_for(environment):
    """The URL maker (sha256 -> URL of the members-only file view) of an environment's
    attachments, for timelines; None without an environment."""
    if environment is None:
        return None
    return lambda sha: reverse("environments:attachment", args=[environment.pk, sha])


def attachment_bytes(sha256: str) -> bytes | None:
    """The stored bytes of an attachment, or None when nothing is stored under that hash
    (the engine's ``Resolver``)."""
    if not SHA256.match(sha256 or ""):
        return None
    storage = attachment_storage()
    name = attachment_name(sha256)
    try:
        with storage.open(name, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, OSError):
        return None


def attachment_save(sha256: str, data: bytes) -> None:
    """Store ``data`` under its hash unless it is there already (content-addressed: the same
    name always holds the same bytes)."""
    storage = attachment_storage()
    name = attachment_name(sha256)
    if not storage.exists(name):
        storage.save(name, ContentFile(data))


@lru_cache(maxsize=16)
def _cached_data_url(sha256: str, media_type: str) -> str | None:
    data = attachment_bytes(sha256)
    return None if data is None else data_url(media_type, data)


def attachment_data_url(attachment: Attachment) -> str | None:
    """The ``data:`` URL of an image attachment (what a model is sent), cached per process
    (an episode sends the same image with every later request)."""
    return _cached_data_url(attachment.sha256, attachment.media_type)
