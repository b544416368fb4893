"""Safe retries (issue 27, point 3): ``Idempotency-Key`` on POSTs, stored per key and tenant for 24 h."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from books.models import Entry
from cast.models import RequestLog
from lore_platform.tenancy import idempotency
from lore_platform.tenancy.models import IdempotencyKey
from lore_platform.tenancy.selectors import idempotency_keys_prune
from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db


def _entries(setup, book) -> int:
    return Entry.objects.for_tenant(setup.tenant).filter(book=book).count()


def test_the_same_post_twice_with_a_key_makes_one_entry_and_says_it_replayed(tenant_a):
    book = make_book(tenant_a)
    client = tenant_a.member_client
    url = f"/api/v1/books/{book.pk}/entries"
    body = {"title": "Varn", "content": "The river city.", "keys": ["varn"]}
    first = client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="retry-1")
    again = client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="retry-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert again["ETag"] == first["ETag"] and again["Content-Type"] == first["Content-Type"]
    assert _entries(tenant_a, book) == 1
    # Without a key, a second POST is a second entry (nothing changes for clients that do not send one).
    client.post(url, body, format="json")
    assert _entries(tenant_a, book) == 2


def test_the_same_key_with_another_body_is_422_and_runs_nothing(tenant_a):
    book = make_book(tenant_a)
    client = tenant_a.member_client
    url = f"/api/v1/books/{book.pk}/entries"
    client.post(url, {"title": "Varn"}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    reused = client.post(url, {"title": "Kael"}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert reused.status_code == 422
    error = reused.json()["error"]
    assert (error["code"], error["field"]) == ("idempotency_key_reused", "Idempotency-Key")
    assert _entries(tenant_a, book) == 1


def test_keys_are_per_tenant(tenant_a, tenant_b):
    mine, theirs = make_book(tenant_a), make_book(tenant_b)
    body = {"title": "Varn"}
    a = tenant_a.member_client.post(f"/api/v1/books/{mine.pk}/entries", body, format="json", HTTP_IDEMPOTENCY_KEY="same")
    b = tenant_b.member_client.post(f"/api/v1/books/{theirs.pk}/entries", body, format="json",
                                    HTTP_IDEMPOTENCY_KEY="same")
    assert a.status_code == b.status_code == 201 and "Idempotent-Replayed" not in b
    assert _entries(tenant_b, theirs) == 1


def test_a_request_still_running_with_the_key_is_409(tenant_a):
    book = make_book(tenant_a)
    url = f"/api/v1/books/{book.pk}/entries"
    body = b'{"title": "Varn"}'
    # The first request has claimed the key and not answered yet.
    idempotency.claim(tenant=tenant_a.tenant, key="busy", method="POST", path=url, body=body)
    busy = tenant_a.member_client.post(url, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="busy")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "idempotency_key_in_flight"
    assert _entries(tenant_a, book) == 0


def test_a_refusal_is_replayed_and_a_bad_key_is_400(tenant_a):
    book = make_book(tenant_a)
    url = f"/api/v1/books/{book.pk}/entries"
    first = tenant_a.member_client.post(url, {"role": "narrator"}, format="json", HTTP_IDEMPOTENCY_KEY="r")
    again = tenant_a.member_client.post(url, {"role": "narrator"}, format="json", HTTP_IDEMPOTENCY_KEY="r")
    assert first.status_code == again.status_code == 400 and again["Idempotent-Replayed"] == "true"
    bad = tenant_a.member_client.post(url, {"title": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="x" * 256)
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "Idempotency-Key"
    assert _entries(tenant_a, book) == 0


def test_keys_expire_after_24_hours(tenant_a):
    book = make_book(tenant_a)
    url = f"/api/v1/books/{book.pk}/entries"
    tenant_a.member_client.post(url, {"title": "Varn"}, format="json", HTTP_IDEMPOTENCY_KEY="old")
    rows = IdempotencyKey.objects.for_tenant(tenant_a.tenant)
    assert rows.count() == 1
    later = timezone.now() + timedelta(hours=24, seconds=1)
    assert idempotency_keys_prune(now=timezone.now()) == 0
    assert idempotency_keys_prune(now=later) == 1
    assert rows.count() == 0
    again = tenant_a.member_client.post(url, {"title": "Varn"}, format="json", HTTP_IDEMPOTENCY_KEY="old")
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
    assert _entries(tenant_a, book) == 2


def _turn_setup(setup):
    book = make_book(setup, owner="admin", title="Coast")
    entry = make_entry(book, keys=["lighthouse"], content="The lighthouse never goes dark.")
    client = setup.admin_client
    character = client.post("/api/v1/characters", {"name": "Kael", "lineage_key": "Kael"}, format="json").json()["id"]
    client.post("/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book.pk},
                format="json")
    chat = client.post("/api/v1/chats", {"kind": "character", "character_id": character, "profile": "classic"},
                       format="json").json()["id"]
    return book, entry, chat


def test_a_retried_context_turn_is_neither_logged_nor_counted_twice(tenant_a, django_capture_on_commit_callbacks):
    _, entry, chat = _turn_setup(tenant_a)
    body = {"messages": [{"role": "user", "name": "Ana", "text": "We row toward the lighthouse."}],
            "model": {"tokenizer": "ceil-chars-4", "input_window": 8192}}
    url = f"/api/v1/chats/{chat}/context"
    with django_capture_on_commit_callbacks(execute=True):
        first = tenant_a.admin_client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="turn-7")
    with django_capture_on_commit_callbacks(execute=True):
        retry = tenant_a.admin_client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="turn-7")
    assert first.status_code == retry.status_code == 200
    assert retry.json() == first.json() and retry["Idempotent-Replayed"] == "true"
    assert RequestLog.objects.for_tenant(tenant_a.tenant).filter(chat_id=chat).count() == 1
    entry.refresh_from_db()
    assert entry.usage_count == 1


def test_a_retried_stateless_context_call_is_replayed(tenant_a, django_capture_on_commit_callbacks):
    book, entry, _ = _turn_setup(tenant_a)
    body = {"messages": [{"role": "user", "name": "Ana", "text": "The lighthouse."}], "book_ids": [book.pk],
            "model": {"tokenizer": "ceil-chars-4", "input_window": 8192}}
    with django_capture_on_commit_callbacks(execute=True):
        first = tenant_a.admin_client.post("/api/v1/context", body, format="json", HTTP_IDEMPOTENCY_KEY="s-1")
    logs = RequestLog.objects.for_tenant(tenant_a.tenant).count()
    entry.refresh_from_db()
    used = entry.usage_count
    with django_capture_on_commit_callbacks(execute=True):
        retry = tenant_a.admin_client.post("/api/v1/context", body, format="json", HTTP_IDEMPOTENCY_KEY="s-1")
    assert first.status_code == retry.status_code == 200 and retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert RequestLog.objects.for_tenant(tenant_a.tenant).count() == logs
    entry.refresh_from_db()
    assert entry.usage_count == used


def test_a_retried_upload_is_replayed_though_its_multipart_boundary_changed(tenant_a):
    from django.test.client import encode_multipart

    from books.models import Book
    from tests.books.formats.builders import world_bytes

    def upload(boundary: str):
        import io

        data = io.BytesIO(world_bytes(2))
        data.name = "lore.json"
        body = encode_multipart(boundary, {"file": data, "title": "Imported"})
        return tenant_a.member_client.generic("POST", "/api/v1/books/import", body,
                                              content_type=f"multipart/form-data; boundary={boundary}",
                                              HTTP_IDEMPOTENCY_KEY="upload-1")

    first, retry = upload("firstBoundary1234"), upload("otherBoundary5678")
    assert first.status_code == retry.status_code == 201, first.content[:300]
    assert retry["Idempotent-Replayed"] == "true" and retry.json() == first.json()
    assert Book.objects.for_tenant(tenant_a.tenant).filter(title="Imported").count() == 1
