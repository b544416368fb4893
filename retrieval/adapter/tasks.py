"""Celery tasks for smart-retrieval indexing.

Tasks take ids only (the tenant id with the entry ids: every read is tenant-
scoped) and are idempotent: indexing skips entries whose vector is current, so
``acks_late`` redelivery, retries and the sweep never embed the same text twice.
Database hiccups (a lost connection, a deadlock, two workers inserting the same
entry's vector at once) are retried with backoff; model errors are recorded on
the entries as "failed" by the service and not retried.
"""
from __future__ import annotations

from typing import Any

from celery import shared_task

from books.events import ENTRIES_CHANGED
from lore_platform.tasks import TASK_RETRY


def _summary(report: Any) -> dict[str, int]:
    return {
        "embedded": len(report.embedded),
        "current": len(report.current),
        "removed": len(report.removed),
        "superseded": len(report.superseded),
        "failed": len(report.failed),
        "missing": len(report.missing),
    }


@shared_task(name="retrieval.index_entries", **TASK_RETRY)
def index_entries(tenant_id: int, entry_ids: list[int]) -> dict[str, int]:
    """Bring these entries' vectors up to date."""
    from retrieval.adapter.indexing import entries_index

    return _summary(entries_index(tenant=tenant_id, entry_ids=entry_ids))


@shared_task(name=ENTRIES_CHANGED, **TASK_RETRY)
def entries_changed(tenant_id: int, entry_ids: list[int]) -> dict[str, int]:
    """Entries changed what they embed (published by ``books.events`` after the write's commit)."""
    from retrieval.adapter.indexing import entries_index

    return _summary(entries_index(tenant=tenant_id, entry_ids=entry_ids))


@shared_task(name="retrieval.reindex_book", **TASK_RETRY)
def reindex_book(tenant_id: int, book_id: int) -> dict[str, int]:
    """Bring every entry of a book up to date (embeds only stale ones)."""
    from retrieval.adapter.indexing import book_reindex

    return _summary(book_reindex(book_id, tenant=tenant_id))


@shared_task(name="retrieval.index_pending_sweep", **TASK_RETRY)
def index_pending_sweep(grace_seconds: float | None = None) -> int:
    """Periodic safety net (celery beat): schedule entries left pending or stale. A worker whose consumer
    connects or reconnects sends it with no grace (config.celery): what a dead worker or a broker outage
    left pending is indexed at once."""
    from datetime import timedelta

    from retrieval.adapter.indexing import SWEEP_GRACE, entries_pending_sweep

    return entries_pending_sweep(grace=SWEEP_GRACE if grace_seconds is None else timedelta(seconds=grace_seconds))
