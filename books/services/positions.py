"""Locking a book for a write, and the entries' list positions (kept dense, 0..n-1)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import Max

from books.access import access_book
from books.models import Book, Entry, Profile
from books.services.cleaning import field_refusal
from lore_platform.errors import NotFound
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant


def book_lock(actor: Actor, book: Book) -> Book:
    """Re-read ``book`` locked for this transaction and check the actor may edit it.

    Server lorebooks also lock the tenant row: the server-wide entry limit is
    shared by several books (S-14), so their writers must queue.
    """
    locked = access_book(actor, book.pk, need="edit", for_update=True)
    if locked.profile == Profile.SERVER:
        Tenant.objects.select_for_update().filter(pk=locked.tenant_id).first()
    return locked


def book_order(book: Book) -> list[tuple[int, int]]:
    """``(id, position)`` of the book's entries in list order."""
    return list(
        Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id").values_list("id", "position")
    )


def positions_write(book: Book, ordered_ids: Sequence[int], current: Mapping[int, int]) -> int:
    """Give ``ordered_ids`` positions 0..n-1, writing only rows that moved."""
    moved = [Entry(pk=pk, position=index) for index, pk in enumerate(ordered_ids) if current.get(pk) != index]
    if moved:
        Entry.objects.for_tenant(book.tenant).bulk_update(moved, ["position"], batch_size=500)
    return len(moved)


def next_position(book: Book) -> int:
    top = Entry.objects.for_tenant(book.tenant).filter(book=book).aggregate(top=Max("position"))["top"]
    return 0 if top is None else top + 1


def ids_clean(entry_ids: Any, field: str = "entry_ids") -> list[int]:
    if not isinstance(entry_ids, (list, tuple)) or not entry_ids:
        raise field_refusal("Name at least one entry.", field)
    seen: list[int] = []
    for index, value in enumerate(entry_ids):
        if isinstance(value, bool) or not isinstance(value, int):
            raise field_refusal("Entry ids are whole numbers.", f"{field}[{index}]")
        if value not in seen:
            seen.append(value)
    return seen


def entries_of(book: Book, ids: Sequence[int], field: str = "entry_ids") -> list[int]:
    """Check every id is an entry of ``book``; NotFound naming the strays otherwise."""
    found = set(Entry.objects.for_tenant(book.tenant).filter(book=book, pk__in=ids).values_list("pk", flat=True))
    missing = [pk for pk in ids if pk not in found]
    if missing:
        raise NotFound(
            "{count} of these entries are not in this book; nothing was changed.",
            values={"count": len(missing)},
            field=field,
            details={"missing": missing[:50]},
        )
    return list(ids)
