"""Copy to my library (P-2): an editable private duplicate with its provenance; counts on the source."""
from __future__ import annotations

import pytest

from books.models import Book, Entry, Profile, Scope, Visibility
from lore_platform.errors import LimitExceeded, NotFound, PermissionDenied
from sharing.services import book_copy, book_visibility_set
from tests.books.factories import entry_count, fill, make_book, make_entry
from tests.sharing.helpers import admin_actor, owner_actor, share_of, shared_book, world

pytestmark = pytest.mark.django_db


def _rich_book(setup):
    book = make_book(
        setup,
        owner="member",
        title="The Salt Coast",
        description="Smugglers and lighthouses.",
        tags=["coast", "smugglers"],
        language="en",
        scan_depth=7,
        token_budget=900,
        recursive=True,
        extra={"from": "import"},
    )
    make_entry(
        book,
        title="Lighthouse",
        content="The lighthouse never goes dark.",
        keys=["lighthouse", "beacon"],
        secondary_keys=["night"],
        secondary_logic="and_all",
        constant=True,
        order=250,
        priority=3,
        probability=40,
        role="assistant",
        usage_count=12,
        extra={"sticky": 2},
    )
    make_entry(book, title="Disabled", content="Nobody sees this entry.", enabled=False)
    fill(book, 8)
    book_visibility_set(actor=owner_actor(setup), book=book, visibility="public")
    book.refresh_from_db()
    return book


def test_copy_is_a_private_editable_duplicate_with_provenance(tenant_a, tenant_b):
    source = _rich_book(tenant_a)
    response = tenant_b.admin_client.post("/api/v1/library/copies", {"book_id": source.pk}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    copy = Book.objects.for_tenant(tenant_b.tenant).get(pk=body["book"]["id"])
    assert body["source"]["book_id"] == source.pk and body["source"]["version"] == source.version
    assert body["source"]["title"] == "The Salt Coast" and body["book"]["entry_count"] == 10

    assert (copy.tenant_id, copy.owner_id, copy.visibility) == (tenant_b.tenant.pk, tenant_b.admin.pk, "private")
    for name in ("title", "description", "tags", "language", "scan_depth", "token_budget", "recursive", "extra"):
        assert getattr(copy, name) == getattr(source, name), name
    fields = ("title", "content", "keys", "secondary_keys", "secondary_logic", "constant", "enabled", "order",
              "priority", "probability", "role", "extra")
    original = list(Entry.objects.for_tenant(tenant_a.tenant).filter(book=source).values_list(*fields))
    copied = list(Entry.objects.for_tenant(tenant_b.tenant).filter(book=copy).values_list(*fields))
    assert copied == original
    assert list(Entry.objects.for_tenant(tenant_b.tenant).filter(book=copy).values_list("usage_count", flat=True)) == [0] * 10

    assert share_of(source).copy_count == 1
    provenance = tenant_b.admin_client.get(f"/api/v1/books/{copy.pk}/sharing").json()["source"]
    assert provenance["book_id"] == source.pk and provenance["version"] == source.version

    # The copier edits the copy; the source does not change.
    edited = tenant_b.admin_client.patch(f"/api/v1/books/{copy.pk}", {"title": "My coast"}, format="json")
    assert edited.status_code == 200, edited.content
    source.refresh_from_db()
    assert source.title == "The Salt Coast"


def test_copy_counts_show_in_the_library(tenant_a, tenant_b, make_tenant):
    source = shared_book(tenant_a)
    book_copy(actor=admin_actor(tenant_b), book_id=source.pk)
    book_copy(actor=admin_actor(make_tenant("Gamma")), book_id=source.pk)
    listed = tenant_b.admin_client.get("/api/v1/library/books").json()["results"]
    assert [(b["id"], b["copy_count"]) for b in listed] == [(source.pk, 2)]


def test_unlisted_books_are_copied_through_their_link_only(tenant_a, tenant_b):
    source = shared_book(tenant_a, visibility="unlisted", entries=3)
    before = world(tenant_a, tenant_b)
    assert tenant_b.admin_client.post("/api/v1/library/copies", {"book_id": source.pk}, format="json").status_code == 404
    assert world(tenant_a, tenant_b) == before
    response = tenant_b.admin_client.post(
        "/api/v1/library/copies", {"link_token": source.share.link_token}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["book"]["entry_count"] == 3


def test_private_books_of_other_tenants_cannot_be_copied(tenant_a, tenant_b):
    source = shared_book(tenant_a, visibility="private")
    before = world(tenant_a, tenant_b)
    with pytest.raises(NotFound):
        book_copy(actor=admin_actor(tenant_b), book_id=source.pk)
    assert world(tenant_a, tenant_b) == before


def test_read_only_keys_cannot_copy(tenant_a, tenant_b):
    source = shared_book(tenant_a)
    before = world(tenant_a, tenant_b)
    with pytest.raises(PermissionDenied):
        book_copy(actor=admin_actor(tenant_b, frozenset({"read"})), book_id=source.pk)
    assert world(tenant_a, tenant_b) == before


def test_own_books_can_be_duplicated(tenant_a):
    source = shared_book(tenant_a, visibility="private", entries=2)
    copy = book_copy(actor=owner_actor(tenant_a), book_id=source.pk)
    assert copy.pk != source.pk and entry_count(copy) == 2 and copy.owner_id == tenant_a.member.pk


def test_server_lorebooks_are_copied_by_admins_as_server_wide_collections(tenant_a, tenant_b):
    source = make_book(tenant_a, owner=None, profile=Profile.SERVER, channels=["123"])
    fill(source, 10, channels=[])
    book_visibility_set(actor=admin_actor(tenant_a), book=source, visibility="public")
    before = world(tenant_a, tenant_b)
    with pytest.raises(PermissionDenied):
        book_copy(actor=owner_actor(tenant_b), book_id=source.pk)
    assert world(tenant_a, tenant_b) == before
    copy = book_copy(actor=admin_actor(tenant_b), book_id=source.pk)
    assert (copy.scope, copy.owner_id, copy.channels) == (Scope.SERVER, None, [])  # channels stay home (I-6)


def test_a_copy_that_breaks_the_copiers_limits_is_refused_whole(tenant_a, tenant_b):
    source = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    fill(source, 10)
    book_visibility_set(actor=admin_actor(tenant_a), book=source, visibility="public")
    full = make_book(tenant_b, owner=None, profile=Profile.SERVER)
    fill(full, 245)  # server-wide books share 250 entries (S-14)
    before = world(tenant_a, tenant_b)
    with pytest.raises(LimitExceeded):
        book_copy(actor=admin_actor(tenant_b), book_id=source.pk)
    assert world(tenant_a, tenant_b) == before


def test_big_books_are_copied_in_batches(tenant_a, tenant_b):
    source = shared_book(tenant_a, entries=620)
    copy = book_copy(actor=admin_actor(tenant_b), book_id=source.pk)
    assert entry_count(copy) == 620
    titles = list(Entry.objects.for_tenant(tenant_b.tenant).filter(book=copy).values_list("title", flat=True))
    assert titles == [f"Filler {i}" for i in range(620)]


def test_copies_are_private_even_from_public_sources(tenant_a, tenant_b):
    source = shared_book(tenant_a)
    copy = book_copy(actor=admin_actor(tenant_b), book_id=source.pk)
    assert copy.visibility == Visibility.PRIVATE
    assert tenant_b.admin_client.get(f"/api/v1/library/books/{copy.pk}").status_code == 404
