"""The issue's "done when", end to end through the API, on both databases.

A public book with ≥10 entries appears in another tenant's library search, is
copied and attached there, is translated for display into a second language,
and retrieval for the attaching chat still uses the original; publishing with
9 entries is refused with a clear error; every denial changes nothing.
"""
from __future__ import annotations

import pytest

from books.models import Book, Entry
from sharing.models import BookTranslation, BookVector
from tests.sharing.helpers import world
from tests.sharing.test_translation_pipeline import shortest_sentence_pair

pytestmark = pytest.mark.django_db

CLASSIC = {"tokenizer": "ceil-chars-4", "input_window": 8192}


def _ok(response, status=200):
    assert response.status_code == status, response.content
    return response.json()


def test_done_when(tenant_a, tenant_b, anon_client, toy_package, xling, django_capture_on_commit_callbacks):
    items = xling["entries"]
    owner, other = tenant_a.member_client, tenant_b.admin_client

    # Tenant A writes an English book of 9 entries; each has a trigger key.
    title_en, title_es = shortest_sentence_pair(items[11])
    book = _ok(owner.post("/api/v1/books", {
        "title": title_en, "description": items[15]["text_en"], "language": "en", "profile": "classic",
        "tags": ["fantasy", "places"],
    }, format="json"), 201)
    book_id = book["id"]
    expected_entries = []
    for i in range(10):
        entry_title_en, entry_title_es = shortest_sentence_pair(items[i + 10])
        key = items[i]["title"].split()[0].lower()
        body = {"title": entry_title_en, "content": items[i]["text_en"], "keys": [key]}
        expected_entries.append({"title": entry_title_es, "content": items[i]["text_es"]})
        if i == 9:
            break
        _ok(owner.post(f"/api/v1/books/{book_id}/entries", body, format="json"), 201)

    # Publishing with 9 entries is refused with a clear error, and nothing changes.
    before = world(tenant_a, tenant_b)
    refused = owner.post(f"/api/v1/books/{book_id}/visibility", {"visibility": "public"}, format="json")
    assert refused.status_code == 422
    assert refused.json()["error"]["message"].startswith("Publishing needs at least 10 entries; this book has 9.")
    assert world(tenant_a, tenant_b) == before

    # The 10th entry, then publishing works; after commit the book is embedded and translated.
    _ok(owner.post(f"/api/v1/books/{book_id}/entries", body, format="json"), 201)
    with django_capture_on_commit_callbacks(execute=True):
        published = _ok(owner.post(f"/api/v1/books/{book_id}/visibility", {"visibility": "public"}, format="json"))
    assert published["visibility"] == "public" and published["entry_count"] == 10
    assert BookVector.objects.for_tenant(tenant_a.tenant).filter(book_id=book_id).exists()
    assert BookTranslation.objects.for_tenant(tenant_a.tenant).get(book_id=book_id).status == "ready"

    # Tenant B finds it in the library, by words and by meaning (a Spanish query).
    by_words = _ok(other.get("/api/v1/library/books", {"q": "moon"}))["results"]
    assert [b["id"] for b in by_words] == [book_id]
    by_meaning = _ok(other.get("/api/v1/library/books", {"q": "un manantial sagrado que cura heridas", "mode": "meaning"}))
    assert [b["id"] for b in by_meaning["results"]] == [book_id]
    assert [b["id"] for b in _ok(other.get("/api/v1/library/books", {"tag": "Places"}))["results"]] == [book_id]

    # Tenant B copies it: a private duplicate in B with its provenance; the source counts the copy.
    copied = _ok(other.post("/api/v1/library/copies", {"book_id": book_id}, format="json"), 201)
    copy = Book.objects.for_tenant(tenant_b.tenant).get(pk=copied["book"]["id"])
    assert copy.visibility == "private" and copied["source"] == {
        "book_id": book_id, "title": title_en, "version": published["version"], "copied_at": copied["source"]["copied_at"]
    }
    assert Entry.objects.for_tenant(tenant_b.tenant).filter(book=copy).count() == 10
    assert _ok(anon_client.get(f"/api/v1/library/books/{book_id}"))["copy_count"] == 1

    # Tenant B attaches the public book to a character and chats.
    character = _ok(other.post("/api/v1/characters", {"name": "Kael"}, format="json"), 201)["id"]
    _ok(other.post("/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book_id},
                   format="json"), 201)
    chat = _ok(other.post("/api/v1/chats", {"kind": "character", "character_id": character, "profile": "classic"},
                          format="json"), 201)["id"]
    assert _ok(anon_client.get(f"/api/v1/library/books/{book_id}"))["attach_count"] == 1

    # Translated for display into Spanish, exactly...
    page = _ok(other.get(f"/api/v1/library/books/{book_id}", {"lang": "es"}))
    assert (page["title"], page["description"], page["display"]["status"]) == (title_es, items[15]["text_es"], "ready")
    entries = _ok(other.get(f"/api/v1/library/books/{book_id}/entries", {"lang": "es"}))["results"]
    assert [{"title": e["title"], "content": e["content"]} for e in entries] == expected_entries

    # ...while retrieval for the attaching chat uses the original English text.
    turn = {"messages": [{"role": "user", "text": "Tell me about Frostmere and Kaelen."}], "model": CLASSIC}
    context = _ok(other.post(f"/api/v1/chats/{chat}/context", turn, format="json"))
    injected = sorted(i["content"] for i in context["injections"])
    assert injected == sorted([items[5]["text_en"], items[6]["text_en"]])
    assert not any(i["content"] in (items[5]["text_es"], items[6]["text_es"]) for i in context["injections"])

    # Denials change nothing: B cannot edit, unpublish or rotate A's book.
    before = world(tenant_a, tenant_b)
    assert other.patch(f"/api/v1/books/{book_id}", {"title": "Mine"}, format="json").status_code == 404
    assert other.post(f"/api/v1/books/{book_id}/visibility", {"visibility": "private"}, format="json").status_code == 404
    assert other.post(f"/api/v1/books/{book_id}/link/rotate").status_code == 404
    assert anon_client.post("/api/v1/library/copies", {"book_id": book_id}, format="json").status_code == 401
    assert tenant_b.read_client.post("/api/v1/library/copies", {"book_id": book_id}, format="json").status_code == 403
    assert world(tenant_a, tenant_b) == before

    # The owner makes it private again: B's chat stops receiving it, and says why.
    _ok(owner.post(f"/api/v1/books/{book_id}/visibility", {"visibility": "private"}, format="json"))
    context = _ok(other.post(f"/api/v1/chats/{chat}/context", turn, format="json"))
    assert context["injections"] == []
    assert [(b["id"], b["reason"]) for b in context["books_left_out"]] == [(book_id, "the owner made this book private")]
    assert anon_client.get(f"/api/v1/library/books/{book_id}").status_code == 404
    # B's copy is B's own: unaffected.
    assert Entry.objects.for_tenant(tenant_b.tenant).filter(book=copy).count() == 10
