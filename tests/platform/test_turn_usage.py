"""What a turn leaves behind: usage counts applied in batches (W-11) and a compact stored log (C-15)."""
from __future__ import annotations

import json

import pytest
from django.db import connection

from cast import usage
from cast.models import RequestLog
from config.celery import app
from tests.platform.test_context_api import _attach, _book, _character, _chat, _context

pytestmark = pytest.mark.django_db



def _chat_with_book(setup, entries):
    """A classic character chat reading one book of ``entries``; (chat id, the entries)."""
    book, made = _book(setup, "Harbour", entries)
    character = _character(setup, "Kael")
    _attach(setup, "character", character, book)
    return _chat(setup, kind="character", character_id=character, profile="classic"), made


def _turn(setup, chat, text):
    return _context(setup, chat, text)


@pytest.fixture
def broker_mode(monkeypatch):
    """Celery as in production (not eager): count the sweeps a turn asks for instead of running them."""
    asked: list[int] = []
    monkeypatch.setattr(usage, "_next_sweep", 0.0)
    from django.core.cache import cache

    cache.delete(usage.SWEEP_CLAIM_KEY)
    from cast.tasks import request_usage_sweep

    monkeypatch.setattr(request_usage_sweep, "apply_async", lambda countdown: asked.append(countdown))
    app.conf.task_always_eager = False
    try:
        yield asked
    finally:
        app.conf.task_always_eager = True


def test_many_turns_are_counted_by_one_sweep(tenant_a, broker_mode, django_capture_on_commit_callbacks):
    chat, (bell, wreck) = _chat_with_book(tenant_a, [{"keys": ["bell"], "content": "Tide bells ring."},
                                                     {"keys": ["wreck"], "content": "Wreck-right."}])
    with django_capture_on_commit_callbacks(execute=True):
        for text in ("the bell", "the bell and the wreck", "the bell again"):
            _turn(tenant_a, chat, text)
    # Three turns within a second set one sweep, a second ahead; nothing is counted on the request path.
    assert broker_mode == [usage.SWEEP_DELAY]
    usage._next_sweep = 0.0  # that sweep has started: the next turn sets another
    _claim_expire()
    with django_capture_on_commit_callbacks(execute=True):
        _turn(tenant_a, chat, "the wreck")
    assert broker_mode == [usage.SWEEP_DELAY, usage.SWEEP_DELAY]
    bell.refresh_from_db()
    assert bell.usage_count == 0
    assert RequestLog.objects.for_tenant(tenant_a.tenant).filter(usage_recorded_at__isnull=True).count() == 4

    from cast.tasks import request_usage_sweep

    assert request_usage_sweep() == 4
    bell.refresh_from_db()
    wreck.refresh_from_db()
    assert (bell.usage_count, wreck.usage_count) == (3, 2)
    assert bell.last_used_at is not None
    # Idempotent: nothing is waiting, a second sweep changes nothing.
    assert request_usage_sweep() == 0
    bell.refresh_from_db()
    assert bell.usage_count == 3


def _claim_expire():
    from django.core.cache import cache

    cache.delete(usage.SWEEP_CLAIM_KEY)


def test_the_web_processes_set_one_sweep_between_them(broker_mode, monkeypatch):
    """Five gunicorn processes each setting a sweep a second would make five small sweeps a second."""
    usage.request_usage_sweep_soon()
    assert broker_mode == [usage.SWEEP_DELAY]
    for _ in range(4):  # other processes (their own gate not set yet), within that second
        usage._next_sweep = 0.0
        usage.request_usage_sweep_soon()
    assert broker_mode == [usage.SWEEP_DELAY]
    # Such a process waits only until the other's sweep starts, not a whole second of its own.
    import time

    assert usage._next_sweep - time.monotonic() <= usage.SWEEP_DELAY
    usage._next_sweep = 0.0
    _claim_expire()  # that sweep has started: the next commit, in any process, sets another
    usage.request_usage_sweep_soon()
    assert broker_mode == [usage.SWEEP_DELAY, usage.SWEEP_DELAY]


def test_without_the_cache_each_process_still_sets_its_sweep(broker_mode, monkeypatch):
    from django.core.cache import cache

    def down(*args, **kwargs):
        raise ConnectionError("cache down")

    monkeypatch.setattr(cache, "add", down)
    for _ in range(2):
        usage._next_sweep = 0.0
        usage.request_usage_sweep_soon()
    assert broker_mode == [usage.SWEEP_DELAY, usage.SWEEP_DELAY]


def test_a_turn_that_injects_nothing_waits_for_no_sweep(tenant_a, broker_mode, django_capture_on_commit_callbacks):
    chat, _ = _chat_with_book(tenant_a, [{"keys": ["bell"], "content": "Tide bells ring."}])
    with django_capture_on_commit_callbacks(execute=True):
        body = _turn(tenant_a, chat, "nothing of note")
    assert body["injections"] == []
    assert broker_mode == []
    log = RequestLog.objects.for_tenant(tenant_a.tenant).get(pk=body["request_log_id"])
    assert log.usage_recorded_at is not None


def test_one_sweep_counts_every_tenants_turns_in_their_own_entries(tenant_a, tenant_b, django_capture_on_commit_callbacks):
    from cast.usage import request_usage_pending_record

    chat, (bell,) = _chat_with_book(tenant_a, [{"keys": ["bell"], "content": "Tide bells ring."}])
    other_chat, _ = _chat_with_book(tenant_b, [{"keys": ["bell"], "content": "Bells in the valley."}])
    with django_capture_on_commit_callbacks(execute=False):
        _turn(tenant_a, chat, "the bell")
        _turn(tenant_b, other_chat, "the bell")
    # One sweep serves every tenant, each entry counted in its own tenant.
    assert request_usage_pending_record() == 2
    bell.refresh_from_db()
    assert bell.usage_count == 1


def test_stored_request_log_is_compressed_and_reads_back_whole(tenant_a):
    entries = [{"keys": [f"rune{i}"], "content": f"Rune {i} burns with a pale light over the harbour."}
               for i in range(60)]
    chat, _ = _chat_with_book(tenant_a, entries)
    body = _turn(tenant_a, chat, " ".join(f"rune{i}" for i in range(60)))
    listed = tenant_a.admin_client.get(f"/api/v1/chats/{chat}/requests").json()["results"][0]
    assert listed["log"] == body["request_log"]
    assert listed["injections"] == body["injections"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT log FROM cast_requestlog WHERE id = %s", [body["request_log_id"]])
        stored = bytes(cursor.fetchone()[0])
    # A big log's sentences repeat: stored in well under a quarter of its JSON size.
    assert len(stored) * 4 < len(json.dumps(body["request_log"]))


def test_request_log_pages_are_small(tenant_a):
    chat, _ = _chat_with_book(tenant_a, [{"keys": ["bell"], "content": "Tide bells ring."}])
    for n in range(3):
        _turn(tenant_a, chat, f"bell {n}")
    page = tenant_a.admin_client.get(f"/api/v1/chats/{chat}/requests?page_size=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2
    # Asking for more than a page of big logs gets the largest page there is.
    big = tenant_a.admin_client.get(f"/api/v1/chats/{chat}/requests?page_size=10000").json()
    assert len(big["results"]) == 3


@pytest.mark.django_db(transaction=True)
def test_logs_stored_before_compression_survive_the_migration(tenant_a):
    from django.db.migrations.executor import MigrationExecutor

    chat, _ = _chat_with_book(tenant_a, [{"keys": ["bell"], "content": "Tide bells ring."}])
    body = _turn(tenant_a, chat, "the bell")
    executor = MigrationExecutor(connection)
    executor.migrate([("cast", "0003_request_log_usage")])
    try:
        old_apps = executor.loader.project_state([("cast", "0003_request_log_usage")]).apps
        OldLog = old_apps.get_model("cast", "RequestLog")
        OldLog.objects.filter(pk=body["request_log_id"]).update(
            log=[{"entry": "1", "outcome": "injected", "detail": "stored as jsonb"}], injections=[{"entry": "1"}]
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    log = RequestLog.objects.for_tenant(tenant_a.tenant).get(pk=body["request_log_id"])
    assert log.log == [{"entry": "1", "outcome": "injected", "detail": "stored as jsonb"}]
    assert log.injections == [{"entry": "1"}]


def test_retention_deletes_old_counted_logs_only(tenant_a, settings, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from cast.tasks import request_logs_prune

    chat, _ = _chat_with_book(tenant_a, [{"keys": ["bell"], "content": "Tide bells ring."}])
    with django_capture_on_commit_callbacks(execute=False):  # usage left waiting on purpose
        old_waiting = _turn(tenant_a, chat, "the bell")["request_log_id"]
    old_counted = _turn(tenant_a, chat, "nothing here")["request_log_id"]
    recent = _turn(tenant_a, chat, "still nothing")["request_log_id"]
    logs = RequestLog.objects.for_tenant(tenant_a.tenant)
    logs.filter(pk__in=[old_waiting, old_counted]).update(created_at=timezone.now() - timedelta(days=40))

    settings.REQUEST_LOG_RETENTION_DAYS = 0  # the default: every log is kept
    assert request_logs_prune() == 0
    settings.REQUEST_LOG_RETENTION_DAYS = 30
    assert request_logs_prune() == 1
    # The old log whose usage was never counted stays until the sweep has counted it.
    assert set(logs.values_list("pk", flat=True)) == {old_waiting, recent}
