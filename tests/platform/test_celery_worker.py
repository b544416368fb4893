"""A real Celery worker process takes a task from Redis and runs it against the database."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from lore_platform.tenancy.services import tenant_create

REPO = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    params = connection.settings_dict
    user = params.get("USER") or "postgres"
    host = params.get("HOST") or "127.0.0.1"
    port = params.get("PORT") or 5432
    password = f":{params['PASSWORD']}" if params.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port}/{params['NAME']}"


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path):
    queue = f"test-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "OMP_NUM_THREADS": "1",
    }
    log = open(tmp_path / "worker.log", "w")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "celery", "-A", "lore_platform.celery", "worker",
            "-Q", queue, "--concurrency", "1", "--pool", "prefork",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO",
        ],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        yield queue, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


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
