"""Regex keys under a time budget (issue 13, point 4): a catastrophic key cannot hold a turn.

The key ``/(a+)+$/`` against 5,000 ``a``s and a ``!`` backtracks for minutes on
``re``; under the budget the turn answers at once, the key is skipped and the
request log and the editor say why.
"""
from __future__ import annotations

import time

import pytest

from cast.models import RequestLog
from retrieval.engine.matching import KeyMatcher, KeyPattern
from retrieval.engine.regex_budget import KEY_TIMEOUT, regex_budget
from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db

EVIL = "/(a+)+$/"
ATTACK = "The lighthouse keeper said " + "a" * 5000 + "!"
MODEL = {"tokenizer": "ceil-chars-4", "input_window": 8192}


def _setup(setup, profile):
    book = make_book(setup, owner="admin", title="Coast", profile=profile)
    evil = make_entry(book, title="Evil", keys=[EVIL], content="Never injected.")
    good = make_entry(book, title="Light", keys=["lighthouse"], content="The lighthouse never goes dark.")
    sane = make_entry(book, title="Sane", keys=["/keep(er|ing)/"], content="Keepers keep the light.")
    client = setup.admin_client
    character = client.post("/api/v1/characters", {"name": "Kael"}, format="json").json()["id"]
    client.post("/api/v1/attachments", {"target": "character", "target_id": character, "book_id": book.pk},
                format="json")
    chat = client.post("/api/v1/chats", {"kind": "character", "character_id": character, "profile": profile},
                       format="json").json()["id"]
    return book, chat, {"evil": evil, "good": good, "sane": sane}


def _turn(setup, chat, text):
    started = time.perf_counter()
    response = setup.admin_client.post(
        f"/api/v1/chats/{chat}/context",
        {"messages": [{"role": "user", "name": "Ana", "text": text}], "model": MODEL}, format="json",
    )
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.content
    return response.json(), elapsed


@pytest.mark.parametrize("profile", ["classic", "sillytavern"])
def test_catastrophic_regex_key_is_skipped_logged_and_flagged(tenant_a, profile):
    book, chat, entries = _setup(tenant_a, profile)
    for _ in range(2):  # and again on the next turn: still in time, never a held worker
        body, elapsed = _turn(tenant_a, chat, ATTACK)
        assert elapsed < 1.0
        injected = {i["entry"] for i in body["injections"]}
        assert injected == {entries["good"].pk, entries["sane"].pk}
        rows = {row["entry"]: row for row in body["request_log"]}
        evil = rows[entries["evil"].pk]  # kept in the compact log: its reason is there
        assert evil["outcome"] == "not_matched"
        assert any(w.startswith("regex_timeout:") and EVIL in w for w in evil["warnings"])
        assert not rows[entries["sane"].pk].get("warnings")
    stored = RequestLog.objects.for_tenant(tenant_a.tenant).filter(chat_id=chat).order_by("-id").first()
    assert any("regex_timeout:" in w for row in stored.log for w in row.get("warnings", []))

    listing = tenant_a.admin_client.get(f"/api/v1/books/{book.pk}/entries").json()["results"]
    codes = {row["title"]: [w["code"] for w in row["warnings"]] for row in listing}
    assert "regex_timeout" in codes["Evil"]
    assert "regex_timeout" not in codes["Light"] and "regex_timeout" not in codes["Sane"]

    # Rewriting the key clears the flag; a harmless text leaves the new key unflagged.
    response = tenant_a.admin_client.patch(f"/api/v1/books/{book.pk}/entries/{entries['evil'].pk}",
                                           {"keys": ["/a+!/"]}, format="json")
    assert response.status_code == 200, response.content
    assert "regex_timeout" not in [w["code"] for w in response.json()["warnings"]]
    body, _ = _turn(tenant_a, chat, "aaa!")
    assert entries["evil"].pk in {i["entry"] for i in body["injections"]}


def test_a_key_that_fits_the_budget_matches_as_before(tenant_a):
    _, chat, entries = _setup(tenant_a, "classic")
    body, _ = _turn(tenant_a, chat, "the keeper of the lighthouse")
    assert {i["entry"] for i in body["injections"]} == {entries["good"].pk, entries["sane"].pk}
    assert not any(row.get("warnings") for row in body["request_log"])


def test_the_turn_budget_bounds_many_slow_keys():
    # Twenty catastrophic keys: each could take KEY_TIMEOUT, but the turn's budget stops them all.
    keys = [KeyPattern(text=f"/(a+)+$|q{i}/", regex=True) for i in range(20)]
    matcher = KeyMatcher(keys)
    started = time.perf_counter()
    with regex_budget(turn_budget=0.2) as budget:
        assert matcher.find_first(["a" * 5000 + "!"]) == {}
    assert time.perf_counter() - started < 0.2 + 20 * 0.01 + 0.5
    assert len(budget.overruns) == 20
    assert any("budget" in reason for reason in budget.overruns.values())
    assert KEY_TIMEOUT * 20 > 0.2


@pytest.mark.parametrize("profile,rule", [("classic", "C-5"), ("sillytavern", "C-5"), ("server", "S-3")])
def test_keys_per_entry_and_characters_per_key_are_limited(tenant_a, profile, rule):
    book = make_book(tenant_a, owner="admin", title="Keys", profile=profile)
    url = f"/api/v1/books/{book.pk}/entries"
    client = tenant_a.admin_client
    assert client.post(url, {"content": "x", "keys": [f"k{i}" for i in range(500)]}, format="json").status_code == 201
    assert client.post(url, {"content": "x", "keys": ["k" * 500]}, format="json").status_code == 201
    started = time.perf_counter()
    too_many = client.post(url, {"content": "x", "keys": [f"k{i}" for i in range(100_000)]}, format="json")
    # Mostly parsing the 1 MB body; the limit is checked before any key is processed (loose bound:
    # the machine is shared).
    assert time.perf_counter() - started < 2.0
    assert too_many.status_code == 422
    error = too_many.json()["error"]
    assert (error["field"], error["rule"]) == ("keys", rule)
    too_long = client.post(url, {"content": "x", "secondary_keys": ["ok", "k" * 501]}, format="json")
    assert too_long.status_code == 422
    assert too_long.json()["error"]["field"] == "secondary_keys[1]"
