"""Reads the pages need that no other app offers yet (small, tenant-scoped)."""
from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from books.models import Book
from books.selectors import CanonMeter, book_canon_meter
from books.tokens import model_tokenizer
from lore_platform.cast.models import Attachment, Character, Novel, Story
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


def characters_with_books(actor: Actor) -> list[dict[str, Any]]:
    """The tenant's characters with the books attached to each, in attachment order."""
    characters = list(Character.objects.for_tenant(actor.tenant).order_by("name", "id"))
    attached: dict[int, list[Book]] = {c.pk: [] for c in characters}
    rows = (
        Attachment.objects.for_tenant(actor.tenant)
        .filter(character__isnull=False)
        .select_related("book")
        .order_by("position", "id")
    )
    for row in rows:
        attached.setdefault(row.character_id, []).append(row.book)  # type: ignore[arg-type]
    return [{"character": c, "books": attached.get(c.pk, [])} for c in characters]


def character_get(actor: Actor, character_id: int) -> Character | None:
    return Character.objects.for_tenant(actor.tenant).filter(pk=character_id).first()


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
