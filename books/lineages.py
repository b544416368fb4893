"""Lineages: what a character's lore belongs to (S-2).

A character's lore belongs to its **lineage**, not to the character row: a
persona deleted and imported again finds its lineage by ``key`` (the card's
stable identity) and so its persona book keeps applying. Characters imported
with the same key share the lineage, hence one book. Lineages live with the
books they own; characters (in cast, above) point at them.
"""
from __future__ import annotations

import uuid

from django.db import IntegrityError, transaction

from books.models import Lineage
from lore_platform.errors import NotFound, ValidationFailed
from lore_platform.tenancy.models import Tenant

LINEAGE_KEY_MAX = 200


def lineage_key_normalise(key: str) -> str:
    """Keys compare without surrounding space and case: re-imports must find their lineage."""
    return " ".join(key.split()).casefold()


def lineage_get_or_create(*, tenant: Tenant, key: str) -> Lineage:
    """The tenant's lineage for ``key``, created on first use."""
    normalised = lineage_key_normalise(key)
    if not normalised:
        raise ValidationFailed("A lineage needs a key (e.g. the card's name and creator).", field="lineage_key")
    if len(normalised) > LINEAGE_KEY_MAX:
        raise ValidationFailed("A lineage key is at most {maximum} characters.", values={"maximum": LINEAGE_KEY_MAX},
                               field="lineage_key")
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
