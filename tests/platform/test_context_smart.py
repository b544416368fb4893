"""The smart profile through the context API, with the real embedding model (W-1..W-8)."""
from __future__ import annotations

import json

import pytest

from books.models import Entry, IndexingState
from books.services import book_create, entries_create_bulk
from tests.books.factories import admin_actor
from tests.shared_data import require_shared

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def xling():
    return json.loads(require_shared("recipes", "xling-eval.json").read_text(encoding="utf-8"))


def _smart_chat(setup, book):
    client = setup.admin_client
    character = client.post("/api/v1/characters", {"name": "Mirelda"}, format="json").json()["id"]
    client.post("/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book.pk},
                format="json")
    return client.post("/api/v1/chats", {"kind": "character", "character_id": character, "profile": "smart"},
                       format="json").json()["id"]


def _world(setup, xling, django_capture_on_commit_callbacks):
    actor = admin_actor(setup)
    book = book_create(actor=actor, title="Fantasy world", profile="smart")
    canon = {"title": "World frame", "content": "A world of ash, salt and old gods; magic costs memory.",
             "canon": True}
    rows = [canon] + [{"title": e["title"], "content": e["text_en"]} for e in xling["entries"]]
    with django_capture_on_commit_callbacks(execute=True):
        entries_create_bulk(actor=actor, book=book, entries=rows)
    return book


def test_entries_are_indexed_after_commit_and_meaning_finds_them_across_languages(
    tenant_a, xling, django_capture_on_commit_callbacks
):
    book = _world(tenant_a, xling, django_capture_on_commit_callbacks)
    states = set(Entry.objects.for_tenant(tenant_a.tenant).filter(book=book).values_list("indexing_state", flat=True))
    assert states == {IndexingState.INDEXED}
    chat = _smart_chat(tenant_a, book)
    titles = {e["id"]: e["title"] for e in xling["entries"]}
    hits = 0
    for query in xling["queries"][:6]:
        body = tenant_a.admin_client.post(
            f"/api/v1/chats/{chat}/context",
            {"messages": [{"role": "user", "text": query["query_es"]}],
             "model": {"tokenizer": "ceil-chars-4", "input_window": 3000}},
            format="json",
        ).json()
        slots = {i["slot"] for i in body["injections"]}
        assert "canon" in slots and "relevant" not in slots  # a big book: matched, not sent whole
        matched = [i for i in body["injections"] if i["slot"] == "matched"]
        assert len(matched) <= 5
        matched_titles = {
            Entry.objects.for_tenant(tenant_a.tenant).get(pk=int(i["entry"])).title for i in matched
        }
        hits += titles[query["target"]] in matched_titles
        assert any("meaning" in row["detail"] for row in body["request_log"] if row["outcome"] == "injected")
    assert hits >= 5


def test_small_world_book_travels_whole_and_is_cache_stable(tenant_a, xling, django_capture_on_commit_callbacks):
    book = _world(tenant_a, xling, django_capture_on_commit_callbacks)
    chat = _smart_chat(tenant_a, book)
    body = tenant_a.admin_client.post(
        f"/api/v1/chats/{chat}/context",
        {"messages": [{"role": "user", "text": "Hello."}], "model": {"id": "gpt-4o"}, "render": True},
        format="json",
    ).json()
    relevant = [i for i in body["injections"] if i["slot"] == "relevant"]
    assert len(relevant) == len(xling["entries"])
    assert all(i["cache_stable"] for i in relevant)
    # Rendered: canon and the whole book come before the history (a cacheable prefix).
    slots = [m["slot"] for m in body["messages"]]
    assert slots.index("canon") < slots.index("relevant") < slots.index("history")


def test_world_index_comes_with_the_lookup_tool_and_the_tool_serves_full_text(
    tenant_a, xling, django_capture_on_commit_callbacks
):
    book = _world(tenant_a, xling, django_capture_on_commit_callbacks)
    chat = _smart_chat(tenant_a, book)
    request = {"messages": [{"role": "user", "text": "Tell me about this world."}],
               "model": {"tokenizer": "ceil-chars-4", "input_window": 2000, "tools": True}}
    body = tenant_a.admin_client.post(f"/api/v1/chats/{chat}/context", request, format="json").json()
    assert body["world_index"], "a big book leaves topics in the world index"
    assert body["tools"][0]["function"]["name"] == "lore_lookup"
    topic = body["world_index"][0]["entry"]
    lore = tenant_a.admin_client.get(f"/api/v1/chats/{chat}/lore/{topic}").json()
    assert lore["content"] == Entry.objects.for_tenant(tenant_a.tenant).get(pk=int(topic)).content

    without_tools = tenant_a.admin_client.post(
        f"/api/v1/chats/{chat}/context", {**request, "model": {**request["model"], "tools": False}}, format="json"
    ).json()
    assert without_tools["tools"] == [] and without_tools["world_index"]

    # Disabled entries are never fetchable (W-6).
    from books.services import entries_bulk_set_enabled

    entries_bulk_set_enabled(actor=admin_actor(tenant_a), book=book, entry_ids=[int(topic)], enabled=False)
    assert tenant_a.admin_client.get(f"/api/v1/chats/{chat}/lore/{topic}").status_code == 404
    # Another tenant cannot use the lookup.
    assert tenant_a.client(None).get(f"/api/v1/chats/{chat}/lore/{topic}").status_code == 401


def test_a_classic_book_is_indexed_at_import_and_a_smart_turn_embeds_only_its_messages(
    tenant_a, xling, monkeypatch, django_capture_on_commit_callbacks
):
    """Issue 14 §13: states mean what they say for every book, and no entry is embedded on the turn."""
    import io

    from retrieval.adapter.embedders import embedder_get

    doc = {"entries": {str(i): {"uid": i, "key": [e["title"]], "comment": e["title"], "content": e["text_en"]}
                       for i, e in enumerate(xling["entries"])}}
    upload = io.BytesIO(json.dumps(doc).encode())
    upload.name = "keywords.json"
    with django_capture_on_commit_callbacks(execute=True):
        response = tenant_a.admin_client.post(
            "/api/v1/books/import", {"file": upload, "profile": "classic"}, format="multipart"
        )
    assert response.status_code == 201, response.json()
    book_id = response.json()["book"]["id"]
    rows = tenant_a.admin_client.get(f"/api/v1/books/{book_id}/entries", {"page_size": 200}).json()["results"]
    assert {row["indexing_state"] for row in rows} == {"indexed"}

    from books.models import Book

    chat = _smart_chat(tenant_a, Book.objects.for_tenant(tenant_a.tenant).get(pk=book_id))
    embedder = embedder_get()
    passages: list[str] = []
    real = embedder.embed_passages
    monkeypatch.setattr(embedder, "embed_passages", lambda texts: passages.extend(texts) or real(texts))
    query = xling["queries"][0]
    body = tenant_a.admin_client.post(
        f"/api/v1/chats/{chat}/context",
        {"messages": [{"role": "user", "text": query["query_es"]}],
         "model": {"tokenizer": "ceil-chars-4", "input_window": 3000}},
        format="json",
    ).json()
    assert passages == []  # the turn embedded its messages only
    assert any("meaning" in row["detail"] for row in body["request_log"] if row["outcome"] == "injected")


def test_a_disabled_entry_says_it_is_not_indexed_and_comes_back_when_enabled(
    tenant_a, xling, django_capture_on_commit_callbacks
):
    """Issue 14: indexing states mean what they say — a disabled entry has no vector on purpose (W-6)."""
    book = _world(tenant_a, xling, django_capture_on_commit_callbacks)
    entry = Entry.objects.for_tenant(tenant_a.tenant).filter(book=book).order_by("pk").last()
    client = tenant_a.admin_client
    url = f"/api/v1/books/{book.pk}/entries/{entry.pk}"
    with django_capture_on_commit_callbacks(execute=True):
        assert client.patch(url, {"enabled": False}, format="json").status_code == 200
    assert client.get(url).json()["indexing_state"] == "disabled"
    with django_capture_on_commit_callbacks(execute=True):
        assert client.patch(url, {"enabled": True}, format="json").status_code == 200
    assert client.get(url).json()["indexing_state"] == "indexed"
