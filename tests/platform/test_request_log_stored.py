"""C-15: a stored request log keeps what the live answer said."""
from __future__ import annotations

import pytest

from tests.platform.test_context_api import _attach, _book, _character, _chat, _context

pytestmark = pytest.mark.django_db


def _setup(tenant_a):
    book, (oath, salt, fish) = _book(tenant_a, "Oaths", [
        {"keys": ["oath"], "content": "The oath binds whoever speaks it."},
        {"keys": ["salt"], "content": "Oaths are sworn on salt."},
        {"keys": ["fish"], "content": "Fish are sacred at the coast."},
    ])
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    return _chat(tenant_a, kind="character", character_id=kael, profile="classic"), (oath, salt, fish)


def _stored(tenant_a, chat_id):
    return tenant_a.admin_client.get(f"/api/v1/chats/{chat_id}/requests").json()["results"][0]


def test_compact_stored_log_keeps_the_count_of_not_matched(tenant_a):
    chat_id, (oath, _, _) = _setup(tenant_a)
    live = _context(tenant_a, chat_id, "I swear the oath.")
    stored = _stored(tenant_a, chat_id)
    assert live["request_log_summary"] == {"entries": 3, "not_matched": 2, "not_matched_listed": False}
    assert stored["request_log_summary"] == live["request_log_summary"]
    assert stored["log_detail"] == "compact"
    assert [row["entry"] for row in stored["log"]] == [oath.pk]


def test_full_turn_is_stored_in_full(tenant_a):
    chat_id, entries = _setup(tenant_a)
    live = _context(tenant_a, chat_id, "I swear the oath.", log="full")
    stored = _stored(tenant_a, chat_id)
    assert stored["log_detail"] == "full"
    assert stored["log"] == live["request_log"]
    assert sorted(row["entry"] for row in stored["log"]) == sorted(e.pk for e in entries)
    assert stored["request_log_summary"] == {"entries": 3, "not_matched": 2, "not_matched_listed": True}


def _smart_setup(tenant_a):
    # Too big to travel whole (W-2): the turn injects the named entry and indexes some; the rest
    # of the book is simply not matched.
    rows = [{"title": f"Harbour {i}", "content": f"Harbour {i} trades salt. " * 140, "keys": []} for i in range(30)]
    book, made = _book(tenant_a, "Coast", rows, profile="smart")
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    return _chat(tenant_a, kind="character", character_id=kael, profile="smart"), made


@pytest.mark.parametrize("log", ["compact", "full"])
def test_smart_turn_counts_the_not_matched_and_lists_them_only_in_the_full_log(tenant_a, log):
    chat_id, entries = _smart_setup(tenant_a)
    live = _context(tenant_a, chat_id, "We sail to Harbour 3.", log=log)
    stored = _stored(tenant_a, chat_id)
    explained = [row for row in live["request_log"] if row["outcome"] != "not_matched"]
    not_matched = 30 - len(explained)
    named = next(row for row in explained if row["entry"] == entries[3].pk)
    assert named["outcome"] == "injected" and "named" in named["detail"]
    assert 0 < not_matched < 30
    assert live["request_log_summary"] == {"entries": 30, "not_matched": not_matched,
                                           "not_matched_listed": log == "full"}
    assert len(live["request_log"]) == (30 if log == "full" else len(explained))
    assert stored["log"] == live["request_log"] and stored["log_detail"] == log
    assert stored["request_log_summary"] == {**live["request_log_summary"], "not_matched_listed": log == "full"}
