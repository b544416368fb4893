"""The turn's store (cast/turn_store.py): the chat as a turn reads it, and the turn's compare-and-swap write.

Two turns that started from the same state: one is stored, the other stores nothing and is told so
(``None``), on both databases, one after the other and at the same moment. What is stored reads back
through the ORM as the ORM would have stored it, and no statement reaches another tenant's chat.
"""
from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from cast import turn_store
from cast.models import Chat, RequestLog
from cast.turn_store import (
    CHAT_COLUMNS,
    LOG_COLUMNS,
    RequestLogRow,
    TurnState,
    chat_read,
    turn_state_lock,
    turn_write,
)

pytestmark = pytest.mark.django_db


def _log(turn: int, **changes: object) -> RequestLogRow:
    values: dict[str, object] = {
        "turn": turn, "profile": "classic", "model_id": "gpt-4o",
        "injections": [{"entry": 7, "book": 3, "content": "The lighthouse never goes dark.", "position": "before"}],
        "world_index": [{"entry": 7, "line": "Lighthouse"}],
        "log": [{"entry": 7, "book": 3, "outcome": "injected", "detail": "key matched", "key": "lighthouse"}],
        "log_detail": "compact", "entries_considered": 12, "not_matched": 11,
        "usage": {"1": [7]},
    }
    values.update(changes)
    return RequestLogRow(**values)  # type: ignore[arg-type]


def _chat(tenant) -> Chat:
    return Chat.objects.create(tenant=tenant.tenant, profile="classic", timed_state={"turn": 0}, turns=0)


def test_the_chat_reads_as_stored_with_its_state(tenant_a):
    chat = _chat(tenant_a)
    row = chat_read(tenant=tenant_a.tenant, chat_id=chat.pk)
    assert row is not None
    assert row.state == TurnState(timed_state={"turn": 0}, turns=0)
    stored = Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat.pk)
    assert {c: getattr(row.chat, c) for c in [f.attname for f in Chat._meta.concrete_fields]} == \
           {c: getattr(stored, c) for c in [f.attname for f in Chat._meta.concrete_fields]}


def test_two_writes_from_the_same_state_store_one_turn(tenant_a):
    chat = _chat(tenant_a)
    read = chat_read(tenant=tenant_a.tenant, chat_id=chat.pk).state
    first = turn_write(tenant=tenant_a.tenant, chat_id=chat.pk, read=read, timed_state={"turn": 1, "spent": ["7"]},
                       log=_log(1))
    second = turn_write(tenant=tenant_a.tenant, chat_id=chat.pk, read=read, timed_state={"turn": 1, "other": True},
                        log=_log(1, profile="smart"))
    assert isinstance(first, int) and second is None
    stored = Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat.pk)
    assert (stored.turns, stored.timed_state) == (1, {"turn": 1, "spent": ["7"]})
    logs = RequestLog.objects.for_tenant(tenant_a.tenant).filter(chat=chat)
    assert [(log.pk, log.profile) for log in logs] == [(first, "classic")]
    # The loser reads the chat again and lands from the newer state.
    newer = chat_read(tenant=tenant_a.tenant, chat_id=chat.pk).state
    assert newer == TurnState(timed_state={"turn": 1, "spent": ["7"]}, turns=1)
    third = turn_write(tenant=tenant_a.tenant, chat_id=chat.pk, read=newer, timed_state={"turn": 2}, log=_log(2))
    assert isinstance(third, int) and third != first
    assert Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat.pk).turns == 2


def test_the_stored_log_reads_back_through_the_orm(tenant_a):
    chat = _chat(tenant_a)
    log = _log(1, log_detail="full")
    log_id = turn_write(tenant=tenant_a.tenant, chat_id=chat.pk, read=TurnState(timed_state={}, turns=0),
                        timed_state={"turn": 1}, log=log)
    stored = RequestLog.objects.for_tenant(tenant_a.tenant).get(pk=log_id)
    assert (stored.tenant_id, stored.chat_id) == (tenant_a.tenant.pk, chat.pk)
    for name in ("turn", "profile", "model_id", "injections", "world_index", "log", "log_detail",
                 "entries_considered", "not_matched", "usage"):
        assert getattr(stored, name) == getattr(log, name), name
    # Waiting for the usage sweep (W-11), stamped with the time it was stored.
    assert stored.usage_recorded_at is None and stored.created_at is not None


def test_a_turn_that_injected_nothing_is_stored_as_counted(tenant_a):
    chat = _chat(tenant_a)
    log_id = turn_write(tenant=tenant_a.tenant, chat_id=chat.pk, read=TurnState(timed_state={}, turns=0),
                        timed_state={}, log=_log(1, injections=[], usage={}))
    stored = RequestLog.objects.for_tenant(tenant_a.tenant).get(pk=log_id)
    assert stored.usage_recorded_at is not None  # the usage sweep never needs to read it


def test_another_tenants_chat_is_neither_read_nor_written(tenant_a, tenant_b):
    theirs = _chat(tenant_b)
    assert chat_read(tenant=tenant_a.tenant, chat_id=theirs.pk) is None
    written = turn_write(tenant=tenant_a.tenant, chat_id=theirs.pk, read=TurnState(timed_state={}, turns=0),
                         timed_state={"taken": True}, log=_log(1))
    assert written is None
    stored = Chat.objects.for_tenant(tenant_b.tenant).get(pk=theirs.pk)
    assert (stored.turns, stored.timed_state) == (0, {"turn": 0})
    assert not RequestLog.objects.for_tenant(tenant_a.tenant).exists()
    assert not RequestLog.objects.for_tenant(tenant_b.tenant).exists()
    with transaction.atomic():
        assert turn_state_lock(tenant=tenant_a.tenant, chat_id=theirs.pk) is None


@pytest.mark.django_db(transaction=True)
def test_the_state_lock_wants_a_transaction(tenant_a):
    chat = _chat(tenant_a)
    with pytest.raises(RuntimeError, match="inside one"):  # in autocommit the chat would be let go at once
        turn_state_lock(tenant=tenant_a.tenant, chat_id=chat.pk)
    with transaction.atomic():
        state = turn_state_lock(tenant=tenant_a.tenant, chat_id=chat.pk)
        assert state == TurnState(timed_state={"turn": 0}, turns=0)
        assert turn_write(tenant=tenant_a.tenant, chat_id=chat.pk, read=state, timed_state={}, log=_log(1))


def test_the_statements_name_every_column_of_their_tables():
    # A column added to a model must be added to the store's statements (else it would be stored
    # as the database's default, not the model's, and the chat read would leave it deferred).
    assert set(CHAT_COLUMNS) == {f.column for f in Chat._meta.concrete_fields}
    assert set(LOG_COLUMNS) == {f.column for f in RequestLog._meta.concrete_fields} - {"id"}
    assert (Chat._meta.db_table, RequestLog._meta.db_table) == ("cast_chat", "cast_requestlog")
    # ... in the order the statements name them (values are passed in that order).
    assert f"SELECT {', '.join(CHAT_COLUMNS)} FROM cast_chat" in " ".join(turn_store.CHAT_SELECT.split())
    for statement in (turn_store.TURN_WRITE_POSTGRESQL, turn_store.LOG_INSERT_SQLITE):
        assert f"INSERT INTO cast_requestlog ({', '.join(LOG_COLUMNS)})" in " ".join(statement.split())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_from_the_same_state_store_one_turn(make_tenant):
    """Writes on their own connections at once, all from the state read before any landed: exactly
    one is stored, every other is told ``None`` and stores nothing. PostgreSQL only: the SQLite test
    database is in memory with a shared cache, whose table locks answer "locked" at once instead of
    waiting (one writer at a time is what SQLite gives; the same-state test above covers it)."""
    tenant = make_tenant()
    chat = _chat(tenant)
    read = chat_read(tenant=tenant.tenant, chat_id=chat.pk).state
    writers = 4
    barrier = threading.Barrier(writers)
    results: list[object] = []

    def write(index: int) -> None:
        try:
            barrier.wait()
            results.append(turn_write(tenant=tenant.tenant, chat_id=chat.pk, read=read,
                                      timed_state={"writer": index}, log=_log(1, model_id=f"writer-{index}")))
        except Exception as exc:  # noqa: BLE001 — reported below
            results.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    landed = [r for r in results if isinstance(r, int)]
    assert len(results) == writers and len(landed) == 1 and results.count(None) == writers - 1, results
    stored = Chat.objects.for_tenant(tenant.tenant).get(pk=chat.pk)
    log = RequestLog.objects.for_tenant(tenant.tenant).get(chat=chat)
    assert log.pk == landed[0] and stored.turns == 1
    assert stored.timed_state == {"writer": int(log.model_id.removeprefix("writer-"))}  # the winner's state
