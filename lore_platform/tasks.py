"""The one retry policy every task uses, and the bounded publish path on the request path.

Tasks are declared with ``celery.shared_task`` so the apps never import the Celery app itself: it
lives in the wiring (``config.celery``), which every process imports at start.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import Task, current_app
from django.db import IntegrityError, InterfaceError, OperationalError

# Database hiccups a retry can cure: a lost connection, a deadlock, two workers
# inserting the same row at once. Anything else is a bug or a recorded failure.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError, IntegrityError)

# The retry policy of every task: ``@shared_task(name=..., **TASK_RETRY)``. Tasks take ids
# and are idempotent, so a late ack (redelivery after a worker dies) and a retry are safe.
# Backoff 2, 4, 8 … seconds, at most 120, with jitter; six retries, then it fails.
TASK_RETRY: dict[str, Any] = {
    "acks_late": True,
    "autoretry_for": TRANSIENT_ERRORS,
    "retry_backoff": 2,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 6,
}


# --- publishing on the request path (issue 13, point 5) -------------------------------------
# A broker outage must not stall a request: with the connection and publish timeouts in settings
# one failed publish costs at most ~100 ms, and after it this process stops trying for
# BROKER_RETRY_AFTER seconds. Nothing is lost: every task published here has a durable record
# in the database (pending entries, uncounted request logs, stale shares, pending translations)
# that its periodic sweep finds once the broker is back.
BROKER_RETRY_AFTER = 5.0
_broker_down_until = 0.0
_broker_lock = threading.Lock()
logger = logging.getLogger(__name__)


def task_publish(task: str | Task, *args: Any, countdown: float | None = None) -> bool:
    """Send ``task`` (a task or its registered name) with ``args``; False if the broker is down.

    Eager mode (the embedded default) runs the task at once, as ``apply_async`` does, and raises.
    """
    global _broker_down_until

    def send() -> None:
        if isinstance(task, str):
            current_app.signature(task, args=args).apply_async(countdown=countdown)
        elif args:
            task.apply_async(args, countdown=countdown)
        else:
            task.apply_async(countdown=countdown)

    if current_app.conf.task_always_eager:
        send()
        return True
    if time.monotonic() < _broker_down_until:
        return False
    try:
        send()
    except Exception as exc:  # noqa: BLE001 - any broker failure: the durable record stays for the sweep
        with _broker_lock:
            first = time.monotonic() >= _broker_down_until
            _broker_down_until = time.monotonic() + BROKER_RETRY_AFTER
        if first:
            logger.warning("broker unavailable (%s); tasks wait for their sweeps for %.0f s", exc, BROKER_RETRY_AFTER)
        return False
    return True


def broker_marked_down() -> bool:
    """Has a publish failed in this process within the last BROKER_RETRY_AFTER seconds?"""
    return time.monotonic() < _broker_down_until
