"""A tenant's full backup and its restore (I-6): above every app they save.

``tenant_backup`` writes every book a tenant admin can see (the tenant's own
books, the admin's books and members' non-private books — a private book
stays its owner's alone, as everywhere else) with the tenant's lineages and
the names of their characters, in the native format, and beside them the
``"backup"`` section (version 2, ``backup.full``): characters, stories,
novels, attachments, chats with their timed state, request logs (on request),
living-world writes, ended AI jobs, members and settings — never a secret.
``tenant_restore`` brings such a backup back (or a version-1 one: books and
lineages only), all or nothing, in one transaction, adding to what the tenant has:

* lineages by key (created when missing) and their characters by name
  (created when the lineage has none of that name);
* each book with its collection state: a personal book goes back to the
  member with the owner's email (to the restoring admin, with a warning,
  when no such member exists); visibility is restored through
  ``sharing.services.book_visibility_set`` (a book now too small to be
  public, P-1, comes back unlisted, with a warning);
* every entry with every field, channels and ``extra`` included, in list
  order, through ``entries_create_bulk`` (its limit checks, indexing);
* then the section's rows (``backup.full.restore_rest``), every old id mapped
  to the row just written.

A book whose name its owner already uses in this tenant, or a persona book
whose lineage has its book already, refuses the whole restore (``Conflict``,
I-2/S-2): a restore never overwrites.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from backup import full
from books.access import books_visible_to
from books.exports import backup_max_bytes, book_as_imported, lineages_native
from books.formats import (
    CollectionState,
    ImportedBook,
    NativeBackup,
    current_limits,
    normalise_text,
    read_native,
)
from books.formats.jsonio import loads
from books.formats.model import book_text_check, plain_json
from books.formats.native import is_native, native_document
from books.imports import entries_as_fields, entries_write
from books.lineages import lineage_get_or_create, lineage_key_normalise
from books.models import Book, Lineage, Scope, Visibility
from books.services import book_create
from cast.models import Character, Chat
from cast.services import character_import
from lore_platform.errors import (
    Conflict,
    LimitExceeded,
    PayloadTooLarge,
    PermissionDenied,
    ValidationFailed,
)
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Membership, Tenant
from sharing.services import book_visibility_set


def tenant_backup_check(actor: Actor) -> None:
    if not actor.is_admin:
        raise PermissionDenied("Only tenant admins back up the tenant's lore (S-1).", rule="S-1")


def tenant_backup(*, actor: Actor, request_logs: bool = False) -> bytes:
    """The tenant's lore and everything built on it as one native document (admins only; a read).

    The books and lineages are the native format (version 1, which every reader of a native
    file understands); the rest is under ``"backup"`` (``BACKUP_VERSION``), ``backup.full``
    says what it holds. ``request_logs``: add the chats' request logs (they can be large).
    """
    tenant_backup_check(actor)
    books = list(books_visible_to(actor).select_related("owner", "lineage").order_by("pk"))
    doc = native_document(
        [book_as_imported(book, with_collection=True) for book in books], lineages=lineages_native(actor.tenant)
    )
    doc["backup"] = full.section(actor, books, request_logs=request_logs)
    return json.dumps(doc, ensure_ascii=False, indent=2).encode("utf-8")


def tenant_backup_filename(tenant: Tenant) -> str:
    return f"loreweave-backup-{tenant.slug}-{timezone.now():%Y%m%d-%H%M%S}.json"


# --- restore -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _BookPlan:
    book: ImportedBook
    collection: CollectionState
    owner_actor: Actor
    lineage_key: str | None


def _read_backup(data: bytes) -> tuple[NativeBackup, dict[str, Any] | None]:
    if not isinstance(data, (bytes, bytearray)):
        raise ValidationFailed("Send the backup file's bytes.", field="file", rule="I-1")
    limit = backup_max_bytes()
    if len(data) > limit:
        raise PayloadTooLarge(
            f"the backup is {len(data):,} bytes; the limit is {limit:,} bytes",
            field="file",
            rule="I-3",
            details={"size": len(data), "limit": limit},
        )
    doc = loads(bytes(data), limit_bytes=limit, max_depth=current_limits().max_json_depth, what="backup file")
    if not is_native(doc):
        raise ValidationFailed(
            'not a Loreweave backup (expected a JSON document with "format": "loreweave-native")',
            field="file",
            rule="I-6",
        )
    backup = read_native(doc)
    for index, book in enumerate(backup.books):
        try:
            book_text_check(book)
        except ValidationFailed as exc:
            raise ValidationFailed(exc.message, field=f"books.{index}.{exc.field}", rule=exc.rule) from None
    section = full.read_section(doc)
    if section is not None:
        full.books_count_check(section, len(backup.books))
    return backup, section


def _members_by_email(tenant: Tenant) -> dict[str, Membership]:
    memberships = Membership.objects.for_tenant(tenant).select_related("user")
    return {m.user.email.casefold(): m for m in memberships if m.user.email}


def _plan_restore(actor: Actor, backup: NativeBackup, warnings: list[str]) -> list[_BookPlan]:
    """Check every book against the tenant as it is (locked) before anything is written."""
    members = _members_by_email(actor.tenant)
    existing = Book.objects.for_tenant(actor.tenant)
    taken: dict[int | None, set[str]] = {}
    for owner, title in existing.values_list("owner_id", "title"):
        taken.setdefault(owner, set()).add(normalise_text(title))
    lineage_books = {key: pk for pk, key in existing.filter(lineage__isnull=False).values_list("pk", "lineage__key")}
    backup_lineages = {lineage_key_normalise(lin.key) for lin in backup.lineages}
    plans: list[_BookPlan] = []
    personas: set[str] = set()
    for index, book in enumerate(backup.books):
        collection = book.collection or CollectionState()
        owner_actor = actor
        if collection.scope == Scope.PERSONAL:
            member = members.get((collection.owner or "").casefold())
            if member is not None:
                owner_actor = Actor(tenant=actor.tenant, user=member.user, role=member.role)
            else:
                warnings.append(
                    f"book {book.name!r}: its owner {collection.owner or '(none)'} is not a member of this tenant; "
                    "it now belongs to you"
                )
        owner_id = owner_actor.user.pk if collection.scope == Scope.PERSONAL and owner_actor.user else None
        if normalise_text(book.name) in taken.get(owner_id, set()):
            whose = "its owner has" if owner_id is not None else "the tenant has"
            raise Conflict(
                f"books.{index}: {whose} a book named {book.name!r} already; a restore never overwrites (I-2). "
                "Nothing was restored.",
                field=f"books.{index}.title",
                rule="I-2",
            )
        lineage_key = None
        if collection.scope == Scope.PERSONA:
            if not collection.lineage_key:
                raise ValidationFailed(
                    f"books.{index}: a persona book names its lineage (S-2)",
                    field=f"books.{index}.collection.lineage_key",
                    rule="S-2",
                )
            lineage_key = lineage_key_normalise(collection.lineage_key)
            if lineage_key in lineage_books or lineage_key in personas:
                raise Conflict(
                    f"books.{index}: the lineage {lineage_key!r} has its persona book already (S-2). "
                    "Nothing was restored.",
                    field=f"books.{index}.collection.lineage_key",
                    rule="S-2",
                )
            personas.add(lineage_key)
            if lineage_key not in backup_lineages:
                warnings.append(f"book {book.name!r}: lineage {lineage_key!r} was not listed; it was created")
        plans.append(_BookPlan(book=book, collection=collection, owner_actor=owner_actor, lineage_key=lineage_key))
    return plans


def _visibility_restore(actor: Actor, book: Book, visibility: str, warnings: list[str]) -> None:
    if visibility == Visibility.PRIVATE:
        return

    try:
        book_visibility_set(actor=actor, book=book, visibility=visibility)
    except LimitExceeded as exc:  # P-1: too few entries to be listed (its savepoint rolled back)
        book_visibility_set(actor=actor, book=book, visibility=Visibility.UNLISTED)
        warnings.append(f"book {book.title!r} came back unlisted, not public: {exc.message}")


def tenant_restore(*, actor: Actor, data: bytes) -> dict[str, Any]:
    """Restore a native backup into the actor's tenant (admins, write key): all or nothing.

    Returns the receipt: the books written (id, title, profile, scope,
    entries), counts of entries, lineages and characters created, and warnings.
    """
    if not actor.can_write:
        raise PermissionDenied("This API key may only read; restoring needs the write scope.", rule="S-1")
    if not actor.is_admin:
        raise PermissionDenied("Only tenant admins restore a backup (S-1).", rule="S-1")
    backup, section = _read_backup(data)
    warnings: list[str] = []
    restored = full.Restored(tenant=actor.tenant, old_tenant=_old_tenant(section))
    rest: dict[str, int] = {}
    written: list[dict[str, Any]] = []
    characters_created = 0
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=actor.tenant.pk).first()
        plans = _plan_restore(actor, backup, warnings)
        restored.fresh = not (
            Book.objects.for_tenant(actor.tenant).exists()
            or Character.objects.for_tenant(actor.tenant).exists()
            or Chat.objects.for_tenant(actor.tenant).exists()
        )

        lineages: dict[str, Lineage] = {}
        for item in backup.lineages:
            lineage = lineage_get_or_create(tenant=actor.tenant, key=item.key)
            lineages[lineage.key] = lineage
            have = set(
                Character.objects.for_tenant(actor.tenant).filter(lineage=lineage).values_list("name", flat=True)
            )
            # A version-2 backup lists its characters with their ids (restored with the rest).
            for name in item.characters if section is None else ():
                if name.strip() and name.strip() not in have:
                    character_import(tenant=actor.tenant, name=name, lineage_key=lineage.key)
                    have.add(name.strip())
                    characters_created += 1

        for index, plan in enumerate(plans):
            c = plan.collection
            fields: dict[str, Any] = {
                "scope": c.scope,
                "description": plan.book.description,
                "tags": list(c.tags),
                "language": c.language,
                "active": c.active,
                "extra": plain_json(plan.book.extra),
            }
            fields.update({k: v for k, v in plan.book.settings.as_dict().items() if v is not None})
            if c.channels:
                fields["channels"] = list(c.channels)
            if c.living_world:
                fields["living_world"] = True
            if c.living_world_review:
                fields["living_world_review"] = True
            if plan.lineage_key is not None:
                lineage = lineages.get(plan.lineage_key) or lineage_get_or_create(
                    tenant=actor.tenant, key=plan.lineage_key
                )
                fields["lineage"] = lineage
            book = book_create(actor=plan.owner_actor, title=plan.book.name, profile=c.profile, **fields)
            ids: list[dict[str, Any]] = (
                full.book_entries(section, index, len(plan.book.entries)) if section is not None
                else [{}] * len(plan.book.entries)
            )
            # List order; the ids travel with their entries (a stable sort keeps the file's order).
            pairs = sorted(zip(plan.book.entries, ids), key=lambda pair: pair[0].position)
            rows = entries_as_fields([e for e, _ in pairs], profile=c.profile, scope=c.scope, warnings=warnings)
            created = entries_write(plan.owner_actor, book, rows)
            if section is not None:
                old_id = full.book_id_of(section, index)
                restored.book_add(old_id, book)
                full.entries_restored(actor.tenant, [r for _, r in pairs], created, f"backup.books.{index}.entries",
                                      restored)
            _visibility_restore(plan.owner_actor, book, c.visibility, warnings)
            written.append(
                {
                    "id": book.pk,
                    "title": book.title,
                    "profile": book.profile,
                    "scope": book.scope,
                    "entries": len(created),
                }
            )
        if section is not None:
            rest = full.restore_rest(actor, section, restored, warnings)
            characters_created = rest.pop("characters_created", 0)
    return {
        "format": "loreweave-native",
        "books": written,
        "books_restored": len(written),
        "entries_restored": sum(item["entries"] for item in written),
        "lineages": len(backup.lineages),
        "characters_created": characters_created,
        "backup_version": 1 if section is None else section["version"],
        "restored": rest,
        "warnings": warnings,
    }


def _old_tenant(section: dict[str, Any] | None) -> int | None:
    tenant = section.get("tenant") if section is not None else None
    value = tenant.get("id") if isinstance(tenant, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
