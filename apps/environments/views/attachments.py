"""An environment's attachment files: served to members for thumbnails and links.

What a user may read is decided by the environment: the hash must be listed in its
``attachments`` and the user a member of its project; knowing a hash is not enough. Images
are shown inline; PDFs are downloaded (never rendered in the app's origin). Every answer
has ``nosniff`` and a ``default-src 'none'`` policy, so a file cannot run as a page.
"""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET

from apps.environments.access import environment_get_for_user
from apps.environments.attachments import attachment_bytes
from coworkenv_engine.attachments import IMAGE_TYPES, Attachment, sniff_media_type


def environment_attachment(environment, sha256: str) -> Attachment:
    for entry in environment.attachments:
        if entry.get("sha256") == sha256:
            return Attachment.of(entry)
    raise Http404("No such attachment.")


@login_required
@require_GET
def attachment_view(request, pk, sha256):
    environment = environment_get_for_user(request.user, pk)
    attachment = environment_attachment(environment, sha256)
    etag = f'"{attachment.sha256}"'
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponse(status=304)
    else:
        data = attachment_bytes(attachment.sha256)
        if data is None:
            raise Http404("The attachment's file is missing from storage.")
        # The type the bytes show, never the document's claim (a spec may say anything).
        media_type = sniff_media_type(data) or "application/octet-stream"
        response = HttpResponse(data, content_type=media_type)
        inline = media_type in IMAGE_TYPES
        response["Content-Disposition"] = content_disposition_header(not inline, attachment.name)
    response["ETag"] = etag
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=86400"
    return response
