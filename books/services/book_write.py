"""Writes of books: create, update, delete, the collection toggle, persona books."""
from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from books.access import book_can_read
from books.lineages import lineage_get
from books.models import Book, Entry, Lineage, Profile, Scope
from books.services import versions
from books.services.cleaning import (
    BOOK_CREATE_FIELDS,
    BOOK_EDITABLE_FIELDS,
    as_bool,
    as_choice,
    book_clean,
    book_rules_check,
    field_refusal,
    unknown_fields,
)
from books.services.positions import book_lock
from lore_platform.errors import Conflict, NotFound, PermissionDenied
from lore_platform.etags import version_check
from lore_platform.tenancy.actor import Actor


def _lineage_resolve(actor: Actor, value: Any) -> Lineage:
    if isinstance(value, Lineage):
        if value.tenant_id != actor.tenant.pk:
            raise NotFound("No such lineage.", field="lineage")
        return value
    if isinstance(value, (uuid.UUID, str)):
        return lineage_get(tenant=actor.tenant, public_id=value)
    raise field_refusal("Name the lineage by its id.", "lineage")


@transaction.atomic
def book_create(*, actor: Actor, title: str, profile: str = "classic", **fields: Any) -> Book:
    """Create a book. Personal books belong to the actor; server-wide and persona books
    belong to the tenant and only admins create them (S-1)."""
    if not actor.can_write:
        raise PermissionDenied("This API key may only read.")
    unknown_fields(fields, BOOK_CREATE_FIELDS)
    profile = as_choice(profile, "profile", Profile.values)
    default_scope = Scope.SERVER if profile == Profile.SERVER else Scope.PERSONAL
    scope = as_choice(fields.pop("scope", None) or default_scope, "scope", Scope.values)
    if profile == Profile.SERVER and scope == Scope.PERSONAL:
        raise field_refusal("Server lorebooks are server-wide or belong to a persona (S-2).", "scope", "S-2")
    lineage_value = fields.pop("lineage", None)
    if scope == Scope.PERSONAL and actor.user is None:
        raise PermissionDenied("This API key acts for no user, so it cannot own a book.")
    if scope != Scope.PERSONAL and not actor.is_admin:
        raise PermissionDenied("Only tenant admins create server-wide and persona books (S-1).", rule="S-1")
    cleaned = book_clean({"title": title, **fields})

    book = Book(tenant=actor.tenant, profile=profile, scope=scope, **cleaned)
    if scope == Scope.PERSONAL:
        book.owner = actor.user

    if scope == Scope.PERSONA:
        if lineage_value is None:
            raise field_refusal("A persona book names the persona's lineage (S-2).", "lineage", "S-2")
        book.lineage = _lineage_resolve(actor, lineage_value)
        existing = Book.with_trashed.for_tenant(actor.tenant).filter(lineage=book.lineage).first()
        if existing is not None and existing.trashed_at is not None:
            raise Conflict("This lineage's book is in the trash; restore it instead of making another (S-2).",
                           field="lineage", rule="S-2")
        if existing is not None:
            raise Conflict("This lineage has its book already; personas of a lineage share one (S-2).",
                           field="lineage", rule="S-2")
    elif lineage_value is not None:
        raise field_refusal("Only persona books belong to a lineage (S-2).", "lineage", "S-2")

    book_rules_check(book)
    book.save()
    return book


@transaction.atomic
def book_update(*, actor: Actor, book: Book, expected_version: object | None = None, **fields: Any) -> Book:
    """Change a book's editable fields; the version is bumped when anything changed.

    ``expected_version`` (the version the caller read; None = unconditional) is compared under the
    book's row lock: of two writers holding the same version only the first wins (412 for the other).
    """
    book = book_lock(actor, book)
    version_check("book", book.pk, book.version, expected_version)
    unknown_fields(fields, BOOK_EDITABLE_FIELDS)
    cleaned = book_clean(fields)
    changed = [name for name, value in cleaned.items() if getattr(book, name) != value]
    if not changed:
        return book
    for name in changed:
        setattr(book, name, cleaned[name])
    book_rules_check(book)
    book.save(update_fields=changed)
    versions.book_version_bump(book)
    return book


@transaction.atomic
def book_delete(*, actor: Actor, book: Book, expected_version: object | None = None) -> None:
    """Delete a book and its entries. A persona book goes too, though its lineage stays."""
    book = book_lock(actor, book)
    version_check("book", book.pk, book.version, expected_version)
    Entry.objects.for_tenant(book.tenant).filter(book=book).delete()
    Book.objects.for_tenant(book.tenant).filter(pk=book.pk).delete()


@transaction.atomic
def book_set_active(*, actor: Actor, book: Book, active: bool) -> Book:
    """The collection toggle (S-12): off removes every entry from prompts, on restores them.

    Entries' own ``enabled`` flags are never touched, so re-activating brings
    back exactly the entries that were enabled before.
    """
    book = book_lock(actor, book)
    active = as_bool(active, "active")
    if book.active != active:
        book.active = active
        book.save(update_fields=["active"])
        versions.book_version_bump(book)
    return book


@transaction.atomic
def persona_book_get_or_create(*, actor: Actor, lineage: Lineage, title: str = "") -> Book:
    """The lineage's server persona book, created on first use (S-2)."""
    lineage = _lineage_resolve(actor, lineage)
    existing = Book.objects.for_tenant(actor.tenant).filter(lineage=lineage).first()
    if existing is not None:
        if not book_can_read(actor, existing):
            raise NotFound("No such book.", field="book")
        return existing
    return book_create(
        actor=actor, title=title or "Persona lore", profile=Profile.SERVER, scope=Scope.PERSONA, lineage=lineage
    )
