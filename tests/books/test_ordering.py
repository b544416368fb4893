"""List order: move to a position / top / bottom, reorder many, dense positions (W-1: order decides canon)."""
from __future__ import annotations

import pytest

from books import services
from books.models import Entry
from lore_platform.errors import NotFound, ValidationFailed
from tests.books.factories import make_book, make_entry, member_actor, order, snapshot, version

pytestmark = pytest.mark.django_db


@pytest.fixture
def book_abcde(tenant_a):
    book = make_book(tenant_a)
    entries = {name: make_entry(book, title=name) for name in "ABCDE"}
    return book, entries


def _names(book):
    titles = dict(Entry.objects.for_tenant(book.tenant).filter(book=book).values_list("pk", "title"))
    return "".join(titles[pk] for pk in order(book))


def _positions(book):
    return list(Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position").values_list("position", flat=True))


@pytest.mark.parametrize(
    "name,kwargs,expected",
    [
        ("E", {"to": "top"}, "EABCD"),
        ("A", {"to": "bottom"}, "BCDEA"),
        ("A", {"position": 2}, "BCADE"),
        ("D", {"position": 1}, "ADBCE"),
        ("B", {"position": 0}, "BACDE"),
        ("B", {"position": 4}, "ACDEB"),
        ("B", {"position": 99}, "ACDEB"),  # past the end = bottom
    ],
)
def test_move(tenant_a, book_abcde, name, kwargs, expected):
    book, entries = book_abcde
    moved = services.entry_move(actor=member_actor(tenant_a), entry=entries[name], **kwargs)
    assert _names(book) == expected
    assert _positions(book) == [0, 1, 2, 3, 4]
    assert moved.position == expected.index(name)


def test_move_needs_exactly_one_target(tenant_a, book_abcde):
    book, entries = book_abcde
    before = snapshot(book)
    for kwargs in ({}, {"to": "top", "position": 1}, {"to": "middle"}, {"position": -1}):
        with pytest.raises(ValidationFailed):
            services.entry_move(actor=member_actor(tenant_a), entry=entries["A"], **kwargs)
    assert snapshot(book) == before


def test_reorder_puts_named_entries_in_their_own_slots(tenant_a, book_abcde):
    book, entries = book_abcde
    full = services.entries_reorder(actor=member_actor(tenant_a), book=book, entry_ids=[entries["D"].pk, entries["B"].pk])
    assert _names(book) == "ADCBE"
    assert full == order(book)
    services.entries_reorder(actor=member_actor(tenant_a), book=book, entry_ids=[entries[n].pk for n in "EDCBA"])
    assert _names(book) == "EDCBA"
    assert _positions(book) == [0, 1, 2, 3, 4]


def test_reorder_refuses_strangers_and_repeats_and_changes_nothing(tenant_a, book_abcde):
    book, entries = book_abcde
    other = make_entry(make_book(tenant_a, title="Other"))
    before = snapshot(book)
    with pytest.raises(NotFound) as exc_info:
        services.entries_reorder(actor=member_actor(tenant_a), book=book, entry_ids=[entries["B"].pk, other.pk])
    assert exc_info.value.details["missing"] == [other.pk]
    with pytest.raises(ValidationFailed):
        services.entries_reorder(actor=member_actor(tenant_a), book=book, entry_ids=[entries["B"].pk] * 2)
    assert snapshot(book) == before


def test_deletes_keep_positions_dense(tenant_a, book_abcde):
    book, entries = book_abcde
    services.entry_delete(actor=member_actor(tenant_a), entry=entries["B"])
    assert (_names(book), _positions(book)) == ("ACDE", [0, 1, 2, 3])
    services.entries_bulk_delete(actor=member_actor(tenant_a), book=book, entry_ids=[entries["A"].pk, entries["D"].pk])
    assert (_names(book), _positions(book)) == ("CE", [0, 1])
    created = services.entry_create(actor=member_actor(tenant_a), book=book, title="F")
    assert created.position == 2 and _names(book) == "CEF"


def test_move_of_an_entry_already_there_changes_nothing(tenant_a, book_abcde):
    book, entries = book_abcde
    before = version(book)
    services.entry_move(actor=member_actor(tenant_a), entry=entries["A"], to="top")
    services.entry_move(actor=member_actor(tenant_a), entry=entries["E"], position=4)
    assert version(book) == before


# --- through the API --------------------------------------------------------------------------


def test_api_move_top_bottom_and_position(tenant_a, book_abcde):
    book, entries = book_abcde
    base = f"/api/v1/books/{book.pk}/entries"
    client = tenant_a.member_client
    response = client.post(f"{base}/{entries['C'].pk}/move", {"to": "top"}, format="json")
    assert response.status_code == 200 and response.json()["position"] == 0
    assert client.post(f"{base}/{entries['A'].pk}/move", {"to": "bottom"}, format="json").status_code == 200
    assert client.post(f"{base}/{entries['E'].pk}/move", {"position": 1}, format="json").status_code == 200
    assert _names(book) == "CEBDA"
    listed = client.get(base).json()["results"]
    assert [row["title"] for row in listed] == list("CEBDA")
    assert [row["position"] for row in listed] == [0, 1, 2, 3, 4]


def test_api_move_bad_body_is_400_and_changes_nothing(tenant_a, book_abcde):
    book, entries = book_abcde
    before = snapshot(book)
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries/{entries['C'].pk}/move", {"to": "top", "position": 2}, format="json"
    )
    assert response.status_code == 400 and response.json()["error"]["field"] == "position"
    assert snapshot(book) == before


def test_api_reorder(tenant_a, book_abcde):
    book, entries = book_abcde
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries/reorder",
        {"entry_ids": [entries[n].pk for n in "BA"]},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["entry_ids"] == order(book) and _names(book) == "BACDE"
    assert body["version"] == version(book)


def test_api_move_of_another_books_entry_is_404(tenant_a, book_abcde):
    book, _ = book_abcde
    other = make_entry(make_book(tenant_a, title="Other"))
    before = snapshot(book)
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries/{other.pk}/move", {"to": "top"}, format="json"
    )
    assert response.status_code == 404
    assert snapshot(book) == before
