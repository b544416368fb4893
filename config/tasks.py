from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="lore_platform.ping", ignore_result=False)
def ping() -> dict[str, object]:
    """Liveness probe for workers: answers with where it ran."""
    return {"pong": True, "hostname": socket.gethostname(), "pid": os.getpid()}


@shared_task(name="lore_platform.worker_probe", ignore_result=False)
def worker_probe() -> dict[str, object]:
    """What a worker sees of the stack: its database, vector extension and data."""
    from config.health import health_status
    from lore_platform.tenancy.models import Tenant

    healthy, status = health_status()
    return {
        "healthy": healthy,
        "checks": status["checks"],
        "tenants": sorted(Tenant.objects.values_list("slug", flat=True)),
        "pid": os.getpid(),
    }
