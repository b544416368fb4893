"""The Celery app. Eager (in-process) when no broker is configured."""
from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lore_platform.settings")

app = Celery("loreweave")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Every installed app's tasks module (lore_platform.cast.tasks included), and the project's own.
app.autodiscover_tasks()
app.autodiscover_tasks(["lore_platform"])
