"""Cross-tenant attach (W-9): who may attach what, and what stops being injected."""
from __future__ import annotations

import pytest

from lore_platform.errors import NotFound, ValidationFailed
from sharing.selectors import PRIVATE_AGAIN_REASON, book_for_attach, book_injectable_for
from sharing.services import book_link_rotate, book_visibility_set
from tests.books.factories import make_entry
from tests.sharing.helpers import admin_actor, owner_actor, shared_book, world

pytestmark = pytest.mark.django_db

CLASSIC = {"tokenizer": "ceil-chars-4", "input_window": 8192}


def test_own_books_the_actor_reads_are_attachable(tenant_a):
    private = shared_book(tenant_a, visibility="private")
    assert book_for_attach(owner_actor(tenant_a), book_id=private.pk) == private
    with pytest.raises(NotFound):  # another member's private book
        book_for_attach(admin_actor(tenant_a), book_id=private.pk)


def test_public_books_of_any_tenant_are_attachable_by_id(tenant_a, tenant_b):
    public = shared_book(tenant_a)
    assert book_for_attach(admin_actor(tenant_b), book_id=public.pk) == public


def test_unlisted_books_only_through_their_current_link(tenant_a, tenant_b):
    unlisted = shared_book(tenant_a, visibility="unlisted")
    other = admin_actor(tenant_b)
    with pytest.raises(NotFound):
        book_for_attach(other, book_id=unlisted.pk)
    token = unlisted.share.link_token
    assert book_for_attach(other, link_token=token) == unlisted
    assert book_for_attach(other, book_id=unlisted.pk, link_token=token) == unlisted
    new_token = book_link_rotate(actor=owner_actor(tenant_a), book=unlisted).link_token
    with pytest.raises(NotFound):
        book_for_attach(other, link_token=token)
    assert book_for_attach(other, link_token=new_token) == unlisted


def test_a_token_must_belong_to_the_named_book(tenant_a, tenant_b):
    unlisted = shared_book(tenant_a, visibility="unlisted")
    public = shared_book(tenant_a, title="Another")
    with pytest.raises(NotFound):
        book_for_attach(admin_actor(tenant_b), book_id=public.pk, link_token=unlisted.share.link_token)


def test_private_books_of_other_tenants_are_never_attachable(tenant_a, tenant_b):
    book = shared_book(tenant_a, visibility="unlisted")
    token = book.share.link_token
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="private")
    for kwargs in ({"book_id": book.pk}, {"link_token": token}, {"link_token": "nonsense"}, {"book_id": 10**9}):
        with pytest.raises(NotFound):
            book_for_attach(admin_actor(tenant_b), **kwargs)
    with pytest.raises(ValidationFailed):
        book_for_attach(admin_actor(tenant_b))


def test_injectable_while_shared_and_says_why_not_after(tenant_a, tenant_b):
    book = shared_book(tenant_a)
    assert book_injectable_for(tenant_a.tenant, book) == (True, None)
    assert book_injectable_for(tenant_b.tenant, book) == (True, None)
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="unlisted")
    book.refresh_from_db()
    assert book_injectable_for(tenant_b.tenant, book) == (True, None)
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="private")
    book.refresh_from_db()
    assert book_injectable_for(tenant_b.tenant, book) == (False, "the owner made this book private")
    assert book_injectable_for(tenant_a.tenant, book) == (True, None)  # own tenant: always


def _character(setup, name):
    response = setup.admin_client.post("/api/v1/characters", {"name": name}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _context(setup, chat_id, text):
    body = {"messages": [{"role": "user", "name": "Ana", "text": text}], "model": CLASSIC}
    response = setup.admin_client.post(f"/api/v1/chats/{chat_id}/context", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_other_tenant_attaches_injects_and_loses_it_when_made_private(tenant_a, tenant_b):
    book = shared_book(tenant_a, entries=9, visibility="private")
    make_entry(book, keys=["lighthouse"], content="The lighthouse of Varn never goes dark.")
    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="public")

    character = _character(tenant_b, "Kael")
    attached = tenant_b.admin_client.post(
        "/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book.pk}, format="json"
    )
    assert attached.status_code == 201, attached.content
    chat = tenant_b.admin_client.post(
        "/api/v1/chats", {"kind": "character", "character_id": character, "profile": "classic"}, format="json"
    ).json()["id"]
    body = _context(tenant_b, chat, "We row toward the lighthouse.")
    assert "The lighthouse of Varn never goes dark." in [i["content"] for i in body["injections"]]

    book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="private")
    body = _context(tenant_b, chat, "We row toward the lighthouse.")
    assert body["injections"] == []
    assert [(b["id"], b["reason"]) for b in body["books_left_out"]] == [(book.pk, PRIVATE_AGAIN_REASON)]
    listed = tenant_b.admin_client.get("/api/v1/attachments").json()["results"]
    assert [(a["book_id"], a["injected"], a["reason"]) for a in listed] == [(book.pk, False, PRIVATE_AGAIN_REASON)]


def test_unlisted_book_attached_through_its_link(tenant_a, tenant_b):
    book = shared_book(tenant_a, visibility="unlisted", entries=2)
    character = _character(tenant_b, "Kael")
    by_id = tenant_b.admin_client.post(
        "/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book.pk}, format="json"
    )
    assert by_id.status_code == 404
    by_link = tenant_b.admin_client.post(
        "/api/v1/attachments",
        {"target": "character", "target_id": character, "link_token": book.share.link_token},
        format="json",
    )
    assert by_link.status_code == 201, by_link.content
    assert by_link.json()["book_id"] == book.pk


def test_only_the_owner_edits_an_attached_book(tenant_a, tenant_b):
    book = shared_book(tenant_a)
    before = world(tenant_a, tenant_b)
    client = tenant_b.admin_client
    assert client.patch(f"/api/v1/books/{book.pk}", {"title": "Mine now"}, format="json").status_code == 404
    assert client.post(f"/api/v1/books/{book.pk}/entries", {"content": "x" * 30}, format="json").status_code == 404
    assert client.delete(f"/api/v1/books/{book.pk}").status_code == 404
    assert client.post(f"/api/v1/books/{book.pk}/visibility", {"visibility": "private"}, format="json").status_code == 404
    assert world(tenant_a, tenant_b) == before
