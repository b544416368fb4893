"""Characters, stories, novels, chats, attachments, and the per-turn context call."""
from __future__ import annotations

import typing
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from books.api.io_views import CappedMultiPartParser
from books.selectors import book_entry_count
from cast import chats as chat_services, living, personas, selectors as cast_selectors, turns
from cast.api import serializers as s
from cast.api.answers import ContextOut, context_body
from cast.attachments import attachment_delete, book_attach
from cast.models import Attachment, Character, Chat, Novel, Story
from cast.services import character_delete, character_import
from lore_platform.api.base import TenantAPIView, TenantViewSet
from lore_platform.api.errors import ErrorOut
from lore_platform.api.pagination import Pagination
from lore_platform.errors import ValidationFailed
from lore_platform.tenancy.actor import Actor
from retrieval.adapter.lookup import lore_lookup
from retrieval.engine import values as ev
from sharing.selectors import book_for_attach

CONTEXT_RESPONSE = OpenApiResponse(response=ContextOut, description="The lore for this turn, in prompt order, "
                                   "with the request log that explains it (P-7, C-15).")


def turn_input(data: dict[str, Any], *, messages: list[dict[str, str]] | None = None) -> turns.TurnInput:
    """Validated context (or preview) fields as the turn's input."""
    names = data.get("names") or {}
    model = data.get("model") or {}
    channel = data.get("channel")
    character = data.get("character")
    return turns.TurnInput(
        profile=data.get("profile") or "",
        # The serializer let only user, assistant and system through.
        messages=tuple(ev.Message(role=typing.cast(ev.Role, m["role"]), text=m["text"], name=m.get("name", ""))
                       for m in (messages if messages is not None else data["messages"])),
        names=ev.Names(user=names.get("user", "User"), char=names.get("char", "Character"), bot=names.get("bot")),
        model_id=model.get("id") or None,
        tokenizer=model.get("tokenizer") or None,
        input_window=model.get("input_window"),
        channel=ev.Channel(id=channel["id"], parent=channel.get("parent")) if channel else None,
        template=tuple(data["template"]) if data.get("template") else None,
        parts=dict(data.get("parts") or {}),
        render=bool(data.get("render")),
        tools=bool(model.get("tools")),
        log=data.get("log") or "compact",
        generation_type=data.get("generation_type") or "normal",
        character=ev.ActiveCharacter(name=character["name"], tags=tuple(character.get("tags") or ()))
        if character else None,
        match_texts=ev.MatchTexts(**(data.get("match_texts") or {})),
    )


def preview_input(data: dict[str, Any]) -> turns.TurnInput:
    return turn_input(data, messages=[{"role": "user", "text": data["message"]}])


class RequestLogPagination(Pagination):
    # One log explains every entry a turn considered (100+ KB on a big book): small pages.
    page_size = 20
    max_page_size = 50


class CharacterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = s.CharacterOut
    lookup_value_regex = r"\d+"

    def scoped_queryset(self, actor: Actor) -> QuerySet[Character]:
        return Character.objects.for_tenant(actor.tenant).select_related("lineage").order_by("id")

    @extend_schema(request=s.CharacterIn, responses={201: s.CharacterOut})
    def create(self, request: Request) -> Response:
        data = s.CharacterIn(data=request.data)
        data.is_valid(raise_exception=True)
        character = character_import(
            tenant=self.actor.tenant,
            name=data.validated_data["name"],
            lineage_key=data.validated_data.get("lineage_key") or None,
            created_by=self.actor.user,
        )
        return Response(s.CharacterOut(character).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Delete a character (its creator or a tenant admin)",
                   description="403 `permission_denied` (S-1) for any other member; its chats stay, without it.")
    def destroy(self, request: Request, pk: str) -> Response:
        character_delete(actor=self.actor, character=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class PersonaListView(TenantAPIView):
    @extend_schema(responses=s.PersonaGroupOut(many=True), summary="Personas grouped by lineage (S-2)")
    def get(self, request: Request) -> Response:
        return Response(s.PersonaGroupOut(personas.persona_groups(actor=self.actor), many=True).data)


class PersonaImportView(TenantAPIView):
    parser_classes = [CappedMultiPartParser]

    @extend_schema(request={"multipart/form-data": s.PersonaImportIn}, responses={201: s.PersonaImportOut},
                   summary="Import a character card as a persona (the seed's /persona import)",
                   description="The card's character joins its lineage and the card's Character Book goes into "
                               "the lineage's book, in one transaction; admins only (S-1). All or nothing (I-3).")
    def post(self, request: Request) -> Response:
        data = s.PersonaImportIn(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        done = personas.persona_import(
            actor=self.actor, data=upload.read(), filename=upload.name,
            lineage_key=data.validated_data.get("lineage_key") or None, mode=data.validated_data["mode"],
        )
        if done.book is not None:
            done.book.entry_count = book_entry_count(done.book)  # type: ignore[attr-defined]
        body = {"character": done.character, "character_created": done.created, "book": done.book,
                "receipt": done.receipt}
        return Response(s.PersonaImportOut(body).data, status=status.HTTP_201_CREATED)


class StoryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = s.StoryOut
    lookup_value_regex = r"\d+"

    def scoped_queryset(self, actor: Actor) -> QuerySet[Story]:
        return Story.objects.for_tenant(actor.tenant).prefetch_related("cast").order_by("id")

    @extend_schema(request=s.StoryIn, responses={201: s.StoryOut})
    def create(self, request: Request) -> Response:
        data = s.StoryIn(data=request.data)
        data.is_valid(raise_exception=True)
        story = chat_services.story_create(actor=self.actor, **data.validated_data)
        return Response(s.StoryOut(story).data, status=status.HTTP_201_CREATED)


class NovelViewSet(StoryViewSet):
    serializer_class = s.NovelOut

    def scoped_queryset(self, actor: Actor) -> QuerySet[Novel]:  # type: ignore[override]
        return Novel.objects.for_tenant(actor.tenant).prefetch_related("cast").order_by("id")

    @extend_schema(request=s.StoryIn, responses={201: s.NovelOut})
    def create(self, request: Request) -> Response:
        data = s.StoryIn(data=request.data)
        data.is_valid(raise_exception=True)
        novel = chat_services.novel_create(actor=self.actor, **data.validated_data)
        return Response(s.NovelOut(novel).data, status=status.HTTP_201_CREATED)


class AttachmentViewSet(mixins.ListModelMixin, TenantViewSet):
    serializer_class = s.AttachmentOut
    lookup_value_regex = r"\d+"

    def scoped_queryset(self, actor: Actor) -> QuerySet[Attachment]:
        return Attachment.objects.for_tenant(actor.tenant).select_related("book").order_by("position", "id")

    @extend_schema(responses=s.AttachmentOut(many=True))
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset()) or []
        rows = [s.attachment_out(a, cast_selectors.attachment_seen(self.actor, a)) for a in page]
        return self.get_paginated_response(rows)

    @extend_schema(request=s.AttachmentIn, responses={201: s.AttachmentOut})
    def create(self, request: Request) -> Response:
        data = s.AttachmentIn(data=request.data)
        data.is_valid(raise_exception=True)
        attachment = book_attach(
            actor=self.actor,
            target=data.validated_data["target"],
            target_id=data.validated_data.get("target_id"),
            book_id=data.validated_data.get("book_id"),
            link_token=data.validated_data.get("link_token") or None,
        )
        body = s.attachment_out(attachment, cast_selectors.attachment_seen(self.actor, attachment))
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Detach a book (whoever attached it, the book's owner or a tenant admin)",
                   description="403 `permission_denied` (S-1) for any other member. Another user's private book "
                   "is listed as \"A private book\", not injected for this caller, without its title (P-1).")
    def destroy(self, request: Request, pk: str) -> Response:
        attachment_delete(actor=self.actor, attachment_id=int(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChatViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = s.ChatOut
    lookup_value_regex = r"\d+"

    def scoped_queryset(self, actor: Actor) -> QuerySet[Chat]:
        return Chat.objects.for_tenant(actor.tenant).prefetch_related("members").order_by("id")

    @extend_schema(request=s.ChatIn, responses={201: s.ChatOut})
    def create(self, request: Request) -> Response:
        data = s.ChatIn(data=request.data)
        data.is_valid(raise_exception=True)
        chat = chat_services.chat_create(actor=self.actor, **data.validated_data)
        return Response(s.ChatOut(chat).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.ContextIn, responses={200: CONTEXT_RESPONSE}, summary="The lore for this turn (P-7)")
    @action(detail=True, methods=["post"])
    def context(self, request: Request, pk: str) -> Response:
        answer = turns.chat_turn(actor=self.actor, chat_id=int(pk), request=turn_input(s.context_in(request.data)))
        return Response(context_body(answer))

    @extend_schema(request=s.PreviewIn, responses={200: CONTEXT_RESPONSE},
                   summary="What a sample message would bring in this chat (W-10); changes nothing")
    @action(detail=True, methods=["post"], url_path="preview", required_scope="read")
    def preview(self, request: Request, pk: str) -> Response:
        data = s.PreviewIn(data=request.data)
        data.is_valid(raise_exception=True)
        answer = turns.chat_preview(actor=self.actor, chat_id=int(pk), request=preview_input(data.validated_data))
        return Response(context_body(answer))

    @extend_schema(responses=s.LoreOut, summary="Full text of an entry this chat reaches (the lookup tool, W-5/W-6)")
    @action(detail=True, methods=["get"], url_path=r"lore/(?P<entry_id>\d+)")
    def lore(self, request: Request, pk: str, entry_id: str) -> Response:
        chat = cast_selectors.chat_get(actor=self.actor, chat_id=int(pk))
        profile = chat.profile or self.actor.tenant.default_profile
        gathering = cast_selectors.chat_books_gather(chat, actor=self.actor, profile=profile)
        return Response(lore_lookup([g.book for g in gathering.books], entry_id))

    @extend_schema(request=s.ToolCallIn, tags=["living world"], responses={
                       200: s.ToolCallOut,
                       409: OpenApiResponse(ErrorOut, description="`living_world_profile` (L-1): the chat's profile "
                                            "does not read the living world (only `smart` does); nothing written."),
                   },
                   summary="Run a living-world tool call from this chat's reply (L-1..L-4)",
                   description="Refusals (the 30-writes budget, a size, a chat that is not the book owner's, a "
                   "book without the living world) are answered 200 with `ok: false` and the error in the tool "
                   "result, for the model to read. A chat the caller cannot see is 404. A chat whose profile is "
                   "not `smart` (the only one that reads the living world, so no tools were offered there) is "
                   "409 `living_world_profile` (L-1).")
    @action(detail=True, methods=["post"], url_path="tool-calls")
    def tool_calls(self, request: Request, pk: str) -> Response:
        data = s.ToolCallIn(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        result = living.tool_call_run(actor=self.actor, chat_id=int(pk), reply_id=values["reply_id"],
                                      model=values["model"], tool_call=values["tool_call"],
                                      profile=values["profile"])
        return Response({"ok": result.ok, "result": result.result, "message": result.message})

    @extend_schema(request=None, responses={200: s.ReplyRevertOut}, tags=["living world"],
                   summary="A reply was regenerated or deleted: revert every write it made, atomically (L-4)",
                   description="409 `undo_conflict` when an entry changed since; nothing is reverted then.")
    @action(detail=True, methods=["post"], url_path=r"replies/(?P<reply_id>[^/]+)/revert")
    def reply_revert(self, request: Request, pk: str, reply_id: str) -> Response:
        writes = living.reply_revert(actor=self.actor, chat_id=int(pk), reply_id=reply_id)
        return Response({"reply_id": reply_id, "reverted": [
            {"id": w.pk, "book": w.book_id, "entry": w.entry_id, "kind": w.kind, "state": w.state} for w in writes
        ]})

    @extend_schema(responses=s.RequestLogOut(many=True), summary="Which entries entered each request (C-15)")
    @action(detail=True, methods=["get"], pagination_class=RequestLogPagination)
    def requests(self, request: Request, pk: str) -> Response:
        chat = cast_selectors.chat_get(actor=self.actor, chat_id=int(pk))
        page = self.paginate_queryset(cast_selectors.chat_request_logs(actor=self.actor, chat=chat))
        page = cast_selectors.request_logs_for(self.actor, list(page or []))
        return self.get_paginated_response(s.RequestLogOut(page, many=True).data)


class StatelessContextView(TenantAPIView):
    required_scope = "read"

    @extend_schema(request=s.StatelessContextIn, responses={200: CONTEXT_RESPONSE},
                   summary="The lore for an ad-hoc turn: books by id and/or a character/story/novel (P-7)")
    def post(self, request: Request) -> Response:
        data = s.StatelessContextIn(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        target = {k: values[k] for k in ("character_id", "story_id", "novel_id") if values.get(k)}
        answer = turns.stateless_turn(actor=self.actor, request=turn_input(values), book_ids=values.get("book_ids") or [],
                                      target=target, timed_state=_state_of(request.data))
        return Response(context_body(answer))


def _state_of(data: object) -> dict[str, Any]:
    """A stateless caller may hand back the timed state of its previous turn."""
    state = data.get("timed_state") if isinstance(data, dict) else None
    if state is None:
        return {}
    if not isinstance(state, dict):
        raise ValidationFailed("timed_state is the object a previous turn returned.", field="timed_state")
    return state


class BookPreviewView(TenantAPIView):
    required_scope = "read"

    @extend_schema(request=s.PreviewIn, responses={200: CONTEXT_RESPONSE},
                   summary="What a sample message would bring from this book (W-10); changes nothing")
    def post(self, request: Request, book_id: int) -> Response:
        data = s.PreviewIn(data=request.data)
        data.is_valid(raise_exception=True)
        book = book_for_attach(self.actor, book_id=book_id)
        answer = turns.book_preview(actor=self.actor, book=book, request=preview_input(data.validated_data))
        return Response(context_body(answer))


class BookLoreView(TenantAPIView):
    @extend_schema(responses=s.LoreOut, summary="Full text of an entry of a book the caller may read (W-5/W-6)")
    def get(self, request: Request, book_id: int, entry_id: int) -> Response:
        book = book_for_attach(self.actor, book_id=book_id, link_token=request.query_params.get("link_token"))
        return Response(lore_lookup([book], str(entry_id)))
