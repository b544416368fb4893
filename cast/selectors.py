"""Reads of cast: chats, their request logs, and the books a chat gathers (W-8, W-9, S-2, S-11, S-12).

A chat reads the books of everything it involves; a book reached twice is used
once, and in chats with several characters every book carries the name of the
character it came from. A book that stopped reaching the chat (another
tenant's book made private again) is left out with the reason.

Private means the owner alone (P-1, issue 26.4): a private book of the tenant
attached to a shared character, story or novel (or the whole tenant) is used
only when the caller is its owner. Every other caller gets it in
``books_left_out`` as "a private book", without its title, and meets none of
its lore in the answers, the stored request logs, the lookup tool or the
attachment listings. The rule is ``books.access.book_can_read``, applied to the
books already loaded: no query of its own on the turn's path.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import connection
from django.db.models import Model, Q, QuerySet

from books.access import book_can_read, book_is_owners_alone
from books.models import Book, Entry, Scope
from cast.models import Attachment, Character, Chat, RequestLog
from lore_platform.errors import NotFound
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant
from sharing.selectors import book_injectable_for


class _Lru(OrderedDict[Hashable, Any]):
    """A small per-process memo, oldest dropped first."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.lock = threading.Lock()

    def get_or(self, key: Hashable, make: Callable[[], Any]) -> Any:
        found = self.get(key)
        if found is None:
            found = make()
            with self.lock:
                self[key] = found
                while len(self) > self.size:
                    self.popitem(last=False)
        return found


# SQL the ORM compiled for the common turn's gathering, by the values it was built with: compiling
# the query costs ~3 times running it (measured: ~0.75 ms vs ~0.2 ms for the attachments join).
# (The chat's own row is read and written by cast/turn_store.py.)
_statements = _Lru(4096)


def statement_rows(key: Hashable, build: Callable[[], QuerySet[Any]]) -> list[tuple[Any, ...]]:
    """Rows of the queryset ``build()`` returns, as plain tuples, compiled once per ``key``.

    ``key`` names every value the queryset is built from (tenant, ids): the same key always
    compiles to the same SQL, so the statement is reused, still the tenant-scoped manager's own.
    Values come as the database driver reads them (JSON as text).
    """
    sql, params = _statements.get_or(key, lambda: build().query.sql_with_params())
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@functools.cache
def _decoders(model: type[Model], names: tuple[str, ...]) -> tuple[tuple[int, Callable[..., Any]], ...]:
    fields = [model._meta.get_field(name) for name in names]
    return tuple((i, f.from_db_value) for i, f in enumerate(fields) if hasattr(f, "from_db_value"))


def _from_row(model: type[Model], names: tuple[str, ...], row: tuple[Any, ...]) -> Any:
    """A model instance from raw column values (JSON text decoded as the field does)."""
    values = list(row)
    for index, decode in _decoders(model, names):
        values[index] = decode(values[index], None, connection)
    return model.from_db(connection.alias, names, values)


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
    # The book row (or the columns that decide who may read it), for the caller's view.
    book: Book | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class Gathering:
    books: list[GatheredBook]
    left_out: list[LeftOutBook]
    # This gathering as each caller sees it (``gathering_for``), by what ``book_can_read`` asks of a caller.
    views: dict[tuple[Any, ...], Gathering] = field(default_factory=dict, compare=False, repr=False)

    @functools.cached_property
    def owners_alone(self) -> bool:
        """Whether some book here is a user's private one, which callers see differently (P-1).
        Worked out once per gathering: the common turn's gathering is cached, so most turns pay nothing."""
        return any(book_is_owners_alone(g.book) for g in self.books) or \
            any(left.book is not None and book_is_owners_alone(left.book) for left in self.left_out)


# What every caller but a private book's owner is told of it: that it is there, not what it is.
PRIVATE_TITLE = "A private book"
PRIVATE_REASON = "Private to its owner: only its owner's own calls use it (P-1)."


def book_usable_by(actor: Actor, book: Book) -> bool:
    """Whether ``actor``'s calls may use ``book`` gathered for one of their tenant's chats.

    The tenant's own books follow the one rule of books (``book_can_read``: a private book is its
    owner's alone); another tenant's book reached this far was shared with the tenant, and whether
    it still is is ``book_injectable_for``'s to say (W-9, P-1). Reads loaded columns only.
    """
    return book.tenant_id != actor.tenant.pk or book_can_read(actor, book)


def gathering_for(actor: Actor, gathering: Gathering) -> Gathering:
    """``gathering`` as ``actor`` may use it: another user's private books move to ``left_out``,
    untitled, with the reason. The same object back when nothing is hidden (the common turn)."""
    if not gathering.owners_alone:
        return gathering
    # What book_can_read asks of the caller; a cached gathering then costs one dict lookup a turn.
    key = (actor.tenant.pk, actor.user.pk if actor.user is not None else None, actor.can_read)
    seen = gathering.views.get(key)
    if seen is None:
        if len(gathering.views) > 64:
            gathering.views.clear()
        seen = gathering.views[key] = _seen_by(actor, gathering)
    return seen


def _seen_by(actor: Actor, gathering: Gathering) -> Gathering:
    hidden = [g for g in gathering.books if not book_usable_by(actor, g.book)]
    renamed = [left for left in gathering.left_out if left.book is not None and not book_usable_by(actor, left.book)]
    if not hidden and not renamed:
        return gathering
    hidden_ids = {g.book.pk for g in hidden}  # a gathering holds each book once
    renamed_ids = {left.book_id for left in renamed}
    books = [g for g in gathering.books if g.book.pk not in hidden_ids]
    left_out = [replace(left, title=PRIVATE_TITLE, reason=PRIVATE_REASON) if left.book_id in renamed_ids else left
                for left in gathering.left_out]
    left_out += [LeftOutBook(book_id=g.book.pk, title=PRIVATE_TITLE, reason=PRIVATE_REASON, book=g.book)
                 for g in hidden]
    return Gathering(books=books, left_out=left_out)


@dataclass(frozen=True, kw_only=True)
class AttachmentSeen:
    """An attachment as one caller sees it: another user's private book is there, but untitled."""

    injected: bool
    reason: str | None
    book_title: str
    hidden: bool = False


def attachment_seen(actor: Actor, attachment: Attachment) -> AttachmentSeen:
    """Whether the attached book reaches ``actor``'s chats, and if not, why (W-9, P-1)."""
    book = attachment.book
    if not book_usable_by(actor, book):
        return AttachmentSeen(injected=False, reason=PRIVATE_REASON, book_title=PRIVATE_TITLE, hidden=True)
    injected, reason = book_injectable_for(actor.tenant, book, link_token=attachment.link_token)
    return AttachmentSeen(injected=injected, reason=reason, book_title=book.title)


def _as_id(value: Any) -> int | None:
    # Stored logs name ids as integers, older ones as text.
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def request_logs_for(actor: Actor, logs: list[RequestLog]) -> list[RequestLog]:
    """Stored request logs as ``actor`` may read them: rows of books they may not read are dropped.

    A log keeps what its turn's caller could see (the owner's turns name their private books);
    a reader sees it through today's rule, so a book made private later is hidden too, and one
    made shared shows again. World-index rows name only an entry: its book is the one the log's
    own rows give it (an indexed entry is logged), else the tenant's entry row says; a row whose
    entry is found nowhere is dropped (its title may have been private). At most two queries a page.
    """
    book_ids: set[int] = set()
    entry_books: dict[int, int] = {}
    for log in logs:
        for row in [*log.injections, *log.log]:
            if (book := _as_id(row.get("book"))) is not None:
                book_ids.add(book)
                if (entry := _as_id(row.get("entry"))) is not None:
                    entry_books[entry] = book
    entry_ids = {e for log in logs for row in log.world_index if (e := _as_id(row.get("entry"))) is not None}
    if unmapped := entry_ids - set(entry_books):
        found = Entry.objects.for_tenant(actor.tenant).filter(pk__in=unmapped).values_list("pk", "book_id")
        entry_books.update(dict(found))
        book_ids.update(entry_books.values())
    books = Book.objects.for_tenant(actor.tenant).filter(pk__in=book_ids).only("tenant_id", "owner_id", "visibility")
    hidden = {book.pk for book in books if not book_usable_by(actor, book)} if book_ids else set()
    if not hidden and all(e in entry_books for e in entry_ids):
        return logs
    for log in logs:
        log.injections = [r for r in log.injections if _as_id(r.get("book")) not in hidden]
        log.log = [r for r in log.log if _as_id(r.get("book")) not in hidden]
        log.world_index = [r for r in log.world_index
                           if (book := entry_books.get(_as_id(r.get("entry")))) is not None  # type: ignore[arg-type]
                           and book not in hidden]
    return logs


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


def chat_books_gather(chat: Chat, *, actor: Actor, profile: str) -> Gathering:
    """The books ``actor``'s turn in ``chat`` reads, in attachment order, each once (W-8, S-2),
    without other users' private books (left out, untitled: P-1)."""
    return gathering_for(actor, _gather(chat, profile=profile))


def _gather(chat: Chat, *, profile: str) -> Gathering:
    """The books a chat reads for any caller of its tenant (cached: the caller's view comes after)."""
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
        if chat.kind == Chat.Kind.CHARACTER and chat.character_id is not None and profile != "smart":
            return _character_gather(tenant, chat.character_id)
        if chat.kind == Chat.Kind.CHARACTER and chat.character_id is not None:
            # The character's books then the tenant-wide ones, in one query.
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
            cast = list(chat.story.cast.order_by("id"))  # type: ignore[union-attr]  # story_id checked above
        elif chat.kind == Chat.Kind.NOVEL and chat.novel_id is not None:
            add(_attached(tenant, profile, novel=chat.novel_id), label=None, via="novel")
            cast = list(chat.novel.cast.order_by("id"))  # type: ignore[union-attr]  # novel_id checked above
        labelled = chat.kind != Chat.Kind.CHARACTER
        for character in cast:
            add(_attached(tenant, profile, character=character), label=character.name if labelled else None,
                via="character")
    add(_attached(tenant, profile, character=None, story=None, novel=None), label=None, via="tenant")
    return _dedupe(tenant, ordered)


_BOOK_COLUMNS = tuple(f.attname for f in Book._meta.concrete_fields)
# Gatherings by the exact rows they were made from (every column of every book): equal rows, equal gathering.
_gatherings = _Lru(1024)


def _character_gather(tenant: Tenant, character_id: int) -> Gathering:
    """The common turn's gathering (a character's books, then the tenant-wide ones), in one query
    that builds no model instance when its rows are the ones seen last time.

    The key is every column of every attached book plus the attachments' own: any change to a
    book (version, visibility, title, ...) or to what is attached is a different key. A book of
    another tenant attached by an unlisted link also depends on the link's current token
    (P-1), which these rows do not show: such a gathering is never kept.
    """
    rows = statement_rows(
        ("gather", tenant.pk, character_id),
        lambda: Attachment.objects.for_tenant(tenant).filter(Q(character_id=character_id) | _TENANT_WIDE)
        .order_by("position", "id")
        .values_list("character_id", "link_token", *(f"book__{name}" for name in _BOOK_COLUMNS)),
    )
    key = (tenant.pk, character_id, tuple(rows))

    def make() -> Gathering:
        ordered = []
        for row in [r for r in rows if r[0]] + [r for r in rows if not r[0]]:
            book = _from_row(Book, _BOOK_COLUMNS, row[2:])
            ordered.append(GatheredBook(book=book, label=None, via="character" if row[0] else "tenant",
                                        link_token=row[1]))
        return _dedupe(tenant, ordered)

    if any(link and book_tenant != tenant.pk for _, link, *columns in rows
           for book_tenant in [columns[_BOOK_COLUMNS.index("tenant_id")]]):
        return make()
    return _gatherings.get_or(key, make)


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
        .order_by("position", "id").values_list("book_id", "book__title", "character_id", "story_id", "novel_id",
                                                "book__tenant_id", "book__owner_id", "book__visibility")
    )
    left_out: list[LeftOutBook] = []
    for book_id, title, character_id, story_id, novel_id, book_tenant, owner, visibility in rows:
        if book_id in used:
            continue
        used.add(book_id)
        target = ("the character" if character_id else "the story" if story_id
                  else "the novel" if novel_id else "the whole tenant")
        reason = _SERVER_READS.format(target=target)
        # The columns the caller's view needs (its title is hidden from all but a private book's owner).
        book = Book(pk=book_id, tenant_id=book_tenant, owner_id=owner, visibility=visibility, title=title)
        left_out.append(LeftOutBook(book_id=book_id, title=title, reason=reason[0].upper() + reason[1:], book=book))
    return left_out


def _dedupe(tenant: Tenant, ordered: list[GatheredBook]) -> Gathering:
    seen: set[int] = set()
    books: list[GatheredBook] = []
    left_out: list[LeftOutBook] = []
    for gathered in ordered:
        if gathered.book.pk in seen:
            continue  # attached twice: injected once, with the first label (W-8)
        if gathered.book.trashed_at is not None:
            continue  # in the trash: gone from every turn until restored (its attachments stay for that)
        seen.add(gathered.book.pk)
        injectable, reason = book_injectable_for(tenant, gathered.book, link_token=gathered.link_token)
        if not injectable:
            left_out.append(LeftOutBook(book_id=gathered.book.pk, title=gathered.book.title, reason=reason or "",
                                        book=gathered.book))
            continue
        books.append(gathered)
    return Gathering(books=books, left_out=left_out)
