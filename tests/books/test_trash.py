"""Deleting a book moves it to the trash: gone everywhere, restorable for 30 days, then purged (issue 28)."""
from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from books.models import Book, Entry
from books.services import book_restore, book_trash, books_trash_purge
from tests.books.factories import make_book, make_entry
from tests.sharing.helpers import owner_actor, shared_book

pytestmark = pytest.mark.django_db

CLASSIC = {"tokenizer": "ceil-chars-4", "input_window": 8192}


def _titles(client, path: str) -> list[str]:
    response = client.get(path)
    assert response.status_code == 200, response.content
    return [b["title"] for b in response.json()["results"]]


def test_delete_moves_to_the_trash_and_restore_brings_it_back_whole(tenant_a):
    client = tenant_a.member_client
    book = make_book(tenant_a, title="Varn")
    make_entry(book, title="Lighthouse", keys=["lighthouse"], content="The lighthouse of Varn never goes dark.")

    assert client.delete(f"/api/v1/books/{book.pk}").status_code == 204
    assert client.get(f"/api/v1/books/{book.pk}").status_code == 404
    assert "Varn" not in _titles(client, "/api/v1/books")
    assert client.get(f"/api/v1/books/{book.pk}/entries").status_code == 404
    trash = client.get("/api/v1/books/trash").json()["results"]
    assert [(b["id"], b["title"]) for b in trash] == [(book.pk, "Varn")]
    assert trash[0]["purge_at"] > trash[0]["trashed_at"]

    restored = client.post(f"/api/v1/books/{book.pk}/restore")
    assert restored.status_code == 200, restored.content
    assert (restored.json()["title"], restored.json()["entry_count"]) == ("Varn", 1)
    assert "Varn" in _titles(client, "/api/v1/books")
    assert client.get("/api/v1/books/trash").json()["results"] == []
    # Not in the trash any more: restoring again is 404.
    assert client.post(f"/api/v1/books/{book.pk}/restore").status_code == 404


def test_only_who_may_edit_trashes_and_restores(tenant_a, tenant_b):
    book = make_book(tenant_a, title="Mine")
    # Another tenant: 404 both ways; a read-only key: refused.
    assert tenant_b.admin_client.delete(f"/api/v1/books/{book.pk}").status_code == 404
    assert tenant_a.member_client.delete(f"/api/v1/books/{book.pk}").status_code == 204
    assert tenant_b.admin_client.post(f"/api/v1/books/{book.pk}/restore").status_code == 404
    assert tenant_b.admin_client.get("/api/v1/books/trash").json()["results"] == []
    # The tenant admin cannot see or restore a member's private book from the trash.
    assert tenant_a.admin_client.get("/api/v1/books/trash").json()["results"] == []
    assert tenant_a.admin_client.post(f"/api/v1/books/{book.pk}/restore").status_code == 404
    assert Book.with_trashed.for_tenant(tenant_a.tenant).get(pk=book.pk).trashed_at is not None


def test_a_public_book_leaves_the_library_and_comes_back_private_under_ten_entries(tenant_a, tenant_b):
    book = shared_book(tenant_a, title="The Salt Coast", entries=10)
    assert "The Salt Coast" in _titles(tenant_b.admin_client, "/api/v1/library/books")
    book_trash(actor=owner_actor(tenant_a), book=book)
    assert "The Salt Coast" not in _titles(tenant_b.admin_client, "/api/v1/library/books")
    assert tenant_b.admin_client.get(f"/api/v1/library/books/{book.pk}").status_code == 404

    # Ten entries: it comes back public, listed again.
    book_restore(actor=owner_actor(tenant_a), book_id=book.pk)
    assert "The Salt Coast" in _titles(tenant_b.admin_client, "/api/v1/library/books")

    # Published when the rule allowed it, now under ten: restored, but not public (P-1).
    book_trash(actor=owner_actor(tenant_a), book=book)
    Entry.objects.for_tenant(tenant_a.tenant).filter(book_id=book.pk).order_by("id").first().delete()
    restored = tenant_a.member_client.post(f"/api/v1/books/{book.pk}/restore").json()
    assert restored["visibility"] == "private"
    assert "The Salt Coast" not in _titles(tenant_b.admin_client, "/api/v1/library/books")


def test_a_trashed_book_leaves_every_turn_and_returns_when_restored(tenant_a):
    client = tenant_a.admin_client
    book = make_book(tenant_a, owner="admin", title="Varn")
    make_entry(book, keys=["lighthouse"], content="The lighthouse of Varn never goes dark.")
    character = client.post("/api/v1/characters", {"name": "Kael"}, format="json").json()["id"]
    attached = client.post(
        "/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book.pk}, format="json"
    )
    assert attached.status_code == 201, attached.content
    chat = client.post(
        "/api/v1/chats", {"kind": "character", "character_id": character, "profile": "classic"}, format="json"
    ).json()["id"]

    def lore() -> list[str]:
        body = {"messages": [{"role": "user", "name": "Ana", "text": "We row toward the lighthouse."}],
                "model": CLASSIC}
        response = client.post(f"/api/v1/chats/{chat}/context", body, format="json")
        assert response.status_code == 200, response.content
        return [i["content"] for i in response.json()["injections"]]

    assert lore() == ["The lighthouse of Varn never goes dark."]
    assert client.delete(f"/api/v1/books/{book.pk}").status_code == 204
    assert lore() == []
    assert client.post(f"/api/v1/books/{book.pk}/restore").status_code == 200
    assert lore() == ["The lighthouse of Varn never goes dark."]


def test_purge_deletes_only_books_trashed_more_than_30_days_ago(tenant_a):
    actor = owner_actor(tenant_a)
    old = make_book(tenant_a, title="Old")
    make_entry(old)
    recent = make_book(tenant_a, title="Recent")
    now = timezone.now()
    book_trash(actor=actor, book=old, now=now - timedelta(days=31))
    book_trash(actor=actor, book=recent, now=now - timedelta(days=29))

    # Past the keeping time it is no longer restorable, even before the purge runs.
    assert tenant_a.member_client.post(f"/api/v1/books/{old.pk}/restore").status_code == 404
    assert [b["title"] for b in tenant_a.member_client.get("/api/v1/books/trash").json()["results"]] == ["Recent"]

    assert books_trash_purge(tenant_a.tenant, now=now) == 1
    left = set(Book.with_trashed.for_tenant(tenant_a.tenant).values_list("title", flat=True))
    assert left == {"Recent"}
    assert not Entry.objects.for_tenant(tenant_a.tenant).filter(book_id=old.pk).exists()

    out = StringIO()
    call_command("books_trash_purge", stdout=out)
    assert "Purged 0" in out.getvalue()


def test_a_persona_lineage_whose_book_is_in_the_trash_is_told_to_restore_it(tenant_a):
    from books.lineages import lineage_get_or_create
    from books.services import book_create
    from tests.books.factories import admin_actor

    actor = admin_actor(tenant_a)
    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="Ilsa by Ana")
    book = book_create(actor=actor, title="Ilsa's lore", profile="server", scope="persona", lineage=lineage)
    book_trash(actor=actor, book=book)
    with pytest.raises(Exception) as refused:
        book_create(actor=actor, title="Again", profile="server", scope="persona", lineage=lineage)
    assert "in the trash" in str(refused.value) and getattr(refused.value, "status", None) == 409
