"""Server seed: the persona list groups personas sharing a lineage; a card imports as a persona (S-2, S-1, I-1..I-4)."""
from __future__ import annotations

import io
import json

import pytest

from books.models import Book, Entry
from cast.models import Character
from tests.books.formats.builders import card, card_book, chara_chunk, png_with

pytestmark = pytest.mark.django_db


def _upload(payload: bytes, name: str) -> io.BytesIO:
    f = io.BytesIO(payload)
    f.name = name
    return f


def _card(name="Kael", creator="ana", entries=2):
    doc = card(card_book(entries) if entries else None)
    doc["data"].update(name=name, creator=creator)
    return doc


def _import(client, payload, name="kael.json", **form):
    return client.post("/api/v1/personas/import", {"file": _upload(payload, name), **form}, format="multipart")


def _rows(tenant):
    return (Character.objects.for_tenant(tenant).count(), Book.objects.for_tenant(tenant).count(),
            Entry.objects.for_tenant(tenant).count())


def test_a_png_card_imports_as_a_persona_with_its_book_in_the_lineage(make_tenant):
    setup = make_tenant("Guild", profile="server")
    png = png_with(chara_chunk(_card()))
    response = _import(setup.admin_client, png, "kael.png")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["character"]["name"] == "Kael" and body["character_created"] is True
    assert body["book"]["entries"] == 2
    assert body["receipt"]["added"] == 2 and body["receipt"]["format"].startswith("card-v2")
    book = Book.objects.for_tenant(setup.tenant).get(pk=body["book"]["id"])
    assert (book.scope, str(book.lineage.public_id)) == ("persona", body["character"]["lineage"])

    # The persona's chats read its lineage book.
    chat = setup.admin_client.post("/api/v1/chats", {"kind": "character", "character_id": body["character"]["id"],
                                                     "profile": "server"}, format="json").json()["id"]
    turn = setup.admin_client.post(f"/api/v1/chats/{chat}/context",
                                   {"messages": [{"role": "user", "text": "say word1"}]}, format="json").json()
    assert [i["content"] for i in turn["injections"]] == ["Card lore 1: the lighthouse never goes out at night."]

    # Deleted and imported again: the same lineage and book; existing entries are skipped (append).
    assert setup.admin_client.delete(f"/api/v1/characters/{body['character']['id']}").status_code == 204
    again = _import(setup.admin_client, json.dumps(_card(entries=3)).encode()).json()
    assert again["character"]["lineage"] == body["character"]["lineage"]
    assert again["book"]["id"] == book.pk and again["book"]["entries"] == 3
    assert (again["receipt"]["added"], again["receipt"]["skipped_count"]) == (1, 2)


def test_the_persona_list_groups_personas_that_share_a_lineage(make_tenant):
    setup = make_tenant("Guild", profile="server")
    first = _import(setup.admin_client, json.dumps(_card()).encode()).json()
    _import(setup.admin_client, json.dumps(_card(name="Kael (winter)", entries=0)).encode(), lineage_key="Kael by ana")
    _import(setup.admin_client, json.dumps(_card(name="Mira", creator="bo", entries=0)).encode())
    groups = setup.member_client.get("/api/v1/personas").json()  # members read (S-1)
    by_lineage = {g["lineage"]: g for g in groups}
    kael = by_lineage[first["character"]["lineage"]]
    assert sorted(p["name"] for p in kael["personas"]) == ["Kael", "Kael (winter)"]
    assert kael["book"] == {"id": first["book"]["id"], "title": first["book"]["title"], "entries": 2}
    mira = next(g for g in groups if [p["name"] for p in g["personas"]] == ["Mira"])
    assert mira["book"] is None  # a card without a book makes no book (I-1)
    assert len(groups) == 2


def test_persona_import_is_all_or_nothing_and_admin_only(make_tenant):
    setup = make_tenant("Guild", profile="server")
    before = _rows(setup.tenant)
    denied = _import(setup.member_client, json.dumps(_card()).encode())
    assert denied.status_code == 403 and denied.json()["error"]["rule"] == "S-1"
    not_a_card = _import(setup.admin_client, json.dumps({"entries": {}}).encode(), "world.json")
    assert not_a_card.status_code == 400 and not_a_card.json()["error"]["field"] == "file"
    # Over the 250-entry persona cap (S-14): refused whole, no character left behind.
    too_many = _import(setup.admin_client, json.dumps(_card(entries=251)).encode())
    assert too_many.status_code == 422, too_many.content
    assert _rows(setup.tenant) == before


def test_persona_endpoints_permission_matrix(make_tenant, anon_client):
    setup, other = make_tenant("Guild", profile="server"), make_tenant("Other", profile="server")
    mine = _import(setup.admin_client, json.dumps(_card()).encode()).json()
    before = _rows(setup.tenant)
    assert anon_client.get("/api/v1/personas").status_code == 401
    assert _import(anon_client, json.dumps(_card(name="X")).encode()).status_code == 401
    # Another tenant sees only its own personas (P-3) and imports into its own tenant only.
    assert other.admin_client.get("/api/v1/personas").json() == []
    for client in (setup.read_client, setup.member_client):
        assert client.get("/api/v1/personas").json()[0]["book"]["id"] == mine["book"]["id"]
        denied = _import(client, json.dumps(_card(name="Y")).encode())
        assert denied.status_code == 403 and "error" in denied.json()
    assert _rows(setup.tenant) == before
