"""Backup and restore endpoints (admins): thin views over ``backup.services``."""
from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from books import exports
from books.api.io_serializers import RestoreIn, RestoreReceiptOut
from books.api.io_views import (
    ERRORS,
    MULTIPART_OVERHEAD,
    UploadView,
    _download,
    _parse,
    _upload_bytes,
)
from lore_platform.api.base import TenantAPIView
from backup import services


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
        summary="Download the tenant's lore as a native backup (admins)",
        operation_id="backup_download",
    )
    def get(self, request: Request) -> HttpResponse:
        payload = services.tenant_backup(actor=self.actor)
        return _download(payload, exports.CONTENT_TYPES["native"], services.tenant_backup_filename(self.actor.tenant))


@extend_schema(tags=["import/export"])
class TenantRestoreView(UploadView):
    def upload_cap(self) -> int:
        return restore_upload_cap()

    @extend_schema(
        request={"multipart/form-data": RestoreIn},
        responses={201: RestoreReceiptOut, **{k: v for k, v in ERRORS.items() if k != 404}},
        summary="Restore a native backup into this tenant (admins; all or nothing)",
        operation_id="backup_restore",
    )
    def post(self, request: Request) -> Response:
        data = _parse(RestoreIn, request.data)
        receipt = services.tenant_restore(actor=self.actor, data=_upload_bytes(data["file"], self.upload_cap()))
        return Response(RestoreReceiptOut(receipt).data, status=status.HTTP_201_CREATED)
