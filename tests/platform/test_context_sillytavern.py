"""The sillytavern profile through the context API: SillyTavern's placement and timed effects (P-7)."""
from __future__ import annotations

import pytest

from cast.models import Chat
from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db


@pytest.fixture
def st_chat(tenant_a):
    book = make_book(tenant_a, owner="admin", title="Dragons", profile="sillytavern", scan_depth=2)
    entries = {
        "before": make_entry(book, title="Lair", keys=["dragon"], content="Dragons sleep in the lair.",
                             placement="before_persona"),
        "after": make_entry(book, title="Scales", keys=["dragon"], content="Their scales are blue.",
                            placement="after_persona"),
        "deep": make_entry(book, title="Whisper", keys=["dragon"], content="A whisper at depth one.",
                           placement="before_persona", extra={"st": {"position": 4, "depth": 1, "role": 0}}),
        "sticky": make_entry(book, title="Sword", keys=["sword"], content="The sword remembers.",
                             placement="before_persona", extra={"st": {"sticky": 5}}),
    }
    client = tenant_a.admin_client
    character = client.post("/api/v1/characters", {"name": "Kael"}, format="json").json()["id"]
    client.post("/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book.pk},
                format="json")
    chat = client.post("/api/v1/chats", {"kind": "character", "character_id": character, "profile": "sillytavern"},
                       format="json").json()["id"]
    return chat, entries


def _turn(setup, chat, messages, **extra):
    response = setup.admin_client.post(
        f"/api/v1/chats/{chat}/context",
        {"messages": [{"role": r, "text": t, "name": "Ana" if r == "user" else "Kael"} for r, t in messages],
         "names": {"user": "Ana", "char": "Kael"}, "model": {"tokenizer": "ceil-chars-4", "input_window": 8192},
         **extra},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_positions_follow_sillytavern(tenant_a, st_chat):
    chat, entries = st_chat
    body = _turn(tenant_a, chat, [("assistant", "Hello."), ("user", "Is there a dragon here?")], render=True)
    slots = {i["entry"]: i["slot"] for i in body["injections"]}
    assert slots == {
        entries["before"].pk: "before_char",
        entries["after"].pk: "after_char",
        entries["deep"].pk: "depth_1",
    }
    history = [m for m in body["messages"] if m["slot"] in {"history", "depth_1"}]
    # Depth 1: right above the last message.
    assert [m["content"] for m in history] == ["Hello.", "A whisper at depth one.", "Is there a dragon here?"]


def test_sticky_entries_stay_for_their_turns_and_state_persists(tenant_a, st_chat):
    chat, entries = st_chat
    sword = entries["sticky"].pk
    first = _turn(tenant_a, chat, [("user", "I draw the sword.")])
    assert sword in {i["entry"] for i in first["injections"]}
    stored = Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat).timed_state
    assert stored["sillytavern"]["sticky"], "sticky state is kept with the chat"
    second = _turn(tenant_a, chat, [("user", "I draw the sword."), ("assistant", "Steel rings."),
                                    ("user", "We walk on.")])
    # Scan depth 2 no longer reaches the sword; sticky keeps it for five messages.
    assert sword in {i["entry"] for i in second["injections"]}
    assert next(r for r in second["request_log"] if r["entry"] == sword)["outcome"] == "injected"
    later = _turn(tenant_a, chat, [("user", "x"), ("assistant", "y"), ("user", "z"), ("assistant", "w"),
                                   ("user", "v"), ("assistant", "u"), ("user", "Quiet now.")])
    assert sword not in {i["entry"] for i in later["injections"]}


def test_preview_does_not_start_timed_effects(tenant_a, st_chat):
    chat, _ = st_chat
    preview = tenant_a.admin_client.post(f"/api/v1/chats/{chat}/preview", {"message": "I draw the sword."},
                                         format="json")
    assert preview.status_code == 200
    assert Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat).timed_state == {}
