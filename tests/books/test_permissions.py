"""Permission matrix for every editor endpoint, asserting nothing changed on a denial.

Callers: the owner (member key), a tenant admin, another member, another
tenant (404, never 403: P-3), a read-only key (403 on writes) and anonymous (401).
Personal books: only the owner reads and edits. Tenant-owned books (server-wide,
persona): members read, admins edit (S-1).
"""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from books import services
from books.models import Entry, Profile
from lore_platform.errors import NotFound, PermissionDenied
from lore_platform.tenancy.services import api_key_create, membership_set, user_get_or_create
from tests.books.factories import admin_actor, make_book, make_entry, member_actor, snapshot

pytestmark = pytest.mark.django_db


def _requests(book, entry):
    """(name, method, path, body, is_write) for every endpoint on one book."""
    b = f"/api/v1/books/{book.pk}"
    e = f"{b}/entries/{entry.pk}"
    spare = Entry.objects.for_tenant(book.tenant).filter(book=book).exclude(pk=entry.pk).values_list("pk", flat=True)[0]
    return [
        ("book get", "get", b, None, False),
        ("canon meter", "get", f"{b}/canon-meter", {"input_window": 8000}, False),
        ("entries list", "get", f"{b}/entries", None, False),
        ("entry get", "get", e, None, False),
        ("book patch", "patch", b, {"title": "Changed"}, True),
        ("book active", "post", f"{b}/active", {"active": False}, True),
        ("entry create", "post", f"{b}/entries", {"title": "New", "content": "New lore text for this entry."}, True),
        ("bulk create", "post", f"{b}/entries/bulk-create", {"entries": [{"content": "More lore."}]}, True),
        ("entry patch", "patch", e, {"content": "Changed lore for this entry."}, True),
        ("entry move", "post", f"{e}/move", {"to": "top"}, True),
        ("reorder", "post", f"{b}/entries/reorder", {"entry_ids": [entry.pk]}, True),
        ("bulk disable", "post", f"{b}/entries/bulk", {"action": "disable", "entry_ids": [entry.pk]}, True),
        ("bulk delete", "post", f"{b}/entries/bulk", {"action": "delete", "entry_ids": [spare]}, True),
        ("entry delete", "delete", e, None, True),
        ("book delete", "delete", b, None, True),
    ]


def _call(client, method, path, body):
    if method == "get":
        return client.get(path, body or {})
    return getattr(client, method)(path, body, format="json")


def _other_member_client(setup):
    other = user_get_or_create(email=f"other@{setup.tenant.slug}.test")
    membership_set(tenant=setup.tenant, user=other, role="member")
    key = api_key_create(tenant=setup.tenant, name="other", scopes=["read", "write"], user=other)
    return setup.client(key.secret)


def _expect(client, book, entry, *, read, write):
    """Run every endpoint; reads answer ``read``, writes ``write``; denied calls change nothing."""
    for name, method, path, body, is_write in _requests(book, entry):
        before = snapshot(book)
        response = _call(client, method, path, body)
        expected = write if is_write else read
        assert response.status_code == expected, (name, response.status_code, response.content[:200])
        if expected >= 400:
            assert "error" in response.json()
        assert snapshot(book) == before, name


def _allowed(client, book, entry):
    """Every endpoint succeeds (run on fresh rows as deletes come last)."""
    for name, method, path, body, _ in _requests(book, entry):
        response = _call(client, method, path, body)
        assert response.status_code in (200, 201, 204), (name, response.status_code, response.content[:300])


# --- personal books ----------------------------------------------------------------------


@pytest.fixture
def personal(tenant_a):
    book = make_book(tenant_a, owner="member", profile=Profile.CLASSIC)
    entry = make_entry(book, title="Varn", content="River city lore, long enough.")
    make_entry(book, title="Spare", content="Spare lore.")
    return book, entry


def test_owner_may_do_everything(tenant_a, personal):
    _allowed(tenant_a.member_client, *personal)


def test_admin_cannot_see_a_members_private_book(tenant_a, personal):
    _expect(tenant_a.admin_client, *personal, read=404, write=404)


def test_another_member_cannot_see_it(tenant_a, personal):
    _expect(_other_member_client(tenant_a), *personal, read=404, write=404)


def test_other_tenant_gets_404(tenant_b, personal):
    _expect(tenant_b.admin_client, *personal, read=404, write=404)


def test_owners_read_only_key_reads_but_cannot_write(tenant_a, personal):
    book, entry = personal
    for name, method, path, body, is_write in _requests(book, entry):
        before = snapshot(book)
        response = _call(tenant_a.read_client, method, path, body)
        assert response.status_code == (403 if is_write else 200), name
        assert snapshot(book) == before, name


def test_anonymous_gets_401(personal):
    _expect(APIClient(), *personal, read=401, write=401)


def test_listing_hides_books_the_caller_cannot_read(tenant_a, tenant_b, personal):
    assert tenant_a.admin_client.get("/api/v1/books").json()["results"] == []
    assert tenant_b.member_client.get("/api/v1/books").json()["results"] == []
    assert [b["id"] for b in tenant_a.member_client.get("/api/v1/books").json()["results"]] == [personal[0].pk]


# --- tenant-owned books (S-1) ------------------------------------------------------------------


@pytest.fixture(params=["server", "persona"])
def tenant_owned(request, tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=request.param)
    entry = make_entry(book, title="Rule", content="Tenant lore.")
    make_entry(book, title="Spare", content="Spare lore.")
    return book, entry


def test_admin_edits_tenant_books(tenant_a, tenant_owned):
    _allowed(tenant_a.admin_client, *tenant_owned)


def test_member_reads_tenant_books_but_cannot_edit(tenant_a, tenant_owned):
    _expect(tenant_a.member_client, *tenant_owned, read=200, write=403)
    response = tenant_a.member_client.patch(f"/api/v1/books/{tenant_owned[0].pk}", {"title": "x"}, format="json")
    assert response.json()["error"]["rule"] == "S-1"


def test_other_tenant_cannot_see_tenant_books(tenant_b, tenant_owned):
    _expect(tenant_b.admin_client, *tenant_owned, read=404, write=404)


def test_only_admins_create_tenant_books(tenant_a):
    response = tenant_a.member_client.post("/api/v1/books", {"title": "Factions", "profile": "server"}, format="json")
    assert response.status_code == 403 and response.json()["error"]["rule"] == "S-1"
    response = tenant_a.read_client.post("/api/v1/books", {"title": "Mine"}, format="json")
    assert response.status_code == 403
    assert APIClient().post("/api/v1/books", {"title": "Mine"}, format="json").status_code == 401
    assert tenant_a.admin_client.post("/api/v1/books", {"title": "Factions", "profile": "server"}, format="json").status_code == 201


# --- the same rules for services called without the API (importer, tasks) ------------------------


def test_services_enforce_access_themselves(tenant_a, tenant_b, personal):
    book, entry = personal
    before = snapshot(book)
    with pytest.raises(NotFound):
        services.entry_create(actor=admin_actor(tenant_a), book=book, content="x")
    with pytest.raises(NotFound):
        services.entries_bulk_delete(actor=member_actor(tenant_b), book=book, entry_ids=[entry.pk])
    with pytest.raises(PermissionDenied):
        services.entry_update(actor=member_actor(tenant_a, scopes=frozenset({"read"})), entry=entry, title="x")
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    with pytest.raises(PermissionDenied):
        services.entries_create_bulk(actor=member_actor(tenant_a), book=server, entries=[{"content": "x"}])
    assert snapshot(book) == before
    assert not Entry.objects.for_tenant(tenant_a.tenant).filter(book=server).exists()
