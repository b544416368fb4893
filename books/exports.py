"""Exporting books (I-6): build format values from rows.

``book_as_imported`` turns a book and its entries into the format-neutral
:class:`books.formats.ImportedBook` the writers take — every modelled field,
``extra`` (the imported fields we do not model, so export is lossless), and,
for the native format only, the collection state (profile, scope, owner,
visibility, active toggle, collection channels, tags, language, living
world, lineage key). SillyTavern world info and Character Card V2 carry
activation settings and enabled states but no tenant-only state: the writers
leave channels and the collection state out (I-6).

Who may export (I-6, world-books seed: "Exportar" from any book you can
see): whoever reads a book gets the formats without tenant-only state
(``READER_FORMATS``: SillyTavern world info, Character Card V2) — a
member a tenant book or a colleague's shared book, anyone a public book or an
unlisted one by its link (through ``sharing``). ``native`` carries the
tenant-only settings, so only who owns the book (its owner; tenant admins for
tenant-owned books) gets it. ``server`` books stay admin-only in every format
(S-1). Exporting is a read: a read-only key may do it.

The tenant's full backup and restore sit above every app they save, in
``backup``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings

from books.access import book_can_read
from books.fields import ENTRY_FIELDS
from books.formats import (
    EXPORT_FORMATS,
    BookSettings,
    CollectionState,
    ImportedBook,
    ImportedEntry,
    NativeLineage,
    export_book,
    write_native,
)
from books.formats.model import book_text_repaired
from books.models import Book, Entry, Lineage, Profile
from lore_platform.errors import (
    NotFound,
    PermissionDenied,
    ValidationFailed,
)
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant

# A backup holds a whole tenant's lore, so it is not bound by the 2 MB of one
# import (I-3); this bounds what a restore reads. Settings may change it.
DEFAULT_BACKUP_MAX_BYTES = 64 * 1024 * 1024

CONTENT_TYPES = {
    "sillytavern": "application/json; charset=utf-8",
    "card-v2": "application/json; charset=utf-8",
    "card-v2-png": "image/png",
    "native": "application/json; charset=utf-8",
}
SUFFIXES = {
    "sillytavern": ".json",
    "card-v2": ".card.json",
    "card-v2-png": ".png",
    "native": ".loreweave.json",
}
logger = logging.getLogger("books.exports")

_UNSAFE_FILENAME = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]+')


def backup_max_bytes() -> int:
    value = getattr(settings, "LOREWEAVE_BACKUP_MAX_BYTES", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else DEFAULT_BACKUP_MAX_BYTES


# --- rows → format values ---------------------------------------------------------------


def entry_as_imported(entry: Entry) -> ImportedEntry:
    """Every field a file carries (``books.fields.ENTRY_FILE_FIELDS``), JSON lists as tuples."""
    values: dict[str, Any] = {}
    for item in ENTRY_FIELDS:
        if item.kind == "state":
            continue
        value = getattr(entry, item.name)
        if item.type is list:
            value = tuple(value or ())
        elif item.type is dict:
            value = value or {}
        values[item.name] = value
    return ImportedEntry(**values)


def _collection(book: Book) -> CollectionState:
    return CollectionState(
        profile=book.profile,
        scope=book.scope,
        lineage_key=book.lineage.key if book.lineage else None,
        owner=book.owner.email if book.owner else None,
        visibility=book.visibility,
        active=book.active,
        channels=tuple(book.channels or ()),
        tags=tuple(book.tags or ()),
        language=book.language,
        living_world=book.living_world,
        living_world_review=book.living_world_review,
    )


def book_as_imported(
    book: Book, *, with_collection: bool = False, entries: Iterable[Entry] | None = None
) -> ImportedBook:
    """``book`` and its entries (in list order) as an ``ImportedBook``.

    ``with_collection`` adds the tenant-only collection state (native format only).
    ``entries`` are the rows to write when the caller read them itself (sharing's
    cross-tenant reads); by default the book's own, in list order.
    """
    if entries is None:
        entries = Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id")
    imported = ImportedBook(
        name=book.title,
        description=book.description,
        settings=BookSettings(
            scan_depth=book.scan_depth,
            token_budget=book.token_budget,
            recursive=book.recursive,
            case_sensitive=book.case_sensitive,
            whole_words=book.whole_words,
        ),
        entries=tuple(entry_as_imported(entry) for entry in entries),
        extra=book.extra or {},
        source_format="loreweave",
        collection=_collection(book) if with_collection else None,
    )
    # A row stored before the text check (issue 26) is written repaired, never fails the whole file.
    imported, repaired = book_text_repaired(imported)
    if repaired:
        logger.warning("book %s: %d stored values hold NUL or an unpaired surrogate, exported repaired; "
                       "run `manage.py text_repair`", book.pk, repaired)
    return imported


def lineages_native(tenant: Tenant, lineage_ids: Sequence[int] | None = None) -> tuple[NativeLineage, ...]:
    """Lineages (all of the tenant's, or those named) with their characters' names."""
    lineages = Lineage.objects.for_tenant(tenant).order_by("pk")
    if lineage_ids is not None:
        lineages = lineages.filter(pk__in=lineage_ids)
    names: dict[int, list[str]] = {}
    # Characters live in cast, above books: read through the lineage's reverse relation.
    for lineage_id, name in (
        lineages.filter(characters__isnull=False).order_by("characters__pk").values_list("pk", "characters__name")
    ):
        names.setdefault(lineage_id, []).append(name)
    return tuple(NativeLineage(key=lin.key, characters=tuple(names.get(lin.pk, ()))) for lin in lineages)


# --- export ---------------------------------------------------------------------------------


# Formats that carry no tenant-only state (channels, collection state): any reader may take them (I-6).
READER_FORMATS = ("sillytavern", "card-v2", "card-v2-png")


def export_format_check(to: str) -> None:
    if to not in EXPORT_FORMATS:
        raise ValidationFailed(
            "Unknown export format {format}; expected one of {formats}.",
            values={"format": repr(to), "formats": ", ".join(EXPORT_FORMATS)},
            field="format",
            rule="I-6",
        )


def server_book_export_check(actor: Actor | None, book: Book) -> None:
    """S-1: only admins export a ``server`` lorebook (import, export and edits are Manage Server's)."""
    if book.profile == Profile.SERVER and (actor is None or not actor.is_admin):
        raise PermissionDenied("Only tenant admins export server lorebooks (S-1).", field="book", rule="S-1")


def book_export_check(actor: Actor, book: Book, to: str = "sillytavern") -> None:
    """Whoever reads ``book`` exports it without tenant-only state; ``native`` is its owner's (I-6, S-1)."""
    if not book_can_read(actor, book):
        raise NotFound("No such book.", field="book")
    server_book_export_check(actor, book)
    if to in READER_FORMATS:
        return
    owns = actor.is_admin if book.owner_id is None else actor.user is not None and actor.user.pk == book.owner_id
    if not owns:
        raise PermissionDenied(
            "The native format carries the book's tenant-only settings (channels, collection state); only the "
            "book's owner exports it. Readers export {formats} (I-6).",
            values={"formats": ", ".join(READER_FORMATS)},
            field="format",
            rule="I-6",
        )


def shared_book_export(*, actor: Actor | None, book: Book, entries: Iterable[Entry], to: str) -> tuple[bytes, str, str]:
    """A book another tenant shares (already vetted as readable by ``sharing``), in a reader format.

    ``actor`` is ``None`` for an anonymous library reader. Tenant-only settings stay
    out (I-6); ``server`` lorebooks need an admin (S-1).
    """
    export_format_check(to)
    if to not in READER_FORMATS:
        raise PermissionDenied(
            "A shared book is exported as {formats}; the native format carries its tenant's own settings (I-6).",
            values={"formats": ", ".join(READER_FORMATS)},
            field="format",
            rule="I-6",
        )
    server_book_export_check(actor, book)
    payload = export_book(book_as_imported(book, entries=entries), to)
    return payload, CONTENT_TYPES[to], export_filename(book.title, to)


def export_filename(title: str, to: str) -> str:
    stem = " ".join(_UNSAFE_FILENAME.sub(" ", title).split()).strip(". ") or "book"
    return f"{stem[:100]}{SUFFIXES[to]}"


def book_export(*, actor: Actor, book: Book, to: str) -> tuple[bytes, str, str]:
    """``book`` written as ``to`` (one of ``EXPORT_FORMATS``): (bytes, content type, file name).

    SillyTavern world info and Character Card V2 (JSON, or PNG with the card
    in a ``chara`` chunk) carry the entries with their activation settings,
    enabled states and ``extra``; ``native`` adds the collection state and,
    for a persona book, its lineage (I-6).
    """
    export_format_check(to)
    book_export_check(actor, book, to)
    if to == "native":
        imported = book_as_imported(book, with_collection=True)
        lineages = lineages_native(book.tenant, [book.lineage_id]) if book.lineage_id else ()
        payload = write_native([imported], lineages=lineages)
    else:
        payload = export_book(book_as_imported(book), to)
    return payload, CONTENT_TYPES[to], export_filename(book.title, to)
