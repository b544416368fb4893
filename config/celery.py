"""The Celery app. Eager (in-process) when no broker is configured; the retry policy and the publish
path its tasks use are the ground's (``lore_platform.tasks``)."""
from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

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
# Every installed app's tasks module (cast.tasks included), and the project's own.
app.autodiscover_tasks()
app.autodiscover_tasks(["lore_platform"])


@worker_ready.connect
def _catch_up(sender: Any = None, **_: Any) -> None:
    """A worker that starts runs the sweeps at once (issue 33): entries a dead worker or an outage left
    pending are indexed within seconds of a worker being back, not at the next beat, and jobs a dead
    worker held are looked at. The index sweep has no grace here: a duplicate of a message still in the
    queue is harmless (indexing skips current vectors)."""
    from lore_platform.tasks import task_publish

    task_publish("retrieval.index_pending_sweep", 0.0)
    task_publish("jobs.jobs_sweep")
