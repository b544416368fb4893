"""Writes for characters (S-2); their lineages are in ``books.lineages``.

A character's lore belongs to its **lineage**, not to the character row: a
persona deleted and imported again finds its lineage by ``key`` (the card's
stable identity) and so its persona book keeps applying. Characters imported
with the same key share the lineage, hence one book.
"""
from __future__ import annotations

from django.db import transaction

from books.lineages import lineage_get_or_create
from cast.models import Character
from lore_platform.errors import NotFound, ValidationFailed
from lore_platform.tenancy.models import Tenant

CHARACTER_NAME_MAX = 120


@transaction.atomic
def character_import(*, tenant: Tenant, name: str, lineage_key: str | None = None) -> Character:
    """Create a character in the lineage found (or created) by ``lineage_key`` (default: the name)."""
    name = name.strip()
    if not name or len(name) > CHARACTER_NAME_MAX:
        raise ValidationFailed("A character name is 1–{max} characters.", values={"max": CHARACTER_NAME_MAX},
                               field="name")
    lineage = lineage_get_or_create(tenant=tenant, key=lineage_key or name)
    return Character.objects.create(tenant=tenant, name=name, lineage=lineage)


@transaction.atomic
def character_delete(*, tenant: Tenant, character: Character) -> None:
    """Delete the character; its lineage and the lineage's persona book stay (S-2)."""
    if character.tenant_id != tenant.pk:
        raise NotFound("No such character.", field="character")
    Character.objects.for_tenant(tenant).filter(pk=character.pk).delete()
