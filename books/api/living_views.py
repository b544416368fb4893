"""AI updates (L-4): the model's writes into a living book, with undo and the review of held writes."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from books import living
from books.access import access_book
from books.api.views import ERRORS, READ_ERRORS
from books.models import LoreWrite
from lore_platform.api.base import TenantAPIView
from lore_platform.api.inputs import validated
from lore_platform.api.pagination import Pagination, page_of
from lore_platform.api.parsers import JSONBodyParser


class LoreWriteOut(serializers.Serializer):
    id = serializers.IntegerField()
    book = serializers.IntegerField(source="book_id")
    entry = serializers.IntegerField(source="entry_id", allow_null=True,
                                     help_text="Null: a held new entry, or an entry deleted since.")
    chat = serializers.IntegerField(source="chat_id")
    reply = serializers.CharField(source="reply_id", help_text="The partner app's id of the reply that wrote it.")
    model = serializers.CharField()
    kind = serializers.ChoiceField(choices=LoreWrite.Kind.choices)
    state = serializers.ChoiceField(choices=LoreWrite.State.choices)
    title = serializers.CharField(help_text="The new entry's title, or the title of the entry appended to.")
    aliases = serializers.ListField(child=serializers.CharField())
    text = serializers.CharField(help_text="The text the model added, as it wrote it (immutable).")
    edits = serializers.SerializerMethodField(help_text="The owner's edits to a held write, applied on accept.")
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    decided_by = serializers.CharField(help_text="undo, reply_reverted, accepted or rejected; empty while pending.")

    def get_edits(self, write: LoreWrite) -> dict[str, Any]:
        edits: dict[str, Any] = {}
        if write.edit_title is not None:
            edits["title"] = write.edit_title
        if write.edit_aliases is not None:
            edits["aliases"] = write.edit_aliases
        if write.edit_text is not None:
            edits["lore" if write.kind == LoreWrite.Kind.CREATE else "text"] = write.edit_text
        return edits


class LoreWriteEditIn(serializers.Serializer):
    title = serializers.CharField(required=False, help_text="A held new entry's title.")
    lore = serializers.CharField(required=False, trim_whitespace=False, help_text="A held new entry's lore.")
    aliases = serializers.ListField(child=serializers.CharField(), required=False)
    text = serializers.CharField(required=False, trim_whitespace=False, help_text="A held append's text.")


class LoreWritesParams(serializers.Serializer):
    state = serializers.ChoiceField(choices=LoreWrite.State.choices, required=False)


LoreWritePageOut = page_of(LoreWriteOut, "LoreWritePageOut")


class AiUpdatesView(TenantAPIView):
    @extend_schema(tags=["living world"], parameters=[LoreWritesParams],
                   responses={200: LoreWritePageOut, **READ_ERRORS},
                   summary="AI updates: every write the model made into this book, newest first (L-4)")
    def get(self, request: Request, book_id: int) -> Response:
        params = validated(LoreWritesParams, request.query_params)
        book = access_book(self.actor, book_id)
        rows = living.lore_writes_list(actor=self.actor, book=book, state=params.get("state"))
        paginator = Pagination()
        page: list[Any] | None = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(LoreWriteOut(page, many=True).data)


class _WriteActionView(TenantAPIView):
    parser_classes = [JSONBodyParser]

    def _out(self, write: LoreWrite) -> Response:
        return Response(LoreWriteOut(write).data)


class AiUpdateView(_WriteActionView):
    @extend_schema(tags=["living world"], request=LoreWriteEditIn, responses={200: LoreWriteOut, **ERRORS},
                   summary="Edit a held write before accepting it; the edits are kept (L-4)")
    def patch(self, request: Request, book_id: int, write_id: int) -> Response:
        edits = validated(LoreWriteEditIn, request.data)
        book = access_book(self.actor, book_id)
        return self._out(living.lore_write_edit(actor=self.actor, book=book, write_id=write_id, edits=edits))


class AiUpdateUndoView(_WriteActionView):
    @extend_schema(tags=["living world"], request=None, responses={200: LoreWriteOut, **ERRORS},
                   summary="Undo a write: newest first per entry, only while the entry is unchanged (409 otherwise)")
    def post(self, request: Request, book_id: int, write_id: int) -> Response:
        book = access_book(self.actor, book_id)
        return self._out(living.lore_write_undo(actor=self.actor, book=book, write_id=write_id))


class AiUpdateAcceptView(_WriteActionView):
    @extend_schema(tags=["living world"], request=LoreWriteEditIn, responses={200: LoreWriteOut, **ERRORS},
                   summary="Accept a held write, with optional edits (kept even when the accept is refused)")
    def post(self, request: Request, book_id: int, write_id: int) -> Response:
        edits = validated(LoreWriteEditIn, request.data or {})
        book = access_book(self.actor, book_id)
        return self._out(living.lore_write_accept(actor=self.actor, book=book, write_id=write_id, edits=edits))


class AiUpdateRejectView(_WriteActionView):
    @extend_schema(tags=["living world"], request=None, responses={200: LoreWriteOut, **ERRORS},
                   summary="Reject a held write; it stays listed")
    def post(self, request: Request, book_id: int, write_id: int) -> Response:
        book = access_book(self.actor, book_id)
        return self._out(living.lore_write_reject(actor=self.actor, book=book, write_id=write_id))
