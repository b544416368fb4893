"""No lost updates (issue 27, point 2): ETags on books and entries, If-Match → 412 when stale, 428 when
the tenant requires it, If-None-Match → 304; the entry page's two-tab edit is told, nothing overwritten."""
from __future__ import annotations

import pytest

from books.models import Book, Entry
from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db


def _entry_url(entry: Entry) -> str:
    return f"/api/v1/books/{entry.book_id}/entries/{entry.pk}"


def test_stale_if_match_on_an_entry_is_412_and_nothing_changes(tenant_a):
    entry = make_entry(make_book(tenant_a), title="Varn", content="first")
    client = tenant_a.member_client
    read = client.get(_entry_url(entry))
    tag = read["ETag"]
    assert tag.startswith(f'"entry-{entry.pk}-')
    # Another client changes it first, with the tag it read: accepted, a new tag.
    first = client.patch(_entry_url(entry), {"content": "theirs"}, format="json", HTTP_IF_MATCH=tag)
    assert first.status_code == 200 and first["ETag"] != tag
    # The stale writer is refused, naming the resource and its current tag.
    stale = client.patch(_entry_url(entry), {"content": "mine"}, format="json", HTTP_IF_MATCH=tag)
    assert stale.status_code == 412
    error = stale.json()["error"]
    assert error["code"] == "precondition_failed"
    assert error["details"] == {"resource": "entry", "id": entry.pk, "etag": first["ETag"]}
    entry.refresh_from_db()
    assert entry.content == "theirs"
    # A tag that was never issued is stale too (the issue's `If-Match: bogus` answered 200).
    bogus = client.patch(_entry_url(entry), {"content": "mine"}, format="json", HTTP_IF_MATCH="bogus")
    assert bogus.status_code == 412
    entry.refresh_from_db()
    assert entry.content == "theirs"


def test_stale_delete_is_412_and_current_delete_works(tenant_a):
    entry = make_entry(make_book(tenant_a))
    client = tenant_a.member_client
    tag = client.get(_entry_url(entry))["ETag"]
    client.patch(_entry_url(entry), {"title": "moved on"}, format="json")
    assert client.delete(_entry_url(entry), HTTP_IF_MATCH=tag).status_code == 412
    assert Entry.objects.for_tenant(tenant_a.tenant).filter(pk=entry.pk).exists()
    current = client.get(_entry_url(entry))["ETag"]
    assert client.delete(_entry_url(entry), HTTP_IF_MATCH=current).status_code == 204


def test_book_if_match_is_its_version(tenant_a):
    book = make_book(tenant_a, title="Old")
    client = tenant_a.member_client
    read = client.get(f"/api/v1/books/{book.pk}")
    assert read["ETag"] == f'"book-{book.pk}-{read.json()["version"]}"'
    ok = client.patch(f"/api/v1/books/{book.pk}", {"title": "New"}, format="json", HTTP_IF_MATCH=read["ETag"])
    assert ok.status_code == 200
    assert ok["ETag"] == f'"book-{book.pk}-{ok.json()["version"]}"' != read["ETag"]
    stale = client.patch(f"/api/v1/books/{book.pk}", {"title": "Lost"}, format="json", HTTP_IF_MATCH=read["ETag"])
    assert stale.status_code == 412 and stale.json()["error"]["details"]["etag"] == ok["ETag"]
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).title == "New"
    assert client.delete(f"/api/v1/books/{book.pk}", HTTP_IF_MATCH=read["ETag"]).status_code == 412
    # "*" matches any current version (RFC 9110): the resource exists.
    assert client.patch(f"/api/v1/books/{book.pk}", {"title": "Star"}, format="json",
                        HTTP_IF_MATCH="*").status_code == 200


def test_if_none_match_answers_304(tenant_a):
    entry = make_entry(make_book(tenant_a))
    client = tenant_a.member_client
    tag = client.get(_entry_url(entry))["ETag"]
    again = client.get(_entry_url(entry), HTTP_IF_NONE_MATCH=tag)
    assert again.status_code == 304 and again["ETag"] == tag and not again.content
    client.patch(_entry_url(entry), {"title": "changed"}, format="json")
    assert client.get(_entry_url(entry), HTTP_IF_NONE_MATCH=tag).status_code == 200
    book_tag = client.get(f"/api/v1/books/{entry.book_id}")["ETag"]
    assert client.get(f"/api/v1/books/{entry.book_id}", HTTP_IF_NONE_MATCH=book_tag).status_code == 304


def test_a_tenant_may_require_if_match(tenant_a):
    entry = make_entry(make_book(tenant_a), content="kept")
    admin = tenant_a.admin_client
    assert admin.get("/api/v1/tenant/preconditions").json() == {"require_if_match": False}
    turned = admin.put("/api/v1/tenant/preconditions", {"require_if_match": True}, format="json")
    assert turned.status_code == 200 and turned.json() == {"require_if_match": True}
    client = tenant_a.member_client
    missing = client.patch(_entry_url(entry), {"content": "blind"}, format="json")
    assert missing.status_code == 428 and missing.json()["error"]["code"] == "precondition_required"
    assert client.delete(_entry_url(entry)).status_code == 428
    entry.refresh_from_db()
    assert entry.content == "kept"
    tag = client.get(_entry_url(entry))["ETag"]
    assert client.patch(_entry_url(entry), {"content": "seen"}, format="json", HTTP_IF_MATCH=tag).status_code == 200
    refused = admin.put("/api/v1/tenant/preconditions", {"require_if_match": "yes"}, format="json", HTTP_IF_MATCH="*")
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "require_if_match"


def test_the_schema_says_etag_if_match_and_idempotency_key():
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    patch = paths["/api/v1/books/{book_id}/entries/{id}"]["patch"]
    assert "If-Match" in {p["name"] for p in patch["parameters"] if p["in"] == "header"}
    assert {"412", "428"} <= set(patch["responses"]) and "ETag" in patch["responses"]["200"]["headers"]
    read = paths["/api/v1/books/{id}"]["get"]
    assert "If-None-Match" in {p["name"] for p in read["parameters"]} and "304" in read["responses"]
    assert "412" in paths["/api/v1/books/{id}"]["delete"]["responses"]
    # Every authenticated POST takes an Idempotency-Key and says when an answer is a replay.
    posts = [ops["post"] for ops in paths.values() if "post" in ops and ops["post"].get("security") != [{}]]
    assert posts and all(
        "Idempotency-Key" in {p["name"] for p in op.get("parameters", []) if p["in"] == "header"} for op in posts
    )
    created = paths["/api/v1/books/{book_id}/entries"]["post"]["responses"]["201"]["headers"]
    assert {"ETag", "Idempotent-Replayed"} <= set(created)


def test_tenant_settings_carry_etags_and_refuse_a_stale_put(tenant_a):
    admin = tenant_a.admin_client
    read = admin.get("/api/v1/tenant/cors")
    tag = read["ETag"]
    assert tag.startswith(f'"cors-{tenant_a.tenant.pk}-')
    assert admin.get("/api/v1/tenant/cors", HTTP_IF_NONE_MATCH=tag).status_code == 304
    first = admin.put("/api/v1/tenant/cors", {"origins": ["https://one.example"]}, format="json", HTTP_IF_MATCH=tag)
    assert first.status_code == 200 and first["ETag"] != tag
    stale = admin.put("/api/v1/tenant/cors", {"origins": ["https://two.example"]}, format="json", HTTP_IF_MATCH=tag)
    assert stale.status_code == 412 and stale.json()["error"]["details"]["etag"] == first["ETag"]
    assert admin.get("/api/v1/tenant/cors").json() == {"origins": ["https://one.example"]}

    setting = admin.get("/api/v1/tenant/preconditions")["ETag"]
    admin.put("/api/v1/tenant/preconditions", {"require_if_match": True}, format="json", HTTP_IF_MATCH=setting)
    assert admin.put("/api/v1/tenant/preconditions", {"require_if_match": False}, format="json",
                     HTTP_IF_MATCH=setting).status_code == 412
    # Required now: a PUT of a setting without If-Match is 428 as well.
    assert admin.put("/api/v1/tenant/cors", {"origins": []}, format="json").status_code == 428
