"""A real Celery worker process takes a task from Redis and runs it against the database."""
from __future__ import annotations

import os
import time

import pytest

from lore_platform.tenancy.services import tenant_create
from tests.celery_worker import celery_worker


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path):
    with celery_worker(tmp_path / "worker.log") as running:
        yield running


@pytest.mark.services
@pytest.mark.postgres
def test_worker_runs_task_against_the_real_stack(celery_worker_process):
    from lore_platform.celery import app
    from lore_platform.tasks import worker_probe

    queue, process = celery_worker_process
    tenant_create(name="Worker Seen", admin_email="w@seen.test")

    started = time.monotonic()
    app.conf.task_always_eager = False
    try:
        result = worker_probe.apply_async(queue=queue).get(timeout=90)
    finally:
        app.conf.task_always_eager = True
    assert process.poll() is None, "the worker died"
    assert result["pid"] != os.getpid(), "the task ran in the test process, not the worker"
    assert result["healthy"] is True
    assert result["checks"]["database"]["engine"] == "postgresql"
    assert result["checks"]["vector"]["backend"] == "pgvector"
    assert result["checks"]["broker"]["mode"] == "broker"
    # The worker reads committed data through the same database.
    assert "worker-seen" in result["tenants"]
    assert time.monotonic() - started < 90
