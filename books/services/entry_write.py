"""Writes of one entry: create, update, delete, and its place in the list."""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from books import limits
from books.models import Book, Entry
from books.services import versions
from books.services.cleaning import as_choice, as_int, entry_clean, field_refusal
from books.services.positions import (
    book_lock,
    book_order,
    entries_of,
    ids_clean,
    next_position,
    positions_write,
)
from lore_platform.errors import NotFound, Term
from lore_platform.etags import stamp_version, version_check
from lore_platform.tenancy.actor import Actor
from retrieval.engine.key_expressions import KeyExpressionError, key_expression_parse


def entry_version(entry: Entry) -> str:
    """The entry's version, its ETag's last part: every write of an entry stamps ``updated_at``."""
    return stamp_version(entry.updated_at)


@transaction.atomic
def entry_create(*, actor: Actor, book: Book, **fields: Any) -> Entry:
    """Add one entry at the bottom of the list."""
    book = book_lock(actor, book)
    cleaned = entry_clean(book, fields, creating=True)
    limits.entry_capacity_check(book, adding=1)
    now = timezone.now()
    entry = Entry(
        tenant=book.tenant, book=book, position=next_position(book), created_at=now, updated_at=now, **cleaned
    )
    versions._entry_stamp(entry)
    entry.save()
    versions._entry_content_changed(entry)
    versions.book_version_bump(book)
    return entry


@transaction.atomic
def entry_update(*, actor: Actor, entry: Entry, expected_version: object | None = None, **fields: Any) -> Entry:
    """Change an entry. Saving channels resolves a legacy `#channel` (S-13).

    ``expected_version`` is the ``entry_version`` the caller read (an API If-Match, the page form's
    hidden field; None = unconditional): a stale one is refused (412) before anything is written.
    """
    book = book_lock(actor, entry.book)
    try:
        entry = Entry.objects.for_tenant(book.tenant).select_for_update().get(pk=entry.pk, book=book)
    except Entry.DoesNotExist:  # deleted by a concurrent request after the view found it
        raise NotFound("No such entry.", field="entry") from None
    read_at = entry.updated_at
    version_check("entry", entry.pk, entry_version(entry), expected_version)
    entry.book = book
    cleaned = entry_clean(book, fields, creating=False)
    if "channels" in cleaned and entry.unresolved_channels:
        # An admin saved a channel selection: the legacy name is resolved.
        cleaned["unresolved_channels"] = []
    changed = [name for name, value in cleaned.items() if getattr(entry, name) != value]
    if not changed:
        return entry
    for name in changed:
        setattr(entry, name, cleaned[name])
    if entry.regex_overruns and ({"keys", "secondary_keys", "key_expression"} & set(changed)):
        # Edited keys get a fresh chance; one that still overruns is flagged again by its next turn.
        kept = set(entry.keys) | set(entry.secondary_keys) | _expression_keys(entry.key_expression)
        entry.regex_overruns = {k: v for k, v in entry.regex_overruns.items() if k in kept}
        changed.append("regex_overruns")
    text_changed = versions._entry_stamp(entry)
    entry.updated_at = timezone.now()
    if entry.updated_at == read_at:  # the clock did not move: the version must
        entry.updated_at = read_at + timedelta(microseconds=1)
    # Compare-and-set: the UPDATE only matches the version read under the lock, so no write between
    # that read and this one is ever overwritten (the lock already queues writers; this says it twice).
    names = [*changed, "content_hash", "indexing_state", "updated_at"]
    written = Entry.objects.for_tenant(book.tenant).filter(pk=entry.pk, updated_at=read_at).update(
        **{name: getattr(entry, name) for name in names})
    if not written:
        now_at = Entry.objects.for_tenant(book.tenant).values_list("updated_at", flat=True).get(pk=entry.pk)
        version_check("entry", entry.pk, stamp_version(now_at), stamp_version(read_at))
    if text_changed:
        versions._entry_content_changed(entry)
    if "enabled" in changed:
        versions._entries_enabled_changed(book, [entry.pk])
    versions.book_version_bump(book)
    return entry


def _expression_keys(text: str) -> set[str]:
    """The keys (atoms) of a saved key expression (K-1); it was checked when saved."""
    if not text.strip():
        return set()
    try:
        return {atom.text for atom in key_expression_parse(text).atoms}
    except KeyExpressionError:
        return set()


@transaction.atomic
def entry_delete(*, actor: Actor, entry: Entry, expected_version: object | None = None) -> None:
    book = book_lock(actor, entry.book)
    entries = Entry.objects.for_tenant(book.tenant).filter(book=book)
    current = entries.filter(pk=entry.pk).values_list("updated_at", flat=True).first()
    if current is None:
        raise NotFound("No such entry.", field="entry")
    version_check("entry", entry.pk, stamp_version(current), expected_version)
    limits.public_floor_check(book, remaining=entries.count() - 1, field="entry")
    entries.filter(pk=entry.pk).delete()
    order = book_order(book)
    positions_write(book, [pk for pk, _ in order], dict(order))
    versions.book_version_bump(book)


MoveTarget = Literal["top", "bottom"]


@transaction.atomic
def entry_move(*, actor: Actor, entry: Entry, position: int | None = None, to: MoveTarget | None = None) -> Entry:
    """Move an entry to ``position`` (0 = top; past the end = bottom), or ``to`` top/bottom.

    List order decides which canon survives a small model (W-1).
    """
    if (position is None) == (to is None):
        raise field_refusal("Give either a position or top/bottom.", "position")
    if to is not None:
        as_choice(to, "to", ("top", "bottom"))
    else:
        position = as_int(position, "position")
        if position is not None and position < 0:
            raise field_refusal("Positions start at 0.", "position")
    book = book_lock(actor, entry.book)
    order = book_order(book)
    ids = [pk for pk, _ in order]
    if entry.pk not in ids:
        raise NotFound("No such entry.", field="entry")
    ids.remove(entry.pk)
    target = 0 if to == "top" else len(ids) if to == "bottom" else min(int(position or 0), len(ids))
    ids.insert(target, entry.pk)
    if positions_write(book, ids, dict(order)):
        versions.book_version_bump(book)
    entry.position = target
    return entry


@transaction.atomic
def entries_reorder(*, actor: Actor, book: Book, entry_ids: list[int]) -> list[int]:
    """Put the named entries in the given order, in the slots they already occupy.

    Other entries keep their places, so reordering a page of the list (or the
    whole list) is one call. Returns the book's full order of ids.
    """
    limits.count_check(len(entry_ids), limits.REORDER_IDS, field="entry_ids", what=Term("A reorder"))
    ids = ids_clean(entry_ids)
    if len(ids) != len(entry_ids):
        raise field_refusal("An entry is named twice.", "entry_ids")
    book = book_lock(actor, book)
    entries_of(book, ids)
    order = book_order(book)
    full = [pk for pk, _ in order]
    named = set(ids)
    slots = [index for index, pk in enumerate(full) if pk in named]
    for slot, pk in zip(slots, ids):
        full[slot] = pk
    if positions_write(book, full, dict(order)):
        versions.book_version_bump(book)
    return full
