"""The two P-1 decisions (docs/api.md "Sharing"): a public book keeps 10 entries (deletion refused),
and a rotated unlisted link stops the attachments made through the old one."""
from __future__ import annotations

import io
import json

import pytest

from books.models import Entry
from sharing.selectors import LINK_ROTATED_REASON
from tests.books.factories import make_entry
from tests.sharing.helpers import shared_book, world

pytestmark = pytest.mark.django_db

CLASSIC = {"tokenizer": "ceil-chars-4", "input_window": 8192}


def _ids(book):
    return list(Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("pk").values_list("pk", flat=True))


def _refused(response):
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert (error["code"], error["rule"]) == ("too_few_entries", "P-1")


def test_a_public_book_cannot_drop_below_ten_entries(tenant_a):
    book = shared_book(tenant_a, entries=11)
    owner = tenant_a.member_client
    ids = _ids(book)
    assert owner.delete(f"/api/v1/books/{book.pk}/entries/{ids[0]}").status_code == 204  # 11 -> 10
    before = world(tenant_a)
    _refused(owner.delete(f"/api/v1/books/{book.pk}/entries/{ids[1]}"))
    _refused(owner.post(f"/api/v1/books/{book.pk}/entries/bulk", {"action": "delete", "entry_ids": ids[1:3]},
                        format="json"))
    small = {"entries": {"0": {"uid": 0, "key": ["salt"], "comment": "Salt", "content": "Salt is sworn on."}}}
    upload = io.BytesIO(json.dumps(small).encode())
    upload.name = "small.json"
    _refused(owner.post(f"/api/v1/books/{book.pk}/import", {"file": upload, "mode": "replace"}, format="multipart"))
    assert world(tenant_a) == before
    # Unpublished first, the owner may delete.
    assert owner.post(f"/api/v1/books/{book.pk}/visibility", {"visibility": "unlisted"},
                      format="json").status_code == 200
    assert owner.delete(f"/api/v1/books/{book.pk}/entries/{ids[1]}").status_code == 204


def _character(setup, name):
    return setup.admin_client.post("/api/v1/characters", {"name": name}, format="json").json()["id"]


def _turn(setup, chat_id):
    body = {"messages": [{"role": "user", "text": "We row toward the lighthouse."}], "model": CLASSIC}
    response = setup.admin_client.post(f"/api/v1/chats/{chat_id}/context", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _attach_by_link(setup, character, token):
    response = setup.admin_client.post(
        "/api/v1/attachments", {"target": "character", "target_id": character, "link_token": token}, format="json"
    )
    assert response.status_code == 201, response.content


def test_rotating_an_unlisted_link_stops_attachments_made_through_the_old_one(tenant_a, tenant_b):
    book = shared_book(tenant_a, visibility="unlisted", entries=2)
    make_entry(book, keys=["lighthouse"], content="The lighthouse of Varn never goes dark.")
    character = _character(tenant_b, "Kael")
    _attach_by_link(tenant_b, character, book.share.link_token)
    chat = tenant_b.admin_client.post("/api/v1/chats", {"kind": "character", "character_id": character,
                                                        "profile": "classic"}, format="json").json()["id"]
    lore = "The lighthouse of Varn never goes dark."
    assert lore in [i["content"] for i in _turn(tenant_b, chat)["injections"]]

    rotated = tenant_a.member_client.post(f"/api/v1/books/{book.pk}/link/rotate")
    assert rotated.status_code == 200, rotated.content
    body = _turn(tenant_b, chat)
    assert body["injections"] == []
    assert [(b["id"], b["reason"]) for b in body["books_left_out"]] == [(book.pk, LINK_ROTATED_REASON)]
    listed = tenant_b.admin_client.get("/api/v1/attachments").json()["results"]
    assert [(a["book_id"], a["injected"], a["reason"]) for a in listed] == [(book.pk, False, LINK_ROTATED_REASON)]
    # The owner's own chats are untouched, and attaching through the new link restores it.
    book.share.refresh_from_db()
    _attach_by_link(tenant_b, character, book.share.link_token)
    assert lore in [i["content"] for i in _turn(tenant_b, chat)["injections"]]
