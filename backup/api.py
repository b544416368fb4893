"""Backup and restore endpoints (admins): thin views over ``backup.services``."""
from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from backup import services
from books import exports
from books.api.io_serializers import RestoreIn, RestoreReceiptOut
from books.api.io_views import (
    ERRORS,
    MULTIPART_OVERHEAD,
    UploadView,
    download,
    upload_bytes,
)
from lore_platform.api.base import TenantAPIView
from lore_platform.api.inputs import validated
from lore_platform.errors import ValidationFailed


class RestoredRowsOut(serializers.Serializer):
    """Every count is there for a version-2 backup; a version-1 backup restores none of these."""

    characters = serializers.IntegerField(required=False, help_text="Characters of the backup, created or found by name.")
    stories = serializers.IntegerField(required=False)
    novels = serializers.IntegerField(required=False)
    attachments = serializers.IntegerField(required=False)
    chats = serializers.IntegerField(required=False)
    request_logs = serializers.IntegerField(required=False, help_text="Only when the backup holds them.")
    lore_writes = serializers.IntegerField(required=False, help_text="Living-world write records, held ones (the review queue) too.")
    jobs = serializers.IntegerField(required=False, help_text="AI jobs that had ended.")


class FullRestoreReceiptOut(RestoreReceiptOut):
    backup_version = serializers.IntegerField(help_text="1: books and lineages only; 2: everything the tenant owns.")
    restored = RestoredRowsOut(help_text="Rows restored beyond books (empty for a version-1 backup).")


def restore_upload_cap() -> int:
    return exports.backup_max_bytes() + MULTIPART_OVERHEAD


@extend_schema(tags=["import/export"])
class TenantBackupView(TenantAPIView):
    @extend_schema(
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT, description="A JSON file (`Content-Disposition: attachment`): a native backup."
            ),
            403: ERRORS[403],
        },
        parameters=[
            OpenApiParameter(
                "request_logs", OpenApiTypes.BOOL, required=False,
                description="1: add every chat's request logs (C-15; they can be large). Default: left out.",
            )
        ],
        summary="Download everything the tenant owns as a native backup (admins)",
        description=(
            "Books with their entries, lineages, characters, stories, novels, attachments, chats with their timed "
            "state, living-world write records and review queue, ended AI jobs, members and settings. Never "
            "secrets: no API key or its hash, no model API key, no link token. A member's private book stays "
            "theirs alone (P-1) and is left out."
        ),
        operation_id="backup_download",
    )
    def get(self, request: Request) -> HttpResponse:
        flag = request.query_params.get("request_logs", "")
        if flag not in ("", "0", "1", "true", "false"):
            raise ValidationFailed("request_logs is 1 or 0.", field="request_logs", rule="I-6")
        payload = services.tenant_backup(actor=self.actor, request_logs=flag in ("1", "true"))
        return download(payload, exports.CONTENT_TYPES["native"], services.tenant_backup_filename(self.actor.tenant))


@extend_schema(tags=["import/export"])
class TenantRestoreView(UploadView):
    def upload_cap(self) -> int:
        return restore_upload_cap()

    @extend_schema(
        request={"multipart/form-data": RestoreIn},
        responses={201: FullRestoreReceiptOut, **{k: v for k, v in ERRORS.items() if k != 404}},
        summary="Restore a native backup into this tenant (admins; all or nothing)",
        operation_id="backup_restore",
    )
    def post(self, request: Request) -> Response:
        data = validated(RestoreIn, request.data)
        receipt = services.tenant_restore(actor=self.actor, data=upload_bytes(data["file"], self.upload_cap()))
        return Response(FullRestoreReceiptOut(receipt).data, status=status.HTTP_201_CREATED)
