"""Living world (issue 17, L-1..L-4, W-12), through the API as the partner app and the owner use it."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from books.models import Book, Entry, LoreWrite, Profile
from tests.books.factories import fill, make_book, make_entry
from tests.platform.test_context_schema import validate  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db

MODEL = {"tokenizer": "ceil-chars-4", "input_window": 8192, "tools": True}
LORE = "The Glass Tower stands on the salt flats; its keepers trade light for water."


def _living(setup, **fields):
    fields.setdefault("title", "Varn")
    return make_book(setup, owner="member", profile=Profile.SMART, living_world=True, **fields)


def _play(setup, *books, client=None):
    """A member's character chat with ``books`` attached: (chat id, client)."""
    client = client or setup.member_client
    character = client.post("/api/v1/characters", {"name": "Mirelda"}, format="json").json()["id"]
    for book in books:
        response = client.post("/api/v1/attachments", {"target": "character", "target_id": character,
                                                       "book_id": book.pk}, format="json")
        assert response.status_code == 201, response.content
    chat = client.post("/api/v1/chats", {"kind": "character", "character_id": character, "profile": "smart"},
                       format="json")
    assert chat.status_code == 201, chat.content
    return chat.json()["id"], character


def _call(client, chat, name, reply="r1", call_id="call_1", **arguments):
    response = client.post(f"/api/v1/chats/{chat}/tool-calls", {
        "reply_id": reply, "model": "gpt-test",
        "tool_call": {"id": call_id, "type": "function",
                      "function": {"name": name, "arguments": json.dumps(arguments)}},
    }, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["message"]["role"] == "tool" and json.loads(body["message"]["content"]) == body["result"]
    return body


def _create(client, chat, reply="r1", title="Glass Tower", lore=LORE, **extra):
    return _call(client, chat, "lore_create", reply=reply, title=title, lore=lore, **extra)


def _context(client, chat, text, model=MODEL):
    response = client.post(f"/api/v1/chats/{chat}/context",
                           {"messages": [{"role": "user", "text": text}], "model": model}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _writes(book):
    return LoreWrite.objects.for_tenant(book.tenant).filter(book=book)


def _entries(book):
    return {e.title: e for e in Entry.objects.for_tenant(book.tenant).filter(book=book)}


# --- 2. the tools in the context answer -----------------------------------------------------


def test_tools_come_with_a_tool_capable_model_in_the_owners_chat(tenant_a, validate):
    book = _living(tenant_a)
    make_entry(book, title="Salt", content="Salt is money in Varn; the guild weighs it.")
    chat, _ = _play(tenant_a, book)
    body = _context(tenant_a.member_client, chat, "hello")
    validate(body, "ContextOut")
    tools = {t["function"]["name"]: t["function"] for t in body["tools"]}
    assert {"lore_create", "lore_append"} <= set(tools)
    create = tools["lore_create"]
    # Strict mode: every property required, the optional aliases nullable.
    assert create["parameters"]["required"] == ["title", "lore", "aliases"]
    assert "book" not in create["parameters"]["properties"]
    assert create["parameters"]["properties"]["aliases"]["type"] == ["array", "null"]
    assert "durable world fact" in create["description"] and "Never use it for the scene" in create["description"]
    assert '"Varn"' in create["description"]
    assert "canon" not in create["parameters"]["properties"]  # L-2: never canon
    assert tools["lore_append"]["parameters"]["required"] == ["entry", "text"]
    assert "at most 2,000 characters" in tools["lore_append"]["parameters"]["properties"]["text"]["description"]

    no_tools = _context(tenant_a.member_client, chat, "hello", model={**MODEL, "tools": False})
    assert not {t["function"]["name"] for t in no_tools["tools"]} & {"lore_create", "lore_append"}


def test_no_write_tools_when_the_living_world_is_off(tenant_a):
    book = make_book(tenant_a, owner="member", profile=Profile.SMART, living_world=False)
    chat, _ = _play(tenant_a, book)
    assert not [t for t in _context(tenant_a.member_client, chat, "hi")["tools"]
                if t["function"]["name"].startswith("lore_") and t["function"]["name"] != "lore_lookup"]


def test_several_living_books_name_the_book_and_say_what_each_is_for(tenant_a, validate):
    varn = _living(tenant_a, title="Varn", description="The salt city and its guilds.")
    sea = _living(tenant_a, title="Grey Sea", description="Islands, tides and the drowned gods.")
    chat, _ = _play(tenant_a, varn, sea)
    body = _context(tenant_a.member_client, chat, "hi")
    validate(body, "ContextOut")
    create = next(t["function"] for t in body["tools"] if t["function"]["name"] == "lore_create")
    book_arg = create["parameters"]["properties"]["book"]
    assert book_arg["enum"] == [varn.pk, sea.pk] and create["parameters"]["required"][0] == "book"
    assert "salt city" in book_arg["description"] and "drowned gods" in book_arg["description"]
    written = _create(tenant_a.member_client, chat, book=sea.pk)
    assert written["ok"] and written["result"]["book"] == sea.pk and "Glass Tower" in _entries(sea)
    unnamed = _create(tenant_a.member_client, chat, title="Other")
    assert not unnamed["ok"] and unnamed["result"]["error"]["field"] == "book"


def test_the_tool_schemas_are_in_the_openapi_schema(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    tool = schema["components"]["schemas"]["ContextOut"]["properties"]["tools"]["items"]
    names = {option["properties"]["function"]["properties"]["name"]["enum"][0] for option in tool["oneOf"]}
    assert names == {"lore_lookup", "lore_create", "lore_append"}
    assert "/api/v1/chats/{id}/tool-calls" in schema["paths"]
    assert "/api/v1/books/{book_id}/ai-updates" in schema["paths"]


# --- 3, 6. a tool call writes, indexes, and the next turn uses it ----------------------------


def test_a_create_becomes_a_when_relevant_entry_used_by_the_next_turn(tenant_a, django_capture_on_commit_callbacks):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    before = _context(tenant_a.member_client, chat, "We ride to the Glass Tower.")
    assert before["injections"] == []
    with django_capture_on_commit_callbacks(execute=True):
        written = _create(tenant_a.member_client, chat, aliases=["the Tower"], canon=True)
    assert not written["ok"] and written["result"]["error"]["field"] == "canon"  # L-2: no canon argument
    with django_capture_on_commit_callbacks(execute=True):
        written = _create(tenant_a.member_client, chat, aliases=["the Tower"])
    assert written["ok"] and written["result"]["status"] == "applied"
    entry = _entries(book)["Glass Tower"]
    assert entry.constant is False and entry.keys == ["the Tower"] and entry.content == LORE
    assert entry.indexing_state == "indexed"
    after = _context(tenant_a.member_client, chat, "We ride to the Glass Tower.")
    assert [i["entry"] for i in after["injections"]] == [entry.pk]


def test_an_append_adds_at_the_end_and_never_rewrites(tenant_a, django_capture_on_commit_callbacks):
    book = _living(tenant_a)
    salt = make_entry(book, title="Salt", content="Salt is money in Varn; the guild weighs it.")
    chat, _ = _play(tenant_a, book)
    with django_capture_on_commit_callbacks(execute=True):
        written = _call(tenant_a.member_client, chat, "lore_append", entry=salt.pk, text="Black salt is forbidden.")
    salt.refresh_from_db()
    assert written["ok"] and salt.content == "Salt is money in Varn; the guild weighs it.\n\nBlack salt is forbidden."
    assert salt.indexing_state == "indexed"
    assert "Black salt" in _context(tenant_a.member_client, chat, "Tell me about Salt")["injections"][0]["content"]
    other = make_book(tenant_a, owner="member", profile=Profile.SMART)
    stranger = make_entry(other, title="Elsewhere", content="Not in this book at all, no.")
    refused = _call(tenant_a.member_client, chat, "lore_append", entry=stranger.pk, text="x")
    assert not refused["ok"] and refused["result"]["error"]["code"] == "not_found"


def test_another_users_chat_is_refused_as_a_tool_result(tenant_a):
    book = _living(tenant_a)
    chat, character = _play(tenant_a, book)
    before = list(_writes(book)), dict(_entries(book))
    # The admin runs a tool call on the member's chat, and on a chat of their own with the same character.
    refused = _create(tenant_a.admin_client, chat)
    assert not refused["ok"] and refused["result"]["error"]["rule"] == "L-1"
    own = tenant_a.admin_client.post("/api/v1/chats", {"kind": "character", "character_id": character,
                                                       "profile": "smart"}, format="json").json()["id"]
    assert not [t for t in _context(tenant_a.admin_client, own, "hi")["tools"]
                if t["function"]["name"] in ("lore_create", "lore_append")]
    refused = _create(tenant_a.admin_client, own)
    assert not refused["ok"] and refused["result"]["error"]["rule"] == "L-1"
    assert (list(_writes(book)), dict(_entries(book))) == before


def test_a_chat_of_another_tenant_is_not_found(tenant_a, tenant_b):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    response = tenant_b.member_client.post(f"/api/v1/chats/{chat}/tool-calls", {
        "reply_id": "r1", "tool_call": {"id": "c", "function": {"name": "lore_create", "arguments": "{}"}}},
        format="json")
    assert response.status_code == 404 and not _writes(book).exists()


# --- 4. limits (L-3, W-12) ---------------------------------------------------------------


def _record(book, *, ago, count):
    LoreWrite.objects.bulk_create([
        LoreWrite(tenant=book.tenant, book=book, chat_id=0, reply_id="old", kind="create", title="x", text="x",
                  state="undone", created_at=timezone.now() - ago) for _ in range(count)
    ])


def test_the_30th_write_in_24_hours_passes_and_the_31st_is_a_readable_refusal(tenant_a):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    _record(book, ago=timedelta(hours=23, minutes=59), count=29)
    _record(book, ago=timedelta(hours=24, seconds=5), count=10)  # outside the rolling window
    assert _create(tenant_a.member_client, chat, title="Thirtieth")["ok"]
    refused = _create(tenant_a.member_client, chat, title="Thirty-first")
    error = refused["result"]["error"]
    assert not refused["ok"] and error["rule"] == "L-3" and error["code"] == "write_budget_exhausted"
    assert error["details"]["limit"] == 30 and "next write" in error["message"]
    assert set(_entries(book)) == {"Thirtieth"}


@pytest.mark.parametrize("size, ok", [(4_000, True), (4_001, False)])
def test_a_new_entry_is_at_most_4000_characters(tenant_a, size, ok):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    written = _create(tenant_a.member_client, chat, lore="a" * size)
    assert written["ok"] is ok and ("Glass Tower" in _entries(book)) is ok
    if not ok:
        assert written["result"]["error"]["rule"] == "L-3" and written["result"]["error"]["details"]["limit"] == 4_000


@pytest.mark.parametrize("size, ok", [(2_000, True), (2_001, False)])
def test_each_append_is_at_most_2000_characters(tenant_a, size, ok):
    book = _living(tenant_a)
    salt = make_entry(book, title="Salt", content="Salt is money in Varn; the guild weighs it.")
    chat, _ = _play(tenant_a, book)
    written = _call(tenant_a.member_client, chat, "lore_append", entry=salt.pk, text="b" * size)
    salt.refresh_from_db()
    assert written["ok"] is ok and salt.content.endswith("b" * size) is ok


@pytest.mark.parametrize("grown, ok", [(20_000, True), (20_001, False)])
def test_a_grown_entry_is_at_most_20000_characters(tenant_a, grown, ok):
    book = _living(tenant_a)
    # content + "\n\n" + 1,000 characters = ``grown``
    salt = make_entry(book, title="Salt", content="s" * (grown - 1_002))
    chat, _ = _play(tenant_a, book)
    written = _call(tenant_a.member_client, chat, "lore_append", entry=salt.pk, text="t" * 1_000)
    salt.refresh_from_db()
    assert written["ok"] is ok and (len(salt.content) == grown) is ok
    if not ok:
        assert written["result"]["error"]["details"] == {"limit": 20_000, "actual": 20_001, "unit": "characters"}


@pytest.mark.parametrize("arguments, field, rule", [
    ({"title": "G"}, "title", "W-12"),
    ({"title": "G" * 101}, "title", "W-12"),
    ({"lore": "too short lore"}, "lore", "W-12"),
    ({"aliases": [f"a{i}" for i in range(51)]}, "aliases", "W-12"),
    ({"aliases": ["a" * 121]}, "aliases[0]", "W-12"),
])
def test_w12_title_lore_and_alias_rules_are_refusals_the_model_reads(tenant_a, arguments, field, rule):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    written = _call(tenant_a.member_client, chat, "lore_create", **{"title": "Glass Tower", "lore": LORE, **arguments})
    assert not written["ok"] and written["result"]["error"]["field"] == field
    assert written["result"]["error"]["rule"] == rule and not _writes(book).exists()
    ok = _call(tenant_a.member_client, chat, "lore_create", title="GT", lore="x" * 20, aliases=[f"{i:03}" + "a" * 117 for i in range(50)])
    assert ok["ok"]


# --- 1. L-1: visibility and copies ----------------------------------------------------------


def test_making_the_book_unlisted_turns_the_living_world_off_and_says_so(tenant_a):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    response = tenant_a.member_client.post(f"/api/v1/books/{book.pk}/visibility", {"visibility": "unlisted"},
                                           format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["living_world"] is False
    assert body["notices"][0]["code"] == "living_world_off" and body["notices"][0]["rule"] == "L-1"
    assert not [t for t in _context(tenant_a.member_client, chat, "hi")["tools"]
                if t["function"]["name"] == "lore_create"]
    refused = _create(tenant_a.member_client, chat)
    assert not refused["ok"] and refused["result"]["error"]["rule"] == "L-1"
    again = tenant_a.member_client.post(f"/api/v1/books/{book.pk}/visibility", {"visibility": "private"},
                                        format="json").json()
    assert again["living_world"] is False and again["notices"] == []


def test_a_copy_never_carries_the_living_world(tenant_a):
    book = _living(tenant_a, living_world_review=True)
    fill(book, 10)
    response = tenant_a.member_client.post("/api/v1/library/copies", {"book_id": book.pk}, format="json")
    assert response.status_code == 201, response.content
    copy = Book.objects.for_tenant(tenant_a.tenant).get(pk=response.json()["book"]["id"])
    assert (copy.living_world, copy.living_world_review) == (False, False)


# --- 5. AI updates, undo, revert (L-4) --------------------------------------------------------


def _updates(setup, book, **params):
    response = setup.member_client.get(f"/api/v1/books/{book.pk}/ai-updates", params)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _undo(setup, book, write_id):
    return setup.member_client.post(f"/api/v1/books/{book.pk}/ai-updates/{write_id}/undo")


def test_every_write_is_listed_with_its_chat_reply_model_time_and_text(tenant_a, validate):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    validate(_create(tenant_a.member_client, chat, reply="reply-7"), "ToolCallOut")
    validate(_create(tenant_a.member_client, chat, title="G"), "ToolCallOut")  # a refusal, documented too
    rows = _updates(tenant_a, book)
    validate(rows, "LoreWriteOut", many=True)
    assert len(rows) == 1
    row = rows[0]
    assert (row["chat"], row["reply"], row["model"], row["kind"], row["state"], row["text"]) == (
        chat, "reply-7", "gpt-test", "create", "applied", LORE)
    assert row["created_at"] and row["entry"] == _entries(book)["Glass Tower"].pk
    assert tenant_a.admin_client.get(f"/api/v1/books/{book.pk}/ai-updates").status_code == 404


def test_undo_goes_newest_to_oldest_per_entry(tenant_a):
    book = _living(tenant_a)
    original = "Salt is money in Varn; the guild weighs it."
    salt = make_entry(book, title="Salt", content=original)
    chat, _ = _play(tenant_a, book)
    first = _call(tenant_a.member_client, chat, "lore_append", entry=salt.pk, text="One.")["result"]["write"]
    second = _call(tenant_a.member_client, chat, "lore_append", entry=salt.pk, text="Two.", reply="r2")["result"]["write"]
    refused = _undo(tenant_a, book, first)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "undo_order"
    assert str(second) in refused.json()["error"]["message"]
    salt.refresh_from_db()
    assert salt.content == original + "\n\nOne.\n\nTwo."
    assert _undo(tenant_a, book, second).status_code == 200
    assert _undo(tenant_a, book, first).json()["state"] == "undone"
    salt.refresh_from_db()
    assert salt.content == original
    assert [r["state"] for r in _updates(tenant_a, book)] == ["undone", "undone"]  # the record stays


def test_undo_after_a_manual_edit_is_a_clear_conflict(tenant_a):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    write = _create(tenant_a.member_client, chat)["result"]
    edited = LORE + " The keepers are blind."
    response = tenant_a.member_client.patch(f"/api/v1/books/{book.pk}/entries/{write['entry']}",
                                            {"content": edited}, format="json")
    assert response.status_code == 200, response.content
    refused = _undo(tenant_a, book, write["write"])
    error = refused.json()["error"]
    assert refused.status_code == 409 and error["code"] == "undo_conflict" and error["rule"] == "L-4"
    assert error["details"]["changed"] == ["lore"] and "lore edited" in error["message"]
    assert _entries(book)["Glass Tower"].content == edited


def test_a_regenerated_reply_reverts_both_its_writes(tenant_a, validate):
    book = _living(tenant_a)
    original = "Salt is money in Varn; the guild weighs it."
    salt = make_entry(book, title="Salt", content=original)
    chat, _ = _play(tenant_a, book)
    _create(tenant_a.member_client, chat, reply="r1")
    _call(tenant_a.member_client, chat, "lore_append", reply="r1", entry=salt.pk, text="Black salt is forbidden.")
    kept = _create(tenant_a.member_client, chat, reply="r0", title="Old Mill")["result"]
    response = tenant_a.member_client.post(f"/api/v1/chats/{chat}/replies/r1/revert")
    assert response.status_code == 200, response.content
    validate(response.json(), "ReplyRevertOut")
    assert sorted(w["state"] for w in response.json()["reverted"]) == ["undone", "undone"]
    salt.refresh_from_db()
    assert salt.content == original and set(_entries(book)) == {"Salt", "Old Mill"}
    assert LoreWrite.objects.unscoped().get(pk=kept["write"]).state == "applied"


def test_a_reply_revert_is_all_or_nothing(tenant_a):
    book = _living(tenant_a)
    salt = make_entry(book, title="Salt", content="Salt is money in Varn; the guild weighs it.")
    chat, _ = _play(tenant_a, book)
    created = _create(tenant_a.member_client, chat, reply="r1")["result"]["entry"]
    _call(tenant_a.member_client, chat, "lore_append", reply="r1", entry=salt.pk, text="Black salt is forbidden.")
    # The newest write (the append) would undo cleanly; the older one's entry was edited by hand.
    Entry.objects.unscoped().filter(pk=created).update(content="Rewritten by hand, on purpose.")
    before = {e.pk: e.content for e in _entries(book).values()}
    response = tenant_a.member_client.post(f"/api/v1/chats/{chat}/replies/r1/revert")
    assert response.status_code == 409 and response.json()["error"]["code"] == "undo_conflict"
    assert {e.pk: e.content for e in _entries(book).values()} == before
    assert set(_writes(book).values_list("state", flat=True)) == {"applied"}
    other = tenant_a.admin_client.post(f"/api/v1/chats/{chat}/replies/r1/revert")
    assert other.status_code == 403


def test_a_held_write_is_accepted_after_an_edit(tenant_a, django_capture_on_commit_callbacks):
    book = _living(tenant_a, living_world_review=True)
    chat, _ = _play(tenant_a, book)
    held = _create(tenant_a.member_client, chat, aliases=["the Tower"])
    assert held["ok"] and held["result"]["status"] == "held" and held["result"]["entry"] is None
    assert _entries(book) == {}
    write = held["result"]["write"]
    base = f"/api/v1/books/{book.pk}/ai-updates/{write}"
    # An edit that breaks a limit is refused on accept, and the edit is kept for the next try.
    refused = tenant_a.member_client.post(f"{base}/accept", {"lore": "x" * 4_001}, format="json")
    assert refused.status_code == 422 and _entries(book) == {}
    assert _updates(tenant_a, book)[0]["edits"] == {"lore": "x" * 4_001}
    mine = "The Glass Tower: its blind keepers trade light for water, every dusk."
    assert tenant_a.member_client.patch(base, {"lore": mine, "title": "The Glass Tower"},
                                        format="json").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        accepted = tenant_a.member_client.post(f"{base}/accept", {}, format="json")
    assert accepted.status_code == 200, accepted.content
    row = accepted.json()
    assert row["state"] == "applied" and row["text"] == LORE  # the model's text stays on record
    entry = _entries(book)["The Glass Tower"]
    assert entry.content == mine and entry.keys == ["the Tower"] and entry.indexing_state == "indexed"
    assert [i["entry"] for i in _context(tenant_a.member_client, chat, "the Glass Tower")["injections"]] == [entry.pk]
    assert _undo(tenant_a, book, write).status_code == 200 and _entries(book) == {}


def test_a_held_write_can_be_rejected_and_review_is_off_by_default(tenant_a):
    assert _living(tenant_a).living_world_review is False
    book = _living(tenant_a, living_world_review=True, title="Reviewed")
    chat, _ = _play(tenant_a, book)
    write = _create(tenant_a.member_client, chat)["result"]["write"]
    response = tenant_a.member_client.post(f"/api/v1/books/{book.pk}/ai-updates/{write}/reject")
    assert response.status_code == 200 and response.json()["state"] == "rejected" and _entries(book) == {}
    again = tenant_a.member_client.post(f"/api/v1/books/{book.pk}/ai-updates/{write}/accept", {}, format="json")
    assert again.status_code == 409


# --- who may call the new endpoints ------------------------------------------------------------


def test_permission_matrix_of_the_living_world_endpoints(tenant_a, tenant_b, anon_client):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    write = _create(tenant_a.member_client, chat)["result"]["write"]
    state = lambda: (list(_writes(book).values_list("pk", "state")), sorted(_entries(book)))  # noqa: E731
    before = state()
    call = {"reply_id": "r9", "tool_call": {"id": "c", "function": {"name": "lore_create",
                                                                     "arguments": {"title": "Mill", "lore": LORE}}}}
    undo = f"/api/v1/books/{book.pk}/ai-updates/{write}/undo"
    cases = [
        (anon_client, (401, 403), (401, 403)),
        (tenant_b.member_client, (404,), (404,)),                # another tenant
        (tenant_a.admin_client, (200,), (404,)),                  # not the owner: a refusal result / invisible
        (tenant_a.client(tenant_a.read_key), (403,), (403,)),     # the owner's key without the write scope
    ]
    for client, tool_status, undo_status in cases:
        response = client.post(f"/api/v1/chats/{chat}/tool-calls", call, format="json")
        assert response.status_code in tool_status
        if response.status_code == 200:
            assert response.json()["ok"] is False
        assert client.post(undo).status_code in undo_status
        listed = client.get(f"/api/v1/books/{book.pk}/ai-updates").status_code
        assert listed == 200 if client is cases[3][0] else listed in undo_status
        assert state() == before
    assert tenant_a.client(tenant_a.read_key).get(f"/api/v1/books/{book.pk}/ai-updates").status_code == 200
    assert tenant_a.admin_client.get(f"/api/v1/books/{book.pk}/ai-updates").status_code == 404
    assert _undo(tenant_a, book, write).status_code == 200  # the owner with the write scope


def test_an_entry_deleted_by_hand_does_not_block_reverting_its_reply(tenant_a):
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    write = _create(tenant_a.member_client, chat, reply="r1")["result"]
    assert tenant_a.member_client.delete(f"/api/v1/books/{book.pk}/entries/{write['entry']}").status_code == 204
    response = tenant_a.member_client.post(f"/api/v1/chats/{chat}/replies/r1/revert")
    assert response.status_code == 200 and response.json()["reverted"][0]["state"] == "undone"
    row = _updates(tenant_a, book)[0]
    assert row["entry"] == write["entry"] and row["decided_by"] == "reply_reverted"  # the record stays traceable


def test_a_tool_call_body_with_an_unknown_field_is_refused_naming_it(tenant_a, client):
    # A misspelt field (here ``replyid``) must not be dropped silently, and the schema says so.
    book = _living(tenant_a)
    chat, _ = _play(tenant_a, book)
    response = tenant_a.member_client.post(f"/api/v1/chats/{chat}/tool-calls", {
        "reply_id": "r1", "replyid": "r2",
        "tool_call": {"id": "c1", "type": "function", "function": {"name": "lore_create", "arguments": "{}"}},
    }, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == "replyid"
    assert LoreWrite.objects.for_tenant(tenant_a.tenant).count() == 0
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert schema["components"]["schemas"]["ToolCallInRequest"]["additionalProperties"] is False


@pytest.mark.parametrize("visibility", ["unlisted", "public"])
def test_a_shared_book_never_takes_the_models_writes_even_with_the_flag_left_on(tenant_a, visibility):
    # L-1: only private books live. Publishing turns the flag off, but a row that kept it (an older
    # version, a write that raced the publish) must still be refused at the turn: no tools, no write.
    book = _living(tenant_a)
    make_entry(book, title="Salt", content="Salt is money in Varn; the guild weighs it.")
    chat, _ = _play(tenant_a, book)
    assert {"lore_create", "lore_append"} <= {t["function"]["name"] for t in _context(
        tenant_a.member_client, chat, "hello")["tools"]}
    Book.objects.for_tenant(tenant_a.tenant).filter(pk=book.pk).update(visibility=visibility, living_world=True)
    tools = {t["function"]["name"] for t in _context(tenant_a.member_client, chat, "hello")["tools"]}
    assert not tools & {"lore_create", "lore_append"}
    response = tenant_a.member_client.post(f"/api/v1/chats/{chat}/tool-calls", {
        "reply_id": "r1", "tool_call": {"id": "c1", "type": "function", "function": {
            "name": "lore_create", "arguments": json.dumps({"title": "Glass Tower", "lore": LORE, "aliases": None})}},
    }, format="json")
    assert not (response.status_code == 200 and response.json()["ok"])
    assert not _writes(book).exists() and "Glass Tower" not in _entries(book)
