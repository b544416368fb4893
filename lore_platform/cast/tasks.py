"""Celery tasks of the cast app. They take ids and are idempotent."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from lore_platform.celery import app


@app.task(name="cast.request_usage_record", acks_late=True, autoretry_for=(Exception,), retry_backoff=True,
          max_retries=5)
def request_usage_record(tenant_id: int, request_log_id: int) -> int:
    """Count one use for every entry a request injected (W-11). Runs once per request log."""
    from books.services import entries_record_usage
    from lore_platform.cast.models import RequestLog
    from lore_platform.tenancy.models import Tenant

    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return 0
    with transaction.atomic():
        log = RequestLog.objects.for_tenant(tenant).select_for_update().filter(pk=request_log_id).first()
        if log is None or log.usage_recorded_at is not None:
            return 0  # already applied (a retry or a duplicate delivery)
        counted = 0
        for owner_id, entry_ids in sorted(log.usage.items()):
            owner = tenant if int(owner_id) == tenant.pk else Tenant.objects.filter(pk=int(owner_id)).first()
            if owner is not None:
                counted += entries_record_usage(tenant=owner, entry_ids=entry_ids, used_at=log.created_at)
        log.usage_recorded_at = timezone.now()
        log.save(update_fields=["usage_recorded_at"])
    return counted
