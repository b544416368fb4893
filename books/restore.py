"""Writing back the books rows of a tenant backup that the importer does not write.

The importer (``books.imports.entries_write``) brings entries back with their
lore; a backup also holds each entry's usage figures (W-11) and the living
world's records (L-4: applied, held — the review queue —, rejected and undone
writes). ``backup.services`` maps the ids; these write the rows as they were.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from books.models import Book, Entry, LoreWrite
from lore_platform.tenancy.models import Tenant


def entry_usage_restore(*, tenant: Tenant, usage: Sequence[tuple[int, int, datetime | None]]) -> None:
    """``usage``: (entry id, usage count, last used) for entries just restored; untouched ones stay 0."""
    rows = [Entry(pk=entry_id, tenant=tenant, usage_count=count, last_used_at=last_used_at)
            for entry_id, count, last_used_at in usage if count or last_used_at is not None]
    Entry.objects.for_tenant(tenant).bulk_update(rows, ["usage_count", "last_used_at"], batch_size=500)


def lore_write_restore(*, tenant: Tenant, book: Book, entry_id: int | None, chat_id: int, **fields: Any) -> LoreWrite:
    """One living-world write as recorded; ``fields`` are its own columns (kind, state, text, edits, times…)."""
    return LoreWrite.objects.create(tenant=tenant, book=book, entry_id=entry_id, chat_id=chat_id, **fields)
