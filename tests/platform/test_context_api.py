"""The context call partner apps make every turn (P-7, W-8, W-10, C-12, C-15, S-2, S-8, S-11, S-12)."""
from __future__ import annotations

import pytest

from books.models import Book, Entry, Scope
from cast.models import Chat, RequestLog
from tests.books.factories import admin_actor, make_book, make_entry

pytestmark = pytest.mark.django_db

CLASSIC = {"tokenizer": "ceil-chars-4", "input_window": 8192}


def _character(setup, name, key=None):
    response = setup.admin_client.post("/api/v1/characters", {"name": name, "lineage_key": key or name}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _attach(setup, target, target_id, book):
    response = setup.admin_client.post(
        "/api/v1/attachments", {"target": target, "target_id": target_id, "book_id": book.pk}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def _chat(setup, **body):
    response = setup.admin_client.post("/api/v1/chats", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _context(setup, chat_id, text, **extra):
    body = {"messages": [{"role": "user", "name": "Ana", "text": text}], "model": CLASSIC, **extra}
    response = setup.admin_client.post(f"/api/v1/chats/{chat_id}/context", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _book(setup, title, entries, owner="admin", **fields):
    book = make_book(setup, owner=owner, title=title, **fields)
    made = [make_entry(book, **entry) for entry in entries]
    return book, made


def _injected(body):
    return [i["content"] for i in body["injections"]]


def test_character_chat_injects_its_books_lore(tenant_a):
    book, _ = _book(tenant_a, "Coast", [{"keys": ["lighthouse"], "content": "The lighthouse never goes dark."}])
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    chat = _chat(tenant_a, kind="character", character_id=kael, profile="classic")
    body = _context(tenant_a, chat, "We row toward the lighthouse.")
    assert _injected(body) == ["The lighthouse never goes dark."]
    assert body["injections"][0]["slot"] == "lorebook"
    assert body["profile"] == "classic"
    outcomes = {row["entry"]: row["outcome"] for row in body["request_log"]}
    assert list(outcomes.values()) == ["injected"]


def test_story_merges_own_and_cast_books_and_uses_a_book_once(tenant_a):
    world, _ = _book(tenant_a, "World", [{"keys": ["storm"], "content": "Storms close the coast road."}])
    ana_book, _ = _book(tenant_a, "Ana's", [{"keys": ["storm"], "content": "Ana fears storms."}])
    kael_book, _ = _book(tenant_a, "Kael's", [{"keys": ["storm"], "content": "Kael was born in a storm."}])
    ana, kael = _character(tenant_a, "Ana"), _character(tenant_a, "Kael")
    story = tenant_a.admin_client.post("/api/v1/stories", {"title": "Wreck", "cast_ids": [ana, kael]}, format="json")
    story_id = story.json()["id"]
    _attach(tenant_a, "story", story_id, world)
    _attach(tenant_a, "character", ana, ana_book)
    _attach(tenant_a, "character", kael, kael_book)
    _attach(tenant_a, "character", kael, world)  # reached twice: used once
    chat = _chat(tenant_a, kind="story", story_id=story_id, profile="classic")
    body = _context(tenant_a, chat, "A storm is coming.")
    assert sorted(_injected(body)) == ["Ana fears storms.", "Kael was born in a storm.", "Storms close the coast road."]
    assert [b["title"] for b in body["books"]] == ["World", "Ana's", "Kael's"]
    labels = {i["content"]: i["label"] for i in body["injections"]}
    assert labels["Storms close the coast road."] is None
    assert labels["Ana fears storms."] == "Ana"
    assert labels["Kael was born in a storm."] == "Kael"


def test_group_chat_labels_every_injection_with_its_character(tenant_a):
    ana_book, _ = _book(tenant_a, "Ana's", [{"keys": ["tea"], "content": "Ana brews bitter tea."}])
    kael_book, _ = _book(tenant_a, "Kael's", [{"keys": ["tea"], "content": "Kael hates tea."}])
    ana, kael = _character(tenant_a, "Ana"), _character(tenant_a, "Kael")
    _attach(tenant_a, "character", ana, ana_book)
    _attach(tenant_a, "character", kael, kael_book)
    chat = _chat(tenant_a, kind="group", member_ids=[ana, kael], profile="classic")
    body = _context(tenant_a, chat, "Who wants tea?")
    assert {(i["label"], i["content"]) for i in body["injections"]} == {
        ("Ana", "Ana brews bitter tea."),
        ("Kael", "Kael hates tea."),
    }


def test_timed_state_usage_and_request_log_persist_across_turns(tenant_a, django_capture_on_commit_callbacks):
    book, (kept, plain) = _book(
        tenant_a,
        "Timed",
        [
            {"keys": ["oath"], "content": "@@keep\nThe oath binds whoever speaks it."},
            {"keys": ["oath"], "content": "Oaths are sworn on salt."},
        ],
    )
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    chat_id = _chat(tenant_a, kind="character", character_id=kael, profile="classic")

    with django_capture_on_commit_callbacks(execute=True):
        first = _context(tenant_a, chat_id, "I swear the oath.")
    assert sorted(_injected(first)) == ["Oaths are sworn on salt.", "The oath binds whoever speaks it."]
    chat = Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat_id)
    assert str(kept.pk) in chat.timed_state.get("kept", [])

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        second = _context(tenant_a, chat_id, "Let us talk about fish.")
    assert callbacks, "usage is counted after the response, by the usage sweep"
    # @@keep stays active without a match; the plain entry needs its key.
    assert _injected(second) == ["The oath binds whoever speaks it."]

    logs = tenant_a.admin_client.get(f"/api/v1/chats/{chat_id}/requests").json()["results"]
    assert [row["turn"] for row in logs] == [second["turn"], first["turn"]]
    latest = {row["entry"]: row["outcome"] for row in logs[0]["log"]}
    # The stored log is compact: an entry that was simply not matched is absent, and counted.
    assert latest == {kept.pk: "injected"}
    assert second["request_log_summary"] == {"entries": 2, "not_matched": 1, "not_matched_listed": False}
    assert RequestLog.objects.for_tenant(tenant_a.tenant).filter(chat_id=chat_id).count() == 2

    kept.refresh_from_db()
    plain.refresh_from_db()
    assert (kept.usage_count, plain.usage_count) == (2, 1)
    assert kept.last_used_at is not None

    # The usage sweep is idempotent: a second run (a duplicate delivery) counts nothing twice.
    from cast.tasks import request_usage_sweep

    assert request_usage_sweep() == 0
    kept.refresh_from_db()
    assert kept.usage_count == 2


def test_preview_equals_live_selection_and_changes_nothing(tenant_a):
    book, _ = _book(
        tenant_a,
        "Coast",
        [
            {"keys": ["bell"], "content": "Tide bells ring before a killing tide."},
            {"keys": ["wreck"], "content": "Wreck-right gives salvage to the first hand."},
        ],
    )
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    chat_id = _chat(tenant_a, kind="character", character_id=kael, profile="classic")
    message = "The bell rang over the wreck."

    preview = tenant_a.admin_client.post(
        f"/api/v1/chats/{chat_id}/preview", {"message": message, "model": CLASSIC}, format="json"
    ).json()
    book_preview = tenant_a.admin_client.post(
        f"/api/v1/books/{book.pk}/preview", {"message": message, "model": CLASSIC, "profile": "classic"}, format="json"
    ).json()
    assert RequestLog.objects.for_tenant(tenant_a.tenant).count() == 0
    assert Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat_id).turns == 0

    live = tenant_a.admin_client.post(
        f"/api/v1/chats/{chat_id}/context",
        {"messages": [{"role": "user", "text": message}], "model": CLASSIC, "log": "full"},
        format="json",
    ).json()
    assert live["injections"]
    assert preview["injections"] == live["injections"] == book_preview["injections"]
    assert preview["request_log"] == live["request_log"]


def test_preview_message_is_at_most_2000_characters(tenant_a):
    book, _ = _book(tenant_a, "Coast", [{"keys": ["bell"], "content": "Tide bells ring."}])
    ok = tenant_a.admin_client.post(f"/api/v1/books/{book.pk}/preview", {"message": "x" * 2000}, format="json")
    assert ok.status_code == 200
    too_long = tenant_a.admin_client.post(f"/api/v1/books/{book.pk}/preview", {"message": "x" * 2001}, format="json")
    assert too_long.status_code == 400
    error = too_long.json()["error"]
    assert error["field"] == "message"
    assert "W-10" in error["message"]


def test_classic_template_moves_the_lorebook_slot(tenant_a):
    book, _ = _book(tenant_a, "Coast", [{"keys": ["bell"], "content": "Tide bells ring.", "role": "assistant"}])
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    chat_id = _chat(tenant_a, kind="character", character_id=kael, profile="classic")
    body = _context(
        tenant_a,
        chat_id,
        "Ring the bell.",
        template=["system", "history", "lorebook"],
        parts={"system": "You are Kael."},
    )
    assert [(m["slot"], m["role"], m["content"]) for m in body["messages"]] == [
        ("system", "system", "You are Kael."),
        ("history", "user", "Ring the bell."),
        ("lorebook", "assistant", "Tide bells ring."),
    ]
    missing = tenant_a.admin_client.post(
        f"/api/v1/chats/{chat_id}/context",
        {"messages": [{"role": "user", "text": "hi"}], "template": ["system", "history"]},
        format="json",
    )
    assert missing.status_code == 400
    assert missing.json()["error"]["rule"] == "C-12"


def test_server_profile_places_lore_above_the_four_recent_turns(tenant_a):
    collection = make_book(tenant_a, owner=None, title="Server lore", scope=Scope.SERVER, profile="server")
    make_entry(collection, keys=[], content="Be kind to newcomers.", title="Rules")
    make_entry(collection, keys=["dragon"], content="Dragons here are vegetarian.", title="Dragons")
    kael = _character(tenant_a, "Kael")
    chat_id = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id="general")
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "text": f"turn {i}"} for i in range(5)]
    messages.append({"role": "user", "text": "Tell me about the dragon."})
    body = tenant_a.admin_client.post(
        f"/api/v1/chats/{chat_id}/context",
        {"messages": messages, "render": True, "parts": {"system": "You are Kael."}, "channel": {"id": "general"}},
        format="json",
    ).json()
    slots = {i["content"]: i["slot"] for i in body["injections"]}
    assert slots == {"Be kind to newcomers.": "system", "Dragons here are vegetarian.": "recent"}
    rendered = [m["content"] for m in body["messages"]]
    assert rendered[:2] == ["You are Kael.", "Be kind to newcomers."]
    # Lore sits right above the four most recent turns.
    assert rendered[-5:] == ["Dragons here are vegetarian.", "turn 2", "turn 3", "turn 4", "Tell me about the dragon."]


def test_server_channels_threads_and_collection_toggle(tenant_a):
    from books.services import book_set_active

    collection = make_book(
        tenant_a, owner=None, title="Tavern lore", scope=Scope.SERVER, profile="server", channels=["tavern"]
    )
    make_entry(collection, keys=["ale"], content="The tavern's ale is brewed with seawater.", title="Ale")
    kael = _character(tenant_a, "Kael", key="kael-card")
    persona = make_book(tenant_a, owner=None, title="Kael persona", scope=Scope.PERSONA, profile="server",
                        lineage=_lineage_of(tenant_a, kael))
    make_entry(persona, keys=["ale"], content="Kael never drinks ale.", title="Kael ale", channels=["tavern"])

    def ask(channel_id, parent=None):
        chat_id = _chat(tenant_a, kind="character", character_id=kael, profile="server", channel_id=channel_id,
                        parent_channel_id=parent or "")
        channel = {"id": channel_id, "parent": parent}
        body = tenant_a.admin_client.post(
            f"/api/v1/chats/{chat_id}/context",
            {"messages": [{"role": "user", "text": "More ale!"}], "channel": channel},
            format="json",
        ).json()
        return sorted(_injected(body)), {r["entry"]: r["outcome"] for r in body["request_log"]}

    assert ask("tavern")[0] == ["Kael never drinks ale.", "The tavern's ale is brewed with seawater."]
    assert ask("market")[0] == []
    assert ask("thread-9", parent="tavern")[0] == ["Kael never drinks ale.", "The tavern's ale is brewed with seawater."]

    entry = Entry.objects.for_tenant(tenant_a.tenant).get(book=collection)
    book_set_active(actor=admin_actor(tenant_a), book=collection, active=False)
    injected, outcomes = ask("tavern")
    assert injected == ["Kael never drinks ale."]
    assert outcomes[entry.pk] == "collection_off"
    entry.refresh_from_db()
    assert entry.enabled is True
    book_set_active(actor=admin_actor(tenant_a), book=Book.objects.for_tenant(tenant_a.tenant).get(pk=collection.pk),
                    active=True)
    assert ask("tavern")[0] == ["Kael never drinks ale.", "The tavern's ale is brewed with seawater."]


def _lineage_of(setup, character_id):
    from cast.models import Character

    return Character.objects.for_tenant(setup.tenant).get(pk=character_id).lineage


def test_stateless_context_with_book_ids(tenant_a):
    book, _ = _book(tenant_a, "Coast", [{"keys": ["bell"], "content": "Tide bells ring."}], owner="member")
    response = tenant_a.read_client.post(
        "/api/v1/context",
        {"messages": [{"role": "user", "text": "a bell"}], "book_ids": [book.pk], "profile": "classic",
         "model": CLASSIC},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert _injected(response.json()) == ["Tide bells ring."]


def test_cross_tenant_access_is_404_on_every_context_endpoint(tenant_a, tenant_b):
    book, _ = _book(tenant_a, "Private", [{"keys": ["bell"], "content": "Tide bells ring."}])
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    chat_id = _chat(tenant_a, kind="character", character_id=kael)
    intruder = tenant_b.admin_client
    message = {"messages": [{"role": "user", "text": "bell"}]}
    assert intruder.post(f"/api/v1/chats/{chat_id}/context", message, format="json").status_code == 404
    assert intruder.post(f"/api/v1/chats/{chat_id}/preview", {"message": "bell"}, format="json").status_code == 404
    assert intruder.get(f"/api/v1/chats/{chat_id}/requests").status_code == 404
    assert intruder.post(f"/api/v1/books/{book.pk}/preview", {"message": "bell"}, format="json").status_code == 404
    stateless = intruder.post("/api/v1/context", {**message, "book_ids": [book.pk]}, format="json")
    assert stateless.status_code == 404
    b_char = _character(tenant_b, "Spy")
    attach = intruder.post(
        "/api/v1/attachments", {"target": "character", "target_id": b_char, "book_id": book.pk}, format="json"
    )
    assert attach.status_code == 404
    foreign_target = intruder.post(
        "/api/v1/attachments", {"target": "character", "target_id": kael, "book_id": book.pk}, format="json"
    )
    assert foreign_target.status_code == 404
    chat = Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat_id)
    assert chat.turns == 0 and chat.timed_state == {}
    assert RequestLog.objects.unscoped().count() == 0


def test_read_only_key_cannot_run_a_persisting_turn(tenant_a):
    kael = _character(tenant_a, "Kael")
    chat_id = _chat(tenant_a, kind="character", character_id=kael)
    response = tenant_a.read_client.post(
        f"/api/v1/chats/{chat_id}/context", {"messages": [{"role": "user", "text": "hi"}]}, format="json"
    )
    assert response.status_code == 403
    assert Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat_id).turns == 0
    preview = tenant_a.read_client.post(f"/api/v1/chats/{chat_id}/preview", {"message": "hi"}, format="json")
    assert preview.status_code == 200


def test_anonymous_is_401(anon_client, tenant_a):
    assert anon_client.post("/api/v1/context", {"messages": []}, format="json").status_code == 401
