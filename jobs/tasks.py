"""Celery task for AI jobs: one per job, taking ids, idempotent (model answers are stored per chunk)."""
from __future__ import annotations

from celery import shared_task

from lore_platform.tasks import TASK_RETRY


@shared_task(name="jobs.job_run", **TASK_RETRY)
def job_run(tenant_id: int, job_id: int) -> str:
    from jobs.services import job_execute

    return job_execute(tenant=tenant_id, job_id=job_id)
