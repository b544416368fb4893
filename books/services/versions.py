"""The version counter and what it tells the layers above (``books.events``): every write calls these after it changed lore."""
from __future__ import annotations

from collections.abc import Sequence

from django.db.models import F
from django.utils import timezone

from books import events
from books.models import Book, Entry, IndexingState, content_hash

# --- the version counter and the change events ----------------------------------


def book_version_bump(book: Book) -> int:
    """Count one change to ``book`` or its entries; returns the new version.

    An UPDATE with ``F()`` so concurrent writers never lose a bump.
    """
    now = timezone.now()
    Book.objects.for_tenant(book.tenant).filter(pk=book.pk).update(version=F("version") + 1, updated_at=now)
    book.version = Book.objects.for_tenant(book.tenant).values_list("version", flat=True).get(pk=book.pk)
    book.updated_at = now
    # Shared books keep their library search text, vector and translations current (P-4, P-5).
    events.book_changed(book)
    return book.version


def _entries_content_changed(book: Book, entry_ids: Sequence[int]) -> None:
    """The text entries are indexed from changed: they are ``pending`` until re-indexed (W-7).

    Indexing runs after commit, by id, in idempotent tasks that compare
    ``content_hash`` (every book is embedded: any chat may read it the smart way).
    """
    events.entries_changed(book=book, entry_ids=entry_ids)


def _entry_content_changed(entry: Entry) -> None:
    _entries_content_changed(entry.book, [entry.pk])


def _entries_enabled_changed(book: Book, entry_ids: Sequence[int]) -> None:
    """Entries were enabled or disabled: disabled ones leave the vector index (W-6), re-enabled ones return."""
    events.entries_changed(book=book, entry_ids=entry_ids)


def _entry_stamp(entry: Entry) -> bool:
    """Recompute the content hash; mark the entry pending if it changed. True = changed."""
    new_hash = content_hash(entry.title, entry.content, list(entry.keys))
    if new_hash == entry.content_hash:
        return False
    entry.content_hash = new_hash
    entry.indexing_state = IndexingState.PENDING
    return True
