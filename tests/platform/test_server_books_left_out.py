"""Server profile: every attached book a turn does not read is in books_left_out, with why (S-2)."""
from __future__ import annotations

import pytest

from books.models import Scope
from tests.books.factories import make_book, make_entry
from tests.platform.test_context_api import _attach, _character, _chat, _lineage_of

pytestmark = pytest.mark.django_db


def test_books_attached_to_the_character_or_tenant_are_left_out_with_the_reason(tenant_a):
    collection = make_book(tenant_a, owner=None, title="Server lore", scope=Scope.SERVER, profile="server")
    make_entry(collection, keys=["ale"], content="The tavern's ale is brewed with seawater.")
    kael = _character(tenant_a, "Kael", key="kael-card")
    persona = make_book(tenant_a, owner=None, title="Kael persona", scope=Scope.PERSONA, profile="server",
                        lineage=_lineage_of(tenant_a, kael))
    make_entry(persona, keys=["ale"], content="Kael never drinks ale.")
    own = make_book(tenant_a, owner="admin", title="Kael's notes", profile="server")
    make_entry(own, keys=["ale"], content="Ale from the north is bitter.")
    tenant_wide = make_book(tenant_a, owner="admin", title="Shared notes", profile="server")
    _attach(tenant_a, "character", kael, own)
    _attach(tenant_a, "tenant", None, tenant_wide)
    _attach(tenant_a, "tenant", None, collection)  # read anyway as a collection: not "left out"
    chat_id = _chat(tenant_a, kind="character", character_id=kael, profile="server")

    body = tenant_a.admin_client.post(f"/api/v1/chats/{chat_id}/context",
                                      {"messages": [{"role": "user", "text": "More ale!"}]}, format="json").json()
    assert {b["id"] for b in body["books"]} == {collection.pk, persona.pk}
    left = {b["id"]: b["reason"] for b in body["books_left_out"]}
    assert set(left) == {own.pk, tenant_wide.pk}
    assert "server-wide collections and the persona's lineage book" in left[own.pk]
    assert "attached to the character" in left[own.pk]
    assert "attached to the whole tenant" in left[tenant_wide.pk]
    assert "Ale from the north is bitter." not in [i["content"] for i in body["injections"]]
