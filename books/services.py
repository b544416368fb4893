"""Writes for books and entries. Every path (API, import, bulk, living world) comes here.

Each service:
1. locks the book row and re-checks that the actor may edit it (``access_book``);
2. cleans the input and runs every limit in ``books.limits`` *before* writing;
3. writes inside one transaction and bumps the book's version once
   (``book_version_bump``: caches and compiled matchers key on it).

Entry positions are the editor's list order, kept dense (0..n-1) by every
service here; ties (rows written elsewhere) fall back to the id.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from books import events, limits
from books.access import access_book, book_can_read
from books.decorators import decorators_read
from books.models import (
    ENTRY_LORE_FIELDS,
    Book,
    Entry,
    IndexingState,
    Placement,
    Profile,
    Role,
    Scope,
    SecondaryLogic,
    Visibility,
    content_hash,
)
from books.models import Lineage
from books.lineages import lineage_get
from lore_platform.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant

INT32 = (-(2**31), 2**31 - 1)

BOOK_EDITABLE_FIELDS = frozenset(
    {
        "title",
        "description",
        "tags",
        "language",
        "scan_depth",
        "token_budget",
        "recursive",
        "case_sensitive",
        "whole_words",
        "living_world",
        "channels",
        "extra",
    }
)
BOOK_CREATE_FIELDS = BOOK_EDITABLE_FIELDS | {"scope", "lineage", "active"}

ENTRY_EDITABLE_FIELDS = frozenset({*ENTRY_LORE_FIELDS, "canon", "channels", "extra"})
# Only creation paths (import, legacy conversion) may set these.
ENTRY_CREATE_ONLY_FIELDS = frozenset({"unresolved_channels"})


# --- the version counter and what it tells the layers above (books.events) ----------------------------------


def book_version_bump(book: Book) -> int:
    """Count one change to ``book`` or its entries; returns the new version.

    An UPDATE with ``F()`` so concurrent writers never lose a bump.
    """
    now = timezone.now()
    Book.objects.for_tenant(book.tenant).filter(pk=book.pk).update(version=F("version") + 1, updated_at=now)
    book.version = Book.objects.for_tenant(book.tenant).values_list("version", flat=True).get(pk=book.pk)
    book.updated_at = now
    # Shared books keep their library search text, vector and translations current (P-4, P-5).
    events.book_changed(book)
    return book.version


def _entries_content_changed(book: Book, entry_ids: Sequence[int]) -> None:
    """The text entries are indexed from changed: they are ``pending`` until re-indexed (W-7).

    Indexing runs after commit, by id, in idempotent tasks that compare
    ``content_hash`` (only world books are embedded).
    """
    events.entries_changed(book=book, entry_ids=entry_ids)


def _entry_content_changed(entry: Entry) -> None:
    _entries_content_changed(entry.book, [entry.pk])


def _entries_enabled_changed(book: Book, entry_ids: Sequence[int]) -> None:
    """Entries were enabled or disabled: disabled ones leave the vector index (W-6), re-enabled ones return."""
    events.entries_changed(book=book, entry_ids=entry_ids)


def _entry_stamp(entry: Entry) -> bool:
    """Recompute the content hash; mark the entry pending if it changed. True = changed."""
    new_hash = content_hash(entry.title, entry.content, list(entry.keys))
    if new_hash == entry.content_hash:
        return False
    entry.content_hash = new_hash
    entry.indexing_state = IndexingState.PENDING
    return True


# --- cleaning ----------------------------------------------------------------------


def _fail(message: str, field: str, rule: str | None = None) -> ValidationFailed:
    return ValidationFailed(message, field=field, rule=rule)


def _as_text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise _fail("Must be text.", field)
    return value


def _as_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise _fail("Must be true or false.", field)
    return value


def _as_int(value: Any, field: str, *, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail("Must be a whole number.", field)
    if not INT32[0] <= value <= INT32[1]:
        raise _fail("Number out of range.", field)
    return value


def _as_str_list(value: Any, field: str, *, dedupe: bool = False) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise _fail("Must be a list of text.", field)
    items: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _fail("Must be text.", f"{field}[{index}]")
        item = item.strip()
        if item and not (dedupe and item in items):
            items.append(item)
    return items


def _as_choice(value: Any, field: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise _fail(f"Must be one of {', '.join(choices)}.", field)
    return str(value)


def _as_dict(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail("Must be a JSON object.", field)
    return value


def _unknown_fields(fields: Mapping[str, Any], allowed: Iterable[str], prefix: str = "") -> None:
    unknown = sorted(set(fields) - set(allowed))
    if unknown:
        raise _fail(f"Unknown or read-only field {unknown[0]!r}.", f"{prefix}{unknown[0]}")


def _book_clean(fields: Mapping[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {}
    for name, value in fields.items():
        if name in ("title", "description", "language"):
            cleaned[name] = _as_text(value, name).strip()
        elif name == "tags":
            cleaned[name] = _as_str_list(value, name, dedupe=True)
        elif name == "channels":
            cleaned[name] = _as_str_list(value, name, dedupe=True)
        elif name in ("scan_depth", "token_budget"):
            cleaned[name] = _as_int(value, name, nullable=True)
        elif name in ("recursive", "case_sensitive", "whole_words", "living_world", "active"):
            cleaned[name] = _as_bool(value, name)
        elif name == "extra":
            cleaned[name] = _as_dict(value, name)
        else:
            cleaned[name] = value
    limits.book_fields_check(cleaned)
    return cleaned


def _book_rules_check(book: Book) -> None:
    """Rules that depend on the whole book (after the change is applied)."""
    if book.channels and not (book.profile == Profile.SERVER and book.scope == Scope.SERVER):
        raise _fail(
            "Channel restrictions on a book are for server-wide collections; persona books restrict each entry (S-11).",
            "channels",
            "S-11",
        )
    if book.living_world:
        if book.profile != Profile.SMART:
            raise _fail("The living world is a world-book feature.", "living_world", "L-1")
        if book.owner_id is None or book.visibility != Visibility.PRIVATE:
            raise _fail("The living world needs a private book owned by a user (L-1).", "living_world", "L-1")


def _entry_clean(book: Book, fields: Mapping[str, Any], *, creating: bool, prefix: str = "") -> dict[str, Any]:
    """Type-check, normalise and limit-check entry fields for ``book``'s profile."""
    allowed = ENTRY_EDITABLE_FIELDS | (ENTRY_CREATE_ONLY_FIELDS if creating else frozenset())
    _unknown_fields(fields, allowed, prefix)
    p = prefix
    cleaned: dict[str, Any] = {}
    if "canon" in fields:
        canon = _as_bool(fields["canon"], f"{p}canon")
        if "constant" in fields and fields["constant"] != canon:
            raise _fail("`canon` and `constant` name the same flag; send one.", f"{p}canon")
        cleaned["constant"] = canon
    for name, value in fields.items():
        field = f"{p}{name}"
        if name == "canon":
            continue
        if name == "title":
            cleaned[name] = _as_text(value, field).strip()
        elif name == "content":
            cleaned[name] = _as_text(value, field)
        elif name in ("keys", "secondary_keys"):
            cleaned[name] = _as_str_list(value, field)
        elif name in ("channels", "unresolved_channels"):
            cleaned[name] = _as_str_list(value, field, dedupe=True)
        elif name in ("selective", "constant", "enabled"):
            cleaned[name] = _as_bool(value, field)
        elif name in ("case_sensitive", "whole_words"):
            cleaned[name] = None if value is None else _as_bool(value, field)
        elif name in ("order", "priority"):
            cleaned[name] = _as_int(value, field)
        elif name in ("probability", "scan_depth"):
            cleaned[name] = _as_int(value, field, nullable=True)
        elif name == "secondary_logic":
            cleaned[name] = _as_choice(value, field, SecondaryLogic.values)
        elif name == "role":
            cleaned[name] = _as_choice(value, field, Role.values)
        elif name == "placement":
            cleaned[name] = _as_choice(value, field, Placement.values)
        elif name == "extra":
            cleaned[name] = _as_dict(value, field)
    if creating:
        # Required text is checked even when absent (a world-book entry needs its title and lore).
        cleaned.setdefault("title", "")
        cleaned.setdefault("content", "")
    limits.entry_fields_check(book.profile, cleaned, field_prefix=p)
    _entry_rules_check(book, cleaned, prefix=p)
    return cleaned


def _entry_rules_check(book: Book, cleaned: Mapping[str, Any], *, prefix: str) -> None:
    for name in ("channels", "unresolved_channels"):
        if cleaned.get(name) and not (book.profile == Profile.SERVER and book.scope == Scope.PERSONA):
            where = (
                "set them on the collection"
                if book.scope == Scope.SERVER
                else "they exist only in server lorebooks"
            )
            raise _fail(f"Per-entry channels belong to persona books; {where} (S-11).", f"{prefix}{name}", "S-11")
    if "content" in cleaned and book.profile == Profile.CLASSIC:
        report = decorators_read(cleaned["content"])
        if report.errors:
            problem = report.errors[0]
            raise ValidationFailed(
                f"Line {problem.line}: {problem.message} (C-13).",
                field=f"{prefix}content",
                rule="C-13",
                details={"line": problem.line, "decorator": problem.name},
            )


# --- locking and positions ------------------------------------------------------------


def _book_lock(actor: Actor, book: Book) -> Book:
    """Re-read ``book`` locked for this transaction and check the actor may edit it.

    Server lorebooks also lock the tenant row: the server-wide entry limit is
    shared by several books (S-14), so their writers must queue.
    """
    locked = access_book(actor, book.pk, need="edit", for_update=True)
    if locked.profile == Profile.SERVER:
        Tenant.objects.select_for_update().filter(pk=locked.tenant_id).first()
    return locked


def _book_order(book: Book) -> list[tuple[int, int]]:
    """``(id, position)`` of the book's entries in list order."""
    return list(
        Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id").values_list("id", "position")
    )


def _positions_write(book: Book, ordered_ids: Sequence[int], current: Mapping[int, int]) -> int:
    """Give ``ordered_ids`` positions 0..n-1, writing only rows that moved."""
    moved = [Entry(pk=pk, position=index) for index, pk in enumerate(ordered_ids) if current.get(pk) != index]
    if moved:
        Entry.objects.for_tenant(book.tenant).bulk_update(moved, ["position"], batch_size=500)
    return len(moved)


def _next_position(book: Book) -> int:
    top = Entry.objects.for_tenant(book.tenant).filter(book=book).aggregate(top=Max("position"))["top"]
    return 0 if top is None else top + 1


def _ids_clean(entry_ids: Any, field: str = "entry_ids") -> list[int]:
    if not isinstance(entry_ids, (list, tuple)) or not entry_ids:
        raise _fail("Name at least one entry.", field)
    seen: list[int] = []
    for index, value in enumerate(entry_ids):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail("Entry ids are whole numbers.", f"{field}[{index}]")
        if value not in seen:
            seen.append(value)
    return seen


def _entries_of(book: Book, ids: Sequence[int], field: str = "entry_ids") -> list[int]:
    """Check every id is an entry of ``book``; NotFound naming the strays otherwise."""
    found = set(Entry.objects.for_tenant(book.tenant).filter(book=book, pk__in=ids).values_list("pk", flat=True))
    missing = [pk for pk in ids if pk not in found]
    if missing:
        raise NotFound(
            f"{len(missing)} of these entries are not in this book; nothing was changed.",
            field=field,
            details={"missing": missing[:50]},
        )
    return list(ids)


# --- books -----------------------------------------------------------------------------


def _lineage_resolve(actor: Actor, value: Any) -> Lineage:
    if isinstance(value, Lineage):
        if value.tenant_id != actor.tenant.pk:
            raise NotFound("No such lineage.", field="lineage")
        return value
    if isinstance(value, (uuid.UUID, str)):
        return lineage_get(tenant=actor.tenant, public_id=value)
    raise _fail("Name the lineage by its id.", "lineage")


@transaction.atomic
def book_create(*, actor: Actor, title: str, profile: str = "classic", **fields: Any) -> Book:
    """Create a book. Personal books belong to the actor; server-wide and persona books
    belong to the tenant and only admins create them (S-1)."""
    if not actor.can_write:
        raise PermissionDenied("This API key may only read.")
    _unknown_fields(fields, BOOK_CREATE_FIELDS)
    profile = _as_choice(profile, "profile", Profile.values)
    default_scope = Scope.SERVER if profile == Profile.SERVER else Scope.PERSONAL
    scope = _as_choice(fields.pop("scope", None) or default_scope, "scope", Scope.values)
    if profile == Profile.SERVER and scope == Scope.PERSONAL:
        raise _fail("Server lorebooks are server-wide or belong to a persona (S-2).", "scope", "S-2")
    lineage_value = fields.pop("lineage", None)
    if scope == Scope.PERSONAL and actor.user is None:
        raise PermissionDenied("This API key acts for no user, so it cannot own a book.")
    if scope != Scope.PERSONAL and not actor.is_admin:
        raise PermissionDenied("Only tenant admins create server-wide and persona books (S-1).", rule="S-1")
    cleaned = _book_clean({"title": title, **fields})

    book = Book(tenant=actor.tenant, profile=profile, scope=scope, **cleaned)
    if scope == Scope.PERSONAL:
        book.owner = actor.user

    if scope == Scope.PERSONA:
        if lineage_value is None:
            raise _fail("A persona book names the persona's lineage (S-2).", "lineage", "S-2")
        book.lineage = _lineage_resolve(actor, lineage_value)
        if Book.objects.for_tenant(actor.tenant).filter(lineage=book.lineage).exists():
            raise Conflict("This lineage has its book already; personas of a lineage share one (S-2).",
                           field="lineage", rule="S-2")
    elif lineage_value is not None:
        raise _fail("Only persona books belong to a lineage (S-2).", "lineage", "S-2")

    _book_rules_check(book)
    book.save()
    return book


@transaction.atomic
def book_update(*, actor: Actor, book: Book, **fields: Any) -> Book:
    """Change a book's editable fields; the version is bumped when anything changed."""
    book = _book_lock(actor, book)
    _unknown_fields(fields, BOOK_EDITABLE_FIELDS)
    cleaned = _book_clean(fields)
    changed = [name for name, value in cleaned.items() if getattr(book, name) != value]
    if not changed:
        return book
    for name in changed:
        setattr(book, name, cleaned[name])
    _book_rules_check(book)
    book.save(update_fields=changed)
    book_version_bump(book)
    return book


@transaction.atomic
def book_delete(*, actor: Actor, book: Book) -> None:
    """Delete a book and its entries. A persona book goes too, though its lineage stays."""
    book = _book_lock(actor, book)
    Entry.objects.for_tenant(book.tenant).filter(book=book).delete()
    Book.objects.for_tenant(book.tenant).filter(pk=book.pk).delete()


@transaction.atomic
def book_set_active(*, actor: Actor, book: Book, active: bool) -> Book:
    """The collection toggle (S-12): off removes every entry from prompts, on restores them.

    Entries' own ``enabled`` flags are never touched, so re-activating brings
    back exactly the entries that were enabled before.
    """
    book = _book_lock(actor, book)
    active = _as_bool(active, "active")
    if book.active != active:
        book.active = active
        book.save(update_fields=["active"])
        book_version_bump(book)
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


# --- entries -----------------------------------------------------------------------------


@transaction.atomic
def entry_create(*, actor: Actor, book: Book, **fields: Any) -> Entry:
    """Add one entry at the bottom of the list."""
    book = _book_lock(actor, book)
    cleaned = _entry_clean(book, fields, creating=True)
    limits.entry_capacity_check(book, adding=1)
    now = timezone.now()
    entry = Entry(
        tenant=book.tenant, book=book, position=_next_position(book), created_at=now, updated_at=now, **cleaned
    )
    _entry_stamp(entry)
    entry.save()
    _entry_content_changed(entry)
    book_version_bump(book)
    return entry


@transaction.atomic
def entries_create_bulk(*, actor: Actor, book: Book, entries: list[dict[str, Any]]) -> list[Entry]:
    """Add many entries at the bottom, in order: all of them or none (I-3).

    Every entry and every limit (batch size, the book's entry cap) is checked
    before the first write; errors name ``entries[i].<field>``.
    """
    book = _book_lock(actor, book)
    if not isinstance(entries, list):
        raise _fail("Send a list of entries.", "entries")
    limits.import_batch_check(len(entries))
    cleaned = []
    for index, fields in enumerate(entries):
        if not isinstance(fields, Mapping):
            raise _fail("Each entry is a JSON object.", f"entries[{index}]")
        cleaned.append(_entry_clean(book, fields, creating=True, prefix=f"entries[{index}]."))
    if not cleaned:
        return []
    limits.entry_capacity_check(book, adding=len(cleaned))

    start = _next_position(book)
    now = timezone.now()
    rows = []
    for offset, values in enumerate(cleaned):
        entry = Entry(tenant=book.tenant, book=book, position=start + offset, created_at=now, updated_at=now, **values)
        _entry_stamp(entry)
        rows.append(entry)
    created = Entry.objects.for_tenant(book.tenant).bulk_create(rows, batch_size=500)
    _entries_content_changed(book, [entry.pk for entry in created])
    book_version_bump(book)
    return created


@transaction.atomic
def entry_update(*, actor: Actor, entry: Entry, **fields: Any) -> Entry:
    """Change an entry. Saving channels resolves a legacy `#channel` (S-13)."""
    book = _book_lock(actor, entry.book)
    entry = Entry.objects.for_tenant(book.tenant).select_for_update().get(pk=entry.pk, book=book)
    entry.book = book
    cleaned = _entry_clean(book, fields, creating=False)
    if "channels" in cleaned and entry.unresolved_channels:
        # An admin saved a channel selection: the legacy name is resolved.
        cleaned["unresolved_channels"] = []
    changed = [name for name, value in cleaned.items() if getattr(entry, name) != value]
    if not changed:
        return entry
    for name in changed:
        setattr(entry, name, cleaned[name])
    text_changed = _entry_stamp(entry)
    entry.updated_at = timezone.now()
    entry.save(update_fields=[*changed, "content_hash", "indexing_state", "updated_at"])
    if text_changed:
        _entry_content_changed(entry)
    if "enabled" in changed:
        _entries_enabled_changed(book, [entry.pk])
    book_version_bump(book)
    return entry


@transaction.atomic
def entry_delete(*, actor: Actor, entry: Entry) -> None:
    book = _book_lock(actor, entry.book)
    deleted, _ = Entry.objects.for_tenant(book.tenant).filter(pk=entry.pk, book=book).delete()
    if not deleted:
        raise NotFound("No such entry.", field="entry")
    order = _book_order(book)
    _positions_write(book, [pk for pk, _ in order], dict(order))
    book_version_bump(book)


MoveTarget = Literal["top", "bottom"]


@transaction.atomic
def entry_move(*, actor: Actor, entry: Entry, position: int | None = None, to: MoveTarget | None = None) -> Entry:
    """Move an entry to ``position`` (0 = top; past the end = bottom), or ``to`` top/bottom.

    List order decides which canon survives a small model (W-1).
    """
    if (position is None) == (to is None):
        raise _fail("Give either a position or top/bottom.", "position")
    if to is not None:
        _as_choice(to, "to", ("top", "bottom"))
    else:
        position = _as_int(position, "position")
        if position is not None and position < 0:
            raise _fail("Positions start at 0.", "position")
    book = _book_lock(actor, entry.book)
    order = _book_order(book)
    ids = [pk for pk, _ in order]
    if entry.pk not in ids:
        raise NotFound("No such entry.", field="entry")
    ids.remove(entry.pk)
    target = 0 if to == "top" else len(ids) if to == "bottom" else min(int(position or 0), len(ids))
    ids.insert(target, entry.pk)
    if _positions_write(book, ids, dict(order)):
        book_version_bump(book)
    entry.position = target
    return entry


@transaction.atomic
def entries_reorder(*, actor: Actor, book: Book, entry_ids: list[int]) -> list[int]:
    """Put the named entries in the given order, in the slots they already occupy.

    Other entries keep their places, so reordering a page of the list (or the
    whole list) is one call. Returns the book's full order of ids.
    """
    ids = _ids_clean(entry_ids)
    if len(ids) != len(entry_ids):
        raise _fail("An entry is named twice.", "entry_ids")
    book = _book_lock(actor, book)
    _entries_of(book, ids)
    order = _book_order(book)
    full = [pk for pk, _ in order]
    named = set(ids)
    slots = [index for index, pk in enumerate(full) if pk in named]
    for slot, pk in zip(slots, ids):
        full[slot] = pk
    if _positions_write(book, full, dict(order)):
        book_version_bump(book)
    return full


@dataclass(frozen=True, kw_only=True)
class BulkResult:
    matched: int  # entries named
    changed: int  # entries whose state changed
    version: int  # the book's version afterwards


@transaction.atomic
def entries_bulk_set_enabled(*, actor: Actor, book: Book, entry_ids: list[int], enabled: bool) -> BulkResult:
    """Enable or disable up to 500 entries at once (W-6, W-12): all or nothing."""
    book = _book_lock(actor, book)
    limits.bulk_action_check(len(entry_ids) if isinstance(entry_ids, (list, tuple)) else 0)
    ids = _ids_clean(entry_ids)
    enabled = _as_bool(enabled, "enabled")
    _entries_of(book, ids)
    flipping = Entry.objects.for_tenant(book.tenant).filter(book=book, pk__in=ids).exclude(enabled=enabled)
    flipped = list(flipping.values_list("pk", flat=True))
    changed = flipping.update(enabled=enabled, updated_at=timezone.now())
    if changed:
        _entries_enabled_changed(book, flipped)
        book_version_bump(book)
    return BulkResult(matched=len(ids), changed=changed, version=book.version)


@transaction.atomic
def entries_bulk_delete(*, actor: Actor, book: Book, entry_ids: list[int]) -> BulkResult:
    """Delete up to 500 entries at once (W-12): all or nothing."""
    book = _book_lock(actor, book)
    limits.bulk_action_check(len(entry_ids) if isinstance(entry_ids, (list, tuple)) else 0)
    ids = _ids_clean(entry_ids)
    _entries_of(book, ids)
    deleted, _ = Entry.objects.for_tenant(book.tenant).filter(book=book, pk__in=ids).delete()
    order = _book_order(book)
    _positions_write(book, [pk for pk, _ in order], dict(order))
    book_version_bump(book)
    return BulkResult(matched=len(ids), changed=deleted, version=book.version)


def entries_record_usage(
    *,
    tenant: Tenant,
    entry_ids: Iterable[int] = (),
    counts: Mapping[int, int] | None = None,
    used_at: datetime | None = None,
) -> int:
    """Count uses in chats (W-11): one for each of ``entry_ids`` (repeats count once), or
    ``counts[entry id]`` each (the usage sweep adds up many turns). Returns the entries changed.

    Usage statistics are not lore: they do not bump the book version, so caches
    keyed on it survive every turn.
    """
    uses = dict.fromkeys(entry_ids, 1)
    for entry_id, count in (counts or {}).items():
        uses[entry_id] = uses.get(entry_id, 0) + count
    by_count: dict[int, list[int]] = {}
    for entry_id, count in uses.items():
        if count > 0:
            by_count.setdefault(count, []).append(entry_id)
    when = used_at or timezone.now()
    if len(by_count) > 1:
        # Several statements touch these rows: lock them in id order first, so two
        # concurrent sweeps queue instead of deadlocking.
        with transaction.atomic():
            list(Entry.objects.for_tenant(tenant).filter(pk__in=sorted(uses)).order_by("pk")
                 .select_for_update().values_list("pk", flat=True))
            return _usage_apply(tenant, by_count, when)
    return _usage_apply(tenant, by_count, when)


def _usage_apply(tenant: Tenant, by_count: dict[int, list[int]], when: datetime) -> int:
    changed = 0
    # One UPDATE per distinct count (a handful), not one per entry.
    for count, ids in sorted(by_count.items()):
        changed += (
            Entry.objects.for_tenant(tenant)
            .filter(pk__in=sorted(ids))
            .update(usage_count=F("usage_count") + count, last_used_at=when)
        )
    return changed
