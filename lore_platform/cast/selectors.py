"""Reads of cast: chats, their request logs, and the books a chat gathers (W-8, W-9, S-2, S-11, S-12).

A chat reads the books of everything it involves; a book reached twice is used
once, and in chats with several characters every book carries the name of the
character it came from. A book that stopped reaching the chat (another
tenant's book made private again) is left out with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from books.models import Book, Scope
from lore_platform.cast.models import Attachment, Character, Chat, RequestLog
from lore_platform.errors import NotFound
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant
from sharing.selectors import book_injectable_for


def chat_get(*, actor: Actor, chat_id: int) -> Chat:
    chat = (
        Chat.objects.for_tenant(actor.tenant)
        .select_related("tenant", "character", "story", "novel")
        .filter(pk=chat_id)
        .first()
    )
    if chat is None:
        raise NotFound("No such chat.", field="id")
    return chat


def chat_request_logs(*, actor: Actor, chat: Chat) -> QuerySet[RequestLog]:
    """Newest first; a queryset, so a page reads (and decompresses) only its own logs."""
    return RequestLog.objects.for_tenant(actor.tenant).filter(chat=chat).order_by("-turn", "-id")


@dataclass(frozen=True, kw_only=True)
class GatheredBook:
    book: Book
    # The character whose book this is, in chats with several characters (W-8).
    label: str | None
    # What the book was reached through: character, story, novel, tenant, persona, server.
    via: str
    # The unlisted link it was attached through, if any (a rotated link stops it: P-1).
    link_token: str = ""


@dataclass(frozen=True, kw_only=True)
class LeftOutBook:
    book_id: int
    title: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class Gathering:
    books: list[GatheredBook]
    left_out: list[LeftOutBook]


def attachment_status(tenant: Tenant, attachment: Attachment) -> tuple[bool, str | None]:
    """Whether the attached book is injected, and if not, why (W-9)."""
    return book_injectable_for(tenant, attachment.book, link_token=attachment.link_token)


def _book_joins(profile: str) -> tuple[str, ...]:
    # Smart searches each book's vectors in its owner's tenant: load owners with the books.
    # Keyword profiles read only the owner's id (the engine loads entries once per version).
    return ("book", "book__tenant") if profile == "smart" else ("book",)


def _attached(tenant: Tenant, profile: str, **target: object) -> list[tuple[Book, str]]:
    rows = (
        Attachment.objects.for_tenant(tenant)
        .filter(**target)
        .select_related(*_book_joins(profile))
        .order_by("position", "id")
    )
    return [(row.book, row.link_token) for row in rows]


# Column names, not relations: the same SQL, compiled in about two thirds of the time (every turn).
_TENANT_WIDE = Q(character_id=None, story_id=None, novel_id=None)


def chat_books_gather(chat: Chat, *, profile: str) -> Gathering:
    """The books a chat reads, in attachment order, each once (W-8, S-2)."""
    tenant = chat.tenant
    ordered: list[GatheredBook] = []

    def add(books: list[tuple[Book, str]], *, label: str | None, via: str) -> None:
        ordered.extend(GatheredBook(book=book, label=label, via=via, link_token=token) for book, token in books)

    if profile == "server":
        # Server-wide collections apply to every persona; the persona's book follows its lineage.
        add(
            [(b, "") for b in Book.objects.for_tenant(tenant).filter(scope=Scope.SERVER).order_by("id")],
            label=None,
            via="server",
        )
        if chat.character_id is not None:
            add(
                [
                    (b, "")
                    for b in Book.objects.for_tenant(tenant)
                    .filter(scope=Scope.PERSONA, lineage__characters=chat.character_id)
                    .order_by("id")
                ],
                label=None,
                via="persona",
            )
        gathering = _dedupe(tenant, ordered)
        used = {g.book.pk for g in gathering.books} | {left.book_id for left in gathering.left_out}
        return Gathering(books=gathering.books, left_out=gathering.left_out + _server_unread(chat, used))
    else:
        cast: list[Character] = []
        if chat.kind == Chat.Kind.CHARACTER and chat.character_id is not None:
            # The common turn: the character's books then the tenant-wide ones, in one query.
            rows = (
                Attachment.objects.for_tenant(tenant)
                .filter(Q(character_id=chat.character_id) | _TENANT_WIDE)
                .select_related(*_book_joins(profile))
                .order_by("position", "id")
            )
            add([(r.book, r.link_token) for r in rows if r.character_id], label=None, via="character")
            add([(r.book, r.link_token) for r in rows if not r.character_id], label=None, via="tenant")
            return _dedupe(tenant, ordered)
        elif chat.kind == Chat.Kind.GROUP:
            cast = list(chat.members.order_by("id"))
        elif chat.kind == Chat.Kind.STORY and chat.story_id is not None:
            add(_attached(tenant, profile, story=chat.story_id), label=None, via="story")
            cast = list(chat.story.cast.order_by("id"))
        elif chat.kind == Chat.Kind.NOVEL and chat.novel_id is not None:
            add(_attached(tenant, profile, novel=chat.novel_id), label=None, via="novel")
            cast = list(chat.novel.cast.order_by("id"))
        labelled = chat.kind != Chat.Kind.CHARACTER
        for character in cast:
            add(_attached(tenant, profile, character=character), label=character.name if labelled else None,
                via="character")
    add(_attached(tenant, profile, character=None, story=None, novel=None), label=None, via="tenant")
    return _dedupe(tenant, ordered)


_SERVER_READS = ("the server profile reads the server-wide collections and the persona's lineage book, "
                 "not books attached to {target} (S-2)")


def _server_unread(chat: Chat, used: set[int]) -> list[LeftOutBook]:
    """Books attached to what the chat involves, which the server profile does not read: said, not dropped."""
    targets = _TENANT_WIDE
    if chat.character_id is not None:
        targets |= Q(character_id=chat.character_id)
    if chat.pk is not None and chat.kind == Chat.Kind.GROUP:
        targets |= Q(character__in=chat.members.all())
    if chat.story_id is not None:
        targets |= Q(story_id=chat.story_id) | Q(character__stories=chat.story_id)
    if chat.novel_id is not None:
        targets |= Q(novel_id=chat.novel_id) | Q(character__novels=chat.novel_id)
    # Plain tuples: this runs on every server turn, and usually finds nothing.
    rows = (
        Attachment.objects.for_tenant(chat.tenant).filter(targets).exclude(book_id__in=used)
        .order_by("position", "id").values_list("book_id", "book__title", "character_id", "story_id", "novel_id")
    )
    left_out: list[LeftOutBook] = []
    for book_id, title, character_id, story_id, novel_id in rows:
        if book_id in used:
            continue
        used.add(book_id)
        target = ("the character" if character_id else "the story" if story_id
                  else "the novel" if novel_id else "the whole tenant")
        reason = _SERVER_READS.format(target=target)
        left_out.append(LeftOutBook(book_id=book_id, title=title, reason=reason[0].upper() + reason[1:]))
    return left_out


def _dedupe(tenant: Tenant, ordered: list[GatheredBook]) -> Gathering:
    seen: set[int] = set()
    books: list[GatheredBook] = []
    left_out: list[LeftOutBook] = []
    for gathered in ordered:
        if gathered.book.pk in seen:
            continue  # attached twice: injected once, with the first label (W-8)
        seen.add(gathered.book.pk)
        injectable, reason = book_injectable_for(tenant, gathered.book, link_token=gathered.link_token)
        if not injectable:
            left_out.append(LeftOutBook(book_id=gathered.book.pk, title=gathered.book.title, reason=reason or ""))
            continue
        books.append(gathered)
    return Gathering(books=books, left_out=left_out)
