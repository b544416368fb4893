"""Tenancy's periodic work."""
from __future__ import annotations

from celery import shared_task

from lore_platform.tasks import TASK_RETRY
from lore_platform.tenancy.selectors import idempotency_keys_prune


@shared_task(name="tenancy.idempotency_keys_prune", **TASK_RETRY)
def idempotency_keys_prune_task() -> int:
    """Expired Idempotency-Key answers (24 h) go; a key reused after that runs as a new request."""
    return idempotency_keys_prune()
