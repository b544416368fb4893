"""Server collections: the active toggle (S-12), channel restrictions (S-11), unresolved #channel (S-13)."""
from __future__ import annotations

import pytest

from books import services
from books.models import Entry, Profile, Scope
from lore_platform.errors import ValidationFailed
from retrieval.adapter.loading import engine_book
from retrieval.engine.server import server_assemble
from retrieval.engine.tokenizers import tokenizer_by_name
from retrieval.engine.values import Channel, Message, TurnRequest
from tests.books.factories import admin_actor, make_book, make_entry, member_actor, snapshot

pytestmark = pytest.mark.django_db


def _enabled(book):
    return dict(Entry.objects.for_tenant(book.tenant).filter(book=book).values_list("title", "enabled"))


def _live(book, channel_id=None, parent_channel_id=None):
    """Titles of the entries the live server selection injects here, in list order.

    The factories' entries have no keywords, so every entry that may appear in this
    channel is always-on (S-4): what is left out is what S-11, S-12, S-13 or W-6 keep out.
    """
    book.refresh_from_db()
    channel = Channel(id=channel_id, parent=parent_channel_id) if channel_id else None
    request = TurnRequest(
        profile="server", books=(engine_book(book),), chat=(Message(role="user", text="hello"),), channel=channel
    )
    injected = {i.entry for i in server_assemble(request, tokenizer=tokenizer_by_name("ceil-chars-4")).injections}
    entries = Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id")
    return [entry.title for entry in entries if str(entry.pk) in injected]


def test_toggle_off_removes_every_entry_and_on_restores_them_as_they_were(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    for title, enabled in (("Kings", True), ("Old war", False), ("Harbor", True)):
        make_entry(book, title=title, enabled=enabled)
    states = _enabled(book)
    assert _live(book) == ["Kings", "Harbor"]

    services.book_set_active(actor=admin_actor(tenant_a), book=book, active=False)
    assert _live(book) == []
    assert _enabled(book) == states  # own flags untouched

    # Edits while the collection is off keep working on the entries' own flags.
    harbor = Entry.objects.for_tenant(tenant_a.tenant).get(book=book, title="Harbor")
    services.entries_bulk_set_enabled(actor=admin_actor(tenant_a), book=book, entry_ids=[harbor.pk], enabled=False)
    assert _live(book) == []

    services.book_set_active(actor=admin_actor(tenant_a), book=book, active=True)
    assert _live(book) == ["Kings"]
    assert _enabled(book) == {**states, "Harbor": False}


def test_toggle_through_the_api_shows_live_flags(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    make_entry(book, title="Kings", enabled=True)
    make_entry(book, title="Old war", enabled=False)
    base = f"/api/v1/books/{book.pk}"
    assert tenant_a.admin_client.post(f"{base}/active", {"active": False}, format="json").json()["active"] is False
    rows = tenant_a.member_client.get(f"{base}/entries").json()["results"]
    assert [(r["title"], r["enabled"], r["live"]) for r in rows] == [("Kings", True, False), ("Old war", False, False)]
    tenant_a.admin_client.post(f"{base}/active", {"active": True}, format="json")
    rows = tenant_a.member_client.get(f"{base}/entries").json()["results"]
    assert [(r["title"], r["enabled"], r["live"]) for r in rows] == [("Kings", True, True), ("Old war", False, False)]


# --- channels (S-11) -----------------------------------------------------------------------------


def test_server_wide_restriction_belongs_to_the_collection(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    make_entry(book, title="Kings")
    make_entry(book, title="Harbor")
    services.book_update(actor=admin_actor(tenant_a), book=book, channels=["rp-main"])
    assert _live(book, channel_id="rp-main") == ["Kings", "Harbor"]
    assert _live(book, channel_id="offtopic") == []
    assert _live(book, channel_id="thread-1", parent_channel_id="rp-main") == ["Kings", "Harbor"]
    entry = Entry.objects.for_tenant(tenant_a.tenant).get(book=book, title="Kings")
    before = snapshot(book)
    with pytest.raises(ValidationFailed) as exc_info:
        services.entry_update(actor=admin_actor(tenant_a), entry=entry, channels=["offtopic"])
    assert (exc_info.value.field, exc_info.value.rule) == ("channels", "S-11")
    assert snapshot(book) == before


def test_persona_books_restrict_each_entry(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    actor = admin_actor(tenant_a)
    services.entry_create(actor=actor, book=book, title="Everywhere", content="lore")
    services.entry_create(actor=actor, book=book, title="Tavern only", content="lore", channels=["tavern"])
    assert _live(book, channel_id="tavern") == ["Everywhere", "Tavern only"]
    assert _live(book, channel_id="market") == ["Everywhere"]
    assert _live(book, channel_id="t-1", parent_channel_id="tavern") == ["Everywhere", "Tavern only"]
    with pytest.raises(ValidationFailed) as exc_info:
        services.book_update(actor=actor, book=book, channels=["tavern"])
    assert exc_info.value.rule == "S-11"


def test_channels_outside_server_books_are_refused(tenant_a):
    book = make_book(tenant_a)
    with pytest.raises(ValidationFailed) as exc_info:
        services.entry_create(actor=member_actor(tenant_a), book=book, content="x", channels=["a"])
    assert exc_info.value.rule == "S-11"


def test_channel_selection_through_the_api(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    response = tenant_a.admin_client.patch(f"/api/v1/books/{book.pk}", {"channels": ["rp-main", "rp-main"]}, format="json")
    assert response.status_code == 200 and response.json()["channels"] == ["rp-main"]
    response = tenant_a.member_client.patch(f"/api/v1/books/{book.pk}", {"channels": []}, format="json")
    assert response.status_code == 403
    book.refresh_from_db()
    assert book.channels == ["rp-main"]


# --- unresolved #channel (S-13) -----------------------------------------------------------------------


def test_unresolved_channel_counts_as_everywhere_until_an_admin_saves_a_selection(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    [legacy] = services.entries_create_bulk(
        actor=admin_actor(tenant_a),
        book=book,
        entries=[{"title": "Old memory", "content": "lore", "unresolved_channels": ["#general"]}],
    )
    assert _live(book, channel_id="anything") == ["Old memory"]
    row = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/entries").json()["results"][0]
    assert row["has_unresolved_channel"] is True
    assert row["unresolved_channels"] == ["#general"]
    assert [w["code"] for w in row["warnings"]] == ["unresolved_channel"]

    response = tenant_a.admin_client.patch(
        f"/api/v1/books/{book.pk}/entries/{legacy.pk}", {"channels": ["9001"]}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["channels"], body["unresolved_channels"], body["has_unresolved_channel"]) == (["9001"], [], False)
    assert body["warnings"] == []
    assert _live(book, channel_id="anything") == []
    assert _live(book, channel_id="9001") == ["Old memory"]


def test_unresolved_channel_is_not_settable_through_the_editor(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    entry = make_entry(book)
    with pytest.raises(ValidationFailed):
        services.entry_update(actor=admin_actor(tenant_a), entry=entry, unresolved_channels=["#x"])
