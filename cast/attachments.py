"""Attaching books to what owns a world (W-8, W-9, S-1).

Books are attached to a character, story, novel or the whole tenant, never to
one chat; what a chat then reads is gathered in ``cast.selectors``.
"""
from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from cast.models import Attachment, Character, Novel, Story
from cast.services import may_undo
from lore_platform.errors import NotFound, PermissionDenied, ValidationFailed
from lore_platform.tenancy.actor import Actor
from sharing.selectors import book_for_attach


def _target(actor: Actor, kind: str, target_id: int | None) -> dict[str, object]:
    if kind == "tenant":
        if target_id is not None:
            raise ValidationFailed("A tenant-wide attachment names no target.", field="target_id")
        return {}
    models: dict[str, type[Character] | type[Story] | type[Novel]] = {
        "character": Character, "story": Story, "novel": Novel}
    model = models.get(kind)
    if model is None:
        raise ValidationFailed("target must be character, story, novel or tenant.", field="target")
    found = model.objects.for_tenant(actor.tenant).filter(pk=target_id).first() if target_id is not None else None
    if found is None:
        raise _target_missing(kind)
    return {kind: found}


def _target_missing(kind: str) -> NotFound:
    """No such character, story or novel: each said whole, so a page can say it in its language."""
    if kind == "character":
        return NotFound("No such character.", field="target_id")
    if kind == "story":
        return NotFound("No such story.", field="target_id")
    return NotFound("No such novel.", field="target_id")


@transaction.atomic
def book_attach(
    *,
    actor: Actor,
    target: str,
    target_id: int | None,
    book_id: int | None = None,
    link_token: str | None = None,
) -> Attachment:
    """Attach a readable book: the actor's own, any public book, or an unlisted one by link (W-9)."""
    if target == "tenant" and not actor.is_admin:
        raise PermissionDenied("Only tenant admins attach server-wide books.", field="target", rule="S-1")
    where = _target(actor, target, target_id)
    book = book_for_attach(actor, book_id=book_id, link_token=link_token)
    existing = Attachment.objects.for_tenant(actor.tenant).filter(book=book, **{
        "character": where.get("character"), "story": where.get("story"), "novel": where.get("novel")
    }).first()
    token = (link_token or "").strip() if book.tenant_id != actor.tenant.pk else ""
    if existing is not None:
        if token and existing.link_token and existing.link_token != token:
            existing.link_token = token  # attached again through the current link: it reaches the book again
            existing.save(update_fields=["link_token"])
        return existing
    last = Attachment.objects.for_tenant(actor.tenant).aggregate(last=Max("position"))["last"]
    return Attachment.objects.create(tenant=actor.tenant, book=book, position=(last or 0) + 1, link_token=token,
                                     attached_by=actor.user, **where)


def attachment_delete(*, actor: Actor, attachment_id: int) -> None:
    """Detach: whoever attached the book, the book's owner, or a tenant admin (issue 26.4)."""
    attachment = Attachment.objects.for_tenant(actor.tenant).select_related("book").filter(pk=attachment_id).first()
    if attachment is None:
        raise NotFound("No such attachment.", field="id")
    if not actor.can_write:
        raise PermissionDenied("This API key may only read.")
    if not may_undo(actor, attachment.attached_by_id, attachment.book.owner_id):
        raise PermissionDenied("Only whoever attached the book, its owner or a tenant admin detaches it (S-1).",
                               field="id", rule="S-1")
    attachment.delete()
