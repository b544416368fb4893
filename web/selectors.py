"""Reads the pages need that no other app offers yet (small, tenant-scoped)."""
from __future__ import annotations

import email
from dataclasses import dataclass
from datetime import datetime
from email.policy import default as default_policy
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.db.models import Count, Q

from books.models import Book, LoreWrite
from books.selectors import CanonMeter, book_canon_meter, book_list
from books.tokens import model_tokenizer
from cast.models import Attachment, Character, Chat, Novel, Story
from cast.selectors import attachment_seen
from cast.services import may_undo
from lore_platform.errors import DomainError
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import ApiKey, Tenant
from sharing.selectors import shared_book_entries

TARGET_KINDS = ("character", "story", "novel")


def attach_targets(actor: Actor) -> list[tuple[str, int, str]]:
    """What the actor may attach a book to: (kind, id, name) of the tenant's characters, stories, novels."""
    tenant = actor.tenant
    rows: list[tuple[str, int, str]] = []
    rows += [("character", c.pk, c.name) for c in Character.objects.for_tenant(tenant).order_by("name", "id")]
    rows += [("story", s.pk, s.title) for s in Story.objects.for_tenant(tenant).order_by("title", "id")]
    rows += [("novel", n.pk, n.title) for n in Novel.objects.for_tenant(tenant).order_by("title", "id")]
    return rows


def api_keys_of(actor: Actor) -> list[ApiKey]:
    return list(ApiKey.objects.for_tenant(actor.tenant).select_related("user").order_by("-created_at", "-id"))


@lru_cache(maxsize=4096)
def _canon_tokens(book_id: int, version: int) -> int:
    # Keyed on the version: any edit of the book makes a new key (the old one ages out).
    count = model_tokenizer(None).count
    book = Book(pk=book_id)
    entries = shared_book_entries(book).filter(constant=True, enabled=True).values_list("content", flat=True)
    return sum(count(text) for text in entries)


def book_canon_tokens(book: Book) -> int:
    """Tokens the book's enabled canon costs every turn (the engine's estimate for an unnamed model)."""
    return _canon_tokens(book.pk, book.version)


# --- characters, stories, novels and what is attached to them (issue 15.6) -----------------

WORLD_OWNERS: dict[str, Any] = {"character": Character, "story": Story, "novel": Novel}


def world_owner_get(actor: Actor, kind: str, owner_id: int) -> Character | Story | Novel | None:
    """One of the tenant's characters, stories or novels (None: not this tenant's, P-3)."""
    owner: Character | Story | Novel | None = (
        WORLD_OWNERS[kind].objects.for_tenant(actor.tenant).filter(pk=owner_id).first())
    return owner


def characters_of(actor: Actor) -> list[Character]:
    """The tenant's characters by name: the cast to choose a story's or novel's from."""
    return list(Character.objects.for_tenant(actor.tenant).order_by("name", "id"))


def world_owners_with_attachments(actor: Actor, kind: str) -> list[dict[str, Any]]:
    """The tenant's characters (or stories, novels) with their attachments in attachment order,
    each with whether its book still reaches chats and why not (W-9, P-1: a rotated link)."""
    model = WORLD_OWNERS[kind]
    owners = model.objects.for_tenant(actor.tenant).order_by("name" if kind == "character" else "title", "id")
    if kind != "character":
        owners = owners.prefetch_related("cast")
    owners = list(owners)
    rows = (
        Attachment.objects.for_tenant(actor.tenant)
        .filter(**{f"{kind}__isnull": False})
        .select_related("book")
        .order_by("position", "id")
    )
    attached: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        seen = attachment_seen(actor, row)  # another user's private book: there, but untitled (P-1)
        attached.setdefault(getattr(row, f"{kind}_id"), []).append(
            {"attachment": row, "title": seen.book_title, "hidden": seen.hidden, "injected": seen.injected,
             "reason": seen.reason, "may_detach": may_undo(actor, row.attached_by_id, row.book.owner_id)})
    return [{"owner": owner, "attachments": attached.get(owner.pk, [])} for owner in owners]


ATTACH_PICKER_MAX = 200  # the picker lists the newest readable books; others attach from the library


def attachable_books(actor: Actor) -> list[Book]:
    """The actor's own tenant's books they may read, for the attach picker (W-9)."""
    return list(book_list(actor=actor)[:ATTACH_PICKER_MAX])


# --- AI updates (issue 17's living world, on pages) ------------------------------------------


def living_books_of(actor: Actor) -> list[dict[str, Any]]:
    """The actor's own books that live or were written by the model, with AI-update counts by state."""
    if actor.user is None:
        return []
    books = list(
        Book.objects.for_tenant(actor.tenant).filter(owner=actor.user)
        .filter(Q(living_world=True) | Q(lore_writes__isnull=False)).distinct().order_by("title", "id")
    )
    counts: dict[int, dict[str, int]] = {b.pk: {} for b in books}
    for row in (LoreWrite.objects.for_tenant(actor.tenant).filter(book__in=books)
                .values("book_id", "state").annotate(n=Count("id"))):
        counts[row["book_id"]][row["state"]] = row["n"]
    return [{"book": b, "counts": counts[b.pk]} for b in books]


def book_writing_chats(actor: Actor, book: Book) -> dict[int, str]:
    """The chats that wrote into ``book``, each with a readable name: its character, story or novel."""
    chat_ids = set(LoreWrite.objects.for_tenant(actor.tenant).filter(book=book)
                   .values_list("chat_id", flat=True).distinct())
    labels: dict[int, str] = {pk: f"#{pk}" for pk in chat_ids}
    for chat in Chat.objects.for_tenant(actor.tenant).filter(pk__in=chat_ids).select_related(
            "character", "story", "novel"):
        owner = chat.character or chat.story or chat.novel
        name = getattr(owner, "name", None) or getattr(owner, "title", None)
        if name:
            labels[chat.pk] = f"#{chat.pk} · {name}"
    return labels


def book_lore_write(actor: Actor, book: Book, write_id: int) -> LoreWrite | None:
    return LoreWrite.objects.for_tenant(actor.tenant).filter(book=book, pk=write_id).first()


@lru_cache(maxsize=1024)
def _canon_meter(tenant: Tenant, book_id: int, born: datetime, version: int, model_id: str) -> CanonMeter | None:
    # Keyed on the version, as _canon_tokens: the old key ages out after any edit. And on the book's
    # creation time: SQLite may give a deleted book's id to the next one, at version 1 again.
    try:
        return book_canon_meter(book=Book(pk=book_id, tenant=tenant), model_id=model_id)
    except DomainError:  # a model without a known input window: the page shows no meter
        return None


def book_canon_meter_of(book: Book, model_id: str) -> CanonMeter | None:
    """The editor's canon meter, computed once per book version and model (every canon edit, move,
    enable or delete bumps the version), not on every page of the list."""
    return _canon_meter(book.tenant, book.pk, book.created_at, book.version, model_id)


# --- the local outbox (the embedded default's mail, shown at /mail) ---------------------------


@dataclass(frozen=True, kw_only=True)
class OutboxMessage:
    sent: str
    to: str
    subject: str
    body: str


def mail_outbox(folder: str, *, limit: int = 20) -> list[OutboxMessage]:
    """The newest messages Django's file mail backend wrote to ``folder`` (one file per connection, its
    messages separated by a line of 79 dashes), newest first."""
    found: list[OutboxMessage] = []
    files = sorted(Path(folder).glob("*.log"), key=lambda path: path.stat().st_mtime, reverse=True)
    for path in files:
        chunks = [c for c in path.read_bytes().split(b"\n" + b"-" * 79 + b"\n") if c.strip()]
        for chunk in reversed(chunks):
            message = email.message_from_bytes(chunk, policy=default_policy)
            part = message.get_body(preferencelist=("plain",))
            body = part.get_content() if part is not None else ""
            found.append(OutboxMessage(sent=str(message.get("Date", "")), to=str(message.get("To", "")),
                                       subject=str(message.get("Subject", "")), body=str(body)))
            if len(found) >= limit:
                return found
    return found
