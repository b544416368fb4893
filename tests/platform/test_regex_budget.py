"""Regex keys under a time budget (issue 13, point 4): a catastrophic key cannot hold a turn.

The key ``/(a+)+$/`` against 5,000 ``a``s and a ``!`` backtracks for minutes on
``re``; under the budget the turn answers at once, the key is skipped and the
request log and the editor say why.
"""
from __future__ import annotations

import pytest

from cast.models import RequestLog
from retrieval.engine.matching import KeyMatcher, KeyPattern
from retrieval.engine.regex_budget import KEY_TIMEOUT, RegexBudget, regex_budget
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
    response = setup.admin_client.post(
        f"/api/v1/chats/{chat}/context",
        {"messages": [{"role": "user", "name": "Ana", "text": text}], "model": MODEL}, format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("profile", ["classic", "sillytavern"])
def test_catastrophic_regex_key_is_skipped_logged_and_flagged(tenant_a, profile):
    book, chat, entries = _setup(tenant_a, profile)
    for _ in range(2):  # and again on the next turn: skipped again, never a held worker
        body = _turn(tenant_a, chat, ATTACK)
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
    body = _turn(tenant_a, chat, "aaa!")
    assert entries["evil"].pk in {i["entry"] for i in body["injections"]}


def test_a_key_that_fits_the_budget_matches_as_before(tenant_a):
    _, chat, entries = _setup(tenant_a, "classic")
    body = _turn(tenant_a, chat, "the keeper of the lighthouse")
    assert {i["entry"] for i in body["injections"]} == {entries["good"].pk, entries["sane"].pk}
    assert not any(row.get("warnings") for row in body["request_log"])


def test_the_turn_budget_bounds_many_slow_keys():
    # Twenty catastrophic keys: each could take KEY_TIMEOUT, but once the turn's budget is spent the
    # rest get the minimum. The budget's clock is injected: the first search finds the turn fresh,
    # every later one finds it past its deadline, whatever the machine's load.
    keys = [KeyPattern(text=f"/(a+)+$|q{i}/", regex=True) for i in range(20)]
    matcher = KeyMatcher(keys)
    readings = iter([0.0, 0.0])  # the budget's start, the first key's look

    def clock() -> float:
        return next(readings, 1.0)

    with regex_budget(turn_budget=0.2, clock=clock) as budget:
        assert matcher.find_first(["a" * 5000 + "!"]) == {}
    reasons = sorted(budget.overruns.values())
    assert len(reasons) == 20
    assert reasons.count(f"took longer than {KEY_TIMEOUT * 1000:.0f} ms") == 1
    assert reasons.count("the turn's regex budget (200 ms) was spent") == 19
    assert KEY_TIMEOUT * 20 > 0.2


def test_a_fresh_budget_gives_each_key_its_own_timeout_until_the_turn_runs_low():
    now = [0.0]
    budget = RegexBudget(key_timeout=0.05, turn_budget=0.25, clock=lambda: now[0])
    assert budget.timeout() == (0.05, False)
    now[0] = 0.21  # 40 ms left: less than one key's timeout
    left, spent = budget.timeout()
    assert spent and left == pytest.approx(0.04)
    now[0] = 0.3
    assert budget.timeout() == (0.001, True)


@pytest.mark.parametrize("profile,rule", [("classic", "C-5"), ("sillytavern", "C-5"), ("server", "S-3")])
def test_keys_per_entry_and_characters_per_key_are_limited(tenant_a, profile, rule):
    book = make_book(tenant_a, owner="admin", title="Keys", profile=profile)
    url = f"/api/v1/books/{book.pk}/entries"
    client = tenant_a.admin_client
    assert client.post(url, {"content": "x", "keys": [f"k{i}" for i in range(500)]}, format="json").status_code == 201
    assert client.post(url, {"content": "x", "keys": ["k" * 500]}, format="json").status_code == 201
    too_many = client.post(url, {"content": "x", "keys": [f"k{i}" for i in range(100_000)]}, format="json")
    assert too_many.status_code == 422
    error = too_many.json()["error"]
    assert (error["field"], error["rule"]) == ("keys", rule)
    too_long = client.post(url, {"content": "x", "secondary_keys": ["ok", "k" * 501]}, format="json")
    assert too_long.status_code == 422
    assert too_long.json()["error"]["field"] == "secondary_keys[1]"
