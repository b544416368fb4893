"""C-15: a stored request log keeps what the live answer said."""
from __future__ import annotations

import pytest

from tests.platform.test_context_api import _book, _character, _chat, _context, _attach

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
