"""Issue 14 through the API: readers export what they can see (I-6, S-1), a native export re-imports
losslessly, receipts name what they drop (I-4), server imports skip over-long entries (S-3)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from books.formats import read_book
from books.models import Book, Profile, Scope
from sharing.services import book_link_rotate
from tests.books.factories import make_book, make_entry
from tests.books.formats.builders import st_entry, world
from tests.books.io_support import entry_rows
from tests.sharing.helpers import owner_actor, share_of, shared_book

pytestmark = pytest.mark.django_db

IMPORT = "/api/v1/books/import"
LORE = "The salt road runs from Varn to the sea, and the toll is paid in iron."


def _upload(client: Any, data: bytes, name: str = "lore.json", **fields: Any) -> Any:
    upload = io.BytesIO(data)
    upload.name = name
    return client.post(IMPORT, {"file": upload, **fields}, format="multipart")


def _export(client: Any, path: str, fmt: str = "sillytavern") -> Any:
    return client.get(path, {"format": fmt})


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:300])
    return response.json()["error"]


# --- 3. export from any book you can see ------------------------------------------------------


def test_a_member_exports_a_colleagues_public_book_but_not_its_native_form(tenant_a):
    book = make_book(tenant_a, owner="admin", title="Admin's atlas", visibility="public")
    make_entry(book, title="Salt road", content=LORE, enabled=False)
    response = _export(tenant_a.member_client, f"/api/v1/books/{book.pk}/export")
    assert response.status_code == 200, response.content[:300]
    read = read_book(response.content)
    assert [(e.title, e.enabled) for e in read.entries] == [("Salt road", False)]
    assert read.collection is None
    assert _error(_export(tenant_a.member_client, f"/api/v1/books/{book.pk}/export", "native"), 403)["rule"] == "I-6"
    assert _export(tenant_a.admin_client, f"/api/v1/books/{book.pk}/export", "native").status_code == 200
    # Still private to someone else = it does not exist (P-3).
    private = make_book(tenant_a, owner="admin", title="Admin's notes")
    assert _export(tenant_a.member_client, f"/api/v1/books/{private.pk}/export").status_code == 404


def test_server_lorebooks_stay_admin_only(tenant_a):
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Server lore")
    make_entry(server, content=LORE)
    assert _error(_export(tenant_a.member_client, f"/api/v1/books/{server.pk}/export"), 403)["rule"] == "S-1"
    assert _export(tenant_a.admin_client, f"/api/v1/books/{server.pk}/export").status_code == 200


def test_anyone_exports_a_public_library_book_without_tenant_settings(tenant_a, tenant_b, anon_client):
    book = shared_book(tenant_a, title="The Salt Coast")
    Book.objects.for_tenant(tenant_a.tenant).filter(pk=book.pk).update(active=False)
    path = f"/api/v1/library/books/{book.pk}/export"
    for client in (anon_client, tenant_b.member_client, tenant_a.member_client):
        response = _export(client, path)
        assert response.status_code == 200, response.content[:300]
        assert response["Content-Disposition"].startswith("attachment")
        doc = json.loads(response.content)
        assert len(doc["entries"]) == 10 and "collection" not in json.dumps(doc)
    card = _export(anon_client, path, "card-v2")
    assert card.status_code == 200 and len(read_book(card.content).entries) == 10
    assert _error(_export(anon_client, path, "native"), 400)["field"] == "format"


def test_unlisted_books_export_by_their_link_only(tenant_a, tenant_b):
    book = shared_book(tenant_a, visibility="unlisted")
    token = share_of(book).link_token
    reader = tenant_b.member_client
    assert _export(reader, f"/api/v1/library/books/{book.pk}/export").status_code == 404
    assert _export(reader, f"/api/v1/books/{book.pk}/export").status_code == 404  # another tenant's row
    response = _export(reader, f"/api/v1/library/links/{token}/export")
    assert response.status_code == 200 and len(read_book(response.content).entries) == 10
    book_link_rotate(actor=owner_actor(tenant_a), book=book)
    assert _export(reader, f"/api/v1/library/links/{token}/export").status_code == 404
    private = shared_book(tenant_a, visibility="private", title="Private")
    assert _export(reader, f"/api/v1/library/books/{private.pk}/export").status_code == 404


def test_a_public_server_lorebook_needs_an_admin_to_export(tenant_a, tenant_b, anon_client):
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Public server lore", visibility="public")
    for i in range(10):
        make_entry(server, title=f"Rule {i}", content=LORE)
    path = f"/api/v1/library/books/{server.pk}/export"
    assert _error(_export(anon_client, path), 403)["rule"] == "S-1"
    assert _error(_export(tenant_b.member_client, path), 403)["rule"] == "S-1"
    assert _export(tenant_b.admin_client, path).status_code == 200


# --- 4. a single book's native export is lossless --------------------------------------------


def test_native_export_re_imports_with_its_collection_state(tenant_a):
    book = make_book(
        tenant_a, owner=None, profile=Profile.SERVER, title="Harbour rules", active=False, channels=["c1"], tags=["sea"]
    )
    make_entry(book, title="Tolls", content=LORE, keys=["toll"], probability=0, enabled=False, order=7)
    exported = _export(tenant_a.admin_client, f"/api/v1/books/{book.pk}/export", "native")
    assert exported.status_code == 200
    response = _upload(tenant_a.admin_client, exported.content, "rules.loreweave.json", profile="server",
                       title="Harbour rules again")
    assert response.status_code == 201, response.json()
    again = Book.objects.for_tenant(tenant_a.tenant).get(pk=response.json()["book"]["id"])
    assert (again.active, again.channels, again.tags) == (False, ["c1"], ["sea"])
    assert {"active", "channels"} <= set(response.json()["receipt"]["restored"])
    assert entry_rows(again) == entry_rows(book)


def test_what_a_native_file_cannot_give_back_is_named(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Channelled", channels=["c1"])
    make_entry(book, content=LORE)
    exported = _export(tenant_a.admin_client, f"/api/v1/books/{book.pk}/export", "native").content
    receipt = _upload(tenant_a.member_client, exported, profile="classic").json()["receipt"]
    assert any("c1" in w and "S-11" in w for w in receipt["warnings"])
    assert "channels" not in receipt["restored"]


# --- 7. the receipt names what it drops -----------------------------------------------------


def test_receipt_names_regex_keys_by_text_and_each_setting_with_its_entries(tenant_a):
    doc = world([
        st_entry(0, key=["/dra(g|k)on/i", "wyrm"], sticky=2, comment="Dragons"),
        st_entry(1, sticky=3, comment="Storms"),
        st_entry(2, comment="Plain"),
    ])
    response = _upload(tenant_a.admin_client, json.dumps(doc).encode(), profile="server", title="Receipt")
    assert response.status_code == 201, response.json()
    receipt = response.json()["receipt"]
    assert receipt["regex_keys"] == [{"index": 0, "entry": "Dragons", "keys": ["/dra(g|k)on/i"]}]
    by_setting = {item["setting"]: item for item in receipt["unsupported_settings"]}
    assert by_setting["sticky"]["count"] == 2
    assert by_setting["sticky"]["entries"] == [{"index": 0, "entry": "Dragons"}, {"index": 1, "entry": "Storms"}]
    assert by_setting["regex_keys"]["entries"] == [{"index": 0, "entry": "Dragons"}]
    assert receipt["unsupported"][0]["regex_keys"] == ["/dra(g|k)on/i"]


# --- 8. server imports skip entries over 4,000 characters ------------------------------------


def test_a_server_import_skips_an_over_long_entry_and_imports_the_rest(tenant_a):
    entries = [st_entry(i) for i in range(13)]
    entries[5]["content"] = ("The long chronicle. " * 355)[:7091]
    assert len(entries[5]["content"]) == 7091
    entries[6]["content"] = "y" * 4000  # exactly at the limit: kept
    response = _upload(tenant_a.admin_client, json.dumps(world(entries)).encode(), profile="server", title="Long")
    assert response.status_code == 201, response.json()
    receipt = response.json()["receipt"]
    assert receipt["added"] == 12 and receipt["skipped_count"] == 1
    (skipped,) = receipt["skipped"]
    assert skipped["index"] == 5 and "7,091" in skipped["reason"] and "S-3" in skipped["reason"]
    book = Book.objects.for_tenant(tenant_a.tenant).get(pk=response.json()["book"]["id"])
    assert book.scope == Scope.SERVER and len(entry_rows(book)) == 12


def test_the_250_entry_cap_stays_all_or_nothing(tenant_a):
    response = _upload(
        tenant_a.admin_client, json.dumps(world([st_entry(i) for i in range(251)])).encode(), profile="server"
    )
    assert _error(response, 422)["rule"] == "S-14"
    assert not Book.objects.for_tenant(tenant_a.tenant).exists()


def test_library_export_permission_matrix(tenant_a, tenant_b, anon_client):
    """Anonymous, other tenant, member, admin, read-only key: all read; a bad key is 401, never anonymous."""
    from rest_framework.test import APIClient

    book = shared_book(tenant_a)
    path = f"/api/v1/library/books/{book.pk}/export"
    for client in (anon_client, tenant_b.member_client, tenant_b.read_client, tenant_a.admin_client, tenant_a.read_client):
        assert _export(client, path).status_code == 200
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Api-Key lw_nope_nope")
    assert _export(bad, path).status_code == 401
    # The book's own endpoint: a read-only key of a reader exports too (exporting is a read).
    assert _export(tenant_a.read_client, f"/api/v1/books/{book.pk}/export").status_code == 200
    assert _export(anon_client, f"/api/v1/books/{book.pk}/export").status_code == 401
