"""Usage counts of injected entries (W-11), applied in batches after the responses;
and the retention of request logs.

Every turn stores, in its request log, which entries it injected; a sweep adds
those up and writes each entry's count once per batch. Twenty chats on one
book would otherwise queue on the same entry rows every turn, and each turn
would pay for a broker message. A turn that injected lore sets a sweep one
second ahead unless a web process has one set already (it runs at once when
Celery runs eagerly, as in the embedded default), so a count lags its turn by
about a second. Celery beat runs the sweep too, for turns whose message was
lost. ``last_used_at`` takes the newest turn of the batch: a second's resolution.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from cast.models import RequestLog
from lore_platform.tasks import task_publish
from lore_platform.tenancy.models import Tenant

SWEEP_BATCH = 500
# A turn's sweep runs this many seconds later and serves every turn this process commits meanwhile.
SWEEP_DELAY = 1.0
SWEEP_CLAIM_KEY = "cast:usage-sweep-set"

_next_sweep = 0.0
_lock = threading.Lock()


def request_usage_sweep_soon() -> None:
    """After a turn commits: make sure a sweep will run after this moment.

    One sweep is set per second for all web processes (``_sweep_claim``); a turn
    committed before that sweep's start is counted by it, so no turn waits for the beat (which is
    only the safety net for a lost message or a crashed worker).
    """
    global _next_sweep
    from cast.tasks import request_usage_sweep

    if request_usage_sweep.app.conf.task_always_eager:
        request_usage_sweep.delay()
        return
    now = time.monotonic()
    with _lock:
        if now < _next_sweep:
            return  # the sweep already set starts after this commit
        _next_sweep = now + SWEEP_DELAY
    starts_in = _sweep_claim()
    if starts_in is not None:
        with _lock:
            # Another web process set one: this process needs none before that one starts.
            _next_sweep = now + starts_in
        return
    # A broker outage only delays the count: the log waits (usage_recorded_at null) for the beat's sweep.
    task_publish(request_usage_sweep, countdown=SWEEP_DELAY)


def _sweep_claim() -> float | None:
    """Claim the next sweep for this process (None), or the seconds until the one another web
    process set starts: one sweep per ``SWEEP_DELAY`` for all of them, not one each.

    The claim lives in the shared cache as long as that sweep's countdown and holds its start
    time, so a turn that finds it committed before that sweep starts. Five processes each setting
    their own cost the worker and the database ~0.2-0.3 ms per turn at 150 turns/s
    (bench.context_load). Without the cache: claimed.
    """
    starts_at = time.time() + SWEEP_DELAY
    try:
        if cache.add(SWEEP_CLAIM_KEY, starts_at, timeout=SWEEP_DELAY):
            return None
        other = cache.get(SWEEP_CLAIM_KEY)
    except Exception:  # noqa: BLE001 — the count must never depend on the cache being up
        return None
    if other is None:
        return None  # that sweep has just started: set the next one
    return max(0.0, float(other) - time.time())


def request_usage_pending_record(*, batch: int = SWEEP_BATCH) -> int:
    """Apply the usage of up to ``batch`` request logs not yet counted; returns how many logs.

    Idempotent: a log is counted and marked in one transaction, and concurrent
    sweeps skip the logs another one holds.
    """
    from books.services import entries_record_usage

    with transaction.atomic():
        # The sweep serves every tenant: it is the one reader that starts unscoped.
        pending = list(
            RequestLog.objects.unscoped()
            .filter(usage_recorded_at__isnull=True)
            .order_by("id")
            .select_for_update(skip_locked=True)
            .only("id", "usage", "created_at")[:batch]
        )
        if not pending:
            return 0
        uses: dict[int, Counter[int]] = {}
        for log in pending:
            for owner_id, entry_ids in log.usage.items():
                uses.setdefault(int(owner_id), Counter()).update(set(entry_ids))
        newest = max(log.created_at for log in pending)
        owners = {t.pk: t for t in Tenant.objects.filter(pk__in=list(uses))}
        for owner_id in sorted(uses):
            if owner_id in owners:  # a deleted tenant's entries are gone with it
                entries_record_usage(tenant=owners[owner_id], counts=uses[owner_id], used_at=newest)
        RequestLog.objects.unscoped().filter(pk__in=[log.pk for log in pending]).update(
            usage_recorded_at=timezone.now()
        )
    return len(pending)


def request_logs_prune(*, older_than_days: int, batch: int = 5_000) -> int:
    """Delete request logs older than ``older_than_days`` (0 keeps them all); returns how many.

    Logs whose usage is still waiting are kept until the sweep has counted them.
    Deleted in batches, each its own transaction, so a large backlog never holds
    long locks.
    """
    if older_than_days <= 0:
        return 0
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted = 0
    while True:
        # Retention is an operator policy over every tenant: it starts unscoped.
        ids = list(
            RequestLog.objects.unscoped()
            .filter(created_at__lt=cutoff, usage_recorded_at__isnull=False)
            .order_by("id")
            .values_list("id", flat=True)[:batch]
        )
        if not ids:
            return deleted
        with transaction.atomic():
            deleted += RequestLog.objects.unscoped().filter(pk__in=ids).delete()[0]
