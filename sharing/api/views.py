"""Sharing and the public library: thin views over ``sharing.services`` and ``sharing.selectors``.

Library pages (list, search, a public book and its entries, a book by its
link, the display languages) are readable by anyone, with or without an API
key. Managing a book's sharing needs a key of the book's tenant: reading the
state needs the read scope, changing it the write scope and the right to edit
the book (its owner; admins for tenant-owned books). Copying needs a write key.
A book the caller may not see is 404 (P-3); one they see but may not change, 403.
"""
from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from books.access import access_book
from books.api.io_views import IgnoreFormatParamNegotiation, download
from books.living import living_world_off_notice
from books.models import Book
from lore_platform.api.base import TenantAPIView
from lore_platform.api.inputs import validated
from lore_platform.api.pagination import PageParams, Pagination, page_of
from lore_platform.api.parsers import JSONBodyParser
from lore_platform.tenancy.permissions import request_actor
from sharing import selectors, services
from sharing.api.serializers import (
    CopyIn,
    CopyOut,
    LanguageParams,
    LanguagesOut,
    LibraryBookOut,
    LibraryEntriesOut,
    LibraryParams,
    SharedExportParams,
    SharingOut,
    VisibilityIn,
    copy_out,
    display_out,
    library_book_out,
    library_entry_out,
    sharing_out,
)

LibraryBookPageOut = page_of(LibraryBookOut, "LibraryBookPageOut")

ERROR = OpenApiResponse(description='`{"error": {"code", "message", "field", "rule", "details"}}`')
READ_ERRORS = {401: ERROR, 404: ERROR}
WRITE_ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 422: ERROR}


class PublicAPIView(APIView):
    """Readable by anyone; an API key, when sent, must still be valid."""

    permission_classes = [AllowAny]


# --- the library (anyone) ------------------------------------------------------------


@extend_schema(tags=["library"])
class LibraryBookListView(PublicAPIView):
    @extend_schema(
        parameters=[LibraryParams, PageParams],
        responses={200: LibraryBookPageOut, 400: ERROR, 503: ERROR},
        summary="Browse and search the public library (P-5)",
        operation_id="library_books_list",
        description="Public books of every tenant. `q` searches words (PostgreSQL full-text search over title, "
        "description, tags and entry titles) or, with `mode=meaning`, meaning (book vectors, pgvector). Filter by "
        "`tag` and `language`; sort by newest, most_copied, most_attached or relevance. Paginated.\n\n"
        "Search by meaning returns only books that are about the query: each book's similarity is compared with "
        "its similarity to meaningless queries, and a book that is not clearly closer is left out (a query that "
        "matches nothing returns no book), unless its text holds every word of the query. The books found are "
        "ranked by fusing the meaning and word rankings (reciprocal-rank fusion). Its answer also says "
        "`indexing_incomplete` (true while published books are still being embedded, so results may be missing "
        "some) and `indexing: {indexed, total}`.",
    )
    def get(self, request: Request) -> Response:
        params = validated(LibraryParams, request.query_params)
        q = (params.get("q") or "").strip()
        filters = {"tag": params.get("tag") or None, "language": params.get("language") or None}
        if q:
            books: Any = selectors.library_search(
                q=q,
                mode=params["mode"],
                sort=params.get("sort"),
                query_language=params.get("lang") or None,
                **filters,
            )
        else:
            books = selectors.library_books(sort=params.get("sort"), **filters)
        paginator = Pagination()
        page: list[Book] = list(paginator.paginate_queryset(books, request, view=self) or [])
        displays = selectors.books_display(page, params.get("lang"))
        response = paginator.get_paginated_response([library_book_out(b, displays[b.pk]) for b in page])
        if q and params["mode"] == "meaning":
            # Books still being embedded cannot be found by meaning yet: say so, with the counts.
            state = selectors.library_meaning_index_state(**filters)
            response.data["indexing_incomplete"] = state.incomplete
            response.data["indexing"] = {"indexed": state.indexed, "total": state.total}
        return response


def _book_page(book: Book, language: str | None) -> Response:
    services.shared_book_freshen(book)
    return Response(library_book_out(book, selectors.book_display(book, language)))


def _entries_page(view: APIView, request: Request, book: Book, language: str | None) -> Response:
    display = selectors.book_display(book, language)
    paginator = Pagination()
    page = paginator.paginate_queryset(selectors.shared_book_entries(book), request, view=view) or []
    response = paginator.get_paginated_response([library_entry_out(entry, display) for entry in page])
    response.data["display"] = display_out(display)
    return response


@extend_schema(tags=["library"])
class LibraryBookView(PublicAPIView):
    @extend_schema(
        parameters=[LanguageParams],
        responses={200: LibraryBookOut, 404: ERROR},
        summary="A public book's page, translated for display when asked (P-4, P-5)",
        operation_id="library_book_get",
    )
    def get(self, request: Request, book_id: int) -> Response:
        params = validated(LanguageParams, request.query_params)
        return _book_page(selectors.library_book(book_id), params.get("lang"))


@extend_schema(tags=["library"])
class LibraryEntriesView(PublicAPIView):
    @extend_schema(
        parameters=[LanguageParams, PageParams],
        responses={200: LibraryEntriesOut, 404: ERROR},
        summary="A public book's entries, in list order (translated for display when ready)",
        operation_id="library_book_entries",
    )
    def get(self, request: Request, book_id: int) -> Response:
        params = validated(LanguageParams, request.query_params)
        return _entries_page(self, request, selectors.library_book(book_id), params.get("lang"))


@extend_schema(tags=["library"])
class LinkBookView(PublicAPIView):
    @extend_schema(
        parameters=[LanguageParams],
        responses={200: LibraryBookOut, 404: ERROR},
        summary="A book by its link: unlisted (or public) books, through the current token only",
        operation_id="library_link_book",
    )
    def get(self, request: Request, token: str) -> Response:
        params = validated(LanguageParams, request.query_params)
        return _book_page(selectors.library_book_by_link(token), params.get("lang"))


@extend_schema(tags=["library"])
class LinkEntriesView(PublicAPIView):
    @extend_schema(
        parameters=[LanguageParams, PageParams],
        responses={200: LibraryEntriesOut, 404: ERROR},
        summary="Entries of a book reached by its link",
        operation_id="library_link_entries",
    )
    def get(self, request: Request, token: str) -> Response:
        params = validated(LanguageParams, request.query_params)
        return _entries_page(self, request, selectors.library_book_by_link(token), params.get("lang"))


EXPORT_RESPONSES = {
    # A JSON file is a JSON object (as the book's own export declares it); the PNG is binary.
    (200, "application/json"): OpenApiResponse(
        OpenApiTypes.OBJECT, description="A JSON file (`Content-Disposition: attachment`): world info or card."
    ),
    (200, "image/png"): OpenApiResponse(OpenApiTypes.BINARY, description="A PNG file: Character Card V2."),
    400: ERROR,
    401: ERROR,
    403: ERROR,
    404: ERROR,
}


class SharedExportView(PublicAPIView):
    """A reader's download (I-6): anyone, with or without a key; server lorebooks need an admin's key (S-1)."""

    content_negotiation_class = IgnoreFormatParamNegotiation

    def _download(self, request: Request, **where: Any) -> HttpResponse:
        params = validated(SharedExportParams, request.query_params)
        payload, content_type, filename = selectors.shared_book_export(
            request_actor(request), params["format"], **where
        )
        return download(payload, content_type, filename)


@extend_schema(tags=["library"], parameters=[SharedExportParams])
class LibraryExportView(SharedExportView):
    @extend_schema(
        responses=EXPORT_RESPONSES,
        operation_id="library_book_export",
        summary="Download a public book as SillyTavern world info or a card (I-6)",
    )
    def get(self, request: Request, book_id: int) -> HttpResponse:
        return self._download(request, book_id=book_id)


@extend_schema(tags=["library"], parameters=[SharedExportParams])
class LinkExportView(SharedExportView):
    @extend_schema(
        responses=EXPORT_RESPONSES,
        operation_id="library_link_export",
        summary="Download a book reached by its link as SillyTavern world info or a card (I-6)",
    )
    def get(self, request: Request, token: str) -> HttpResponse:
        return self._download(request, link_token=token)


@extend_schema(tags=["library"])
class LanguagesView(PublicAPIView):
    @extend_schema(
        responses={200: LanguagesOut},
        summary="Display languages and installed translation packages (P-4)",
    )
    def get(self, request: Request) -> Response:
        from sharing import config

        pairs = sorted(selectors.translation_pairs())
        return Response(
            {
                "display_languages": config.display_languages(),
                "installed_pairs": [{"source": s, "target": t} for s, t in pairs],
            }
        )


# --- copying (a write key of the copier's tenant) ---------------------------------------


@extend_schema(tags=["library"])
class CopyView(TenantAPIView):
    parser_classes = [JSONBodyParser]

    @extend_schema(
        request=CopyIn,
        responses={201: CopyOut, **WRITE_ERRORS},
        summary="Copy a book to my library (P-2)",
        description="An editable, private duplicate owned by the caller (server lorebooks: the tenant), with its "
        "entries and settings and its provenance (source book and version). Public books by `book_id`, unlisted "
        "ones by `link_token`.",
    )
    def post(self, request: Request) -> Response:
        data = validated(CopyIn, request.data)
        copy = services.book_copy(
            actor=self.actor, book_id=data.get("book_id"), link_token=data.get("link_token") or None
        )
        state = selectors.book_sharing_state(self.actor, copy)
        return Response(copy_out(state), status=status.HTTP_201_CREATED)


# --- a book's sharing, in its own tenant ---------------------------------------------------


@extend_schema(tags=["sharing"])
class SharingView(TenantAPIView):
    @extend_schema(
        responses={200: SharingOut, **READ_ERRORS},
        summary="A book's sharing: visibility, link (to its managers), counts, provenance, translations",
    )
    def get(self, request: Request, book_id: int) -> Response:
        book = access_book(self.actor, book_id)
        return Response(sharing_out(selectors.book_sharing_state(self.actor, book)))


@extend_schema(tags=["sharing"])
class VisibilityView(TenantAPIView):
    parser_classes = [JSONBodyParser]

    @extend_schema(
        request=VisibilityIn,
        responses={200: SharingOut, **WRITE_ERRORS},
        summary="Make a book private, unlisted or public (P-1, L-1)",
        description="Public needs at least 10 entries (422 `too_few_entries`, rule P-1). Unlisted and public "
        "books lose their living-world flag (L-1). Making a book private again stops it reaching other "
        "tenants' chats (W-9).",
    )
    def post(self, request: Request, book_id: int) -> Response:
        data = validated(VisibilityIn, request.data)
        book = access_book(self.actor, book_id)
        was_living = book.living_world
        services.book_visibility_set(actor=self.actor, book=book, visibility=data["visibility"])
        body = sharing_out(selectors.book_sharing_state(self.actor, book))
        if was_living and not book.living_world:
            body["notices"].append(living_world_off_notice(book))
        return Response(body)


@extend_schema(tags=["sharing"])
class LinkRotateView(TenantAPIView):
    @extend_schema(
        request=None,
        responses={200: SharingOut, **WRITE_ERRORS},
        summary="Give the book a new link; the old one stops working",
    )
    def post(self, request: Request, book_id: int) -> Response:
        book = access_book(self.actor, book_id)
        services.book_link_rotate(actor=self.actor, book=book)
        return Response(sharing_out(selectors.book_sharing_state(self.actor, book)))
