"""Helpers for the import/export/backup tests: what a tenant holds, and row-level comparisons."""

from __future__ import annotations

from typing import Any

from books.models import ENTRY_LORE_FIELDS, Book, Entry
from tests.books.formats.corpus import corpus_files, manifest

# Every column an import writes and an export reads (ids, timestamps, usage and indexing aside).
ENTRY_COLUMNS = (
    *ENTRY_LORE_FIELDS,
    "channels",
    "unresolved_channels",
    "position",
    "extra",
)
BOOK_SETTINGS = ("scan_depth", "token_budget", "recursive", "case_sensitive", "whole_words")

IMPORTABLE = [f for f in corpus_files() if manifest()[f].entries is not None] or ["<corpus missing>"]
REFUSED = [f for f in corpus_files() if manifest()[f].entries is None] or ["<corpus missing>"]

# One profile per corpus file for the DB path (the pure path covers every profile).
# Server books need an admin; smart ones are kept small.
PROFILE_FOR = {
    "st-worldinfo/user_x_world.json": "server",
    "st-worldinfo/sillytavern_toaru_2023-02.json": "server",
    "novelai/nai_tool_test_v6.lorebook": "server",
    "png-ccv3/user_fallout_western_us.png": "server",
    "st-worldinfo/sillytavern_eldoria_2024-09.json": "smart",
    "st-worldinfo/user_douluo_fullwidth_comma_key.json": "smart",
    "st-worldinfo/dal_main_12.0.0.json": "sillytavern",
    "st-worldinfo/chub_hybrid_arcanthea.json": "sillytavern",
    "st-worldinfo/user_tarot_v1.3.0.json": "sillytavern",
    "png-ccv3/sillytavern_seraphina_2024-09.png": "sillytavern",
    "card-json/kj_fortune_teller_v3.json": "sillytavern",
    "kobold-aid-worldinfo/kobold_story_aid_ewijson_keys.json": "sillytavern",
}


def profile_for(relpath: str) -> str:
    return PROFILE_FOR.get(relpath, "classic")


def filename_of(relpath: str) -> str:
    return relpath.rsplit("/", 1)[-1]


def tenant_state(tenant: Any) -> tuple[Any, ...]:
    """Counts and versions of everything a tenant's lore is: compare before/after a refusal."""
    books = Book.objects.for_tenant(tenant)
    return (
        books.count(),
        Entry.objects.for_tenant(tenant).count(),
        sorted(books.values_list("pk", "version", "title", "scan_depth", "recursive")),
        sorted(Entry.objects.for_tenant(tenant).values_list("pk", "book_id", "position", "content")),
    )


def entry_rows(book: Book) -> list[dict[str, Any]]:
    return list(
        Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id").values(*ENTRY_COLUMNS)
    )


def book_settings(book: Book) -> dict[str, Any]:
    fresh = Book.objects.for_tenant(book.tenant).get(pk=book.pk)
    return {name: getattr(fresh, name) for name in BOOK_SETTINGS}


def assert_same_lore(first: Book, second: Book, *, title: bool = True) -> None:
    """Same entries (every column, ``extra`` included), settings, enabled states, extra and title."""
    a, b = entry_rows(first), entry_rows(second)
    assert len(a) == len(b)
    for index, (left, right) in enumerate(zip(a, b, strict=True)):
        for column in ENTRY_COLUMNS:
            assert left[column] == right[column], (index, column, left[column], right[column])
    assert [row["enabled"] for row in a] == [row["enabled"] for row in b]
    assert [row["title"] for row in a] == [row["title"] for row in b]  # C-9: the display name survives
    assert book_settings(first) == book_settings(second)
    one = Book.objects.for_tenant(first.tenant).get(pk=first.pk)
    two = Book.objects.for_tenant(second.tenant).get(pk=second.pk)
    assert one.extra == two.extra
    assert one.description == two.description
    if title:
        assert one.title == two.title
