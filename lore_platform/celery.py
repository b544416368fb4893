"""The Celery app, and the one retry policy its tasks use. Eager (in-process) when no broker is configured."""
from __future__ import annotations

import os
from typing import Any

from celery import Celery
from django.db import IntegrityError, InterfaceError, OperationalError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lore_platform.settings")

app = Celery("loreweave")
app.config_from_object("django.conf:settings", namespace="CELERY")
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
