"""Personas in the server profile (S-2): the list grouped by lineage, and a card imported as a persona.

A persona is a character; its lore is its lineage's one persona book, so the
list groups the personas that share a lineage (they share that book). Importing
a card as a persona (the seed's ``/persona import``) creates the character in
the card's lineage and imports the card's Character Book into that lineage's
book, in one transaction, with the import's receipt. The card is read by the
import service (``books.imports``), which reads PNG, CHARX and JSON cards.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count

from books.imports import ImportMode, book_import_into, book_import_new, import_read
from books.lineages import lineage_get_or_create
from books.models import Book, Lineage, Profile, Scope
from cast.models import Character
from cast.services import CHARACTER_NAME_MAX
from lore_platform.errors import PermissionDenied, ValidationFailed
from lore_platform.tenancy.actor import Actor


@dataclass(frozen=True, kw_only=True)
class PersonaGroup:
    lineage: Lineage
    personas: list[Character]
    # The lineage's persona book (none until lore is written or imported for it).
    book: Book | None


def persona_groups(*, actor: Actor) -> list[PersonaGroup]:
    """Every lineage with personas or a persona book, with its personas and book (S-2)."""
    tenant = actor.tenant
    characters = list(Character.objects.for_tenant(tenant).order_by("name", "id"))
    books = {
        b.lineage_id: b
        for b in Book.objects.for_tenant(tenant).filter(scope=Scope.PERSONA)
        .annotate(entry_count=Count("entries")).order_by("id")
    }
    lineage_ids = {c.lineage_id for c in characters if c.lineage_id is not None} | {k for k in books if k is not None}
    lineages = Lineage.objects.for_tenant(tenant).filter(pk__in=lineage_ids).order_by("created_at", "id")
    by_lineage: dict[int, list[Character]] = {}
    for character in characters:
        by_lineage.setdefault(character.lineage_id, []).append(character)
    return [PersonaGroup(lineage=lin, personas=by_lineage.get(lin.pk, []), book=books.get(lin.pk)) for lin in lineages]


@dataclass(frozen=True, kw_only=True)
class PersonaImport:
    character: Character
    created: bool
    book: Book | None
    receipt: dict[str, Any]


def _card_identity(card_data: Any) -> tuple[str, str]:
    name = str(card_data.get("name") or "").strip()
    creator = str(card_data.get("creator") or "").strip()
    return name, creator


def persona_import(
    *,
    actor: Actor,
    data: bytes,
    filename: str | None,
    lineage_key: str | None = None,
    mode: ImportMode = "append",
) -> PersonaImport:
    """Import a character card as a persona: the character and its Character Book, all or nothing.

    The lineage is found by ``lineage_key`` (default: the card's name and
    creator), so a persona deleted and imported again gets its lore back; a
    persona of that name already in the lineage is reused. Admins only (S-1).
    """
    if not (actor.is_admin and actor.can_write):
        raise PermissionDenied("Only admins (Manage Server) import personas.", field="file", rule="S-1")
    imported = import_read(data, filename=filename)  # checks the file before any write
    if imported.card is None:
        raise ValidationFailed("A persona import takes a character card (PNG, CHARX or JSON).", field="file",
                               rule="I-1")
    name, creator = _card_identity(imported.card.data)
    if not name or len(name) > CHARACTER_NAME_MAX:
        raise ValidationFailed("The card's name must be 1–{max} characters.", values={"max": CHARACTER_NAME_MAX},
                               field="file", rule="I-1")
    key = (lineage_key or "").strip() or (f"{name} by {creator}" if creator else name)
    with transaction.atomic():
        lineage = lineage_get_or_create(tenant=actor.tenant, key=key)
        character = Character.objects.for_tenant(actor.tenant).filter(lineage=lineage, name=name).first()
        created = character is None
        if character is None:
            character = Character.objects.create(tenant=actor.tenant, name=name, lineage=lineage,
                                                 created_by=actor.user)
        existing = Book.objects.for_tenant(actor.tenant).filter(lineage=lineage).first()
        # The lineage's one book: imported into when it exists, else made from the card's book.
        # A card without a book changes no book (I-1); the persona is still imported.
        if existing is not None:
            result = book_import_into(actor=actor, book=existing, data=data, filename=filename, mode=mode)
        else:
            result = book_import_new(actor=actor, data=data, filename=filename, profile=Profile.SERVER,
                                     scope=Scope.PERSONA, lineage=lineage)
    return PersonaImport(character=character, created=created, book=result.book, receipt=result.receipt)
