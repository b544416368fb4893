"""Who may read or edit a book of the actor's own tenant: the one place that decides it.

- A user's own book: the owner reads and edits it (W-9); private books of
  other users are invisible.
- A tenant-owned book (server-wide collection, persona lineage book): every
  member reads it, only tenant admins edit it (S-1).
- A user's non-private (``unlisted`` or ``public``) book: every member of the
  tenant reads it; only its owner edits it.
- Every read needs a key (or session) that may read; every edit one with the
  write scope.

Nothing here crosses tenants: another tenant's book is NotFound. Reading other
tenants' public and unlisted books (the library, links, attachments) is
``sharing/selectors.py``'s job, which reuses ``book_can_read``/``book_can_edit``
for the actor's own tenant.

A book the actor may not read does not exist for them (NotFound, P-3). A book
they may read but not edit answers PermissionDenied: they can see it anyway.
"""
from __future__ import annotations

from typing import Literal

from django.db.models import Q

from books.models import Book, Entry, Visibility
from lore_platform.errors import NotFound, PermissionDenied
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.scoping import TenantScopedQuerySet

Need = Literal["read", "edit"]


def books_visible_to(actor: Actor) -> TenantScopedQuerySet[Book]:
    """The tenant's books this actor may read."""
    readable = Q(owner__isnull=True) | ~Q(visibility=Visibility.PRIVATE)
    if actor.user is not None:
        readable |= Q(owner=actor.user)
    return Book.objects.for_tenant(actor.tenant).filter(readable)


def book_is_owners_alone(book: Book) -> bool:
    """A user's private book: in its tenant only its owner reads it (P-1). Every other book of a
    tenant is read by all its members, so callers holding many books ask ``book_can_read`` only of these."""
    return book.owner_id is not None and book.visibility == Visibility.PRIVATE


def book_can_read(actor: Actor, book: Book) -> bool:
    if book.tenant_id != actor.tenant.pk or not actor.can_read:
        return False
    if not book_is_owners_alone(book):
        return True
    return actor.user is not None and book.owner_id == actor.user.pk


def book_can_edit(actor: Actor, book: Book) -> bool:
    if book.tenant_id != actor.tenant.pk or not actor.can_write:
        return False
    if book.owner_id is None:
        return actor.is_admin
    return actor.user is not None and book.owner_id == actor.user.pk


def book_edit_check(actor: Actor, book: Book) -> None:
    """Raise unless ``actor`` may edit ``book`` (NotFound when they cannot even read it)."""
    if not book_can_read(actor, book):
        raise NotFound("No such book.", field="book")
    if not book_can_edit(actor, book):
        if book.owner_id is None:
            raise PermissionDenied("Only tenant admins edit server-wide and persona books (S-1).", rule="S-1")
        if not actor.can_write:
            raise PermissionDenied("This API key may only read.")
        raise PermissionDenied("Only the book's owner edits it (W-9).", rule="W-9")


def access_book(actor: Actor, book_id: int | str, need: Need = "read", *, for_update: bool = False) -> Book:
    """The book ``book_id`` if ``actor`` may ``need`` it.

    Missing, another tenant's and private-to-someone-else all raise NotFound;
    readable-but-not-editable raises PermissionDenied. ``for_update`` locks the
    row (call inside a transaction) so limit checks and version bumps serialise.
    """
    try:
        pk = int(book_id)
    except (TypeError, ValueError):
        raise NotFound("No such book.", field="book") from None
    queryset = Book.objects.for_tenant(actor.tenant).filter(pk=pk)
    # No select_related when locking: PostgreSQL cannot lock the nullable side of an outer join.
    # NO KEY UPDATE: writers still queue on the book, but rows that only reference it (a worker's
    # vectors and entry updates, checked by deferred foreign keys at commit) no longer wait for it;
    # a plain FOR UPDATE deadlocked there under concurrent edits and indexing (bench.faults soak).
    queryset = queryset.select_for_update(no_key=True) if for_update else queryset.select_related("lineage")
    book = queryset.first()
    if book is None or not book_can_read(actor, book):
        raise NotFound("No such book.", field="book")
    if need == "edit":
        book_edit_check(actor, book)
    return book


def access_entry(actor: Actor, book: Book, entry_id: int | str) -> Entry:
    """An entry of ``book`` (already accessed); another book's entry is NotFound."""
    try:
        pk = int(entry_id)
    except (TypeError, ValueError):
        raise NotFound("No such entry.", field="entry") from None
    entry = Entry.objects.for_tenant(actor.tenant).filter(book=book, pk=pk).first()
    if entry is None:
        raise NotFound("No such entry.", field="entry")
    entry.book = book
    return entry
