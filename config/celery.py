"""The Celery app. Eager (in-process) when no broker is configured; the retry policy and the publish
path its tasks use are the ground's (``lore_platform.tasks``)."""
from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery, bootsteps

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
# Every installed app's tasks module, and the wiring's own (config.tasks: the ping and the worker probe).
app.autodiscover_tasks()
app.autodiscover_tasks(["config"])


def _catch_up() -> None:
    """Run the sweeps at once (issue 33): entries a dead worker or a broker outage left pending are
    indexed within seconds of a worker (or the broker) being back, not at the next beat, and AI jobs
    whose message is gone or whose worker died are looked at. The index sweep has no grace here: a
    duplicate of a message still in the queue is harmless (indexing skips current vectors)."""
    from lore_platform.tasks import task_publish

    task_publish("retrieval.index_pending_sweep", 0.0)
    task_publish("jobs.jobs_sweep")


class _CatchUpOnConnect(bootsteps.StartStopStep):
    """A consumer step: started when a worker's consumer connects, and again every time it reconnects
    after the broker was lost (celery's worker_ready is sent once, at the first start only)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, parent: Any) -> None:
        try:
            _catch_up()
        except Exception:  # noqa: BLE001 - a catch-up that fails waits for beat; the worker keeps running
            logging.getLogger(__name__).exception("catch-up sweeps not sent")


app.steps["consumer"].add(_CatchUpOnConnect)
