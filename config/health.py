"""``/healthz``: is each part of the stack this deployment uses answering?

``down`` parts (database, vector, broker) make it a 503. ``degraded`` parts
still serve but need the operator: the data directory's free space under
``HEALTH_MIN_FREE_BYTES`` (issue 26, point 7) answers 200 with ``"status":
"degraded"`` — reads still work and restarting would not free a byte, so a
probe must not kill the process, but monitoring sees it before writes start
failing with 507.
"""
from __future__ import annotations

import shutil
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe


def _check_database() -> dict[str, Any]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return {"ok": True, "engine": connection.vendor}
    except Exception as exc:  # noqa: BLE001 - report any failure, never raise
        return {"ok": False, "engine": connection.vendor, "error": str(exc)[:200]}


def _check_vector() -> dict[str, Any]:
    if settings.VECTOR_BACKEND != "pgvector":
        return {"ok": True, "backend": "memory"}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        if row is None:
            return {"ok": False, "backend": "pgvector", "error": "extension 'vector' is not installed in this database"}
        return {"ok": True, "backend": "pgvector", "version": row[0]}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "backend": "pgvector", "error": str(exc)[:200]}


def _check_broker() -> dict[str, Any]:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return {"ok": True, "mode": "eager"}
    from kombu import Connection

    url = settings.CELERY_BROKER_URL
    try:
        # A fresh connection, not the app's pool: health must reflect the broker now.
        with Connection(url, connect_timeout=2, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS) as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return {"ok": True, "mode": "broker", "transport": url.split(":", 1)[0]}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "mode": "broker", "error": str(exc)[:200]}


def _check_disk() -> dict[str, Any]:
    path = settings.DATA_DIR
    minimum = settings.HEALTH_MIN_FREE_BYTES
    try:
        usage = shutil.disk_usage(path)
    except OSError as exc:
        return {"ok": False, "path": str(path), "error": str(exc)[:200]}
    result: dict[str, Any] = {"ok": usage.free >= minimum, "path": str(path), "free_bytes": usage.free,
                              "total_bytes": usage.total, "min_free_bytes": minimum}
    if not result["ok"]:
        result["error"] = f"{usage.free:,} bytes free in the data directory; the threshold is {minimum:,}"
    return result


# Parts whose failure degrades the service instead of taking it down.
DEGRADING = ("disk",)


def health_status() -> tuple[bool, dict[str, Any]]:
    checks = {"database": _check_database(), "vector": _check_vector(), "broker": _check_broker(),
              "disk": _check_disk()}
    failing = [name for name, result in checks.items() if not result["ok"]]
    down = [name for name in failing if name not in DEGRADING]
    degraded = [name for name in failing if name in DEGRADING]
    status = "unavailable" if down else "degraded" if degraded else "ok"
    return not down, {"status": status, "down": down, "degraded": degraded, "checks": checks}


@csrf_exempt  # probes carry no token: another method is a 405, not a CSRF 403
@require_safe  # (JSON: lore_platform.api.middleware)
def healthz(request: HttpRequest) -> JsonResponse:
    healthy, body = health_status()
    return JsonResponse(body, status=200 if healthy else 503)
