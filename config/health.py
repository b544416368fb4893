"""``/healthz``: is each part of the stack this deployment uses answering?"""
from __future__ import annotations

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


def health_status() -> tuple[bool, dict[str, Any]]:
    checks = {"database": _check_database(), "vector": _check_vector(), "broker": _check_broker()}
    down = [name for name, result in checks.items() if not result["ok"]]
    return not down, {"status": "ok" if not down else "unavailable", "down": down, "checks": checks}


@csrf_exempt  # probes carry no token: another method is a 405, not a CSRF 403
@require_safe  # (JSON: lore_platform.api.middleware)
def healthz(request: HttpRequest) -> JsonResponse:
    healthy, body = health_status()
    return JsonResponse(body, status=200 if healthy else 503)
