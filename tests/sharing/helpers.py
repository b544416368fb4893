"""Helpers for sharing tests: shared books in a few lines, and a snapshot of everything sharing may touch."""
from __future__ import annotations

from typing import Any

from books.models import Book, Entry
from cast.models import Attachment
from lore_platform.tenancy.actor import Actor
from sharing.models import BookShare, BookTranslation, BookVector
from sharing.services import book_visibility_set
from tests.books.factories import fill, make_book, make_entry


def owner_actor(setup: Any, scopes: frozenset[str] = frozenset({"read", "write"})) -> Actor:
    """The owner of books made by :func:`shared_book` (the tenant's member)."""
    return Actor(tenant=setup.tenant, user=setup.member, role="member", scopes=scopes)


def admin_actor(setup: Any, scopes: frozenset[str] = frozenset({"read", "write"})) -> Actor:
    return Actor(tenant=setup.tenant, user=setup.admin, role="admin", scopes=scopes)


def shared_book(
    setup: Any,
    *,
    entries: int = 10,
    visibility: str = "public",
    title: str = "The Salt Coast",
    **fields: Any,
) -> Book:
    """A book owned by ``setup.member`` with ``entries`` entries, shared through the service."""
    book = make_book(setup, owner="member", title=title, **fields)
    if entries:
        fill(book, entries)
    if visibility != "private":
        book_visibility_set(actor=owner_actor(setup), book=book, visibility=visibility)
    book.refresh_from_db()
    return book


def share_of(book: Book) -> BookShare | None:
    return BookShare.objects.for_tenant(book.tenant).filter(book=book).first()


def world(*setups: Any) -> tuple[Any, ...]:
    """Everything a sharing request could change in these tenants: compare before/after a denial."""
    rows: list[Any] = []
    for setup in setups:
        tenant = setup.tenant
        rows.append(
            list(
                Book.objects.for_tenant(tenant)
                .order_by("pk")
                .values_list("pk", "title", "visibility", "living_world", "version", "updated_at", "owner_id")
            )
        )
        rows.append(
            list(Entry.objects.for_tenant(tenant).order_by("pk").values_list("pk", "book_id", "title", "content"))
        )
        rows.append(
            list(
                BookShare.objects.for_tenant(tenant)
                .order_by("pk")
                .values_list(
                    "pk", "book_id", "link_token", "copy_count", "published_at", "source_book_id", "search_version"
                )
            )
        )
        rows.append(list(BookTranslation.objects.for_tenant(tenant).order_by("pk").values_list("pk", "status")))
        rows.append(list(BookVector.objects.for_tenant(tenant).order_by("pk").values_list("pk", "content_hash")))
        rows.append(list(Attachment.objects.for_tenant(tenant).order_by("pk").values_list("pk", "book_id")))
    return tuple(rows)


__all__ = ["admin_actor", "fill", "make_book", "make_entry", "owner_actor", "share_of", "shared_book", "world"]
