"""Celery tasks of the cast app. They take ids and are idempotent."""
from __future__ import annotations

from celery import shared_task

from lore_platform.tasks import TASK_RETRY


# Database hiccups are retried; anything else is a bug, and the next sweep (beat) tries again anyway.
@shared_task(name="cast.request_usage_sweep", **TASK_RETRY)
def request_usage_sweep() -> int:
    """Count the uses of every request log still waiting (W-11); see cast/usage.py."""
    from cast.usage import SWEEP_BATCH, request_usage_pending_record

    total = 0
    while True:
        done = request_usage_pending_record()
        total += done
        if done < SWEEP_BATCH:
            return total


@shared_task(name="cast.request_logs_prune", **TASK_RETRY)
def request_logs_prune() -> int:
    """Delete request logs older than ``REQUEST_LOG_RETENTION_DAYS`` (0, the default: keep them all)."""
    from django.conf import settings

    from cast.usage import request_logs_prune as prune

    return prune(older_than_days=settings.REQUEST_LOG_RETENTION_DAYS)
