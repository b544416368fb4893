"""Writes for characters and their lineages (S-2).

A character's lore belongs to its **lineage**, not to the character row: a
persona deleted and imported again finds its lineage by ``key`` (the card's
stable identity) and so its persona book keeps applying. Characters imported
with the same key share the lineage, hence one book.
"""
from __future__ import annotations

import uuid

from django.db import IntegrityError, transaction

from lore_platform.cast.models import Character, Lineage
from lore_platform.errors import NotFound, ValidationFailed
from lore_platform.tenancy.models import Tenant

LINEAGE_KEY_MAX = 200
CHARACTER_NAME_MAX = 120


def lineage_key_normalise(key: str) -> str:
    """Keys compare without surrounding space and case: re-imports must find their lineage."""
    return " ".join(key.split()).casefold()


def lineage_get_or_create(*, tenant: Tenant, key: str) -> Lineage:
    """The tenant's lineage for ``key``, created on first use."""
    normalised = lineage_key_normalise(key)
    if not normalised:
        raise ValidationFailed("A lineage needs a key (e.g. the card's name and creator).", field="lineage_key")
    if len(normalised) > LINEAGE_KEY_MAX:
        raise ValidationFailed(f"A lineage key is at most {LINEAGE_KEY_MAX} characters.", field="lineage_key")
    existing = Lineage.objects.for_tenant(tenant).filter(key=normalised).first()
    if existing is not None:
        return existing
    try:
        # A savepoint: a concurrent import of the same card may win the race.
        with transaction.atomic():
            return Lineage.objects.create(tenant=tenant, key=normalised)
    except IntegrityError:
        return Lineage.objects.for_tenant(tenant).get(key=normalised)


def lineage_get(*, tenant: Tenant, public_id: uuid.UUID | str) -> Lineage:
    """The tenant's lineage with this public id; another tenant's is NotFound."""
    try:
        parsed = public_id if isinstance(public_id, uuid.UUID) else uuid.UUID(str(public_id))
    except ValueError:
        raise NotFound("No such lineage.", field="lineage") from None
    lineage = Lineage.objects.for_tenant(tenant).filter(public_id=parsed).first()
    if lineage is None:
        raise NotFound("No such lineage.", field="lineage")
    return lineage


@transaction.atomic
def character_import(*, tenant: Tenant, name: str, lineage_key: str | None = None) -> Character:
    """Create a character in the lineage found (or created) by ``lineage_key`` (default: the name)."""
    name = name.strip()
    if not name or len(name) > CHARACTER_NAME_MAX:
        raise ValidationFailed(f"A character name is 1–{CHARACTER_NAME_MAX} characters.", field="name")
    lineage = lineage_get_or_create(tenant=tenant, key=lineage_key or name)
    return Character.objects.create(tenant=tenant, name=name, lineage=lineage)


@transaction.atomic
def character_delete(*, tenant: Tenant, character: Character) -> None:
    """Delete the character; its lineage and the lineage's persona book stay (S-2)."""
    if character.tenant_id != tenant.pk:
        raise NotFound("No such character.", field="character")
    Character.objects.for_tenant(tenant).filter(pk=character.pk).delete()
