"""Celery tasks for AI jobs: one per job, taking ids, idempotent (model answers are stored per chunk;
only the worker that claims a queued job runs it), routed to the jobs queue (settings); and the sweep
that re-sends lost jobs and takes over those whose worker died (on the default queue, so a busy
jobs worker never delays it)."""
from __future__ import annotations

from celery import shared_task

from lore_platform.tasks import TASK_RETRY


@shared_task(name="jobs.job_run", **TASK_RETRY)
def job_run(tenant_id: int, job_id: int) -> str:
    from jobs.services import job_execute

    return job_execute(tenant=tenant_id, job_id=job_id)


@shared_task(name="jobs.jobs_sweep", **TASK_RETRY)
def jobs_sweep() -> dict[str, int]:
    """Periodic safety net (celery beat, every 15 s): lost messages and dead workers' jobs."""
    from jobs.services import jobs_sweep as sweep

    return sweep()
