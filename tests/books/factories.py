"""Factories for books tests: actors, books and entries, written fast and directly.

Fill helpers write rows with ``bulk_create`` (no limit checks): they set up a
book *near* a limit so the service under test is the one that must refuse.
"""
from __future__ import annotations

from typing import Any

from books.lineages import lineage_get_or_create
from books.models import Book, Entry, Profile, Scope, content_hash
from lore_platform.tenancy.actor import Actor

SMART_LORE = "The river city of Varn trades salt for iron every spring."  # > 20 characters


def admin_actor(setup: Any, scopes: frozenset[str] = frozenset({"read", "write"})) -> Actor:
    return Actor(tenant=setup.tenant, user=setup.admin, role="admin", scopes=scopes)


def member_actor(setup: Any, scopes: frozenset[str] = frozenset({"read", "write"})) -> Actor:
    return Actor(tenant=setup.tenant, user=setup.member, role="member", scopes=scopes)


def make_book(setup: Any, *, owner: Any = "member", profile: str = Profile.CLASSIC, **fields: Any) -> Book:
    """A book row. ``owner``: "member", "admin" or None (tenant-owned)."""
    user = {"member": setup.member, "admin": setup.admin, None: None}[owner]
    scope = fields.pop("scope", Scope.PERSONAL if user is not None else Scope.SERVER)
    if scope == Scope.PERSONA and "lineage" not in fields:
        fields["lineage"] = lineage_get_or_create(tenant=setup.tenant, key=f"persona-{Book.objects.for_tenant(setup.tenant).count()}")
    return Book.objects.create(
        tenant=setup.tenant, owner=user, profile=profile, scope=scope, title=fields.pop("title", "A book"), **fields
    )


def make_entry(book: Book, **fields: Any) -> Entry:
    fields.setdefault("title", f"Entry {Entry.objects.for_tenant(book.tenant).filter(book=book).count()}")
    fields.setdefault("content", SMART_LORE)
    fields.setdefault("position", Entry.objects.for_tenant(book.tenant).filter(book=book).count())
    entry = Entry(tenant=book.tenant, book=book, **fields)
    entry.content_hash = content_hash(entry.title, entry.content, list(entry.keys))
    entry.save()
    return entry


def fill(book: Book, count: int, **fields: Any) -> None:
    """Add ``count`` plain entries at the bottom of ``book`` without limit checks."""
    start = Entry.objects.for_tenant(book.tenant).filter(book=book).count()
    rows = [
        Entry(
            tenant=book.tenant,
            book=book,
            title=f"Filler {start + i}",
            content=SMART_LORE,
            position=start + i,
            **fields,
        )
        for i in range(count)
    ]
    Entry.objects.for_tenant(book.tenant).bulk_create(rows, batch_size=500)


def entry_count(book: Book) -> int:
    return Entry.objects.for_tenant(book.tenant).filter(book=book).count()


def version(book: Book) -> int:
    return Book.objects.for_tenant(book.tenant).values_list("version", flat=True).get(pk=book.pk)


def order(book: Book) -> list[int]:
    return list(
        Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id").values_list("pk", flat=True)
    )


def snapshot(book: Book) -> tuple[Any, ...]:
    """Everything an editor could change: compare before/after a refused request."""
    refreshed = Book.objects.for_tenant(book.tenant).get(pk=book.pk)
    rows = list(
        Entry.objects.for_tenant(book.tenant)
        .filter(book=book)
        .order_by("pk")
        .values_list("pk", "title", "content", "enabled", "constant", "position", "channels", "updated_at")
    )
    return (
        refreshed.version,
        refreshed.title,
        refreshed.description,
        refreshed.active,
        refreshed.channels,
        refreshed.updated_at,
        rows,
    )


def api(setup_client: Any, method: str, path: str, data: Any = None, **params: Any) -> Any:
    """Call the API with JSON bodies."""
    call = getattr(setup_client, method)
    if method == "get":
        return call(path, data or params)
    return call(path, data, format="json")
