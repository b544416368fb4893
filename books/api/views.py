"""Editor API: thin views over ``books.services`` and ``books.selectors``.

Each handler parses, calls one service or selector, and serializes. Access is
decided by ``books.access``: a book the caller may not read is 404; one they
may read but not edit is 403; a read-only key cannot write (403).
"""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from books import selectors, services
from books.access import access_book, access_entry, books_visible_to
from books.api.serializers import (
    BookActiveIn,
    BookCreateIn,
    BookListParams,
    BookOut,
    BookUpdateIn,
    BulkResultOut,
    CanonMeterOut,
    CanonMeterParams,
    EntriesBulkCreateIn,
    EntriesBulkIn,
    EntriesCreatedOut,
    EntriesReorderIn,
    EntryIn,
    EntryListParams,
    EntryMoveIn,
    EntryOut,
    ErrorOut,
    ReorderOut,
    TrashedBookOut,
)
from books.limits import PUBLISH_MIN_ENTRIES, TRASH_KEEP_DAYS
from books.lineages import lineage_get
from books.models import Book, Entry
from books.services.entry_write import entry_version
from lore_platform.api.base import TenantViewSet
from lore_platform.api.conditional import SCHEMA
from lore_platform.api.inputs import validated
from lore_platform.api.pagination import page_of
from lore_platform.api.parsers import JSONBodyParser
from lore_platform.tenancy.actor import Actor
from retrieval.engine.rules import SMART

ERRORS = {
    400: OpenApiResponse(ErrorOut, description="Invalid input; `error.field` and `error.rule` name what and why."),
    403: OpenApiResponse(ErrorOut, description="Visible but not yours to change, or a read-only key."),
    404: OpenApiResponse(ErrorOut, description="No such book or entry (or not visible to the caller)."),
    422: OpenApiResponse(
        ErrorOut, description="A product limit would be broken (`error.rule`, `error.details.limit`); nothing was written."
    ),
}
READ_ERRORS = {404: ERRORS[404]}
READ_TAGGED = SCHEMA["read"]
WRITE_TAGGED = SCHEMA["write"]
TrashedBookPageOut = page_of(TrashedBookOut, "TrashedBookPageOut")


@extend_schema(tags=["books"])
class BookViewSet(TenantViewSet):
    """Books of lore entries the caller may read: their own, and the tenant's server-wide and persona books."""

    lookup_value_regex = r"\d+"
    serializer_class = BookOut
    # JSON only: form encoding would turn every absent boolean into False on a partial update.
    parser_classes = [JSONBodyParser]

    def scoped_queryset(self, actor: Actor) -> QuerySet[Book]:
        return books_visible_to(actor)

    def _out(self, book: Book, **kwargs: Any) -> Response:
        if not hasattr(book, "entry_count"):
            book.entry_count = selectors.book_entry_count(book)  # type: ignore[attr-defined]
        return self.tagged(Response(BookOut(book, context={"actor": self.actor}).data, **kwargs), "book", book.pk,
                           book.version)

    @extend_schema(parameters=[BookListParams], responses=BookOut(many=True), summary="List books")
    def list(self, request: Request) -> Response:
        params = validated(BookListParams, request.query_params)
        lineage = params.pop("lineage", None)
        books = selectors.book_list(
            actor=self.actor,
            lineage=lineage_get(tenant=self.actor.tenant, public_id=lineage) if lineage else None,
            **params,
        )
        page = self.paginate_queryset(books)
        return self.get_paginated_response(BookOut(page, many=True, context={"actor": self.actor}).data)

    @extend_schema(request=BookCreateIn, responses={201: BookOut, **ERRORS}, summary="Create a book",
                   parameters=SCHEMA["created"]["parameters"])
    def create(self, request: Request) -> Response:
        data = validated(BookCreateIn, request.data)
        data.setdefault("profile", self.actor.tenant.default_profile)
        book = services.book_create(actor=self.actor, **data)
        return self._out(book, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: BookOut, **READ_ERRORS, **READ_TAGGED["responses"]}, summary="A book",
                   parameters=READ_TAGGED["parameters"])
    def retrieve(self, request: Request, pk: str) -> Response:
        return self._out(access_book(self.actor, pk))

    @extend_schema(request=BookUpdateIn, responses={200: BookOut, **ERRORS, **WRITE_TAGGED["responses"]},
                   summary="Change a book", parameters=WRITE_TAGGED["parameters"])
    def partial_update(self, request: Request, pk: str) -> Response:
        data = validated(BookUpdateIn, request.data)
        book = access_book(self.actor, pk)
        expected = self.expected_version("book", book.pk)
        book = services.book_update(actor=self.actor, book=book, expected_version=expected, **data)
        return self._out(book)

    @extend_schema(
        responses={204: None, **ERRORS, **WRITE_TAGGED["responses"]},
        parameters=WRITE_TAGGED["parameters"][:1],
        summary="Move a book to the trash",
        description="The book and its entries leave every list, the library and every turn at once, and stay "
        f"restorable for {TRASH_KEEP_DAYS} days (`GET /api/v1/books/trash`, `POST /api/v1/books/{{id}}/restore`); "
        "after that they are deleted for good. A public book leaves the library while it is in the trash.",
    )
    def destroy(self, request: Request, pk: str) -> Response:
        book = access_book(self.actor, pk)
        services.book_trash(actor=self.actor, book=book, expected_version=self.expected_version("book", book.pk))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        responses={200: TrashedBookPageOut},
        summary="Books in the trash",
        description=f"The caller's trashed books (tenant-owned ones too, for admins), restorable for "
        f"{TRASH_KEEP_DAYS} days after they were trashed (`purge_at`), most recently trashed first.",
    )
    @action(detail=False, methods=["get"], url_path="trash")
    def trash(self, request: Request) -> Response:
        page = self.paginate_queryset(services.books_trashed(self.actor))
        return self.get_paginated_response(TrashedBookOut(page, many=True).data)

    @extend_schema(
        request=None,
        responses={200: BookOut, **ERRORS},
        summary="Restore a book from the trash",
        description="The book comes back as it was, with its entries and attachments. A formerly public book "
        f"with fewer than {PUBLISH_MIN_ENTRIES.value} entries comes back private (P-1). A book not in the trash "
        "(or purged) is 404.",
    )
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, pk: str) -> Response:
        return self._out(services.book_restore(actor=self.actor, book_id=pk))

    @extend_schema(
        request=BookActiveIn,
        responses={200: BookOut, **ERRORS},
        summary="Turn a collection on or off (S-12)",
        description="Off removes every entry from prompts without touching their own enabled flags; "
        "on restores them exactly as they were.",
    )
    @action(detail=True, methods=["post"])
    def active(self, request: Request, pk: str) -> Response:
        data = validated(BookActiveIn, request.data)
        book = services.book_set_active(actor=self.actor, book=access_book(self.actor, pk), active=data["active"])
        return self._out(book)

    @extend_schema(
        parameters=[CanonMeterParams],
        responses={200: CanonMeterOut, **READ_ERRORS, 400: ERRORS[400]},
        summary="Canon meter (W-1)",
        description="Core canon: N tokens per turn for a model, with a warning when canon gets heavy (from "
        f"{SMART.canon_heavy_percent}% of the canon budget, `heavy_at`) or takes more than the canon budget "
        f"({SMART.canon_share_percent}% of the input window, at most {SMART.canon_cap_tokens:,} tokens).",
    )
    @action(detail=True, methods=["get"], url_path="canon-meter")
    def canon_meter(self, request: Request, pk: str) -> Response:
        params = validated(CanonMeterParams, request.query_params)
        meter = selectors.book_canon_meter(
            book=access_book(self.actor, pk),
            model_id=params["model"],
            input_window=params.get("input_window"),
            tokenizer=params.get("tokenizer"),
        )
        return Response(CanonMeterOut(meter).data)


BOOK_ID = OpenApiParameter("book_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The book's id.")
ENTRY_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The entry's id.")


@extend_schema(tags=["entries"], parameters=[BOOK_ID])
@extend_schema_view(
    retrieve=extend_schema(parameters=[ENTRY_ID]),
    partial_update=extend_schema(parameters=[ENTRY_ID]),
    destroy=extend_schema(parameters=[ENTRY_ID]),
    move=extend_schema(parameters=[ENTRY_ID]),
)
class EntryViewSet(TenantViewSet):
    """Entries of one book, in list order, with the editor's filters, sorts and bulk actions."""

    lookup_value_regex = r"\d+"
    serializer_class = EntryOut
    parser_classes = [JSONBodyParser]

    def scoped_queryset(self, actor: Actor) -> QuerySet[Entry]:
        return Entry.objects.for_tenant(actor.tenant).filter(book=self.book)

    @property
    def book(self) -> Book:
        if not hasattr(self, "_book"):
            self._book = access_book(self.actor, self.kwargs["book_id"])
        return self._book

    def _entry_out(self, entry: Entry, **kwargs: Any) -> Response:
        notes = selectors.entries_notes(self.book, [entry])
        return self.tagged(Response(EntryOut(entry, context={"book": self.book, "notes": notes}).data, **kwargs),
                           "entry", entry.pk, entry_version(entry))

    @extend_schema(
        parameters=[EntryListParams],
        responses={200: EntryOut(many=True), **READ_ERRORS},
        summary="List entries (filters, sorts, warnings)",
    )
    def list(self, request: Request, book_id: str) -> Response:
        params = validated(EntryListParams, request.query_params)
        model_id = params.pop("model", None)
        tokenizer = params.pop("tokenizer", None)
        entries = selectors.entry_list(book=self.book, **params)
        page = self.paginate_queryset(entries) or []
        notes = selectors.entries_notes(self.book, page, model_id=model_id, tokenizer=tokenizer)
        return self.get_paginated_response(EntryOut(page, many=True, context={"book": self.book, "notes": notes}).data)

    @extend_schema(request=EntryIn, responses={201: EntryOut, **ERRORS}, summary="Add an entry at the bottom",
                   parameters=SCHEMA["created"]["parameters"])
    def create(self, request: Request, book_id: str) -> Response:
        data = validated(EntryIn, request.data)
        entry = services.entry_create(actor=self.actor, book=self.book, **data)
        return self._entry_out(entry, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: EntryOut, **READ_ERRORS, **READ_TAGGED["responses"]}, summary="An entry",
                   parameters=READ_TAGGED["parameters"])
    def retrieve(self, request: Request, book_id: str, pk: str) -> Response:
        return self._entry_out(access_entry(self.actor, self.book, pk))

    @extend_schema(request=EntryIn, responses={200: EntryOut, **ERRORS, **WRITE_TAGGED["responses"]},
                   summary="Change an entry", parameters=WRITE_TAGGED["parameters"])
    def partial_update(self, request: Request, book_id: str, pk: str) -> Response:
        data = validated(EntryIn, request.data)
        entry = access_entry(self.actor, self.book, pk)
        expected = self.expected_version("entry", entry.pk)
        entry = services.entry_update(actor=self.actor, entry=entry, expected_version=expected, **data)
        return self._entry_out(entry)

    @extend_schema(responses={204: None, **ERRORS, **WRITE_TAGGED["responses"]}, summary="Delete an entry",
                   parameters=WRITE_TAGGED["parameters"][:1])
    def destroy(self, request: Request, book_id: str, pk: str) -> Response:
        entry = access_entry(self.actor, self.book, pk)
        services.entry_delete(actor=self.actor, entry=entry, expected_version=self.expected_version("entry", entry.pk))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=EntryMoveIn, responses={200: EntryOut, **ERRORS}, summary="Move an entry to a position, top or bottom"
    )
    @action(detail=True, methods=["post"])
    def move(self, request: Request, book_id: str, pk: str) -> Response:
        data = validated(EntryMoveIn, request.data)
        entry = services.entry_move(actor=self.actor, entry=access_entry(self.actor, self.book, pk), **data)
        return self._entry_out(entry)

    @extend_schema(request=EntriesReorderIn, responses={200: ReorderOut, **ERRORS}, summary="Reorder many entries")
    @action(detail=False, methods=["post"])
    def reorder(self, request: Request, book_id: str) -> Response:
        data = validated(EntriesReorderIn, request.data)
        order = services.entries_reorder(actor=self.actor, book=self.book, entry_ids=data["entry_ids"])
        version = selectors.book_version(self.book)
        return Response(ReorderOut({"entry_ids": order, "version": version}).data)

    @extend_schema(
        request=EntriesBulkIn,
        responses={200: BulkResultOut, **ERRORS},
        summary="Enable, disable or delete up to 500 entries",
        description="One transaction: an unknown id or more than 500 ids (W-12) changes nothing.",
    )
    @action(detail=False, methods=["post"])
    def bulk(self, request: Request, book_id: str) -> Response:
        data = validated(EntriesBulkIn, request.data)
        if data["action"] == "delete":
            result = services.entries_bulk_delete(actor=self.actor, book=self.book, entry_ids=data["entry_ids"])
        else:
            result = services.entries_bulk_set_enabled(
                actor=self.actor, book=self.book, entry_ids=data["entry_ids"], enabled=data["action"] == "enable"
            )
        body = {"action": data["action"], "matched": result.matched, "changed": result.changed,
                "version": result.version}
        return Response(BulkResultOut(body).data)

    @extend_schema(
        request=EntriesBulkCreateIn,
        responses={201: EntriesCreatedOut, **ERRORS},
        summary="Add up to 500 entries at once",
        description="All or nothing: every entry and limit is checked before anything is written (I-3).",
    )
    @action(detail=False, methods=["post"], url_path="bulk-create")
    def bulk_create(self, request: Request, book_id: str) -> Response:
        data = validated(EntriesBulkCreateIn, request.data)
        created = services.entries_create_bulk(actor=self.actor, book=self.book, entries=data["entries"])
        notes = selectors.entries_notes(self.book, created)
        body = {
            "entries": EntryOut(created, many=True, context={"book": self.book, "notes": notes}).data,
            "version": selectors.book_version(self.book),
        }
        return Response(body, status=status.HTTP_201_CREATED)
