"""Import → export → import gives the same book, for every export format (I-6, C-9)."""
from __future__ import annotations

from dataclasses import fields

import pytest

from books.formats import export_book, map_for_profile, read_book
from books.formats.model import MODELLED_ENTRY_FIELDS, ImportedBook
from tests.books.formats.corpus import ROUND_TRIP_PAIRS, corpus_files, manifest
from tests.shared_data import require_shared

IMPORTABLE = [f for f in corpus_files() if manifest().get(f) and manifest()[f].entries is not None] or ["<missing>"]
FORMATS = ("sillytavern", "card-v2", "card-v2-png", "native")


def _book(relpath: str) -> ImportedBook:
    return read_book((require_shared("corpus") / relpath).read_bytes(), filename=relpath.rsplit("/", 1)[-1])


def assert_same_book(before: ImportedBook, after: ImportedBook) -> None:
    assert after.name == before.name
    assert after.description == before.description
    assert after.settings == before.settings
    assert after.extra == before.extra
    assert len(after.entries) == len(before.entries)
    for i, (a, b) in enumerate(zip(before.entries, after.entries)):
        for field in fields(a):
            assert getattr(b, field.name) == getattr(a, field.name), (i, field.name)


@pytest.mark.parametrize("to", FORMATS)
@pytest.mark.parametrize("relpath", IMPORTABLE)
def test_round_trip(relpath: str, to: str) -> None:
    book = _book(relpath)
    again = read_book(export_book(book, to))
    if to.startswith("card") and not book.entries:
        # A card whose book is empty is a card without a book: it imports nothing (I-1).
        assert again.card_without_book and again.entries == ()
        return
    assert_same_book(book, again)
    # Enabled states and display names explicitly (C-9).
    assert [e.enabled for e in again.entries] == [e.enabled for e in book.entries]
    assert [e.title for e in again.entries] == [e.title for e in book.entries]
    # Writing the re-read book gives the same bytes: the formats are a fixed point.
    assert export_book(again, to) == export_book(book, to) or to == "card-v2-png"


@pytest.mark.parametrize("relpath", IMPORTABLE[:1] + ["st-worldinfo/user_x_world.json", "novelai/nai_tool_test_v6.lorebook"])
def test_chain_of_conversions_keeps_the_book(relpath: str) -> None:
    book = _book(relpath)
    data = export_book(book, "card-v2-png")
    for to in ("native", "sillytavern", "card-v2", "sillytavern"):
        data = export_book(read_book(data), to)
    assert_same_book(book, read_book(data))


@pytest.mark.parametrize("world, card", ROUND_TRIP_PAIRS)
def test_world_file_and_card_give_equal_entries(world: str, card: str) -> None:
    from_world, from_card = _book(world), _book(card)
    assert len(from_world.entries) == len(from_card.entries) > 0
    for a, b in zip(from_world.entries, from_card.entries):
        for name in MODELLED_ENTRY_FIELDS:
            assert getattr(a, name) == getattr(b, name), (a.title, name)
        # SillyTavern's own settings too (groups, recursion, depth, timers …).
        card_st = dict(b.extra.get("st", {}))
        if "useGroupScoring" not in a.extra.get("st", {}) and card_st.get("useGroupScoring") is False:
            # SillyTavern's card writer turns null into false; its card import keeps that false, and so do we.
            del card_st["useGroupScoring"]
        assert a.extra.get("st", {}) == card_st, a.title
    # and they map to the same receipt in every profile
    for profile in ("classic", "sillytavern"):
        assert map_for_profile(from_world, profile)[1]["unsupported"] == map_for_profile(from_card, profile)[1]["unsupported"]
