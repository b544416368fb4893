"""Characters, stories, novels, chats, attachments, and the per-turn context call."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from lore_platform.api.base import TenantAPIView, TenantViewSet
from lore_platform.api.pagination import Pagination
from lore_platform.cast import chats as chat_services
from lore_platform.cast.api import serializers as s
from lore_platform.cast.attachments import (
    GatheredBook,
    Gathering,
    attachment_delete,
    attachment_status,
    book_attach,
    chat_books_gather,
)
from lore_platform.cast.models import Attachment, Character, Chat, Novel, Story
from lore_platform.cast.services import character_delete, character_import
from lore_platform.errors import NotFound
from lore_platform.tenancy.actor import Actor
from retrieval.context import ContextInput, chat_turn, context_run
from retrieval.engine import values as ev
from retrieval.lookup import lore_lookup

CONTEXT_RESPONSE = OpenApiResponse(
    response=OpenApiTypes.OBJECT,
    description=(
        "injections (entry, book, slot, role, content, label, tokens, cache_stable) in prompt order; "
        "world_index; tools; request_log (one outcome per entry, C-15); timed_state; books and "
        "books_left_out (with the reason); messages when a template is rendered."
    ),
)


def context_input(data: dict[str, Any], *, profile: str) -> ContextInput:
    names = data.get("names") or {}
    model = data.get("model") or {}
    channel = data.get("channel")
    return ContextInput(
        profile=profile,
        messages=tuple(ev.Message(role=m["role"], text=m["text"], name=m.get("name", "")) for m in data["messages"]),
        names=ev.Names(user=names.get("user", "User"), char=names.get("char", "Character"), bot=names.get("bot")),
        model_id=model.get("id") or None,
        tokenizer=model.get("tokenizer") or None,
        input_window=model.get("input_window"),
        channel=ev.Channel(id=channel["id"], parent=channel.get("parent")) if channel else None,
        template=tuple(data["template"]) if data.get("template") else None,
        parts=dict(data.get("parts") or {}),
        render=bool(data.get("render")),
        tools=bool(model.get("tools")),
    )


class RequestLogPagination(Pagination):
    # One log explains every entry a turn considered (100+ KB on a big book): small pages.
    page_size = 20
    max_page_size = 50


def profile_of(actor: Actor, requested: str | None, chat: Chat | None = None) -> str:
    return requested or (chat.profile if chat and chat.profile else "") or actor.tenant.default_profile


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
        )
        return Response(s.CharacterOut(character).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, pk: str) -> Response:
        character_delete(tenant=self.actor.tenant, character=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


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
        page = self.paginate_queryset(self.get_queryset())
        rows = [s.attachment_out(a, *attachment_status(self.actor.tenant, a)) for a in page]
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
        body = s.attachment_out(attachment, *attachment_status(self.actor.tenant, attachment))
        return Response(body, status=status.HTTP_201_CREATED)

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
        data = s.ContextIn(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        result = chat_turn(actor=self.actor, chat_id=int(pk),
                           request=context_input(values, profile=values.get("profile") or ""))
        return Response(result.as_dict(log=values["log"]))

    @extend_schema(request=s.PreviewIn, responses={200: CONTEXT_RESPONSE},
                   summary="What a sample message would bring in this chat (W-10); changes nothing")
    @action(detail=True, methods=["post"], url_path="preview", required_scope="read")
    def preview(self, request: Request, pk: str) -> Response:
        data = s.PreviewIn(data=request.data)
        data.is_valid(raise_exception=True)
        values = {**data.validated_data, "messages": [{"role": "user", "text": data.validated_data["message"]}]}
        result = chat_turn(actor=self.actor, chat_id=int(pk),
                           request=context_input(values, profile=values.get("profile") or ""), persist=False)
        return Response(result.as_dict(log=values["log"]))

    @extend_schema(responses=s.LoreOut, summary="Full text of an entry this chat reaches (the lookup tool, W-5/W-6)")
    @action(detail=True, methods=["get"], url_path=r"lore/(?P<entry_id>\d+)")
    def lore(self, request: Request, pk: str, entry_id: str) -> Response:
        chat = chat_services.chat_get(actor=self.actor, chat_id=int(pk))
        gathering = chat_books_gather(chat, profile=profile_of(self.actor, None, chat))
        return Response(lore_lookup([g.book for g in gathering.books], entry_id))

    @extend_schema(responses=s.RequestLogOut(many=True), summary="Which entries entered each request (C-15)")
    @action(detail=True, methods=["get"], pagination_class=RequestLogPagination)
    def requests(self, request: Request, pk: str) -> Response:
        chat = chat_services.chat_get(actor=self.actor, chat_id=int(pk))
        page = self.paginate_queryset(chat_services.chat_request_logs(actor=self.actor, chat=chat))
        return self.get_paginated_response(s.RequestLogOut(page, many=True).data)


def _readable_books(actor: Actor, book_ids: list[int]) -> list[GatheredBook]:
    from sharing.selectors import book_for_attach

    return [GatheredBook(book=book_for_attach(actor, book_id=i), label=None, via="request") for i in book_ids]


class StatelessContextView(TenantAPIView):
    required_scope = "read"

    @extend_schema(request=s.StatelessContextIn, responses={200: CONTEXT_RESPONSE},
                   summary="The lore for an ad-hoc turn: books by id and/or a character/story/novel (P-7)")
    def post(self, request: Request) -> Response:
        data = s.StatelessContextIn(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        profile = profile_of(self.actor, values.get("profile"))
        books = _readable_books(self.actor, values.get("book_ids") or [])
        left_out = []
        target = {k: values.get(k) for k in ("character_id", "story_id", "novel_id") if values.get(k)}
        if len(target) > 1:
            from lore_platform.errors import ValidationFailed

            raise ValidationFailed("Name at most one of character_id, story_id, novel_id.", field="character_id")
        if target:
            chat = _transient_chat(self.actor, target)
            gathered = chat_books_gather(chat, profile=profile)
            seen = {g.book.pk for g in books}
            books += [g for g in gathered.books if g.book.pk not in seen]
            left_out = gathered.left_out
        result = context_run(
            request=context_input(values, profile=profile),
            gathering=Gathering(books=books, left_out=left_out),
            state=_state_of(request.data),
            seed=f"tenant-{self.actor.tenant.pk}",
        )
        return Response(result.as_dict(log=values["log"]))


def _state_of(data: object) -> dict[str, Any]:
    """A stateless caller may hand back the timed state of its previous turn."""
    state = data.get("timed_state") if isinstance(data, dict) else None
    if state is None:
        return {}
    if not isinstance(state, dict):
        from lore_platform.errors import ValidationFailed

        raise ValidationFailed("timed_state is the object a previous turn returned.", field="timed_state")
    return state


def _transient_chat(actor: Actor, target: dict[str, int]) -> Chat:
    chat = Chat(tenant=actor.tenant)
    if "character_id" in target:
        chat.kind = Chat.Kind.CHARACTER
        chat.character = Character.objects.for_tenant(actor.tenant).filter(pk=target["character_id"]).first()
        found: object = chat.character
    elif "story_id" in target:
        chat.kind = Chat.Kind.STORY
        chat.story = Story.objects.for_tenant(actor.tenant).filter(pk=target["story_id"]).first()
        found = chat.story
    else:
        chat.kind = Chat.Kind.NOVEL
        chat.novel = Novel.objects.for_tenant(actor.tenant).filter(pk=target["novel_id"]).first()
        found = chat.novel
    if found is None:
        raise NotFound("No such character, story or novel.", field=next(iter(target)))
    return chat


class BookPreviewView(TenantAPIView):
    required_scope = "read"

    @extend_schema(request=s.PreviewIn, responses={200: CONTEXT_RESPONSE},
                   summary="What a sample message would bring from this book (W-10); changes nothing")
    def post(self, request: Request, book_id: int) -> Response:
        data = s.PreviewIn(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        from sharing.selectors import book_for_attach

        book = book_for_attach(self.actor, book_id=book_id)
        profile = values.get("profile") or book.profile
        request_data = {**values, "messages": [{"role": "user", "text": values["message"]}]}
        result = context_run(
            request=context_input(request_data, profile=profile),
            gathering=Gathering(books=[GatheredBook(book=book, label=None, via="preview")], left_out=[]),
            state={},
            seed=f"preview-{book.pk}",
            dry_run=True,
        )
        return Response(result.as_dict(log=values["log"]))


class BookLoreView(TenantAPIView):
    @extend_schema(responses=s.LoreOut, summary="Full text of an entry of a book the caller may read (W-5/W-6)")
    def get(self, request: Request, book_id: int, entry_id: int) -> Response:
        from sharing.selectors import book_for_attach

        book = book_for_attach(self.actor, book_id=book_id, link_token=request.query_params.get("link_token"))
        return Response(lore_lookup([book], str(entry_id)))
