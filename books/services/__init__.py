"""Writes for books and entries. Every path (API, import, bulk, living world) comes here.

Each service:
1. locks the book row and re-checks that the actor may edit it (``access_book``);
2. cleans the input and runs every limit in ``books.limits`` *before* writing;
3. writes inside one transaction and bumps the book's version once
   (``book_version_bump``: caches and compiled matchers key on it).

Entry positions are the editor's list order, kept dense (0..n-1) by every
service here; ties (rows written elsewhere) fall back to the id.

One module per concern; import the services from this package:

- ``versions``: the version counter and the indexing hook (every write calls
  them through this module, so there is one place to change or patch them);
- ``cleaning``: input types, normalisation and limits, before any write;
- ``positions``: locking a book for a write, list positions;
- ``book_write``, ``entry_write``, ``bulk``: the writes;
- ``usage``: usage statistics (no version bump).
"""
from __future__ import annotations

from books.services.book_write import (
    book_create,
    book_delete,
    book_set_active,
    book_update,
    persona_book_get_or_create,
)
from books.services.bulk import (
    BulkResult,
    entries_bulk_delete,
    entries_bulk_set_enabled,
    entries_create_bulk,
)
from books.services.cleaning import (
    BOOK_CREATE_FIELDS,
    BOOK_EDITABLE_FIELDS,
    ENTRY_CREATE_ONLY_FIELDS,
    ENTRY_EDITABLE_FIELDS,
    INT32,
)
from books.services.entry_write import (
    MoveTarget,
    entries_reorder,
    entry_create,
    entry_delete,
    entry_move,
    entry_update,
)
from books.services.trash import (
    book_restore,
    book_trash,
    books_trash_purge,
    books_trashed,
    trash_purge_at,
)
from books.services.usage import entries_flag_regex_overruns, entries_record_usage
from books.services.versions import book_version_bump

__all__ = [
    "book_restore",
    "book_trash",
    "books_trash_purge",
    "books_trashed",
    "trash_purge_at",
    "BOOK_CREATE_FIELDS",
    "BOOK_EDITABLE_FIELDS",
    "ENTRY_CREATE_ONLY_FIELDS",
    "ENTRY_EDITABLE_FIELDS",
    "INT32",
    "BulkResult",
    "MoveTarget",
    "book_create",
    "book_delete",
    "book_set_active",
    "book_update",
    "book_version_bump",
    "entries_bulk_delete",
    "entries_bulk_set_enabled",
    "entries_create_bulk",
    "entries_flag_regex_overruns",
    "entries_record_usage",
    "entries_reorder",
    "entry_create",
    "entry_delete",
    "entry_move",
    "entry_update",
    "persona_book_get_or_create",
]
