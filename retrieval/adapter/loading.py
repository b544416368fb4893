"""Books from the database as engine values, cached per book version (every profile).

A turn reads only the book rows; a book's entries are loaded once per version
(every change bumps it), so repeated turns share one immutable engine value
and the compiled matchers keyed on it. The ``sillytavern`` profile also gets
each entry as SillyTavern's own entry value (``Book.world_info``), built from
the same rows with the SillyTavern exporter's field mapping: the settings we
model plus the World Info settings an import kept in ``extra``.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace

from books.exports import entry_as_imported
from books.formats.sillytavern import world_entry
from books.models import Book, Entry
from retrieval.engine import values as ev
from retrieval.engine.matching import CompileCache
from retrieval.engine.sillytavern.entries import book_from_st_json

ENGINE_BOOK_CACHE_SIZE = 256


# Engine values of books, keyed by (book id, version, creation time): a new version is a new key.
engine_book_cache: CompileCache[ev.Book] = CompileCache(maxsize=ENGINE_BOOK_CACHE_SIZE)
# The same books with SillyTavern's entry values, for the sillytavern profile only.
world_info_book_cache: CompileCache[ev.Book] = CompileCache(maxsize=ENGINE_BOOK_CACHE_SIZE)


def engine_entry(entry: Entry) -> ev.Entry:
    keys = tuple(k for k in entry.keys if isinstance(k, str))
    return ev.Entry(
        id=str(entry.pk),
        title=entry.title,
        content=entry.content,
        keys=keys,
        secondary_keys=tuple(k for k in entry.secondary_keys if isinstance(k, str)),
        secondary_logic=entry.secondary_logic,  # type: ignore[arg-type]
        constant=entry.constant,
        canon=entry.constant,
        enabled=entry.enabled,
        order=entry.order,
        priority=entry.priority,
        probability=entry.probability,
        scan_depth=entry.scan_depth,
        case_sensitive=entry.case_sensitive,
        whole_words=entry.whole_words,
        role=entry.role,  # type: ignore[arg-type]
        placement=entry.placement,  # type: ignore[arg-type]
        # Smart reads keys as aliases (I-5).
        aliases=keys,
        # Unresolved legacy #channel names count as all channels until an admin saves a selection (S-13).
        channels=tuple(entry.channels) if not entry.unresolved_channels else (),
        key_expression=entry.key_expression,
    )


def _engine_version(key: tuple[int, int, float]) -> int:
    """A version number unique to this book *and* state, for the engine's compile caches."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def engine_book(book: Book, *, profile: str = "") -> ev.Book:
    """The engine value of ``book`` at its current version (cached), as ``profile`` reads it."""
    # Row ids can be reused (SQLite after a delete, a restored backup): the creation
    # time tells two books with one id apart, the version tells two states of one book.
    key = (book.pk, book.version, book.created_at.timestamp())
    if profile == "sillytavern":
        return world_info_book_cache.get(key, lambda: _engine_book_load(book, key, world_info=True))
    return engine_book_cache.get(key, lambda: _engine_book_load(book, key))


def _engine_book_load(book: Book, key: tuple[int, int, float], *, world_info: bool = False) -> ev.Book:
    rows = list(Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id"))
    scope = book.scope if book.scope in {"server", "persona"} else None
    value = ev.Book(
        # Injections and the request log name books by id: titles may repeat across tenants.
        id=str(book.pk),
        name=str(book.pk),
        entries=tuple(engine_entry(row) for row in rows),
        settings=ev.BookSettings(
            scan_depth=book.scan_depth,
            token_budget=book.token_budget,
            recursive=book.recursive,
            active=book.active,
            channels=tuple(book.channels or ()),
            case_sensitive=book.case_sensitive,
            whole_words=book.whole_words,
        ),
        scope=scope,  # type: ignore[arg-type]
        version=_engine_version(key),
    )
    if world_info:
        # uid = the entry's id, so every profile names entries the same way.
        raw = [world_entry(entry_as_imported(row), index=i, uid=row.pk) for i, row in enumerate(rows)]
        value = replace(value, world_info=book_from_st_json(raw, world=value.id))
    return value


