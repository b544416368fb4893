"""Entries through the editor API: CRUD, each filter, each sort, text search."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from books.models import Entry, Profile
from tests.books.factories import SMART_LORE, make_book, make_entry, version

pytestmark = pytest.mark.django_db


def test_entry_crud(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    client = tenant_a.member_client
    base = f"/api/v1/books/{book.pk}/entries"
    created = client.post(base, {"title": "Varn", "content": SMART_LORE, "keys": ["river city"]}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["title"], body["keys"], body["position"], body["indexing_state"], body["live"]) == (
        "Varn", ["river city"], 0, "pending", True
    )
    assert body["content_hash"] and body["usage_count"] == 0 and body["last_used_at"] is None
    entry_id = body["id"]

    assert client.get(f"{base}/{entry_id}").json()["content"] == SMART_LORE
    patched = client.patch(f"{base}/{entry_id}", {"canon": True, "enabled": False}, format="json")
    assert patched.status_code == 200
    assert (patched.json()["canon"], patched.json()["constant"], patched.json()["live"]) == (True, True, False)

    assert client.delete(f"{base}/{entry_id}").status_code == 204
    assert client.get(f"{base}/{entry_id}").status_code == 404
    assert version(book) == 4  # create, update, delete


def test_entry_of_another_book_is_404(tenant_a):
    book = make_book(tenant_a)
    other = make_entry(make_book(tenant_a, title="Other"))
    assert tenant_a.member_client.get(f"/api/v1/books/{book.pk}/entries/{other.pk}").status_code == 404
    response = tenant_a.member_client.patch(f"/api/v1/books/{book.pk}/entries/{other.pk}", {"title": "x"}, format="json")
    assert response.status_code == 404
    other.refresh_from_db()
    assert other.title != "x"


def test_type_errors_are_400_naming_the_field(tenant_a):
    book = make_book(tenant_a)
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries", {"role": "narrator"}, format="json"
    )
    assert response.status_code == 400 and response.json()["error"]["field"] == "role"
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()


@pytest.fixture
def library(tenant_a):
    """A world book whose entries differ in every way the filters and sorts look at."""
    book = make_book(tenant_a, profile=Profile.SMART)
    now = timezone.now()
    rows = {
        "Varn": dict(constant=True, usage_count=9, content="Varn is the river city of salt."),
        "Salt Guild": dict(usage_count=0, content="Merchants who own the docks.", keys=["guild of salt"]),
        "Iron Pact": dict(enabled=False, usage_count=2, content="An old alliance of smiths."),
        "Ember Gate": dict(constant=True, enabled=False, usage_count=0, content="A gate that opens at dusk."),
        "Delta": dict(usage_count=5, content="Marshes south of Varn."),
    }
    for minutes, (title, fields) in enumerate(rows.items()):
        make_entry(book, title=title, updated_at=now - timedelta(minutes=10 - minutes * 3 % 7), **fields)
    return book


def _titles(setup, book, **params):
    response = setup.member_client.get(f"/api/v1/books/{book.pk}/entries", params)
    assert response.status_code == 200, response.json()
    return [row["title"] for row in response.json()["results"]]


@pytest.mark.parametrize(
    "params,expected",
    [
        ({}, ["Varn", "Salt Guild", "Iron Pact", "Ember Gate", "Delta"]),
        ({"enabled": "true"}, ["Varn", "Salt Guild", "Delta"]),
        ({"enabled": "false"}, ["Iron Pact", "Ember Gate"]),
        ({"canon": "true"}, ["Varn", "Ember Gate"]),
        ({"canon": "false"}, ["Salt Guild", "Iron Pact", "Delta"]),
        ({"never_used": "true"}, ["Salt Guild", "Ember Gate"]),
        ({"never_used": "true", "enabled": "true"}, ["Salt Guild"]),
        ({"q": "varn"}, ["Varn", "Delta"]),  # title and content
        ({"q": "GUILD OF"}, ["Salt Guild"]),  # aliases, case-insensitive
        ({"q": "nothing like this"}, []),
    ],
)
def test_filters(tenant_a, library, params, expected):
    assert _titles(tenant_a, library, **params) == expected


def test_sorts(tenant_a, library):
    assert _titles(tenant_a, library, sort="position") == ["Varn", "Salt Guild", "Iron Pact", "Ember Gate", "Delta"]
    assert _titles(tenant_a, library, sort="most_used") == ["Varn", "Delta", "Iron Pact", "Salt Guild", "Ember Gate"]
    edited = list(
        Entry.objects.for_tenant(tenant_a.tenant).filter(book=library).order_by("-updated_at").values_list("title", flat=True)
    )
    assert _titles(tenant_a, library, sort="recently_edited") == edited
    assert edited != _titles(tenant_a, library)  # the fixture makes the orders differ


def test_sort_by_title_orders_by_display_name_case_insensitively(tenant_a, library):
    """C-9: the display name sorts the editor list (and only that: the list order stays)."""
    make_entry(library, title="anchor reef", content="A reef of old anchors off Varn's docks.")
    expected = ["anchor reef", "Delta", "Ember Gate", "Iron Pact", "Salt Guild", "Varn"]
    assert _titles(tenant_a, library, sort="title") == expected
    assert _titles(tenant_a, library, sort="title", enabled="true") == ["anchor reef", "Delta", "Salt Guild", "Varn"]
    assert _titles(tenant_a, library)[:2] == ["Varn", "Salt Guild"]


def test_editing_moves_an_entry_to_the_top_of_recently_edited(tenant_a, library):
    delta = Entry.objects.for_tenant(tenant_a.tenant).get(book=library, title="Iron Pact")
    tenant_a.member_client.patch(
        f"/api/v1/books/{library.pk}/entries/{delta.pk}", {"content": "An alliance of smiths, renewed."}, format="json"
    )
    assert _titles(tenant_a, library, sort="recently_edited")[0] == "Iron Pact"


def test_bad_sort_is_400(tenant_a, library):
    response = tenant_a.member_client.get(f"/api/v1/books/{library.pk}/entries", {"sort": "random"})
    assert response.status_code == 400 and response.json()["error"]["field"] == "sort"


def test_listing_is_paginated(tenant_a):
    book = make_book(tenant_a)
    for i in range(7):
        make_entry(book, title=f"E{i}")
    page = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/entries", {"page_size": 3, "page": 2}).json()
    assert page["count"] == 7 and [row["title"] for row in page["results"]] == ["E3", "E4", "E5"]
