"""The context call's hot path (issue 18.1): the partner app's usual body read without the
serializer, and a chat's books kept per process by the rows they are made from. Each shortcut
must answer exactly what the long way answers, and notice every change at once."""
from __future__ import annotations

import pytest

from cast.api.serializers import ContextIn, context_in_fast
from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "text": "We row toward the lighthouse."}, {"role": "assistant", "text": "", "name": "Kael"}]

BODIES = [
    {"messages": MESSAGES},
    {"messages": MESSAGES, "model": {"id": "gpt-4o"}},
    {"messages": MESSAGES, "model": {"id": "gpt-4o"}, "log": "full"},
    {"messages": MESSAGES, "names": {"user": "Ana", "char": "Kael"}},
    {"messages": MESSAGES, "names": {"user": "Ana"}, "log": "compact"},
    {"messages": []},
    # The serializer's to decide (trimmed, blank, too long, other fields, bad values):
    {"messages": MESSAGES, "model": {"id": " gpt-4o "}},
    {"messages": MESSAGES, "model": {"id": ""}},
    {"messages": MESSAGES, "model": {"id": None}},
    {"messages": MESSAGES, "model": {"id": "x" * 121}},
    {"messages": MESSAGES, "model": {"id": "gpt-4o", "tools": True}},
    {"messages": MESSAGES, "model": {}},
    {"messages": MESSAGES, "model": "gpt-4o"},
    {"messages": MESSAGES, "names": {"user": "Ana", "bot": "B"}},
    {"messages": MESSAGES, "names": {"user": ""}},
    {"messages": MESSAGES, "log": "verbose"},
    {"messages": MESSAGES, "profile": "classic"},
    {"messages": MESSAGES, "render": True},
    {"messages": [{"role": "narrator", "text": "x"}]},
    {"messages": [{"role": "user"}]},
    {"messages": "hello"},
    {"model": {"id": "gpt-4o"}},
    [],
]


@pytest.mark.parametrize("body", BODIES)
def test_the_usual_body_reads_as_the_serializer_reads_it(body):
    fast = context_in_fast(body)
    serializer = ContextIn(data=body)
    if fast is None:
        return  # the serializer answers it (its errors are the API's: tests/contract)
    assert serializer.is_valid(), serializer.errors
    assert fast == serializer.validated_data


def test_the_usual_body_is_read_without_the_serializer():
    # Breaking the shortcut (always None) must fail here, not only slow the turn down.
    assert context_in_fast(BODIES[1]) is not None
    assert context_in_fast({"messages": MESSAGES, "model": {"id": " gpt-4o "}}) is None


def _setup(tenant):
    book = make_book(tenant, owner="admin", title="Coast")
    make_entry(book, keys=["lighthouse"], content="The lighthouse never goes dark.")
    character = tenant.admin_client.post("/api/v1/characters", {"name": "Kael"}, format="json").json()["id"]
    attached = tenant.admin_client.post("/api/v1/attachments", {"target": "character", "target_id": character,
                                                               "book_id": book.pk}, format="json").json()
    chat = tenant.admin_client.post("/api/v1/chats", {"kind": "character", "character_id": character,
                                                      "profile": "classic"}, format="json").json()["id"]
    return book, character, attached, chat


def _turn(tenant, chat, **extra):
    body = {"messages": [{"role": "user", "text": "We row toward the lighthouse."}], "model": {"id": "gpt-4o"}, **extra}
    response = tenant.admin_client.post(f"/api/v1/chats/{chat}/context", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_an_untrimmed_model_id_is_answered_as_before(tenant_a):
    _, _, _, chat = _setup(tenant_a)
    assert _turn(tenant_a, chat, model={"id": "  gpt-4o  "})["model"]["id"] == "gpt-4o"
    response = tenant_a.admin_client.post(f"/api/v1/chats/{chat}/context",
                                          {"messages": MESSAGES, "model": {"id": "x" * 121}}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"].startswith("model")


def test_the_chat_books_follow_every_change_between_turns(tenant_a):
    book, _character, attached, chat = _setup(tenant_a)
    first = _turn(tenant_a, chat)
    assert [(b["id"], b["title"]) for b in first["books"]] == [(book.pk, "Coast")]
    assert [i["content"] for i in first["injections"]] == ["The lighthouse never goes dark."]

    # A renamed book: the next turn names it so.
    renamed = tenant_a.admin_client.patch(f"/api/v1/books/{book.pk}", {"title": "Far Coast"}, format="json")
    assert renamed.status_code == 200, renamed.content
    assert [b["title"] for b in _turn(tenant_a, chat)["books"]] == ["Far Coast"]

    # A new entry (a new book version): its text too.
    added = tenant_a.admin_client.post(f"/api/v1/books/{book.pk}/entries", {
        "title": "Keeper", "keys": ["lighthouse"], "content": "A second keeper lives there."}, format="json")
    assert added.status_code == 201, added.content
    assert "A second keeper lives there." in [i["content"] for i in _turn(tenant_a, chat)["injections"]]

    # A second book attached tenant-wide: read after the character's.
    other = make_book(tenant_a, owner="admin", title="Harbour")
    make_entry(other, keys=["lighthouse"], content="Harbour lore.")
    tenant_a.admin_client.post("/api/v1/attachments", {"target": "tenant", "book_id": other.pk}, format="json")
    assert [(b["id"], b["via"]) for b in _turn(tenant_a, chat)["books"]] == [(book.pk, "character"), (other.pk, "tenant")]

    # Detached: gone at once.
    deleted = tenant_a.admin_client.delete(f"/api/v1/attachments/{attached['id']}")
    assert deleted.status_code == 204, deleted.content
    body = _turn(tenant_a, chat)
    assert [b["id"] for b in body["books"]] == [other.pk]
    assert [i["content"] for i in body["injections"]] == ["Harbour lore."]
    assert added.json()["id"] not in [i["entry"] for i in body["injections"]]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_turns_of_one_chat_each_count(make_tenant):
    """Turns of one chat at once: each lands (one that finds its chat moved on runs again under the
    chat's lock), none is lost from the counter or the request logs (PostgreSQL: real concurrency)."""
    import threading

    from django.db import connections

    from cast.models import Chat, RequestLog
    from cast.turns import TurnInput, chat_turn
    from retrieval.engine import values as ev
    from tests.books.factories import admin_actor

    tenant = make_tenant()
    _, _, _, chat = _setup(tenant)
    actor = admin_actor(tenant)
    request = TurnInput(messages=(ev.Message(role="user", text="We row toward the lighthouse."),), model_id="gpt-4o")
    errors = []
    barrier = threading.Barrier(6)

    def turn() -> None:
        try:
            barrier.wait()
            for _ in range(3):
                chat_turn(actor=actor, chat_id=chat, request=request)
        except Exception as exc:  # noqa: BLE001 — reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=turn) for _ in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        # Each turn runs its usage sweep eagerly here, and Celery marks an eager run in one process-wide
        # flag it saves and restores per call: six threads interleaving can leave it set, and every later
        # ``AsyncResult.get()`` in this test process then refuses ("Never call result.get() within a task").
        from celery._state import _set_task_join_will_block

        _set_task_join_will_block(False)
    assert not errors
    assert Chat.objects.for_tenant(tenant.tenant).get(pk=chat).turns == 18
    assert RequestLog.objects.for_tenant(tenant.tenant).filter(chat_id=chat).count() == 18


def test_a_turn_that_finds_its_chat_moved_on_runs_again_from_the_new_state(tenant_a, monkeypatch):
    """Another turn of the chat lands while this one runs: this one is not written over it, it runs
    again from the state the other left (an entry spent by the other turn stays spent)."""
    from cast import turns
    from cast.models import Chat, RequestLog
    from tests.books.factories import admin_actor

    book, _, _, chat = _setup(tenant_a)
    once = make_entry(book, keys=["lighthouse"], content="@@dont_activate_after_match\nThe keeper waves once.")
    actor = admin_actor(tenant_a)
    request = turns.TurnInput(messages=(turns.ev.Message(role="user", text="We row toward the lighthouse."),),
                              model_id="gpt-4o")
    real_turn_on = turns._turn_on
    runs = []

    def turn_on(*args, **kwargs):
        runs.append(dict(kwargs["state"]))
        if len(runs) == 1:  # the first run: another turn of this chat lands meanwhile
            inner = turns.chat_turn(actor=actor, chat_id=chat, request=request)
            assert once.pk in [int(i.entry) for i in inner.selection.injections]
        return real_turn_on(*args, **kwargs)

    monkeypatch.setattr(turns, "_turn_on", turn_on)
    answer = turns.chat_turn(actor=actor, chat_id=chat, request=request)
    assert len(runs) == 3  # this turn, the one that landed, this turn again
    assert runs[0] == {} and str(once.pk) in runs[2].get("spent", [])
    assert once.pk not in [int(i.entry) for i in answer.selection.injections]
    assert Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat).turns == 2
    logs = RequestLog.objects.for_tenant(tenant_a.tenant).filter(chat_id=chat).order_by("id")
    assert [log.pk for log in logs][-1] == answer.request_log_id and logs.count() == 2


def test_each_turn_writes_its_own_chat_and_log(make_tenant):
    """The turn's UPDATE and INSERT are compiled once and reused: each chat of each tenant still
    gets its own state, counter and request log, stored as the ORM would store them (C-15)."""
    from cast.models import Chat, RequestLog

    alpha, beta = make_tenant("Alpha"), make_tenant("Beta")
    chats = [(alpha, _setup(alpha)[3]), (alpha, _setup(alpha)[3]), (beta, _setup(beta)[3])]
    expected = {}
    for rounds in (1, 2, 3):
        for index, (tenant, chat) in enumerate(chats):
            if index + 1 < rounds:
                continue  # chats end at different turn counts: a write to the wrong row shows
            body = _turn(tenant, chat, log="full" if index == 1 else "compact")
            expected[chat] = (tenant, expected.get(chat, (None, 0))[1] + 1)
            log = RequestLog.objects.for_tenant(tenant.tenant).get(pk=body["request_log_id"])
            assert (log.chat_id, log.turn, log.profile, log.model_id) == (chat, body["turn"], "classic", "gpt-4o")
            assert log.injections == body["injections"]
            assert log.log == body["request_log"]
            assert log.log_detail == ("full" if index == 1 else "compact")
            assert (log.entries_considered, log.not_matched) == (body["request_log_summary"]["entries"],
                                                                 body["request_log_summary"]["not_matched"])
            assert log.usage == {str(tenant.tenant.pk): [i["entry"] for i in body["injections"]]}
            assert log.usage_recorded_at is None and log.created_at is not None
    assert {chat: turn for chat, (_, turn) in expected.items()} == {chats[0][1]: 1, chats[1][1]: 2, chats[2][1]: 3}
    for chat, (tenant, turn) in expected.items():
        assert Chat.objects.for_tenant(tenant.tenant).get(pk=chat).turns == turn
        assert RequestLog.objects.for_tenant(tenant.tenant).filter(chat_id=chat).count() == turn


@pytest.mark.parametrize("record", [
    {"entry": "12", "book": "3", "outcome": "injected", "detail": "key matched"},
    {"entry": "12", "book": "3", "outcome": "not_matched"},
    {"entry": "7", "book": "3", "outcome": "injected", "detail": "recursion", "key": "tower", "message": 0, "via_entry": "12"},
    {"entry": "x-1", "book": "3", "outcome": "skipped", "key": "", "message": 4, "warnings": ("unknown decorator @@x",)},
    {"entry": "99", "book": "ext", "outcome": "budget", "detail": "over budget", "warnings": ("a", "b")},
])
def test_a_log_row_is_the_engine_record_with_integer_ids(record):
    """The stored and answered log row (C-15) is the engine's own shape, ids as integers, same key order."""
    from cast.turns import log_row
    from retrieval.engine import values as ev
    from retrieval.engine.cases import log_record_to_dict

    engine = log_record_to_dict(ev.LogRecord(**record))
    expected = {name: int(value) if name in ("entry", "book", "via_entry") and value.isdigit() else value
                for name, value in engine.items()}
    for _ in range(2):  # the second time the id conversions are remembered
        row = log_row(ev.LogRecord(**record))
        assert row == expected
        assert list(row) == list(expected)
        assert [type(v) for v in row.values()] == [type(v) for v in expected.values()]
