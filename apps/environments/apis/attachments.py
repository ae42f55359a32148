"""Attachments of an environment over the API: list them, upload one (base64 in JSON)."""

import base64
import binascii

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from apps.accounts.models import Role
from apps.core.api import StandardPagination, paginated_response
from apps.core.exceptions import ApplicationError
from apps.environments.access import environment_get_for_user
from apps.environments.apis.common import READ_ERRORS, WRITE_ERRORS, JsonApiView, validated
from apps.environments.services import attachment_add
from coworkenv_engine.attachments import SIZE_LIMITS

TAG = "environments"
MAX_BASE64_CHARS = (max(SIZE_LIMITS.values()) * 4) // 3 + 4


class AttachmentOutput(serializers.Serializer):
    sha256 = serializers.CharField()
    media_type = serializers.CharField()
    size = serializers.IntegerField()
    name = serializers.CharField()
    ref = serializers.CharField(help_text='What a record field holds to refer to it: "sha256:…".')


class AttachmentInput(serializers.Serializer):
    name = serializers.CharField(max_length=255)
    media_type = serializers.ChoiceField(
        choices=sorted(SIZE_LIMITS), required=False, help_text="Sniffed from the bytes if left out."
    )
    content_base64 = serializers.CharField(max_length=MAX_BASE64_CHARS, trim_whitespace=False)


def _payload(entry: dict) -> dict:
    return {**entry, "ref": f"sha256:{entry['sha256']}"}


class AttachmentListApi(JsonApiView):
    pagination_class = StandardPagination

    @extend_schema(
        tags=[TAG],
        summary="List an environment's attachments",
        responses={200: AttachmentOutput(many=True), **READ_ERRORS},
    )
    def get(self, request, pk):
        environment = environment_get_for_user(request.user, pk)
        entries = [_payload(entry) for entry in environment.attachments]
        return paginated_response(request, self, entries, AttachmentOutput)

    @extend_schema(
        tags=[TAG],
        summary="Attach an image or PDF",
        description="Author role or higher. The file (PNG, JPEG, WebP, GIF up to 5 MB; PDF up "
        "to 20 MB) is stored by its sha256 and listed under the spec's ``attachments`` (a new "
        'revision, back to draft). Records refer to it with the returned ``ref`` ("sha256:…").',
        request=AttachmentInput,
        responses={201: AttachmentOutput, **WRITE_ERRORS},
    )
    def post(self, request, pk):
        environment = environment_get_for_user(request.user, pk, min_role=Role.AUTHOR)
        data = validated(AttachmentInput, request.data)
        try:
            content = base64.b64decode(data["content_base64"], validate=True)
        except (binascii.Error, ValueError):
            raise ApplicationError(
                "content_base64 is not valid base64.", {"field": "content_base64"}
            ) from None
        attachment = attachment_add(
            environment=environment,
            data=content,
            name=data["name"],
            media_type=data.get("media_type"),
        )
        return Response(_payload(attachment.to_dict()), status=status.HTTP_201_CREATED)
