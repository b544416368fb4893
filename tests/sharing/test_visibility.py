"""Visibility (P-1), links, and the living world turning off (L-1)."""
from __future__ import annotations

import pytest

from books.models import Book, Profile, Visibility
from lore_platform.errors import LimitExceeded, NotFound, PermissionDenied, ValidationFailed
from sharing.services import book_link_rotate, book_visibility_set
from tests.books.factories import fill, make_book, version
from tests.sharing.helpers import admin_actor, owner_actor, share_of, world

pytestmark = pytest.mark.django_db


def _book(setup, entries=10, **fields):
    book = make_book(setup, owner="member", **fields)
    fill(book, entries)
    return book


def test_books_start_private(tenant_a):
    assert make_book(tenant_a).visibility == Visibility.PRIVATE


def test_publishing_with_nine_entries_is_refused_and_changes_nothing(tenant_a):
    book = _book(tenant_a, entries=9)
    before = world(tenant_a)
    with pytest.raises(LimitExceeded) as refused:
        book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="public")
    error = refused.value
    assert error.rule == "P-1" and error.code == "too_few_entries" and error.field == "visibility"
    assert error.details == {"min": 10, "actual": 9, "unit": "entries"}
    assert "at least 10 entries" in error.message and "has 9" in error.message
    assert world(tenant_a) == before


def test_publishing_with_nine_entries_via_api_is_a_clear_422(tenant_a):
    book = _book(tenant_a, entries=9)
    before = world(tenant_a)
    response = tenant_a.member_client.post(f"/api/v1/books/{book.pk}/visibility", {"visibility": "public"}, format="json")
    assert response.status_code == 422
    body = response.json()["error"]
    assert body["code"] == "too_few_entries" and body["rule"] == "P-1" and body["field"] == "visibility"
    assert body["details"] == {"min": 10, "actual": 9, "unit": "entries"}
    assert world(tenant_a) == before


def test_publishing_with_ten_entries_lists_the_book_and_bumps_the_version(tenant_a):
    book = _book(tenant_a, entries=10)
    start = version(book)
    share = book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="public")
    book.refresh_from_db()
    assert book.visibility == Visibility.PUBLIC
    assert book.version == start + 1
    assert share.published_at is not None
    assert len(share.link_token) >= 32
    assert share.search_version == book.version  # findable as soon as it commits


def test_unlisted_needs_no_minimum(tenant_a):
    book = _book(tenant_a, entries=1)
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="unlisted")
    book.refresh_from_db()
    assert book.visibility == Visibility.UNLISTED
    assert share_of(book).published_at is None


def test_setting_the_same_visibility_changes_nothing(tenant_a):
    book = _book(tenant_a)
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="public")
    before = world(tenant_a)
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="public")
    assert world(tenant_a) == before


@pytest.mark.parametrize("visibility", ["unlisted", "public"])
def test_sharing_turns_the_living_world_off(tenant_a, visibility):
    book = _book(tenant_a, profile=Profile.SMART, living_world=True)
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility=visibility)
    book.refresh_from_db()
    assert book.living_world is False


def test_making_private_again_keeps_the_living_world_off(tenant_a):
    book = _book(tenant_a, profile=Profile.SMART, living_world=True)
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="public")
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="private")
    book.refresh_from_db()
    assert (book.visibility, book.living_world) == (Visibility.PRIVATE, False)


def test_unknown_visibility_is_refused(tenant_a):
    book = _book(tenant_a)
    with pytest.raises(ValidationFailed):
        book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="secret")


def test_only_the_owner_changes_visibility(tenant_a, tenant_b):
    book = _book(tenant_a)
    before = world(tenant_a, tenant_b)
    with pytest.raises(NotFound):  # another user's private book does not exist for the admin
        book_visibility_set(actor=admin_actor(tenant_a), book=book, visibility="public")
    with pytest.raises(NotFound):
        book_visibility_set(actor=admin_actor(tenant_b), book=book, visibility="public")
    with pytest.raises(PermissionDenied):
        book_visibility_set(actor=owner_actor(tenant_a, frozenset({"read"})), book=book, visibility="public")
    assert world(tenant_a, tenant_b) == before


def test_tenant_owned_books_are_shared_by_admins(tenant_a):
    book = make_book(tenant_a, owner=None)
    fill(book, 10)
    with pytest.raises(PermissionDenied):
        book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="public")
    book_visibility_set(actor=admin_actor(tenant_a), book=book, visibility="public")
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).visibility == Visibility.PUBLIC


def test_rotating_the_link_kills_the_old_one(tenant_a, anon_client):
    book = _book(tenant_a, entries=2)
    old = book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="unlisted").link_token
    assert anon_client.get(f"/api/v1/library/links/{old}").status_code == 200
    new = book_link_rotate(actor=owner_actor(tenant_a), book=book).link_token
    assert new != old
    assert anon_client.get(f"/api/v1/library/links/{old}").status_code == 404
    assert anon_client.get(f"/api/v1/library/links/{new}").json()["id"] == book.pk


def test_link_of_a_private_book_opens_nothing(tenant_a, anon_client):
    book = _book(tenant_a, entries=2)
    token = book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="unlisted").link_token
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="private")
    assert anon_client.get(f"/api/v1/library/links/{token}").status_code == 404
    assert anon_client.get(f"/api/v1/library/links/{token}/entries").status_code == 404


def test_sharing_state_shows_the_link_only_to_the_owner(tenant_a):
    book = _book(tenant_a)
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="public")
    mine = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/sharing").json()
    assert mine["visibility"] == "public" and mine["can_manage"] is True
    assert mine["link"]["active"] is True and mine["link"]["path"].endswith(mine["link"]["token"])
    assert (mine["entry_count"], mine["can_publish"], mine["publish_min_entries"]) == (10, True, 10)
    theirs = tenant_a.admin_client.get(f"/api/v1/books/{book.pk}/sharing").json()
    assert theirs["can_manage"] is False and theirs["link"] is None


def test_visibility_api_round_trip(tenant_a):
    book = _book(tenant_a)
    client = tenant_a.member_client
    body = client.post(f"/api/v1/books/{book.pk}/visibility", {"visibility": "unlisted"}, format="json").json()
    assert body["visibility"] == "unlisted" and body["link"]["active"] is True
    token = body["link"]["token"]
    rotated = client.post(f"/api/v1/books/{book.pk}/link/rotate").json()
    assert rotated["link"]["token"] != token
    body = client.post(f"/api/v1/books/{book.pk}/visibility", {"visibility": "private"}, format="json").json()
    assert body["visibility"] == "private" and body["link"]["active"] is False
