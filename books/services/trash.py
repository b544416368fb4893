"""The trash: deleting a book moves it here, restorable for ``limits.TRASH_KEEP_DAYS`` days.

A trashed book is gone for every read (``Book.objects`` leaves it out: lists,
the library, attachments' gathering, turns); its entries, attachments and
sharing rows stay, so a restore brings the book back as it was. Publishing
rules still hold on the way back: a formerly public book with fewer entries
than P-1 asks comes back private.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from books import limits
from books.access import book_can_read, book_edit_check
from books.models import Book, Entry, Visibility
from books.services import versions
from books.services.positions import book_lock
from lore_platform.errors import NotFound
from lore_platform.etags import version_check
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant


def trash_cutoff(now: datetime | None = None) -> datetime:
    """Books trashed before this moment are past keeping."""
    return (now or timezone.now()) - timedelta(days=limits.TRASH_KEEP_DAYS)


def trash_purge_at(book: Book) -> datetime | None:
    """When a trashed book will be purged for good."""
    return book.trashed_at + timedelta(days=limits.TRASH_KEEP_DAYS) if book.trashed_at else None


@transaction.atomic
def book_trash(*, actor: Actor, book: Book, now: datetime | None = None,
               expected_version: object | None = None) -> Book:
    """Move ``book`` to the trash (the actor must be able to edit it); ``expected_version`` (If-Match)
    refuses a stale caller with 412, as for any change.

    The version is bumped first, while the book is still live, so caches and the
    layers above (library, vectors, compiled matchers) hear that it changed.
    """
    locked = book_lock(actor, book)
    version_check("book", locked.pk, locked.version, expected_version)
    versions.book_version_bump(locked)
    locked.trashed_at = now or timezone.now()
    Book.with_trashed.for_tenant(locked.tenant).filter(pk=locked.pk).update(trashed_at=locked.trashed_at)
    return locked


def books_trashed(actor: Actor, *, now: datetime | None = None) -> QuerySet[Book]:
    """The actor's trashed books they may restore, most recently trashed first (within the keeping time)."""
    books = (
        Book.with_trashed.for_tenant(actor.tenant)
        .filter(trashed_at__isnull=False, trashed_at__gte=trash_cutoff(now))
        .order_by("-trashed_at", "-id")
    )
    # What the actor could edit (books.access): their own books; tenant-owned ones for admins.
    mine = Q(owner=actor.user) if actor.user is not None else Q(pk__in=[])
    if actor.is_admin:
        mine |= Q(owner__isnull=True)
    return books.filter(mine)


def _trashed_get(actor: Actor, book_id: Any, now: datetime | None) -> Book:
    try:
        pk = int(book_id)
    except (TypeError, ValueError):
        raise NotFound("No such book in the trash.", field="book") from None
    book = (
        Book.with_trashed.for_tenant(actor.tenant)
        .select_for_update()
        .filter(pk=pk, trashed_at__isnull=False, trashed_at__gte=trash_cutoff(now))
        .first()
    )
    if book is None or not book_can_read(actor, book):
        raise NotFound("No such book in the trash.", field="book")
    book_edit_check(actor, book)
    return book


@transaction.atomic
def book_restore(*, actor: Actor, book_id: Any, now: datetime | None = None) -> Book:
    """Bring a trashed book back, as it was, unless publishing no longer allows it (P-1).

    A public book with fewer than ``PUBLISH_MIN_ENTRIES`` entries comes back
    private: the library only lists books that meet P-1.
    """
    book = _trashed_get(actor, book_id, now)
    changes: dict[str, Any] = {"trashed_at": None}
    if book.visibility == Visibility.PUBLIC:
        count = Entry.objects.for_tenant(book.tenant).filter(book=book).count()
        if count < limits.PUBLISH_MIN_ENTRIES.value:
            changes["visibility"] = Visibility.PRIVATE
    Book.with_trashed.for_tenant(book.tenant).filter(pk=book.pk).update(**changes)
    for name, value in changes.items():
        setattr(book, name, value)
    versions.book_version_bump(book)  # live again: the library, vectors and caches hear it
    return book


def books_trash_purge(tenant: Tenant, *, now: datetime | None = None) -> int:
    """Delete, with their entries, the tenant's books trashed more than the keeping time ago."""
    expired = Book.with_trashed.for_tenant(tenant).filter(trashed_at__lt=trash_cutoff(now))
    ids = list(expired.values_list("pk", flat=True))
    if not ids:
        return 0
    with transaction.atomic():
        Entry.objects.for_tenant(tenant).filter(book_id__in=ids).delete()
        Book.with_trashed.for_tenant(tenant).filter(pk__in=ids).delete()
    return len(ids)
