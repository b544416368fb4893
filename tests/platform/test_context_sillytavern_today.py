"""SillyTavern 1.13+ through the context API (issue 31): what the call carries beyond the messages.

Generation-type ``triggers``, ``characterFilter`` against the chat's (or named) character,
outlets, extra match sources, ``ignoreBudget`` and the request log that tells them apart.
"""
from __future__ import annotations

from typing import Any

import pytest

from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db

MODEL = {"tokenizer": "ceil-chars-4", "input_window": 8192}


@pytest.fixture
def st_book(tenant_a):
    return make_book(tenant_a, owner="admin", title="Skyrim", profile="sillytavern", scan_depth=2)


def _character(setup, name: str, book) -> int:
    client = setup.admin_client
    character = client.post("/api/v1/characters", {"name": name}, format="json").json()["id"]
    client.post("/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book.pk},
                format="json")
    return int(character)


def _stateless(setup, text: str, **extra: Any) -> dict[str, Any]:
    response = setup.admin_client.post(
        "/api/v1/context",
        {"messages": [{"role": "user", "text": text, "name": "Ana"}], "model": MODEL, "profile": "sillytavern",
         "log": "full", **extra},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def _injected(body: dict[str, Any]) -> set[int]:
    return {i["entry"] for i in body["injections"]}


def _log(body: dict[str, Any], entry) -> dict[str, Any]:
    return next(r for r in body["request_log"] if r["entry"] == entry.pk)


def test_generation_type_limits_entries_with_triggers(tenant_a, st_book):
    impersonate = make_entry(st_book, keys=["door"], content="Speak as the user.",
                             extra={"st": {"triggers": ["impersonate"]}})
    always = make_entry(st_book, keys=["door"], content="The door is oak.")
    ids = {"book_ids": [st_book.pk]}

    normal = _stateless(tenant_a, "I open the door.", **ids)
    assert _injected(normal) == {always.pk}
    assert _log(normal, impersonate)["outcome"] == "filtered"
    assert "impersonate" not in _log(normal, impersonate)["detail"] and "normal" in _log(normal, impersonate)["detail"]

    acting = _stateless(tenant_a, "I open the door.", generation_type="impersonate", **ids)
    assert _injected(acting) == {impersonate.pk, always.pk}


def test_swipe_does_not_scan_the_message_being_swiped(tenant_a, st_book):
    entry = make_entry(st_book, keys=["replyword"], content="Seen.")
    messages = [{"role": "user", "text": "go", "name": "Ana"}, {"role": "assistant", "text": "a replyword", "name": "K"}]
    client = tenant_a.admin_client
    bodies = [
        client.post("/api/v1/context", {"messages": messages, "model": MODEL, "profile": "sillytavern",
                                        "book_ids": [st_book.pk], **extra}, format="json").json()
        for extra in ({}, {"generation_type": "swipe"})
    ]
    assert [entry.pk in _injected(body) for body in bodies] == [True, False]


def test_unknown_generation_type_is_a_400_naming_the_field(tenant_a, st_book):
    response = tenant_a.admin_client.post(
        "/api/v1/context", {"messages": [{"role": "user", "text": "x"}], "book_ids": [st_book.pk],
                            "generation_type": "dream"}, format="json")
    assert response.status_code == 400
    assert "generation_type" in response.content.decode()


def test_character_filter_checks_the_character_of_a_character_id_call(tenant_a, st_book):
    only_neloth = make_entry(st_book, keys=["tower"], content="Neloth's tower.",
                             extra={"st": {"characterFilter": {"isExclude": False, "names": ["Neloth"], "tags": []}}})
    not_neloth = make_entry(st_book, keys=["tower"], content="Someone else's tower.",
                            extra={"st": {"characterFilter": {"isExclude": True, "names": ["Neloth"], "tags": []}}})
    neloth = _character(tenant_a, "Neloth", st_book)
    kael = _character(tenant_a, "Kael", st_book)

    assert _injected(_stateless(tenant_a, "The tower.", character_id=neloth)) == {only_neloth.pk}
    as_kael = _stateless(tenant_a, "The tower.", character_id=kael)
    assert _injected(as_kael) == {not_neloth.pk}
    assert _log(as_kael, only_neloth)["outcome"] == "filtered"


def test_character_filter_in_a_stored_chat_and_by_tags(tenant_a, st_book):
    elves = make_entry(st_book, keys=["tower"], content="Elven tower.",
                       extra={"st": {"characterFilter": {"isExclude": False, "names": [], "tags": ["elf"]}}})
    only_neloth = make_entry(st_book, keys=["tower"], content="Neloth's tower.",
                             extra={"st": {"characterFilter": {"isExclude": False, "names": ["Neloth"], "tags": []}}})
    neloth = _character(tenant_a, "Neloth", st_book)
    chat = tenant_a.admin_client.post("/api/v1/chats", {"kind": "character", "character_id": neloth,
                                                        "profile": "sillytavern"}, format="json").json()["id"]

    def turn(**extra: Any) -> set[int]:
        response = tenant_a.admin_client.post(
            f"/api/v1/chats/{chat}/context",
            {"messages": [{"role": "user", "text": "The tower."}], "model": MODEL, **extra}, format="json")
        assert response.status_code == 200, response.content
        return _injected(response.json())

    assert turn() == {only_neloth.pk}  # the chat's character, no tags
    assert turn(character={"name": "Neloth", "tags": ["elf"]}) == {only_neloth.pk, elves.pk}
    assert turn(character={"name": "Kael", "tags": []}) == set()


def test_outlet_entries_come_back_named_and_fill_the_outlet_macro(tenant_a, st_book):
    low = make_entry(st_book, keys=["go"], content="SCENE-10", order=10, placement="before_persona",
                     extra={"st": {"position": 7, "outletName": "scene"}})
    high = make_entry(st_book, keys=["go"], content="SCENE-30", order=30, placement="before_persona",
                      extra={"st": {"position": 7, "outletName": "scene"}})
    reader = make_entry(st_book, keys=["go"], content="Scene: {{outlet::scene}}.")
    body = _stateless(tenant_a, "Let us go.", book_ids=[st_book.pk])

    outlet = [(i["entry"], i["content"]) for i in body["injections"] if i["slot"] == "outlet_scene"]
    assert outlet == [(high.pk, "SCENE-30"), (low.pk, "SCENE-10")]  # highest order first, as SillyTavern
    by_entry = {i["entry"]: i["content"] for i in body["injections"]}
    assert by_entry[reader.pk] == "Scene: SCENE-30\nSCENE-10."
    assert "outlet 'scene'" in _log(body, high)["detail"]


def test_match_texts_are_scanned_by_entries_that_ask_for_them(tenant_a, st_book):
    lance = make_entry(st_book, keys=["lance"], content="The lance.",
                       extra={"st": {"matchCharacterDescription": True}})
    plain = make_entry(st_book, keys=["lance"], content="Plain.")
    texts = {"match_texts": {"character_description": "She carries a lance."}}
    body = _stateless(tenant_a, "Hello there.", book_ids=[st_book.pk], **texts)
    assert _injected(body) == {lance.pk}
    assert _log(body, plain)["outcome"] == "not_matched"


def test_budget_cuts_are_logged_as_such_and_ignore_budget_entries_stay(tenant_a, st_book):
    st_book.token_budget = 10
    st_book.save()
    first = make_entry(st_book, keys=["go"], content="x" * 20, order=300)
    cut = make_entry(st_book, keys=["go"], content="y" * 40, order=200)
    kept = make_entry(st_book, keys=["go"], content="z" * 40, order=100, extra={"st": {"ignoreBudget": True}})
    body = _stateless(tenant_a, "go", book_ids=[st_book.pk])

    assert _injected(body) == {first.pk, kept.pk}
    row = _log(body, cut)
    assert row["outcome"] == "over_budget" and "cut by budget" in row["detail"] and "10 tokens" in row["detail"]
    assert "ignores the budget" in _log(body, kept)["detail"]


def test_in_a_group_chat_the_speaking_member_is_the_active_character(tenant_a, st_book):
    only_neloth = make_entry(st_book, keys=["tower"], content="Neloth's tower.",
                             extra={"st": {"characterFilter": {"isExclude": False, "names": ["Neloth"], "tags": []}}})
    neloth = _character(tenant_a, "Neloth", st_book)
    kael = _character(tenant_a, "Kael", st_book)
    chat = tenant_a.admin_client.post("/api/v1/chats", {"kind": "group", "member_ids": [neloth, kael],
                                                        "profile": "sillytavern"}, format="json").json()["id"]

    def turn(speaker: str) -> set[int]:
        response = tenant_a.admin_client.post(
            f"/api/v1/chats/{chat}/context",
            {"messages": [{"role": "user", "text": "The tower."}], "model": MODEL,
             "names": {"user": "Ana", "char": speaker}}, format="json")
        assert response.status_code == 200, response.content
        return _injected(response.json())

    assert turn("Neloth") == {only_neloth.pk}
    assert turn("Kael") == set()


def test_outlet_macro_in_the_apps_texts_is_filled_when_rendering(tenant_a, st_book):
    make_entry(st_book, keys=["go"], content="SCENE-30", placement="before_persona",
               extra={"st": {"position": 7, "outletName": "scene"}})
    body = _stateless(tenant_a, "Let us go.", book_ids=[st_book.pk], render=True,
                      parts={"character": "Kael. Now: {{outlet::scene}}{{outlet::empty}}"})
    character = [m["content"] for m in body["messages"] if m["slot"] == "character"]
    assert character == ["Kael. Now: SCENE-30"]
