"""The Celery app, and the one retry policy its tasks use. Eager (in-process) when no broker is configured."""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from celery import Celery, Task
from django.db import IntegrityError, InterfaceError, OperationalError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lore_platform.settings")

app = Celery("loreweave")


class _DjangoCeleryNames:
    """Django's ``CELERY_*`` settings under Celery's own lowercase names, read when asked.

    Not ``config_from_object(settings, namespace="CELERY")``: with a namespace celery 5.6 lets the
    Django value win over any later ``app.conf`` change (tests toggle eager mode that way), and it
    reads ``CELERY_RESULT_BACKEND`` and others as pre-4.0 names.
    """

    def __getattr__(self, name: str) -> Any:
        from django.conf import settings

        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return getattr(settings, f"CELERY_{name.upper()}")
        except AttributeError:
            raise AttributeError(name) from None

    def __dir__(self) -> list[str]:
        from django.conf import settings

        return [key[len("CELERY_"):].lower() for key in dir(settings) if key.startswith("CELERY_")]


app.config_from_object(_DjangoCeleryNames())
# Every installed app's tasks module (lore_platform.cast.tasks included), and the project's own.
app.autodiscover_tasks()
app.autodiscover_tasks(["lore_platform"])

# Database hiccups a retry can cure: a lost connection, a deadlock, two workers
# inserting the same row at once. Anything else is a bug or a recorded failure.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError, IntegrityError)

# The retry policy of every task: ``@app.task(name=..., **TASK_RETRY)``. Tasks take ids
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
            app.signature(task, args=args).apply_async(countdown=countdown)
        elif args:
            task.apply_async(args, countdown=countdown)
        else:
            task.apply_async(countdown=countdown)

    if app.conf.task_always_eager:
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
