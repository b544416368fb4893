"""K-1 key expressions through the entry API, a chat's context call and the formats."""
from __future__ import annotations

import json

import pytest

from books.exports import book_export
from books.imports import book_import_new
from books.models import Entry, Profile
from tests.books.factories import make_book, make_entry, member_actor
from tests.books.io_support import assert_same_lore

pytestmark = pytest.mark.django_db

DRAGON = "(dragon AND egg) OR hatchling, NOT statue"
LORE = "Dragon eggs hatch only in fire; hatchlings imprint on the first voice they hear."


def _entries(book):
    return f"/api/v1/books/{book.pk}/entries"


def test_an_entry_keeps_its_expression_and_the_api_shows_it(tenant_a):
    book = make_book(tenant_a)
    created = tenant_a.member_client.post(
        _entries(book), {"title": "Eggs", "content": LORE, "keys": ["dragon"], "key_expression": DRAGON},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["key_expression"] == DRAGON
    cleared = tenant_a.member_client.patch(f"{_entries(book)}/{created.json()['id']}", {"key_expression": "  "},
                                           format="json")
    assert cleared.status_code == 200 and cleared.json()["key_expression"] == ""


@pytest.mark.parametrize(
    ("expression", "position", "problem"),
    [
        ("dragon AND (egg OR", 18, "expected a key"),
        ("(dragon AND egg", 0, "missing ')'"),
        ('dragon AND "egg', 11, "unterminated quoted phrase"),
        ("NOT statue", 0, "no key is present"),
    ],
)
def test_an_invalid_expression_is_422_naming_the_field_rule_and_position(tenant_a, expression, position, problem):
    book = make_book(tenant_a)
    response = tenant_a.member_client.post(
        _entries(book), {"title": "Eggs", "content": LORE, "key_expression": expression}, format="json"
    )
    assert response.status_code == 422, response.json()
    error = response.json()["error"]
    assert (error["code"], error["field"], error["rule"]) == ("invalid_key_expression", "key_expression", "K-1")
    assert error["details"]["position"] == position and problem in error["details"]["problem"]
    assert f"position {position}" in error["message"]
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()


def test_an_invalid_expression_leaves_the_entry_as_it_was(tenant_a):
    book = make_book(tenant_a)
    entry = make_entry(book, content=LORE, keys=["dragon"], key_expression="dragon AND egg")
    response = tenant_a.member_client.patch(
        f"{_entries(book)}/{entry.pk}", {"title": "Renamed", "key_expression": "dragon AND"}, format="json"
    )
    assert response.status_code == 422 and response.json()["error"]["details"]["position"] == 10
    entry.refresh_from_db()
    assert (entry.title, entry.key_expression) != ("Renamed", "dragon AND")
    assert entry.key_expression == "dragon AND egg"


def test_bulk_create_names_the_entry_of_the_bad_expression(tenant_a):
    book = make_book(tenant_a)
    response = tenant_a.member_client.post(
        f"{_entries(book)}/bulk-create",
        {"entries": [{"title": "A", "content": LORE, "key_expression": "a AND b"},
                     {"title": "B", "content": LORE, "key_expression": "a OR OR b"}]},
        format="json",
    )
    assert response.status_code == 422, response.json()
    assert response.json()["error"]["field"] == "entries[1].key_expression"
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()


@pytest.mark.parametrize("profile", [Profile.SMART, Profile.SILLYTAVERN])
def test_profiles_without_key_logic_refuse_an_expression(tenant_a, profile):
    book = make_book(tenant_a, profile=profile)
    response = tenant_a.member_client.post(
        _entries(book), {"title": "Dragon eggs", "content": LORE * 2, "key_expression": "dragon AND egg"},
        format="json",
    )
    assert response.status_code == 422, response.json()
    assert (response.json()["error"]["field"], response.json()["error"]["rule"]) == ("key_expression", "K-1")


MODEL = {"tokenizer": "ceil-chars-4", "input_window": 8192}


def _chat(setup, book, profile):
    client = setup.admin_client
    character = client.post("/api/v1/characters", {"name": "Kael"}, format="json").json()["id"]
    if profile != "server":  # a server-wide collection applies to every persona (S-2)
        attached = client.post("/api/v1/attachments",
                               {"target": "character", "target_id": character, "book_id": book.pk}, format="json")
        assert attached.status_code == 201, attached.content
    return client.post("/api/v1/chats", {"kind": "character", "character_id": character, "profile": profile},
                       format="json").json()["id"]


def _turn(setup, chat, *texts):
    response = setup.admin_client.post(
        f"/api/v1/chats/{chat}/context",
        {"messages": [{"role": "user", "name": "Ana", "text": text} for text in texts], "model": MODEL,
         "log": "full"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    return {i["entry"] for i in body["injections"]}, {row["entry"]: row for row in body["request_log"]}


@pytest.mark.parametrize("profile", ["classic", "server"])
def test_the_context_call_activates_by_the_expression(tenant_a, profile):
    book = make_book(tenant_a, owner="admin" if profile == "classic" else None, profile=profile, title="Eyrie")
    eggs = make_entry(book, title="Eggs", content=LORE, keys=["dragon"], key_expression=DRAGON)
    chat = _chat(tenant_a, book, profile)
    injected, log = _turn(tenant_a, chat, "A dragon guards an egg.")
    assert injected == {eggs.pk}, log
    injected, log = _turn(tenant_a, chat, "A dragon sleeps.")  # keys alone would fire
    assert injected == set()
    injected, log = _turn(tenant_a, chat, "A hatchling beside a stone statue.")
    assert injected == set() and log[eggs.pk]["outcome"] == "secondary_failed"
    assert "does not hold" in log[eggs.pk]["detail"]
    injected, log = _turn(tenant_a, chat, "A hatchling squeaks.")
    assert injected == {eggs.pk} and "holds" in log[eggs.pk]["detail"]


def test_a_sillytavern_chat_reads_the_nearest_sillytavern_keys(tenant_a):
    # The sillytavern profile reads a book as SillyTavern reads its export: dragon + egg (and_all).
    book = make_book(tenant_a, owner="admin", title="Eyrie")
    eggs = make_entry(book, title="Eggs", content=LORE, keys=["wyrm"], key_expression=DRAGON)
    chat = _chat(tenant_a, book, "sillytavern")
    assert _turn(tenant_a, chat, "A dragon guards an egg.")[0] == {eggs.pk}
    assert _turn(tenant_a, chat, "A wyrm.")[0] == set()


def _book_with_expressions(setup):
    book = make_book(setup, title="Eyrie")
    make_entry(book, title="Eggs", content=LORE, keys=["wyrm"], secondary_keys=["nest"],
               secondary_logic="not_all", key_expression=DRAGON)
    make_entry(book, title="Gold", content="Red-gold scales mark the royal line.",
               key_expression='"red AND gold" OR /wyrm(ling)?s?/i')
    make_entry(book, title="Plain", content="Plain keys stay plain.", keys=["plain"])
    return book


@pytest.mark.parametrize("to", ["sillytavern", "card-v2", "native"])
def test_export_and_import_keep_the_expression_and_the_entrys_own_keys(tenant_a, tenant_b, to):
    book = _book_with_expressions(tenant_a)
    payload, _, filename = book_export(actor=member_actor(tenant_a), book=book, to=to)
    again = book_import_new(actor=member_actor(tenant_b), data=payload, filename=filename, profile="classic")
    assert_same_lore(book, again.book)
    rows = {e.title: e for e in Entry.objects.for_tenant(tenant_b.tenant).filter(book=again.book)}
    assert rows["Eggs"].key_expression == DRAGON
    assert (rows["Eggs"].keys, rows["Eggs"].secondary_keys, rows["Eggs"].secondary_logic) == (
        ["wyrm"], ["nest"], "not_all")
    named = {item["entry"]: item for item in again.receipt["key_expressions"]}
    assert named["Eggs"]["key_expression"] == DRAGON and named["Eggs"]["used"] is True
    assert "Plain" not in named


def test_sillytavern_reads_the_nearest_equivalent_and_the_file_names_it(tenant_a):
    book = _book_with_expressions(tenant_a)
    doc = json.loads(book_export(actor=member_actor(tenant_a), book=book, to="sillytavern")[0])
    entries = {e["comment"]: e for e in doc["entries"].values()}
    eggs = entries["Eggs"]
    assert (eggs["key"], eggs["keysecondary"], eggs["selectiveLogic"], eggs["selective"]) == (
        ["dragon"], ["egg"], 3, True)  # 3 = AND ALL
    assert entries["Gold"]["key"] == ["red AND gold", "/wyrm(ling)?s?/i"] and entries["Gold"]["keysecondary"] == []
    assert entries["Plain"]["key"] == ["plain"] and "loreweave" not in entries["Plain"]
    receipt = {item["title"]: item for item in doc["loreweave"]["key_expressions"]}
    assert set(receipt) == {"Eggs", "Gold"}
    assert receipt["Eggs"]["exported_as"] == {"key": ["dragon"], "keysecondary": ["egg"], "selectiveLogic": "and_all"}


def test_importing_an_expression_into_a_world_book_keeps_it_unused_and_says_so(tenant_a, tenant_b):
    book = _book_with_expressions(tenant_a)
    payload, _, filename = book_export(actor=member_actor(tenant_a), book=book, to="native")
    again = book_import_new(actor=member_actor(tenant_b), data=payload, filename=filename, profile="smart")
    named = {item["entry"]: item for item in again.receipt["key_expressions"]}
    assert named["Eggs"]["used"] is False
    assert any("key_expression" in item["settings"] for item in again.receipt["unsupported"])
    smart = Entry.objects.for_tenant(tenant_b.tenant).get(book=again.book, title="Eggs")
    assert smart.key_expression == "" and smart.extra["key_expression"] == {"expression": DRAGON}
    # and a keyword book importing that world book's export takes the expression back
    payload, _, filename = book_export(actor=member_actor(tenant_b), book=again.book, to="sillytavern")
    back = book_import_new(actor=member_actor(tenant_b), data=payload, filename=filename, profile="classic",
                           title="Eyrie again")
    row = Entry.objects.for_tenant(tenant_b.tenant).get(book=back.book, title="Eggs")
    assert row.key_expression == DRAGON and "key_expression" not in row.extra
