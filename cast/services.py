"""Writes for characters (S-2); their lineages are in ``books.lineages``.

A character's lore belongs to its **lineage**, not to the character row: a
persona deleted and imported again finds its lineage by ``key`` (the card's
stable identity) and so its persona book keeps applying. Characters imported
with the same key share the lineage, hence one book.

Characters, stories, novels and attachments are shared by the whole tenant, so
undoing what one member put there is not every member's call (issue 26.4):
``may_undo`` is the one rule, for the API and the pages alike — a tenant admin
(S-1) or the member who made it; a book's owner may also take their book off
what it is attached to. Rows made before their maker was kept are admins' only.
"""
from __future__ import annotations

from django.db import transaction

from books.lineages import lineage_get_or_create
from cast.models import Character
from lore_platform.errors import NotFound, PermissionDenied, ValidationFailed
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant, User

CHARACTER_NAME_MAX = 120


@transaction.atomic
def character_import(*, tenant: Tenant, name: str, lineage_key: str | None = None,
                     created_by: User | None = None) -> Character:
    """Create a character in the lineage found (or created) by ``lineage_key`` (default: the name).

    ``created_by`` may delete it later (``character_delete``); without one only admins do."""
    name = name.strip()
    if not name or len(name) > CHARACTER_NAME_MAX:
        raise ValidationFailed("A character name is 1–{max} characters.", values={"max": CHARACTER_NAME_MAX},
                               field="name")
    lineage = lineage_get_or_create(tenant=tenant, key=lineage_key or name)
    return Character.objects.create(tenant=tenant, name=name, lineage=lineage, created_by=created_by)


def may_undo(actor: Actor, *makers: int | None) -> bool:
    """Whether ``actor`` may remove something of the tenant's shared world that ``makers`` (user ids:
    who made it, and for an attachment the attached book's owner) put there: a tenant admin may,
    and so may any of them. An unknown maker (None) is nobody."""
    if actor.is_admin:
        return True
    return actor.user is not None and actor.user.pk in {m for m in makers if m is not None}


@transaction.atomic
def character_delete(*, actor: Actor, character: Character) -> None:
    """Delete the character (its creator or a tenant admin); its lineage and the lineage's persona
    book stay (S-2), its chats stay without it."""
    if character.tenant_id != actor.tenant.pk:
        raise NotFound("No such character.", field="character")
    if not actor.can_write:
        raise PermissionDenied("This API key may only read.")
    if not may_undo(actor, character.created_by_id):
        raise PermissionDenied("Only the character's creator or a tenant admin deletes it (S-1).", field="id",
                               rule="S-1")
    Character.objects.for_tenant(actor.tenant).filter(pk=character.pk).delete()
