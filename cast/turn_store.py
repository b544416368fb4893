"""Where a chat turn reads and writes its chat (P-7, C-15): three statements, written out in full.

A stored chat's turn reads its chat (:func:`chat_read`), runs the engine, and writes by
compare-and-swap (:func:`turn_write`): the chat's new timed state, its turn counter and the turn's
request log land together, and only if the chat still has the turn count the turn read. Only a turn
writes the timed state and every turn counts itself, so the counter is the chat's version. When
another turn of the chat landed in between, nothing is written and the caller runs the turn again
from the state :func:`turn_state_lock` reads while it holds the chat's row (docs/adr/0003).

* PostgreSQL: the write is one statement, ``WITH moved AS (UPDATE … RETURNING id) INSERT … SELECT …
  FROM moved``: the log row is inserted only when the update found the chat at the count read
  (both or neither), in one round trip.
* SQLite (no ``UPDATE`` inside ``WITH``): the same two statements in one short transaction; the
  insert runs only when the update changed a row.

Why SQL and not the ORM: ``update()`` and ``create()`` spend longer building their statements
than the database spends running them (~0.3 and ~0.5 ms a turn, measured), and the context call is
the product's hot path. The statements here are constant text, so there is nothing to build or
cache per chat, and PostgreSQL prepares them after their second run (``prepare_threshold``).

Tenant scoping: these statements do not pass through the tenant-scoped manager, so each names the
tenant itself: every read and update filters on ``tenant_id`` as ``for_tenant()`` would, and the
log row is stored under the tenant given. Values are prepared by the model fields
(``get_db_prep_save``), so a row written here reads back through the ORM as if the ORM wrote it.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Field, Model
from django.utils import timezone

from cast.models import Chat, RequestLog
from lore_platform.tenancy.models import Tenant


@dataclass(frozen=True, kw_only=True)
class TurnState:
    """Where a chat's turns stand: the engine's timed state (JSON, as stored) and how many turns landed."""

    timed_state: Mapping[str, Any]
    # The chat's version: a write lands only on the count it started from.
    turns: int


@dataclass(frozen=True, kw_only=True)
class ChatRow:
    """A chat as a turn reads it: the row (what gathering and the chat's settings need) and its state."""

    chat: Chat
    state: TurnState


@dataclass(frozen=True, kw_only=True)
class RequestLogRow:
    """What one turn stores in its request log (C-15): the rows as the answer shows them, with integer ids."""

    turn: int
    profile: str
    model_id: str
    injections: Sequence[Mapping[str, Any]]
    world_index: Sequence[Mapping[str, Any]]
    # Every entry ("full") or all but the simply not matched ("compact", counted in ``not_matched``).
    log: Sequence[Mapping[str, Any]]
    log_detail: str
    entries_considered: int
    not_matched: int
    # Injected entry ids per owning tenant, counted later by the usage sweep (W-11).
    usage: Mapping[str, Sequence[int]]


# --- the statements ---------------------------------------------------------------------------

# Every column of each table, in statement order (tests/platform/test_turn_store.py keeps them equal to the models').
CHAT_COLUMNS = ("id", "tenant_id", "owner_id", "kind", "character_id", "story_id", "novel_id", "channel_id",
                "parent_channel_id", "profile", "model_id", "timed_state", "turns", "created_at")
LOG_COLUMNS = ("tenant_id", "chat_id", "turn", "profile", "model_id", "injections", "world_index", "log",
               "log_detail", "entries_considered", "not_matched", "usage", "usage_recorded_at", "created_at")

CHAT_SELECT = """
    SELECT id, tenant_id, owner_id, kind, character_id, story_id, novel_id, channel_id,
           parent_channel_id, profile, model_id, timed_state, turns, created_at
    FROM cast_chat WHERE tenant_id = %s AND id = %s
"""

# PostgreSQL: the row lock a turn takes when its first write found the chat moved on.
STATE_LOCK_POSTGRESQL = "SELECT timed_state, turns FROM cast_chat WHERE tenant_id = %s AND id = %s FOR UPDATE"
# SQLite has no row locks: a write that changes nothing takes the database's write lock until the
# transaction ends (no other turn lands meanwhile, whatever the transaction mode), then the state is read.
STATE_LOCK_SQLITE = ("UPDATE cast_chat SET turns = turns WHERE tenant_id = %s AND id = %s",
                     "SELECT timed_state, turns FROM cast_chat WHERE tenant_id = %s AND id = %s")

# Parameters: timed state, tenant, chat, the turn count read; then (PostgreSQL) the log's values but
# its chat id, which comes from the updated row: no updated row, no log row.
TURN_WRITE_POSTGRESQL = """
    WITH moved AS (
        UPDATE cast_chat SET timed_state = %s, turns = turns + 1
        WHERE tenant_id = %s AND id = %s AND turns = %s
        RETURNING id
    )
    INSERT INTO cast_requestlog (tenant_id, chat_id, turn, profile, model_id, injections, world_index, log,
                                 log_detail, entries_considered, not_matched, usage, usage_recorded_at, created_at)
    SELECT %s, moved.id, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s FROM moved
    RETURNING id
"""

# SQLite: the same write as two statements in one transaction; the insert runs only if the update changed a row.
CHAT_STATE_UPDATE_SQLITE = """
    UPDATE cast_chat SET timed_state = %s, turns = turns + 1
    WHERE tenant_id = %s AND id = %s AND turns = %s
"""
LOG_INSERT_SQLITE = """
    INSERT INTO cast_requestlog (tenant_id, chat_id, turn, profile, model_id, injections, world_index, log,
                                 log_detail, entries_considered, not_matched, usage, usage_recorded_at, created_at)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""


@functools.cache
def _fields(model: type[Model], columns: tuple[str, ...]) -> tuple[Field[Any, Any], ...]:
    by_column = {f.column: f for f in model._meta.concrete_fields}
    return tuple(by_column[c] for c in columns)


@functools.cache
def _converters(vendor: str, model: type[Model], columns: tuple[str, ...]) -> tuple[tuple[int, Any, tuple[Any, ...]], ...]:
    """What the ORM applies to each column it reads (the backend's converters, then the field's own), by position."""
    found = []
    for index, field in enumerate(_fields(model, columns)):
        column = field.get_col(model._meta.db_table)
        converters = (*connection.ops.get_db_converters(column), *field.get_db_converters(connection))
        if converters:
            found.append((index, column, converters))
    return tuple(found)


def _decoded(model: type[Model], columns: tuple[str, ...], row: Sequence[Any]) -> list[Any]:
    """Column values as the ORM reads them (JSON arrives as text; SQLite's datetimes as naive UTC)."""
    values = list(row)
    for index, column, converters in _converters(connection.vendor, model, columns):
        for convert in converters:
            values[index] = convert(values[index], column, connection)
    return values


# --- reading ---------------------------------------------------------------------------------


def chat_read(*, tenant: Tenant, chat_id: int) -> ChatRow | None:
    """The chat ``chat_id`` of ``tenant`` and its turn state; ``None`` when the tenant has no such chat."""
    with connection.cursor() as cursor:
        cursor.execute(CHAT_SELECT, (tenant.pk, chat_id))
        row = cursor.fetchone()
    if row is None:
        return None
    chat = Chat.from_db(connection.alias, [f.attname for f in _fields(Chat, CHAT_COLUMNS)],
                        _decoded(Chat, CHAT_COLUMNS, row))
    chat.tenant = tenant  # the row's own tenant, already loaded: no query when gathering asks for it
    return ChatRow(chat=chat, state=TurnState(timed_state=chat.timed_state or {}, turns=chat.turns))


def turn_state_lock(*, tenant: Tenant, chat_id: int) -> TurnState | None:
    """The chat's turn state, holding the chat until the current transaction ends: no other turn of it
    lands meanwhile, so a :func:`turn_write` from this state succeeds. Call inside ``transaction.atomic()``."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("turn_state_lock holds the chat until the transaction ends: call it inside one")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(STATE_LOCK_POSTGRESQL, (tenant.pk, chat_id))
        else:
            take_lock, select = STATE_LOCK_SQLITE
            cursor.execute(take_lock, (tenant.pk, chat_id))
            cursor.execute(select, (tenant.pk, chat_id))
        row = cursor.fetchone()
    if row is None:
        return None
    state, turns = _decoded(Chat, ("timed_state", "turns"), row)
    return TurnState(timed_state=state or {}, turns=turns)


# --- writing ---------------------------------------------------------------------------------


def turn_write(*, tenant: Tenant, chat_id: int, read: TurnState, timed_state: Mapping[str, Any],
               log: RequestLogRow) -> int | None:
    """Store one turn of the chat: its new timed state, the counter one up, and its request log.

    Compare-and-swap on the counter in ``read``: the new request log's id, or ``None`` with nothing
    written when another turn of this chat landed since ``read`` was read (or the chat is gone).
    """
    now = timezone.now()
    log_values = (
        tenant.pk, chat_id, log.turn, log.profile, log.model_id, log.injections, log.world_index, log.log,
        log.log_detail, log.entries_considered, log.not_matched, log.usage,
        # Nothing injected, nothing to count: stored as counted, so the usage sweep never reads it.
        None if log.usage else now,
        now,
    )
    log_params = [f.get_db_prep_save(v, connection) for f, v in zip(_fields(RequestLog, LOG_COLUMNS), log_values)]
    state = _fields(Chat, ("timed_state",))[0].get_db_prep_save(timed_state, connection)
    update_params = [state, tenant.pk, chat_id, read.turns]
    if connection.vendor == "postgresql":
        del log_params[LOG_COLUMNS.index("chat_id")]  # the statement takes it from the updated row
        with connection.cursor() as cursor:
            cursor.execute(TURN_WRITE_POSTGRESQL, (*update_params, *log_params))
            row = cursor.fetchone()
        return None if row is None else int(row[0])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(CHAT_STATE_UPDATE_SQLITE, update_params)
        if cursor.rowcount != 1:
            return None
        cursor.execute(LOG_INSERT_SQLITE, log_params)
        return int(cursor.lastrowid)
