"""Import and export endpoints: thin views over ``books.imports`` and ``books.exports``.

Uploads are multipart (``file`` plus form fields). The request size is
capped before the body is parsed: larger than the biggest file the import
limits accept (plus room for the form) is a 413 JSON error before the body
is read. Every refusal is ``{"error": {code, message, field, rule, details}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.http import HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from books import exports, imports, limits as book_limits
from books.access import access_book
from books.api.io_serializers import (
    ExportParams,
    ImportIntoIn,
    ImportLimitsOut,
    ImportNewIn,
    ImportOut,
)
from books.api.serializers import ErrorOut
from books.formats import EXPORT_FORMATS, current_limits
from books.lineages import lineage_get
from books.selectors import book_entry_count
from lore_platform.api.base import TenantAPIView
from lore_platform.api.inputs import validated
from lore_platform.api.parsers import form_fields_check
from lore_platform.errors import PayloadTooLarge

# Room for the multipart envelope and the form fields next to the file.
MULTIPART_OVERHEAD = 64 * 1024

ERRORS = {
    400: OpenApiResponse(
        ErrorOut, description="Unreadable or unrecognised file, or a bad field (`error.field`, `error.rule`)."
    ),
    403: OpenApiResponse(ErrorOut, description="Not yours to change (S-1), or a read-only key."),
    404: OpenApiResponse(ErrorOut, description="No such book (or not visible to the caller)."),
    409: OpenApiResponse(ErrorOut, description="The name (I-2) or the persona's lineage (S-2) is taken."),
    413: OpenApiResponse(ErrorOut, description="The upload is larger than the import limits (GET /import-limits)."),
    415: OpenApiResponse(ErrorOut, description="Not a multipart/form-data upload."),
    422: OpenApiResponse(ErrorOut, description="A limit would be broken (W-12, S-14, I-3); nothing was written."),
}
BOOK_ID = OpenApiParameter("book_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The book's id.")


def import_upload_cap() -> int:
    """The largest import request: the largest file any import limit accepts, plus the form."""
    limits = current_limits()
    return max(limits.max_json_bytes, limits.max_png_bytes, limits.max_charx_bytes) + MULTIPART_OVERHEAD


class CappedMultiPartParser(MultiPartParser):
    """Multipart, refused with 413 before parsing when the request is larger than the view's cap."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        context = parser_context or {}
        view = context.get("view")
        cap = view.upload_cap() if view is not None and hasattr(view, "upload_cap") else import_upload_cap()
        request = context.get("request")
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        except (TypeError, ValueError):
            length = 0
        if length > cap:
            raise PayloadTooLarge(
                f"the upload is {length:,} bytes; the largest accepted is {cap:,} bytes (I-3)",
                field="file",
                rule="I-3",
                details={"size": length, "limit": cap},
            )
        parsed = super().parse(stream, media_type, parser_context)
        form_fields_check(parsed.data)  # NUL in a text field: 400 naming it, before any service
        return parsed


class IgnoreFormatParamNegotiation(DefaultContentNegotiation):
    """``?format=`` names the export format here, not a renderer; errors are always JSON."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: str | None = None) -> Any:
        renderer = renderers[0]
        return renderer, renderer.media_type


def upload_bytes(upload: UploadedFile, cap: int) -> bytes:
    if upload.size is not None and upload.size > cap:
        raise PayloadTooLarge(
            f"the file is {upload.size:,} bytes; the largest accepted is {cap:,} bytes (I-3)",
            field="file",
            rule="I-3",
            details={"size": upload.size, "limit": cap},
        )
    return upload.read(cap + 1)


def download(payload: bytes, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(payload, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["Content-Length"] = str(len(payload))
    response["X-Content-Type-Options"] = "nosniff"
    return response



class UploadView(TenantAPIView):
    parser_classes = [CappedMultiPartParser]

    def upload_cap(self) -> int:
        return import_upload_cap()

    def _import_out(self, result: imports.ImportResult, **kwargs: Any) -> Response:
        book = result.book
        if book is not None:
            book.entry_count = book_entry_count(book)  # type: ignore[attr-defined]
        body = ImportOut({"book": book, "receipt": result.receipt}, context={"actor": self.actor}).data
        return Response(body, **kwargs)


@extend_schema(tags=["import/export"])
class BookImportView(UploadView):
    @extend_schema(
        request={"multipart/form-data": ImportNewIn},
        responses={
            201: OpenApiResponse(ImportOut, description="The new book and the receipt (I-4)."),
            200: OpenApiResponse(ImportOut, description="A card without a lorebook: nothing was written (I-1)."),
            **ERRORS,
        },
        summary="Import a file as a new book",
        operation_id="books_import",
        description="All or nothing (I-3): every limit is checked before the first write. The name comes from "
        "`title`, else the file, else the file name; a name in use is refused (409, I-2).",
    )
    def post(self, request: Request) -> Response:
        data = validated(ImportNewIn, request.data)
        upload = data["file"]
        lineage = data.get("lineage")
        result = imports.book_import_new(
            actor=self.actor,
            data=upload_bytes(upload, self.upload_cap()),
            filename=upload.name,
            profile=data.get("profile") or self.actor.tenant.default_profile,
            title=data.get("title"),
            scope=data.get("scope"),
            lineage=lineage_get(tenant=self.actor.tenant, public_id=lineage) if lineage else None,
        )
        code = status.HTTP_201_CREATED if result.book is not None else status.HTTP_200_OK
        return self._import_out(result, status=code)


@extend_schema(tags=["import/export"], parameters=[BOOK_ID])
class BookImportIntoView(UploadView):
    @extend_schema(
        request={"multipart/form-data": ImportIntoIn},
        responses={200: OpenApiResponse(ImportOut, description="The book and the receipt (I-4)."), **ERRORS},
        summary="Import a file into a book (append or replace)",
        operation_id="books_import_into",
        description="append (default) skips entries already in the book: same title and same content after "
        "normalisation (Unicode NFKC, case folded, whitespace collapsed). replace swaps this book's entries "
        "for the file's. All or nothing (I-3).",
    )
    def post(self, request: Request, book_id: int) -> Response:
        book = access_book(self.actor, book_id, need="edit")
        data = validated(ImportIntoIn, request.data)
        upload = data["file"]
        result = imports.book_import_into(
            actor=self.actor,
            book=book,
            data=upload_bytes(upload, self.upload_cap()),
            filename=upload.name,
            mode=data["mode"],
        )
        return self._import_out(result)


@extend_schema(tags=["import/export"], parameters=[BOOK_ID, ExportParams])
class BookExportView(TenantAPIView):
    content_negotiation_class = IgnoreFormatParamNegotiation

    @extend_schema(
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT, description="A JSON file (`Content-Disposition: attachment`): world info, card "
                "or native, by `format`."
            ),
            (200, "image/png"): OpenApiResponse(
                OpenApiTypes.BINARY, description="A PNG file (`Content-Disposition: attachment`): Character Card V2."
            ),
            400: ERRORS[400],
            403: ERRORS[403],
            404: ERRORS[404],
        },
        summary="Download a book as a file (I-6)",
        operation_id="books_export",
        description="sillytavern and card-v2 carry entries, activation settings and enabled states but no "
        "tenant-only state: whoever reads the book may take them. native also keeps channels and the "
        "collection state: only the book's owner (admins for tenant-owned books). Server lorebooks: admins (S-1).",
    )
    def get(self, request: Request, book_id: int) -> HttpResponse:
        params = validated(ExportParams, request.query_params)
        book = access_book(self.actor, book_id)
        payload, content_type, filename = exports.book_export(actor=self.actor, book=book, to=params["format"])
        return download(payload, content_type, filename)


@extend_schema(tags=["import/export"])
class ImportLimitsView(TenantAPIView):
    @extend_schema(
        responses={200: ImportLimitsOut},
        operation_id="import_limits",
        summary="Import limits (file sizes, card sizes, entry caps)",
    )
    def get(self, request: Request) -> Response:
        body = {
            "limits": current_limits().as_dict(),
            "max_upload_bytes": import_upload_cap(),
            "max_backup_bytes": exports.backup_max_bytes(),
            "entry_caps": {
                "smart_book": book_limits.SMART_ENTRIES_PER_BOOK.value,
                "server_persona": book_limits.SERVER_ENTRIES_PER_LINEAGE.value,
                "server_wide": book_limits.SERVER_ENTRIES_SERVER_WIDE.value,
                "import_batch": book_limits.IMPORT_BATCH.value,
            },
            "export_formats": list(EXPORT_FORMATS),
        }
        return Response(ImportLimitsOut(body).data)


__all__ = [
    "BookExportView",
    "IgnoreFormatParamNegotiation",
    "download",
    "BookImportIntoView",
    "BookImportView",
    "ImportLimitsView",
]
