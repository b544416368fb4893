"""What a book write tells the layers above it, after commit, by Celery task name.

Books sit below retrieval (indexing) and sharing (the library) and never import
them. A write that changes what entries embed marks them ``pending`` here (the
dirty flag is the entry's own ``indexing_state``, W-7) and publishes
:data:`ENTRIES_CHANGED`; a change to a book that is not private publishes
:data:`SHARED_BOOK_CHANGED`. The layer above implements each task under that
name (``retrieval.adapter.tasks``, ``sharing.tasks``). The rows are the durable record:
a message lost with the broker only delays, since each implementer's periodic
sweep finds what is still behind (pending entries, a share older than the
book's ``version``).
"""
from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from books.models import INDEXED_PROFILES, Book, Entry, IndexingState, Visibility
from lore_platform.tasks import task_publish

# (tenant_id, entry_ids): retrieval brings these entries' vectors up to date.
ENTRIES_CHANGED = "books.entries_changed"
# (tenant_id, book_id): sharing refreshes the book's library text, vector and translations (P-4, P-5).
SHARED_BOOK_CHANGED = "books.shared_book_changed"
# Entry ids per message: a 500-entry import becomes several tasks that workers share.
ENTRIES_PER_MESSAGE = 100


def _publish_after_commit(name: str, *args: object) -> None:
    # A registered task runs as configured (eagerly on the embedded default); a broker outage
    # costs at most one ~100 ms try (task_publish), never an error in the committed write.
    transaction.on_commit(lambda: task_publish(name, *args), robust=True)


def entries_changed(*, book: Book, entry_ids: Iterable[int]) -> None:
    """Entries of ``book`` changed what they embed or whether they are enabled.

    Enabled entries of indexed books (every profile, ``INDEXED_PROFILES``) become
    ``pending`` now and are indexed after the surrounding transaction commits, by id.
    """
    if book.profile not in INDEXED_PROFILES:
        return
    ids = sorted({int(i) for i in entry_ids})
    if not ids:
        return
    Entry.objects.for_tenant(book.tenant).filter(pk__in=ids, enabled=True, book__profile__in=INDEXED_PROFILES).exclude(
        indexing_state=IndexingState.PENDING
    ).update(indexing_state=IndexingState.PENDING)
    for start in range(0, len(ids), ENTRIES_PER_MESSAGE):
        _publish_after_commit(ENTRIES_CHANGED, book.tenant_id, ids[start : start + ENTRIES_PER_MESSAGE])


def book_changed(book: Book) -> None:
    """``book`` got a new version; a shared one has library state to refresh."""
    if book.visibility == Visibility.PRIVATE:
        return
    _publish_after_commit(SHARED_BOOK_CHANGED, book.tenant_id, book.pk)
