"""S-11 and S-13 on the live path: the context call of a stored chat, server profile."""
from __future__ import annotations

import pytest

from books.models import Scope
from tests.books.factories import admin_actor, make_book, make_entry
from tests.platform.test_context_api import _character, _chat, _lineage_of

pytestmark = pytest.mark.django_db


def _turn(setup, chat_id, text, channel=None):
    body = {"messages": [{"role": "user", "text": text}]}
    if channel is not None:
        body["channel"] = channel
    response = setup.admin_client.post(f"/api/v1/chats/{chat_id}/context", body, format="json")
    assert response.status_code == 200, response.content
    return sorted(i["content"] for i in response.json()["injections"])


@pytest.fixture
def tavern(tenant_a):
    """A server-wide collection restricted to #tavern, and a persona entry restricted to #tavern."""
    collection = make_book(tenant_a, owner=None, title="Tavern lore", scope=Scope.SERVER, profile="server",
                           channels=["tavern"])
    make_entry(collection, keys=["ale"], content="The tavern's ale is brewed with seawater.", title="Ale")
    kael = _character(tenant_a, "Kael", key="kael-card")
    persona = make_book(tenant_a, owner=None, title="Kael persona", scope=Scope.PERSONA, profile="server",
                        lineage=_lineage_of(tenant_a, kael))
    make_entry(persona, keys=["ale"], content="Kael never drinks ale.", title="Kael ale", channels=["tavern"])
    return kael, persona


BOTH = ["Kael never drinks ale.", "The tavern's ale is brewed with seawater."]


def test_the_chat_stored_channel_applies_when_the_request_names_none(tenant_a, tavern):
    kael, _ = tavern
    in_tavern = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id="tavern")
    elsewhere = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id="market")
    assert _turn(tenant_a, in_tavern, "More ale!") == BOTH
    assert _turn(tenant_a, elsewhere, "More ale!") == []


def test_a_thread_follows_its_stored_parent_channel(tenant_a, tavern):
    kael, _ = tavern
    thread = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id="thread-9",
                   parent_channel_id="tavern")
    assert _turn(tenant_a, thread, "More ale!") == BOTH


def test_a_channel_named_in_the_request_overrides_the_stored_one(tenant_a, tavern):
    kael, _ = tavern
    in_tavern = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id="tavern")
    assert _turn(tenant_a, in_tavern, "More ale!", channel={"id": "market"}) == []
    elsewhere = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id="market")
    assert _turn(tenant_a, elsewhere, "More ale!", channel={"id": "tavern"}) == BOTH


def test_an_unresolved_legacy_channel_counts_as_every_channel_until_an_admin_saves_one(tenant_a, tavern):
    from books.services import entry_update

    kael, persona = tavern
    legacy = make_entry(persona, keys=["mead"], content="Kael brews mead in secret.", title="Kael mead",
                        channels=["tavern"], unresolved_channels=["#old-cellar"])
    market = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id="market")
    # S-13: the unresolved #old-cellar makes the entry active everywhere, whatever channels say.
    assert _turn(tenant_a, market, "Some mead?") == ["Kael brews mead in secret."]
    # An admin saves a selection: the legacy name is resolved and the restriction applies.
    entry_update(actor=admin_actor(tenant_a), entry=legacy, channels=["tavern"])
    assert _turn(tenant_a, market, "Some mead?") == []
    tavern_chat = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id="tavern")
    assert _turn(tenant_a, tavern_chat, "Some mead?") == ["Kael brews mead in secret."]
