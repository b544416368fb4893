"""Writes of many entries at once, all or nothing: create (imports, I-3), enable/disable, delete."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from books import limits
from books.models import Book, Entry
from books.services import versions
from books.services.cleaning import as_bool, entry_clean, field_refusal
from books.services.positions import (
    book_lock,
    book_order,
    entries_of,
    ids_clean,
    next_position,
    positions_write,
)
from lore_platform.tenancy.actor import Actor


@transaction.atomic
def entries_create_bulk(*, actor: Actor, book: Book, entries: list[dict[str, Any]]) -> list[Entry]:
    """Add many entries at the bottom, in order: all of them or none (I-3).

    Every entry and every limit (batch size, the book's entry cap) is checked
    before the first write; errors name ``entries[i].<field>``.
    """
    book = book_lock(actor, book)
    if not isinstance(entries, list):
        raise field_refusal("Send a list of entries.", "entries")
    limits.import_batch_check(len(entries))
    cleaned = []
    for index, fields in enumerate(entries):
        if not isinstance(fields, Mapping):
            raise field_refusal("Each entry is a JSON object.", f"entries[{index}]")
        cleaned.append(entry_clean(book, fields, creating=True, prefix=f"entries[{index}]."))
    if not cleaned:
        return []
    limits.entry_capacity_check(book, adding=len(cleaned))

    start = next_position(book)
    now = timezone.now()
    rows = []
    for offset, values in enumerate(cleaned):
        entry = Entry(tenant=book.tenant, book=book, position=start + offset, created_at=now, updated_at=now, **values)
        versions._entry_stamp(entry)
        rows.append(entry)
    created = Entry.objects.for_tenant(book.tenant).bulk_create(rows, batch_size=500)
    versions._entries_content_changed(book, [entry.pk for entry in created])
    versions.book_version_bump(book)
    return created


@dataclass(frozen=True, kw_only=True)
class BulkResult:
    matched: int  # entries named
    changed: int  # entries whose state changed
    version: int  # the book's version afterwards


@transaction.atomic
def entries_bulk_set_enabled(*, actor: Actor, book: Book, entry_ids: list[int], enabled: bool) -> BulkResult:
    """Enable or disable up to 500 entries at once (W-6, W-12): all or nothing."""
    book = book_lock(actor, book)
    limits.bulk_action_check(len(entry_ids) if isinstance(entry_ids, (list, tuple)) else 0)
    ids = ids_clean(entry_ids)
    enabled = as_bool(enabled, "enabled")
    entries_of(book, ids)
    flipping = Entry.objects.for_tenant(book.tenant).filter(book=book, pk__in=ids).exclude(enabled=enabled)
    flipped = list(flipping.values_list("pk", flat=True))
    changed = flipping.update(enabled=enabled, updated_at=timezone.now())
    if changed:
        versions._entries_enabled_changed(book, flipped)
        versions.book_version_bump(book)
    return BulkResult(matched=len(ids), changed=changed, version=book.version)


@transaction.atomic
def entries_bulk_delete(*, actor: Actor, book: Book, entry_ids: list[int]) -> BulkResult:
    """Delete up to 500 entries at once (W-12): all or nothing."""
    book = book_lock(actor, book)
    limits.bulk_action_check(len(entry_ids) if isinstance(entry_ids, (list, tuple)) else 0)
    ids = ids_clean(entry_ids)
    entries_of(book, ids)
    entries = Entry.objects.for_tenant(book.tenant).filter(book=book)
    limits.public_floor_check(book, remaining=entries.exclude(pk__in=ids).count(), field="entry_ids")
    deleted, _ = entries.filter(pk__in=ids).delete()
    order = book_order(book)
    positions_write(book, [pk for pk, _ in order], dict(order))
    versions.book_version_bump(book)
    return BulkResult(matched=len(ids), changed=deleted, version=book.version)
