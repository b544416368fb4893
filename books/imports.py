"""Importing lore files into books (I-1 … I-5): a check step, then an execute step, in one transaction.

Two services:

``book_import_new``
    A new book from a file (I-2). Its name: the typed ``title`` when given,
    else the name inside the file, else the file name. A name the owner
    already uses (the actor's own books for a personal book; the tenant's
    books for a server-wide or persona book), compared after
    :func:`books.formats.normalise_text`, is refused with ``Conflict`` (409,
    I-2): an import never overwrites.
``book_import_into``
    Into an existing book, ``mode="append"`` (default) or ``"replace"``.

    *append* adds the file's entries at the bottom and skips those that
    **already exist**: an imported entry already exists in the book when one
    of the book's entries has the same title and the same content, both
    compared after normalisation (Unicode NFKC, case folded, runs of
    whitespace collapsed, ends trimmed) — see
    :func:`books.formats.entry_fingerprint`. The title compared is the one
    the entry would be stored under, so an entry whose title the profile
    makes up (world books need one) is still found on a second import. Keys,
    activation settings and the enabled flag do not count: the same lore with
    other keys is a duplicate; two entries sharing a title but saying
    different things are not. Repeats inside the file are skipped too (the
    first one is kept). The book's own settings are left alone.

    *replace* deletes every entry of that book (no other book) and imports
    the file's entries in their place; the book also takes the scan settings
    the file states and its book-level ``extra`` fields. Its title,
    description, tags, sharing and collection state stay.

Both services read the file first (pure, no lock held), then, inside one
``transaction.atomic``: lock the book (and the tenant row, which serialises
name checks and the shared server-wide entry pool), plan the import against
the rows as they are now (duplicates, W-12/S-14 entry caps, the 500-entry
batch, every per-entry limit of the profile) and only then write. Any
refusal raises before the first write; a failure during the writes rolls
everything back (I-3). The receipt (I-4) comes from
:func:`books.formats.map_for_profile`, computed against the locked rows, so
it states what was really added and skipped; the service adds the book, the
mode and the ids written.

A card without an embedded book changes nothing (I-1): the services return
the receipt with ``book`` ``None`` (new) or the book untouched (into).

World books (``smart``) are embedded after commit: ``entries_create_bulk``
marks the new entries pending and publishes ``books.events.ENTRIES_CHANGED``
after commit, by id.

Tenant-only state: per-entry channels exist only in server persona books
(S-11), so they are dropped (and the receipt says so) anywhere else. A new
book from a native file takes back its collection state where the new book can
hold it (``collection_fields``; the receipt's ``restored`` and ``warnings`` say
what came back and what did not); sharing and ownership come back only through
a full backup restore (``backup.services.tenant_restore``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from books import limits
from books.access import access_book
from books.formats import (
    CollectionState,
    ImportedBook,
    ImportedEntry,
    ImportPlan,
    current_limits,
    entry_fingerprint,
    map_for_profile,
    normalise_text,
    plan_book,
    read_book,
)
from books.formats.model import book_text_check, plain_json, text_check
from books.models import ENTRY_LORE_FIELDS, Book, Entry, Profile, Scope
from books.services import book_create, book_update, book_version_bump, entries_create_bulk
from lore_platform.errors import Conflict, PermissionDenied, Phrase, Term, ValidationFailed
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant

ImportMode = Literal["append", "replace"]
IMPORT_MODES: tuple[str, ...] = ("append", "replace")

# Fields of ``ImportedEntry`` the entry services take (``position`` is the list order they give).
_ENTRY_SERVICE_FIELDS = ENTRY_LORE_FIELDS


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    """The book written (``None`` when the file changed nothing) and the receipt (I-4)."""

    book: Book | None
    receipt: dict[str, Any]


# --- reading --------------------------------------------------------------------------


def import_read(data: bytes, *, filename: str | None) -> ImportedBook:
    """Read an uploaded file (format detected from its content) and vet what it holds.

    Raises only ``DomainError``s: ``ValidationFailed`` (I-1), ``PayloadTooLarge``
    and ``LimitExceeded`` (I-3).
    """
    if not isinstance(data, (bytes, bytearray)):
        raise ValidationFailed("Send the file's bytes.", field="file", rule="I-1")
    book = read_book(bytes(data), filename=filename, limits=current_limits())
    book_text_check(book)
    return book


# --- checks shared by both services ------------------------------------------------------


def _write_allowed_check(actor: Actor, scope: str) -> None:
    """S-1: a read-only key imports nothing; server-wide and persona books are the admins'."""
    if not actor.can_write:
        raise PermissionDenied("This API key may only read; importing needs the write scope.", field="file", rule="S-1")
    if scope != Scope.PERSONAL and not actor.is_admin:
        raise PermissionDenied(
            "Only tenant admins import server-wide and persona books (S-1).", field="scope", rule="S-1"
        )
    if scope == Scope.PERSONAL and actor.user is None:
        raise PermissionDenied("This API key acts for no user, so it cannot own a book.", field="scope")


def _lock(actor: Actor, book: Book) -> Book:
    """``book`` re-read under a row lock, editable by ``actor``; server books also lock the tenant
    (the server-wide entry cap is shared by several books, S-14)."""
    locked = access_book(actor, book.pk, need="edit", for_update=True)
    if locked.profile == Profile.SERVER:
        Tenant.objects.select_for_update().filter(pk=locked.tenant_id).first()
    return locked


def _fingerprints(book: Book) -> set[str]:
    rows = Entry.objects.for_tenant(book.tenant).filter(book=book).values_list("title", "content")
    return {entry_fingerprint(title, content) for title, content in rows}


def _pool_used(book: Book) -> int:
    """Entries already counting against ``book``'s entry cap (0 when it has none)."""
    capacity = limits.entry_capacity(book)
    return capacity.used if capacity is not None else 0


def _server_wide_used(tenant: Tenant) -> int:
    return Entry.objects.for_tenant(tenant).filter(book__profile=Profile.SERVER, book__scope=Scope.SERVER).count()


def _title_taken_check(actor: Actor, *, scope: str, title: str) -> None:
    """I-2: a new book never takes a name its owner already uses."""
    books = Book.objects.for_tenant(actor.tenant)
    books = books.filter(owner=actor.user) if scope == Scope.PERSONAL else books.filter(owner__isnull=True)
    wanted = normalise_text(title)
    for pk, existing in books.values_list("pk", "title"):
        if normalise_text(existing) == wanted:
            if scope == Scope.PERSONAL:
                raise Conflict(
                    "You have a book named {title} already; an import never overwrites a book (I-2). "
                    "Type another name, or import into that book.",
                    values={"title": repr(existing)},
                    field="title",
                    rule="I-2",
                    details={"book": pk},
                )
            raise Conflict(
                "The tenant has a book named {title} already; an import never overwrites a book (I-2). "
                "Type another name, or import into that book.",
                values={"title": repr(existing)},
                field="title",
                rule="I-2",
                details={"book": pk},
            )


def entries_as_fields(
    entries: Sequence[ImportedEntry], *, profile: str, scope: str, warnings: list[str]
) -> list[dict[str, Any]]:
    """The service's field dicts for ``entries``; channels only where they exist (S-11)."""
    keeps_channels = profile == Profile.SERVER and scope == Scope.PERSONA
    dropped = 0
    out: list[dict[str, Any]] = []
    for entry in entries:
        fields: dict[str, Any] = {}
        for name in _ENTRY_SERVICE_FIELDS:
            value = getattr(entry, name)
            fields[name] = list(value) if isinstance(value, tuple) else value
        fields["extra"] = plain_json(entry.extra)
        if keeps_channels:
            fields["channels"] = list(entry.channels)
            fields["unresolved_channels"] = list(entry.unresolved_channels)
        elif entry.channels or entry.unresolved_channels:
            dropped += 1
        out.append(fields)
    if dropped:
        if dropped == 1:
            warnings.append(Phrase("channel restrictions of 1 entry were not imported: per-entry channels belong "
                                   "to server persona books (S-11)"))
        else:
            warnings.append(Phrase("channel restrictions of {count} entries were not imported: per-entry channels "
                                   "belong to server persona books (S-11)", values={"count": dropped}))
    return out


def collection_fields(
    collection: CollectionState, *, profile: str, scope: str, restored: list[str], warnings: list[str]
) -> dict[str, Any]:
    """The collection state of a native file that a new book takes back (I-6: a native export is lossless).

    Tags, language and the collection toggle always; collection channels where the
    new book can hold them (a server-wide collection, S-11); the living world where
    it is allowed (a private world book, L-1). What cannot come back is named in
    ``warnings``: sharing (a new book starts private, P-1) and the owner (the
    importer owns it).
    """
    fields: dict[str, Any] = {"tags": list(collection.tags), "language": collection.language}
    restored.extend(["tags", "language"])
    fields["active"] = collection.active
    restored.append("active")
    if collection.channels:
        if profile == Profile.SERVER and scope == Scope.SERVER:
            fields["channels"] = list(collection.channels)
            restored.append("channels")
        else:
            warnings.append(Phrase(
                "collection channels {channels} were not restored: only server-wide collections have channels (S-11)",
                values={"channels": ", ".join(collection.channels)}))
    if collection.living_world:
        if profile == Profile.SMART and scope == Scope.PERSONAL:
            fields["living_world"] = True
            restored.append("living_world")
        else:
            warnings.append(Phrase("the living world was not restored: it belongs to private world books (L-1)"))
    if collection.visibility != "private":
        warnings.append(Phrase(
            "the file's book was {visibility}; an imported book starts private — share it again (P-1)",
            values={"visibility": Term(collection.visibility)}))
    return fields


def entries_write(actor: Actor, book: Book, entries: list[dict[str, Any]]) -> list[Entry]:
    """Write through ``entries_create_bulk`` (its own checks, positions, indexing, version) in batches."""
    created: list[Entry] = []
    batch = limits.IMPORT_BATCH.value
    for start in range(0, len(entries), batch):
        created.extend(entries_create_bulk(actor=actor, book=book, entries=entries[start : start + batch]))
    return created


def _settings_fields(plan: ImportPlan) -> dict[str, Any]:
    """Book scan settings the file states (``None`` = it says nothing: keep the default)."""
    settings = plan.settings.as_dict()
    return {name: value for name, value in settings.items() if value is not None}


def _receipt_finish(
    receipt: dict[str, Any],
    *,
    mode: str,
    book: Book | None,
    created: Sequence[Entry] = (),
    replaced: int = 0,
    warnings: Iterable[str] = (),
) -> dict[str, Any]:
    receipt["mode"] = mode
    receipt["added"] = len(created)
    receipt["entry_ids"] = [entry.pk for entry in created]
    receipt["replaced"] = replaced
    receipt["warnings"] = [*receipt.get("warnings", []), *warnings]
    receipt["changes_nothing"] = bool(receipt.get("card_without_book"))
    receipt.setdefault("restored", [])
    if book is not None:
        receipt["book"] = {
            **receipt.get("book", {}),
            "id": book.pk,
            "title": book.title,
            "profile": book.profile,
            "scope": book.scope,
            "version": book.version,
        }
    return receipt


def _nothing_receipt(imported: ImportedBook, profile: str, *, mode: str, book: Book | None) -> dict[str, Any]:
    """I-1: a card without a book — the receipt says so and nothing is written."""
    _, receipt = map_for_profile(imported, profile)
    return _receipt_finish(receipt, mode=mode, book=book)


# --- the services ---------------------------------------------------------------------------


def book_import_new(
    *,
    actor: Actor,
    data: bytes = b"",
    filename: str | None = None,
    imported: ImportedBook | None = None,
    profile: str,
    title: str | None = None,
    scope: str | None = None,
    lineage: Any = None,
) -> ImportResult:
    """Import a file as a new book (I-2): all of it, or nothing (I-3).

    ``data`` is the file as uploaded; ``imported`` is a book already read (the values entry point: an AI
    job's accepted draft), which skips the file reader and goes through the same plan and limits.

    ``scope`` defaults to ``server`` for server lorebooks and ``personal``
    otherwise; ``persona`` books name their ``lineage`` (a ``Lineage`` or its
    public id). Server-wide and persona books are created only by tenant
    admins; a read-only key imports nothing (S-1).

    Raises ``PermissionDenied``, ``ValidationFailed`` (unreadable file, bad
    value), ``PayloadTooLarge``/``LimitExceeded`` (I-3, W-12, S-14) or
    ``Conflict`` (the name is taken, I-2; the lineage has its book already,
    S-2) — with nothing written.
    """
    if profile not in Profile.values:
        raise ValidationFailed(
            "Unknown profile {profile}; expected one of {profiles}.",
            values={"profile": repr(profile), "profiles": ", ".join(Profile.values)},
            field="profile",
            rule="I-5",
        )
    if scope is None:
        scope = str(Scope.SERVER if profile == Profile.SERVER else Scope.PERSONAL)
    elif scope not in Scope.values:
        raise ValidationFailed("Unknown scope {scope}.", values={"scope": repr(scope)}, field="scope", rule="S-2")
    _write_allowed_check(actor, scope)
    if scope == Scope.PERSONA and lineage is None:
        raise ValidationFailed("A persona book names the persona's lineage (S-2).", field="lineage", rule="S-2")
    if scope != Scope.PERSONA and lineage is not None:
        raise ValidationFailed("Only persona books belong to a lineage (S-2).", field="lineage", rule="S-2")
    typed = (title or "").strip()
    if typed:
        text_check(typed, "title")
        limits.book_fields_check({"title": typed})

    if imported is None:
        imported = import_read(data, filename=filename)
    if imported.card_without_book:
        return ImportResult(book=None, receipt=_nothing_receipt(imported, profile, mode="new", book=None))

    with transaction.atomic():
        # One import at a time per tenant: the name check and the server-wide pool stay true until commit.
        Tenant.objects.select_for_update().filter(pk=actor.tenant.pk).first()
        existing_count = _server_wide_used(actor.tenant) if profile == Profile.SERVER and scope == Scope.SERVER else 0
        plan = plan_book(imported, profile=profile, name=typed or None, scope=scope, existing_count=existing_count)
        _title_taken_check(actor, scope=scope, title=plan.title)
        warnings: list[str] = []
        entries = entries_as_fields(plan.entries, profile=profile, scope=scope, warnings=warnings)

        fields: dict[str, Any] = {"description": plan.description, "extra": plain_json(plan.book.extra)}
        fields.update(_settings_fields(plan))
        restored: list[str] = []
        if imported.collection is not None:
            fields.update(collection_fields(imported.collection, profile=profile, scope=scope, restored=restored,
                                            warnings=warnings))
        if scope == Scope.PERSONA:
            fields["lineage"] = lineage
        book = book_create(actor=actor, title=plan.title, profile=profile, scope=scope, **fields)
        created = entries_write(actor, book, entries)
        book.refresh_from_db()
        receipt = _receipt_finish(plan.receipt, mode="new", book=book, created=created, warnings=warnings)
        receipt["restored"] = restored
    return ImportResult(book=book, receipt=receipt)


def book_import_into(
    *,
    actor: Actor,
    book: Book,
    data: bytes = b"",
    filename: str | None = None,
    imported: ImportedBook | None = None,
    mode: ImportMode = "append",
) -> ImportResult:
    """Import a file (``data``), or a book already read (``imported``), into ``book``: ``append`` (skip
    entries that already exist) or ``replace``.

    See the module docstring for what "already exists" means and what
    replace changes. The actor must edit the book (its owner; tenant admins
    for server-wide and persona books; a write key). All or nothing (I-3).
    """
    if mode not in IMPORT_MODES:
        raise ValidationFailed(
            "Unknown import mode {mode}; expected append or replace.",
            values={"mode": repr(mode)},
            field="mode",
            rule="I-2",
        )
    if not actor.can_write:
        raise PermissionDenied("This API key may only read; importing needs the write scope.", field="file", rule="S-1")
    # Refuse strangers before reading their upload (the lock below checks again).
    book = access_book(actor, book.pk, need="edit")

    if imported is None:
        imported = import_read(data, filename=filename)
    if imported.card_without_book:
        return ImportResult(book=book, receipt=_nothing_receipt(imported, book.profile, mode=mode, book=book))

    with transaction.atomic():
        locked = _lock(actor, book)
        used = _pool_used(locked)
        if mode == "append":
            existing = _fingerprints(locked)
            existing_count = used
        else:
            existing = set()
            existing_count = used - Entry.objects.for_tenant(locked.tenant).filter(book=locked).count()
        plan = plan_book(
            imported, profile=locked.profile, scope=locked.scope, existing=existing, existing_count=existing_count
        )
        warnings: list[str] = []
        entries = entries_as_fields(plan.entries, profile=locked.profile, scope=locked.scope, warnings=warnings)

        replaced = 0
        if mode == "replace":
            limits.public_floor_check(locked, remaining=len(entries), field="file")  # P-1, as a deletion
            doomed = Entry.objects.for_tenant(locked.tenant).filter(book=locked)
            replaced = doomed.count()
            doomed.delete()
            settings = {**_settings_fields(plan), "extra": plain_json(plan.book.extra)}
            locked = book_update(actor=actor, book=locked, **settings)
        created = entries_write(actor, locked, entries)
        if replaced and not created:
            book_version_bump(locked)  # the entries went; nothing else counted the change
        locked.refresh_from_db()
        receipt = _receipt_finish(
            plan.receipt, mode=mode, book=locked, created=created, replaced=replaced, warnings=warnings
        )
    return ImportResult(book=locked, receipt=receipt)
